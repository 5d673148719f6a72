# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sources of a model placement (hub_fetch.fetch): the manifest of a repository and revision from Hugging
Face or ModelScope, the download with the hub's official client, and the copy from a host directory or a tar
archive into the staging directory. The hub SDKs are imported only when used, after set_client_env.
Runs on the managed host, under the Python the hub clients are installed for.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type
import os
import shutil
import sys
import tarfile

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import weights as W
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights.fetch_place import FetchError


def set_client_env(endpoint):
    """Keep both SDKs quiet, offline-safe and pointed at one endpoint (must run before importing them)."""
    env = {
        "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1", "DO_NOT_TRACK": "1",
        "MODELSCOPE_DOWNLOAD_INTRA_CLOUD": "false",
    }
    for k, v in env.items():
        os.environ.setdefault(k, v)
    if endpoint:
        os.environ["HF_ENDPOINT"] = endpoint.rstrip("/")
        os.environ["MODELSCOPE_ENDPOINT"] = endpoint.rstrip("/")


class StdoutToStderr:
    """Hub SDKs print; a module's stdout must carry only its JSON result."""

    def __enter__(self):
        sys.stdout.flush()
        self.saved = os.dup(1)
        os.dup2(2, 1)
        return self

    def __exit__(self, *exc):
        sys.stdout.flush()
        os.dup2(self.saved, 1)
        os.close(self.saved)


def hf_manifest(p):
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.hf_api import RepoFile
    except ImportError as e:
        raise FetchError("huggingface_hub is not importable by %s (%s): install it there (the model_weights role "
                         "does, into /opt/llmfleet/venv) or run this module with that interpreter" % (sys.executable, e))
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError
    api = HfApi(endpoint=p["endpoint"], token=p["token"])
    revision = p["revision"] or "main"
    where = p["endpoint"] or "huggingface.co"
    entries = []
    # Before anything is written: a repository or revision the hub does not have is an input to fix.
    try:
        commit = revision if W.is_commit(revision) else api.model_info(p["repo_id"], revision=revision).sha
        for f in api.list_repo_tree(p["repo_id"], revision=commit, recursive=True):
            if not isinstance(f, RepoFile):
                continue
            entries.append({"path": f.path, "size": f.size, "blob_id": f.blob_id,
                            "lfs_sha256": f.lfs.sha256 if f.lfs else None})
    except RevisionNotFoundError:
        raise FetchError("revision %r of %s does not exist on %s: set revision (model_weights_revision) to a "
                         "branch, tag or commit of that repository, or leave it empty for main" % (
                             revision, p["repo_id"], where))
    except GatedRepoError:
        raise FetchError("%s on %s is gated: accept its terms on the hub with your account and give a token of "
                         "that account (model_weights_token)" % (p["repo_id"], where))
    except RepositoryNotFoundError:
        raise FetchError("%s at revision %r was not found on %s (or the token cannot read it): check repo_id "
                         "(model_weights_repo_id), revision (model_weights_revision) and, for a private repository, "
                         "token (model_weights_token)" % (p["repo_id"], revision, where))
    keep = set(W.filter_paths([e["path"] for e in entries], p["allow_patterns"], p["ignore_patterns"]))
    return commit, W.manifest_from_hf_tree([e for e in entries if e["path"] in keep and e["path"] != ".gitattributes"])


def ms_manifest(p):
    try:
        from modelscope_hub.api import HubApi
    except ImportError as e:
        raise FetchError("the modelscope SDK is not importable by %s (%s): install it there (the model_weights role "
                         "does, into /opt/llmfleet/venv) or run this module with that interpreter" % (sys.executable, e))
    api = HubApi(endpoint=p["endpoint"], token=p["token"]) if p["endpoint"] else HubApi(token=p["token"])
    files = [{"path": f.path, "size": f.size, "sha256": f.sha256, "type": f.type}
             for f in api.list_repo_files(p["repo_id"], "model", revision=p["revision"] or "master", recursive=True)]
    keep = set(W.filter_paths([f["path"] for f in files], p["allow_patterns"], p["ignore_patterns"]))
    return None, W.manifest_from_modelscope([f for f in files if f["path"] in keep and f["path"] != ".gitattributes"])


def hub_download(p, staging, paths):
    """Fetch exactly `paths` into staging with the official client (exact-match patterns)."""
    patterns = [W.exact_pattern(x) for x in paths]
    with StdoutToStderr():
        if p["source"] == "hf":
            from huggingface_hub import snapshot_download
            snapshot_download(p["repo_id"], revision=p["_commit"], local_dir=staging, allow_patterns=patterns,
                              token=p["token"], endpoint=p["endpoint"], max_workers=p["max_workers"])
        else:
            from modelscope import snapshot_download
            kwargs = {"revision": p["revision"] or "master", "local_dir": staging, "allow_patterns": patterns,
                      "max_workers": p["max_workers"], "token": p["token"]}
            if p["endpoint"]:
                kwargs["endpoint"] = p["endpoint"]
            snapshot_download(p["repo_id"], **kwargs)


def local_copy(src, staging, paths):
    for rel in paths:
        dst = os.path.join(staging, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        tmp = dst + ".incomplete"
        shutil.copyfile(os.path.join(src, rel), tmp)
        os.replace(tmp, dst)


def extract_archive(archive, staging):
    with tarfile.open(archive) as tf:
        try:
            files = W.archive_files(tf.getmembers(), archive)
        except ValueError as exc:
            raise FetchError(str(exc))
        for m, rel in files:
            dst = os.path.join(staging, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            src = tf.extractfile(m)
            with open(dst + ".incomplete", "wb") as out:
                shutil.copyfileobj(src, out, 8 << 20)
            os.replace(dst + ".incomplete", dst)
