# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a hub's answer about a repository and revision says: None when it has them, else one sentence naming
the variable to change (model_weights_revision, model_weights_repo_id, model_weights_endpoint, ...). Pure
functions: the caller asks the hub and passes the answer in (status, headers, body)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.input_checks import show_value


def _json_or_none(body):
    try:
        return json.loads(body) if body else None
    except (TypeError, ValueError):
        return None


def looks_like_hf(status, headers, body):
    """A Hugging Face (or mirror) answer to GET /api/models/{repo}/revision/{rev}."""
    headers = dict((str(k).lower(), v) for k, v in (headers or {}).items())
    doc = _json_or_none(body)
    if headers.get("x-error-code") or headers.get("x-repo-commit"):
        return True
    return status == 200 and isinstance(doc, dict) and "sha" in doc


def looks_like_modelscope(status, headers, body):
    """A ModelScope (or mirror) answer: JSON with a numeric Code."""
    doc = _json_or_none(body)
    return isinstance(doc, dict) and "Code" in doc


def hf_revision_verdict(status, headers, body, repo_id, revision, endpoint):
    """None when the hub has repo_id at revision, else a problem naming the variable to change."""
    headers = dict((str(k).lower(), v) for k, v in (headers or {}).items())
    code = headers.get("x-error-code", "")
    rev = revision or "main"
    doc = _json_or_none(body)
    if status == 200 and isinstance(doc, dict) and doc.get("sha"):
        return None
    if code == "RevisionNotFound" or (status == 404 and "revision" in str(body).lower() and code != "RepoNotFound"):
        return ("model_weights_revision %s does not exist in %s on %s: set it to a branch, tag or commit of that "
                "repository (or leave it empty for main)." % (show_value(rev), repo_id, endpoint))
    if code == "GatedRepo":
        return ("%s on %s is gated: accept its terms with your account and set model_weights_token to a token of "
                "that account." % (repo_id, endpoint))
    if status in (401, 403, 404) and (code in ("RepoNotFound", "")):
        return ("%s at revision %s was not found on %s (or model_weights_token cannot read it): check "
                "model_weights_repo_id and model_weights_revision%s." % (
                    repo_id, show_value(rev), endpoint,
                    "" if code else " (and that model_weights_endpoint is a Hugging Face hub or mirror)"))
    return ("%s answered HTTP %s for %s at revision %s: check model_weights_endpoint and model_weights_repo_id."
            % (endpoint, status, repo_id, show_value(rev)))


def ms_revision_verdict(status, headers, body, repo_id, revision, endpoint):
    doc = _json_or_none(body)
    rev = revision or "master"
    if isinstance(doc, dict) and "Code" in doc:
        if status == 200 and doc.get("Code") in (200, "200") and doc.get("Success", True) is not False:
            return None
        message = str(doc.get("Message") or "")
        if "revision" in message.lower():
            return ("model_weights_revision %s does not exist in %s on %s (%s): set it to a branch, tag or commit "
                    "of that repository (or leave it empty for master)."
                    % (show_value(rev), repo_id, endpoint, message))
        return ("%s at revision %s was not found on %s (%s): check model_weights_repo_id, model_weights_revision "
                "and, for a private model, model_weights_token." % (repo_id, show_value(rev), endpoint,
                                                                    message or "HTTP %s" % status))
    return None  # not a ModelScope answer: the caller decides (endpoint_problem)


def endpoint_problem(source, endpoint, answers_as):
    """The endpoint answers as another hub (answers_as: 'hf', 'modelscope' or None for neither)."""
    names = {"hf": "Hugging Face", "modelscope": "ModelScope"}
    if answers_as == source:
        return None
    if answers_as in names:
        return ("model_weights_endpoint %s is a %s endpoint, but model_weights_source is %s: point "
                "model_weights_endpoint at a %s hub or mirror, or set model_weights_source: %s."
                % (endpoint, names[answers_as], source, names.get(source, source), answers_as))
    return ("model_weights_endpoint %s does not answer as a %s hub (no %s API there): point it at a %s mirror, "
            "or leave it empty for the public hub." % (endpoint, names.get(source, source),
                                                       names.get(source, source), names.get(source, source)))
