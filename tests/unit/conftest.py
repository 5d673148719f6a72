"""Make `ansible_collections.llmfleet.vllm` importable from this checkout (collections/ links back here)."""
import os
import sys

import pytest

COLLECTIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)


def install_host_package(libexec, docker=None):
    """What the vllm_server role installs on a serving host: the launchers (roles/vllm_server/files) and the
    host package beside them (host_package.package_files, the lookup's list). docker: a path that replaces
    /usr/bin/docker in the installed copy (for a TEST DOUBLE). Returns libexec."""
    import shutil

    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.host_package import package_files

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.makedirs(os.path.join(str(libexec), "llmfleet_host"), exist_ok=True)
    for name in ("llmfleet-watchdog", "wait-healthy", "follow-container"):
        shutil.copy(os.path.join(root, "roles", "vllm_server", "files", name), os.path.join(str(libexec), name))
        os.chmod(os.path.join(str(libexec), name), 0o755)
    for entry in package_files(str(libexec)):
        content = entry["content"]
        if docker:
            content = content.replace('DOCKER = "/usr/bin/docker"', "DOCKER = %r" % str(docker))
        with open(entry["path"], "w") as fh:
            fh.write(content)
    return libexec


@pytest.fixture
def host_install():
    """install_host_package, for tests of the host tools as the role installs them."""
    return install_host_package
