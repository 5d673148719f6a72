# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/vllm_server/files/python/sitecustomize.py: CPU replicas ask Linux for AMX in every Python process.

Each case runs a fresh interpreter with the role's directory first on PYTHONPATH, as the replica's container does.
"""
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

SITE = Path(__file__).resolve().parents[4] / "roles" / "vllm_server" / "files" / "python"
XCOMP = ("import ctypes\n"
         "libc = ctypes.CDLL(None, use_errno=True)\n"
         "value = ctypes.c_ulong(0)\n"
         "libc.syscall(158, {op}, ctypes.byref(value))\n"
         "print(value.value >> 18 & 1)\n")


def python(code, *path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in path))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)


def amx_supported():
    return platform.machine() == "x86_64" and python(XCOMP.format(op="0x1021")).stdout.strip() == "1"


@pytest.mark.skipif(not amx_supported(), reason="this CPU (or kernel) has no AMX tile state")
def test_the_process_holds_amx_permission_from_the_start():
    assert python(XCOMP.format(op="0x1022")).stdout.strip() == "0"  # not without it (permission is per process)
    result = python(XCOMP.format(op="0x1022"), SITE)
    assert result.returncode == 0 and result.stdout.strip() == "1", result.stdout + result.stderr


def test_the_shadowed_sitecustomize_still_runs(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['IMAGE_SITECUSTOMIZE'] = 'ran'\n")
    result = python("import os, sitecustomize\nprint(os.environ.get('IMAGE_SITECUSTOMIZE'), sitecustomize.__file__)",
                    SITE, tmp_path)
    assert result.returncode == 0, result.stderr
    ran, module = result.stdout.split()
    assert ran == "ran" and Path(module).parent == SITE


def test_nothing_breaks_without_another_sitecustomize(tmp_path):
    result = python("print('ok')", SITE, tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
