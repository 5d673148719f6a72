# SPDX-License-Identifier: GPL-3.0-or-later
# llmfleet.vllm, CPU replicas (vllm_server_cpu_amx_permission): mounted into the container and put first on
# PYTHONPATH, so every Python process of the replica runs it, the engine core that vLLM spawns included.
#
# vLLM's CPU attention runs AMX tile instructions on CPUs that have them (bfloat16, blocks of 32k tokens), but
# never asks Linux for the AMX state first (arch_prctl ARCH_REQ_XCOMP_PERM; permission is per process and is
# cleared by exec). The engine only survives when a oneDNN matrix multiply happened to ask before the first
# attention call; a short first prompt (a 1-token health probe after a restart) reaches attention first and the
# engine core dies of SIGILL ("Illegal instruction", "EngineCore encountered an issue"). Asking here is harmless
# where there is no AMX (the call fails and is ignored). Then the image's own sitecustomize, if any, runs.
"""Ask Linux for AMX tile permission, then run the next sitecustomize on the path."""
import ctypes
import os
import platform
import sys

ARCH_PRCTL = 158  # x86_64 syscall number
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18


def request_amx():
    """True when Linux granted the AMX tile state to this process."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, ctypes.c_ulong(XFEATURE_XTILEDATA)) == 0
    except (OSError, AttributeError):
        return False


def run_next_sitecustomize():
    """Import the sitecustomize this one shadows (Debian's, an image's own), then put this module back."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved_path = sys.path[:]
    mine = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    try:
        __import__("sitecustomize")
    except ImportError:
        pass
    finally:
        sys.path[:] = saved_path
        if mine is not None:
            sys.modules["sitecustomize"] = mine


request_amx()
run_next_sitecustomize()
