# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A model's metadata from Hugging Face or ModelScope, read on the controller before any host changes:
config.json, generation_config.json and model.safetensors.index.json at the pinned revision, through the same
endpoint / mirror / token settings as the model_weights role (the hubs' own clients, huggingface_hub and modelscope),
cached on the controller under ``cache_dir/<source>/<org>--<name>/<revision>/``.  A cached revision that is a
commit is read from the cache without asking the hub (air-gapped controllers: point ``model`` at a local directory
instead).  Bad repo, revision or a gated repo without a token: HubMetadataError, one line naming the input to fix.
"""

from __future__ import annotations

import json
import os
import re

META_FILES = ("config.json", "generation_config.json", "model.safetensors.index.json")
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")


class HubMetadataError(ValueError):
    """The hub could not give the model's metadata; the message names the input to fix."""


def looks_like_repo_id(model):
    return bool(REPO_ID_RE.match(model or "")) and not os.path.exists(os.path.expanduser(model))


def cache_path(cache_dir, source, repo_id, revision):
    return os.path.join(os.path.expanduser(cache_dir), source, repo_id.replace("/", "--"), revision)


def read_cached(path):
    """The metadata a cache directory holds (None when config.json is not there)."""
    if not os.path.isfile(os.path.join(path, "config.json")):
        return None
    out = {"path": path}
    for name in META_FILES:
        f = os.path.join(path, name)
        key = name.split(".", maxsplit=1)[0] if name != "model.safetensors.index.json" else "index"
        out[key] = None
        if os.path.isfile(f):
            with open(f) as fh:
                out[key] = json.load(fh)
    sizes = os.path.join(path, "safetensors_sizes.json")
    out["safetensors_bytes"] = None
    if os.path.isfile(sizes):
        with open(sizes) as fh:
            out["safetensors_bytes"] = json.load(fh)["total"]
    return out


def _hf(repo_id, revision, endpoint, token, dest):
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (EntryNotFoundError, GatedRepoError, RepositoryNotFoundError,
                                        RevisionNotFoundError)
    api = HfApi(endpoint=endpoint or None, token=token or None)
    where = endpoint or "huggingface.co"
    try:
        info = api.model_info(repo_id, revision=revision or "main", files_metadata=True)
    except RevisionNotFoundError:
        raise HubMetadataError("revision %r of %s does not exist on %s: set model_weights_revision to a branch, tag "
                               "or commit of that repository, or leave it empty for main" % (revision, repo_id, where))
    except GatedRepoError:
        raise HubMetadataError("%s on %s is gated: accept its terms on the hub and give a token of that account "
                               "(model_weights_token)" % (repo_id, where))
    except RepositoryNotFoundError:
        raise HubMetadataError("%s at revision %r was not found on %s (or the token cannot read it): check the "
                               "model id, model_weights_revision and, for a private repository, model_weights_token"
                               % (repo_id, revision or "main", where))
    names = {s.rfilename: s.size for s in info.siblings or []}
    if "config.json" not in names:
        raise HubMetadataError("%s on %s has no config.json at revision %s: it is not a model vLLM can serve"
                               % (repo_id, where, info.sha))
    for name in META_FILES:
        if name in names:
            try:
                api.hf_hub_download(repo_id, name, revision=info.sha, local_dir=dest)
            except EntryNotFoundError:
                continue
    return info.sha, sum(size or 0 for n, size in names.items() if n.endswith(".safetensors"))


def _ms(repo_id, revision, endpoint, token, dest):
    from modelscope import snapshot_download
    kwargs = {"revision": revision or "master", "local_dir": dest, "allow_patterns": list(META_FILES)}
    if endpoint:
        kwargs["endpoint"] = endpoint
    if token:
        kwargs["token"] = token
    import contextlib
    try:
        with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
            snapshot_download(repo_id, **kwargs)
    except Exception as e:  # noqa: BLE001 - the SDK raises plain exceptions for a missing repo or revision
        raise HubMetadataError("%s at revision %r could not be read from ModelScope %s (%s): check the model id, "
                               "model_weights_revision and model_weights_token"
                               % (repo_id, revision or "master", endpoint or "modelscope.cn", str(e).splitlines()[0]))
    if not os.path.isfile(os.path.join(dest, "config.json")):
        raise HubMetadataError("%s on ModelScope has no config.json at revision %r" % (repo_id, revision or "master"))
    return revision or "master", None


def fetch_metadata(repo_id, source="hf", revision=None, endpoint=None, token=None,
                   cache_dir="~/.cache/llmfleet/hub-metadata"):
    """The model's metadata (see read_cached), from the controller's cache or the hub."""
    if source not in ("hf", "modelscope"):
        raise HubMetadataError("model_weights_source must be hf or modelscope to read %s from a hub, got %r"
                               % (repo_id, source))
    if revision and COMMIT_RE.match(revision):
        hit = read_cached(cache_path(cache_dir, source, repo_id, revision))
        if hit:
            return dict(hit, commit=revision, cached=True)
    from ansible_collections.llmfleet.vllm.plugins.module_utils.weights.hub_clients import set_client_env
    set_client_env(endpoint)
    staging = cache_path(cache_dir, source, repo_id, ".staging")
    os.makedirs(staging, exist_ok=True)
    try:
        commit, st_bytes = (_hf if source == "hf" else _ms)(repo_id, revision, endpoint, token, staging)
    except HubMetadataError:
        raise
    except Exception as e:  # noqa: BLE001 - the clients raise their own transport errors (httpx, requests, OSError)
        where = endpoint or ("huggingface.co" if source == "hf" else "modelscope.cn")
        raise HubMetadataError("%s has no profile file, and its config.json could not be read from %s (%s: %s): "
                               "set model_weights_endpoint to a mirror this controller reaches, or give a model "
                               "directory on the controller as llmfleet_model"
                               % (repo_id, where, type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    final = cache_path(cache_dir, source, repo_id, commit)
    if st_bytes:
        with open(os.path.join(staging, "safetensors_sizes.json"), "w") as fh:
            json.dump({"total": st_bytes}, fh)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    if os.path.isdir(final):
        import shutil
        shutil.rmtree(final)
    os.replace(staging, final)
    return dict(read_cached(final), commit=commit, cached=False)
