"""Generate a tiny random model of another public architecture than the Qwen3-MoE (item 6 of issue #29).

    docker run --rm -v $PWD/tests/images/tiny-model:/recipe:ro -v OUT:/out --entrypoint python3 IMAGE \
        /recipe/make_tiny_arch.py llama|gemma3 /out

Each model keeps the keys of the published config.json it is shaped after (the copies in
tests/fixtures/model_configs/, sources in SOURCES.md), with tiny sizes so the vLLM CPU engine serves it in seconds:
  llama   meta-llama/Llama-3.1-8B-Instruct: LlamaForCausalLM, dense, GQA, llama3 rope scaling
  gemma3  google/gemma-3-1b-it: Gemma3ForCausalLM (gemma3_text), 5 sliding-window layers to 1 full, one KV head,
          query_pre_attn_scalar, tied embeddings
The tokenizer and chat template are the tiny Qwen3-MoE's (make_tiny_model.py), so a chat completion works the same
way; the weights are random (seeded), the answers are noise. No profile names these models: the deployments that
use them plan from their config.json alone.
"""
import json
import os
import pathlib
import sys

import torch
from transformers import GenerationConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_model as base  # noqa: E402  (the tokenizer, its vocabulary and the ChatML template)

ARCHS = {
    "llama": {
        "class": "LlamaForCausalLM",
        "config": {
            "hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 32, "intermediate_size": 256, "max_position_embeddings": 4096, "vocab_size": base.VOCAB_SIZE,
            "hidden_act": "silu", "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "attention_bias": False,
            "mlp_bias": False,
            "rope_parameters": {"rope_theta": 500000.0, "factor": 8.0, "high_freq_factor": 4.0,
                                "low_freq_factor": 1.0, "original_max_position_embeddings": 1024,
                                "rope_type": "llama3"},
        },
        # Keys that the published config.json spells and transformers 5 writes otherwise (or not at all).
        "published": {"rope_theta": 500000.0, "pretraining_tp": 1},
    },
    "gemma3": {
        "class": "Gemma3ForCausalLM",
        "config": {
            "hidden_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 1,
            "head_dim": 64, "intermediate_size": 256, "max_position_embeddings": 4096, "vocab_size": base.VOCAB_SIZE,
            "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-06, "query_pre_attn_scalar": 64,
            "sliding_window": 128, "tie_word_embeddings": True, "attention_bias": False,
            "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
        },
        "published": {"sliding_window_pattern": 6, "rope_theta": 1000000, "rope_local_base_freq": 10000,
                      "cache_implementation": "hybrid"},
    },
}
MAX_SHARD_SIZE = "1MB"


def model_classes(name):
    if name == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        return LlamaConfig, LlamaForCausalLM
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    return Gemma3TextConfig, Gemma3ForCausalLM


def check(out, name):
    """Load the result back the way a server does and fail loudly on any mismatch with the contract."""
    from transformers import AutoConfig, AutoTokenizer

    cfg = AutoConfig.from_pretrained(out)
    for key, want in ARCHS[name]["config"].items():
        got = getattr(cfg, key, None)
        if key != "rope_parameters" and got != want:
            sys.exit(f"make_tiny_arch {name}: config {key} is {got!r}, want {want!r}")
    if cfg.architectures != [ARCHS[name]["class"]]:
        sys.exit(f"make_tiny_arch {name}: architectures {cfg.architectures!r}")
    tok = AutoTokenizer.from_pretrained(out)
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    if prompt != "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n":
        sys.exit(f"make_tiny_arch {name}: chat template renders {prompt!r}")


def main(name, out):
    if name not in ARCHS:
        sys.exit(f"make_tiny_arch: unknown architecture {name!r}; one of {sorted(ARCHS)}")
    spec = ARCHS[name]
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(base.SEED)
    tokenizer = base.build_tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in base.SPECIAL_TOKENS}
    config_cls, model_cls = model_classes(name)
    config = config_cls(**spec["config"], bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                        pad_token_id=ids["<|endoftext|>"])
    config.architectures = [spec["class"]]
    model = model_cls(config).to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
    )
    model.save_pretrained(out, max_shard_size=MAX_SHARD_SIZE, safe_serialization=True)
    tokenizer.save_pretrained(out)
    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.setdefault("torch_dtype", "bfloat16")
    for key, value in spec["published"].items():
        cfg.setdefault(key, value)
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    tc_path = out / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    tc["chat_template"] = base.CHAT_TEMPLATE
    tc["tokenizer_class"] = "PreTrainedTokenizerFast"
    tc.pop("backend", None)
    tc_path.write_text(json.dumps(tc, indent=2, sort_keys=True) + "\n")
    (out / "chat_template.jinja").unlink(missing_ok=True)
    if not (out / "model.safetensors.index.json").exists():
        sys.exit(f"make_tiny_arch {name}: weights were not sharded (no model.safetensors.index.json)")
    for path in out.iterdir():
        path.chmod(0o644)
    check(out, name)
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"arch": spec["class"], "out": str(out), "parameters": params,
                      "files": sorted(os.listdir(out))}))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: make_tiny_arch.py llama|gemma3 OUT_DIR")
    main(sys.argv[1], sys.argv[2])
