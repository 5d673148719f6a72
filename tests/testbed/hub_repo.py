#!/usr/bin/env python
"""Test-bed hub repositories: one local git repo that both local hubs serve.

Two jobs, usable from pytest (import) and from shell (CLI):

* ``synth``: write a synthetic Hugging Face model directory whose layout is valid: config.json
  (Qwen3MoeForCausalLM), tokenizer files, N real safetensors shards (8-byte header length, JSON
  header, tensor bytes) and model.safetensors.index.json naming every tensor's shard. Used while
  the real tiny model (LLMFLEET_TEST_MODEL_DIR) is absent, and for large throughput shards.
* ``publish``: turn a model directory into the repository layout ``olah`` serves offline and
  ``tests/testbed/modelscope_server.py`` serves too: ``ROOT/models/<org>/<name>`` is a plain git
  repo, ``*.safetensors`` (and any file >= 1 MiB) committed as Git LFS pointer files whose objects
  sit under ``.git/lfs/objects/aa/bb/<sha256>`` (hard-linked, so a 200 MB shard costs no copy).
  git-lfs itself is not needed. The commit is tagged ``v1``; the branch is ``main``.

CLI:
  hub_repo.py synth OUT_DIR [--shard-mb 1,1] [--seed 0]
  hub_repo.py publish MODEL_DIR ROOT ORG/NAME     -> prints the commit sha
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

LFS_MIN_BYTES = 1 << 20
GIT = ["git", "-c", "user.name=llmfleet-testbed", "-c", "user.email=testbed@llmfleet.invalid",
       "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]


def _safetensors_bytes_file(path: Path, tensors: dict[str, int], rng) -> None:
    """Write a real safetensors file: tensors maps name -> byte length (dtype U8, 1-D)."""
    header, offset = {}, 0
    for name, nbytes in tensors.items():
        header[name] = {"dtype": "U8", "shape": [nbytes], "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for nbytes in tensors.values():
            left = nbytes
            while left:
                chunk = min(left, 8 << 20)
                f.write(rng(chunk))
                left -= chunk


def synth_model(out: Path, shard_mb: list[float], seed: int = 0) -> Path:
    """Write a synthetic but structurally valid HF model directory into ``out``."""
    import random
    gen = random.Random(seed)

    def rng(n: int) -> bytes:
        return gen.randbytes(n)

    out.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 64,
        "num_hidden_layers": len(shard_mb), "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 512, "torch_dtype": "bfloat16",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps({"do_sample": False}) + "\n")
    vocab = {chr(ord("a") + i): i for i in range(26)}
    (out / "tokenizer.json").write_text(json.dumps({
        "version": "1.0", "added_tokens": [{"id": 26, "content": "<|im_end|>", "special": True}],
        "model": {"type": "BPE", "vocab": vocab, "merges": []}}) + "\n")
    (out / "tokenizer_config.json").write_text(json.dumps({
        "eos_token": "<|im_end|>", "model_max_length": 512,
        "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"}) + "\n")
    n = len(shard_mb)
    weight_map, total = {}, 0
    for i, mb in enumerate(shard_mb, start=1):
        name = f"model-{i:05d}-of-{n:05d}.safetensors"
        nbytes = max(64, int(mb * (1 << 20)) - 4096)
        tensors = {f"model.layers.{i - 1}.mlp.experts.weight": nbytes - 32,
                   f"model.layers.{i - 1}.input_layernorm.weight": 32}
        _safetensors_bytes_file(out / name, tensors, rng)
        for t in tensors:
            weight_map[t] = name
        total += nbytes
    (out / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2) + "\n")
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(8 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _is_lfs(path: Path) -> bool:
    return path.suffix in (".safetensors", ".bin", ".gguf") or path.stat().st_size >= LFS_MIN_BYTES


def publish(model_dir: Path, root: Path, repo_id: str, tag: str = "v1") -> str:
    """Publish model_dir as ROOT/models/<org>/<name> (git + LFS pointers). Returns the commit."""
    repo = root / "models" / repo_id
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    subprocess.run(GIT + ["init", "-q", str(repo)], check=True)
    attrs = []
    for src in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        rel = src.relative_to(model_dir)
        if rel.parts[0].startswith("."):
            continue
        dst = repo / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if _is_lfs(src):
            oid, size = _sha256(src), src.stat().st_size
            obj = repo / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
            obj.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, obj)
            except OSError:
                shutil.copyfile(src, obj)
            dst.write_text(f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n")
            attrs.append(f"{rel.as_posix()} filter=lfs diff=lfs merge=lfs -text")
        else:
            shutil.copyfile(src, dst)
    (repo / ".gitattributes").write_text("\n".join(attrs) + "\n")
    subprocess.run(GIT + ["-C", str(repo), "add", "-A"], check=True)
    subprocess.run(GIT + ["-C", str(repo), "commit", "-q", "-m", "test-bed model"], check=True)
    subprocess.run(GIT + ["-C", str(repo), "tag", tag], check=True)
    return subprocess.run(GIT + ["-C", str(repo), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("synth")
    s.add_argument("out", type=Path)
    s.add_argument("--shard-mb", default="1,1")
    s.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("publish")
    p.add_argument("model_dir", type=Path)
    p.add_argument("root", type=Path)
    p.add_argument("repo_id")
    args = ap.parse_args(argv)
    if args.cmd == "synth":
        synth_model(args.out, [float(x) for x in args.shard_mb.split(",")], args.seed)
        print(args.out)
    else:
        print(publish(args.model_dir, args.root, args.repo_id))
    return 0


if __name__ == "__main__":
    sys.exit(main())
