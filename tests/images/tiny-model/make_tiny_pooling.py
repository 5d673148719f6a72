"""Generate the tiny pooling-runner models of the test bed (issue #39 item 5) and the tiny LoRA adapter (item 6).

    docker run --rm -v $PWD/tests/images/tiny-model:/recipe:ro -v OUT:/out --entrypoint python3 IMAGE \
        /recipe/make_tiny_pooling.py bert /out
    docker run ... -v BASE:/base:ro -v WHEELS:/wheels:ro -e PYTHONPATH=/wheels/peft-....whl:/wheels/accelerate-....whl \
        --entrypoint python3 IMAGE /recipe/make_tiny_pooling.py lora /out /base llmfleet-test/tiny-qwen3-moe

bert   an embedding model of a real architecture vLLM serves on its pooling runner on CPU: BertModel (encoder-only,
       CLS pooling), with the keys of microsoft/xtremedistil-l12-h384-uncased's published config.json
       (tests/fixtures/model_configs/microsoft--xtremedistil-l12-h384-uncased.json) at tiny sizes; hidden size
       HIDDEN, so /v1/embeddings returns vectors of HIDDEN numbers.
rerank a reranker (cross-encoder) of the same shape: BertForSequenceClassification with one label, which vLLM serves
       on its pooling runner for /v1/score and /v1/rerank.
lora   a LoRA adapter for the tiny Qwen3-MoE (make_tiny_model.py) made with peft: rank LORA_RANK on the attention
       projections, random weights (init_lora_weights=False, seeded), saved as peft saves it (adapter_config.json,
       adapter_model.safetensors).
The tokenizer is the tiny Qwen3-MoE's (make_tiny_model.py). Weights are random (seeded).
"""
import json
import os
import pathlib
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_model as base  # noqa: E402  (the tokenizer and its vocabulary)

HIDDEN = 128
BERT_CONFIG = {
    "hidden_size": HIDDEN, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 256,
    "max_position_embeddings": 512, "type_vocab_size": 2, "vocab_size": base.VOCAB_SIZE, "hidden_act": "gelu",
    "layer_norm_eps": 1e-12, "position_embedding_type": "absolute", "attention_probs_dropout_prob": 0.1,
    "hidden_dropout_prob": 0.1, "initializer_range": 0.02,
}
LORA_RANK = 8
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]


def make_bert(out, rerank=False):
    from transformers import AutoConfig, BertConfig, BertForSequenceClassification, BertModel

    torch.manual_seed(base.SEED)
    tokenizer = base.build_tokenizer()
    pad = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = BertConfig(**BERT_CONFIG, pad_token_id=pad, num_labels=1 if rerank else 2)
    arch = "BertForSequenceClassification" if rerank else "BertModel"
    config.architectures = [arch]
    model = (BertForSequenceClassification(config) if rerank else BertModel(config, add_pooling_layer=False))
    model = model.to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    cfg = json.loads((out / "config.json").read_text())
    cfg.setdefault("torch_dtype", "float32")
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    (out / "chat_template.jinja").unlink(missing_ok=True)
    back = AutoConfig.from_pretrained(out)
    if back.architectures != [arch] or back.hidden_size != HIDDEN:
        sys.exit("make_tiny_pooling bert: config reads back as %r / %r" % (back.architectures, back.hidden_size))
    return {"arch": arch, "hidden_size": HIDDEN, "parameters": sum(p.numel() for p in model.parameters())}


def make_lora(out, base_dir, base_name):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(base.SEED)
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    config = LoraConfig(r=LORA_RANK, lora_alpha=2 * LORA_RANK, target_modules=LORA_TARGETS, lora_dropout=0.0,
                        init_lora_weights=False, task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, config)
    peft_model.save_pretrained(out, safe_serialization=True)
    cfg = json.loads((out / "adapter_config.json").read_text())
    # peft writes the base model's path as it was loaded (/base); the test bed publishes the base by repo id.
    cfg["base_model_name_or_path"] = base_name
    (out / "adapter_config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    if cfg["r"] != LORA_RANK or cfg["peft_type"] != "LORA":
        sys.exit("make_tiny_pooling lora: adapter_config.json says r=%r peft_type=%r" % (cfg["r"], cfg["peft_type"]))
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    return {"adapter": "LORA", "r": LORA_RANK, "target_modules": sorted(cfg["target_modules"]), "parameters": trainable}


def main(kind, out, base_dir=None, base_name=None):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if kind in ("bert", "rerank"):
        made = make_bert(out, rerank=kind == "rerank")
    elif kind == "lora" and base_dir and base_name:
        made = make_lora(out, base_dir, base_name)
    else:
        sys.exit("usage: make_tiny_pooling.py bert|rerank OUT_DIR | lora OUT_DIR BASE_MODEL_DIR BASE_REPO_ID")
    for path in out.iterdir():
        path.chmod(0o644)
    made["files"] = sorted(os.listdir(out))
    print(json.dumps(made))


if __name__ == "__main__":
    main(*sys.argv[1:5])
