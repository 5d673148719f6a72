# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Container image references: parse, check the pin, rewrite the registry (pure functions, no I/O).

Grammar: the Docker / OCI distribution reference grammar (github.com/distribution/reference, reference.go):
    reference  := name [ ":" tag ] [ "@" digest ]
    name       := [ domain "/" ] path-component { "/" path-component }
    domain     := host [ ":" port ]   -- the first component is a domain only if it has "." or ":" or is "localhost"
    tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest     := algorithm ":" hex   -- this project accepts sha256 only (64 lowercase hex)
Names without a domain are Docker Hub's: docker.io, with "library/" in front of a single component.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

DEFAULT_REGISTRY = "docker.io"

_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_PATH_RE = re.compile(r"^%s(?:/%s)*$" % (_PATH_COMPONENT, _PATH_COMPONENT))
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_RE = re.compile(r"^(?:%s(?:\.%s)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?$" % (_DOMAIN_COMPONENT, _DOMAIN_COMPONENT))
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST_RE = re.compile(r"^sha256:[a-f0-9]{64}$")

EXAMPLE = "vllm/vllm-openai:v0.17.1@sha256:<64 hex digits>"


class ImageRefError(ValueError):
    """A reference that cannot be used; the message says what is wrong and how to fix it."""


def parse(ref):
    """Split an image reference into its parts.

    Returns a dict: registry (explicit or docker.io), path (repository path on that registry, with
    library/ for official Docker Hub images), repository (what `docker` calls the name: registry/path,
    without the docker.io/ prefix for Hub images as the docker CLI prints them), tag (or None),
    digest (or None), explicit_registry (bool).
    Raises ImageRefError with a message that names the faulty part.
    """
    if not isinstance(ref, str) or not ref.strip():
        raise ImageRefError("the image reference is empty; expected e.g. %s" % EXAMPLE)
    if ref != ref.strip() or any(c.isspace() for c in ref):
        raise ImageRefError("the image reference %r contains white space" % ref)
    rest, digest = ref, None
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not _DIGEST_RE.match(digest):
            raise ImageRefError(
                "the digest %r in %r is not sha256:<64 lowercase hex digits>" % (digest, ref))
    tag = None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, tag = rest.rsplit(":", 1)
        if not _TAG_RE.match(tag):
            raise ImageRefError("the tag %r in %r is not a valid tag ([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})" % (tag, ref))
    parts = rest.split("/")
    first = parts[0]
    explicit = len(parts) > 1 and ("." in first or ":" in first or first == "localhost")
    if explicit:
        registry, path = first, "/".join(parts[1:])
        if not _DOMAIN_RE.match(registry):
            raise ImageRefError("the registry %r in %r is not a valid host[:port]" % (registry, ref))
    else:
        registry, path = DEFAULT_REGISTRY, rest
        if len(parts) == 1:
            path = "library/" + rest
    if not _PATH_RE.match(path):
        raise ImageRefError(
            "the repository %r in %r is not valid (lowercase letters, digits and . _ - separators)" % (path, ref))
    repository = "%s/%s" % (registry, path) if explicit else rest
    return {
        "registry": registry,
        "path": path,
        "repository": repository,
        "tag": tag,
        "digest": digest,
        "explicit_registry": explicit,
    }


def check_pinned(ref, allow_unpinned=False):
    """Parse ref and insist on a digest unless allow_unpinned; returns parse(ref)."""
    parts = parse(ref)
    if parts["digest"] is None and not allow_unpinned:
        shown = ref if parts["tag"] else ref + ":latest"
        raise ImageRefError(
            "the image %s is not pinned by digest: a tag can move, so two hosts (or two runs) could serve different "
            "engines. Pin it as repository:tag@sha256:<digest>; get the digest with "
            "`docker buildx imagetools inspect %s` (the 'Digest:' line), `skopeo inspect docker://%s` "
            "(.Digest), or `docker inspect --format '{{index .RepoDigests 0}}' %s` after a pull. "
            "To run a moving tag anyway, set vllm_image_allow_unpinned: true." % (shown, shown, shown, shown))
    return parts


def mirror(ref, mirror_host):
    """Rewrite ref to pull through mirror_host (host[:port][/path prefix]), keeping path, tag and digest.

    docker.io/vllm/vllm-openai:v1@sha256:x with mirror.internal:5000 -> mirror.internal:5000/vllm/vllm-openai:v1@sha256:x
    An empty mirror_host returns ref unchanged.
    """
    parts = parse(ref)
    if not mirror_host:
        return ref
    host = mirror_host.strip().rstrip("/")
    for scheme in ("https://", "http://"):
        if host.startswith(scheme):
            host = host[len(scheme):]
    domain, _sep, prefix = host.partition("/")
    if not _DOMAIN_RE.match(domain) or (prefix and not _PATH_RE.match(prefix)):
        raise ImageRefError(
            "vllm_image_registry_mirror %r is not host[:port] or host[:port]/path (e.g. mirror.internal:5000)"
            % mirror_host)
    out = "%s/%s%s" % (domain, prefix + "/" if prefix else "", parts["path"])
    if parts["tag"]:
        out += ":" + parts["tag"]
    if parts["digest"]:
        out += "@" + parts["digest"]
    return out


def describe(ref, mirror_host="", allow_unpinned=False):
    """Everything a role needs about ref in one dict (for the image_ref filter).

    Keys: parse()'s keys plus pull_ref (what to pull: the mirror applied; by digest when pinned, else
    repository:tag), pull_repository, pull_tag (tag or digest as the Docker API wants them), pull_registry,
    pinned, resolved (what to run: by digest when pinned, else repository:tag of pull_ref).
    """
    parts = check_pinned(ref, allow_unpinned)
    pulled = parse(mirror(ref, mirror_host))
    pinned = parts["digest"] is not None
    tag = parts["tag"] or "latest"
    pull_ref = "%s@%s" % (pulled["repository"], pulled["digest"]) if pinned else "%s:%s" % (pulled["repository"], tag)
    result = dict(parts)
    result.update({
        "pinned": pinned,
        "pull_repository": pulled["repository"],
        "pull_tag": pulled["digest"] if pinned else tag,
        "pull_registry": pulled["registry"],
        "pull_ref": pull_ref,
        "resolved": pull_ref,
        "tag_ref": "%s:%s" % (pulled["repository"], tag),
    })
    return result
