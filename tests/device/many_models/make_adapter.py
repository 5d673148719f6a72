#!/usr/bin/env python
"""A LoRA adapter with random weights for a model's config.json, in peft's layout (adapter_config.json +
adapter_model.safetensors), made on the lent machine with its torch (issue #39's GPU proof: an adapter served by its
own name).  Usage: make_adapter.py CONFIG_JSON OUTDIR RANK [TARGETS]   (TARGETS: comma list, default q,k,v,o_proj)."""
import json
import os
import sys

import torch
from safetensors.torch import save_file


def shapes(config, target):
    """(input, output) of one attention projection, from the config's head counts."""
    hidden = config["hidden_size"]
    head_dim = config.get("head_dim") or hidden // config["num_attention_heads"]
    q_out = config["num_attention_heads"] * head_dim
    kv_out = config.get("num_key_value_heads", config["num_attention_heads"]) * head_dim
    return {"q_proj": (hidden, q_out), "k_proj": (hidden, kv_out), "v_proj": (hidden, kv_out),
            "o_proj": (q_out, hidden)}[target]


def main(config_path, outdir, rank, targets="q_proj,k_proj,v_proj,o_proj"):
    with open(config_path) as fh:
        config = json.load(fh)
    rank, targets = int(rank), targets.split(",")
    torch.manual_seed(0)
    tensors = {}
    for layer in range(config["num_hidden_layers"]):
        for target in targets:
            fan_in, fan_out = shapes(config, target)
            stem = "base_model.model.model.layers.%d.self_attn.%s" % (layer, target)
            tensors[stem + ".lora_A.weight"] = (torch.randn(rank, fan_in) * 0.01).to(torch.bfloat16)
            tensors[stem + ".lora_B.weight"] = (torch.randn(fan_out, rank) * 0.01).to(torch.bfloat16)
    os.makedirs(outdir, exist_ok=True)
    save_file(tensors, os.path.join(outdir, "adapter_model.safetensors"))
    adapter_config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 2 * rank,
                      "lora_dropout": 0.0, "target_modules": targets, "bias": "none", "fan_in_fan_out": False,
                      "modules_to_save": None, "use_rslora": False, "use_dora": False,
                      "base_model_name_or_path": config_path}
    with open(os.path.join(outdir, "adapter_config.json"), "w") as fh:
        json.dump(adapter_config, fh, indent=1)
    print(json.dumps({"adapter": outdir, "r": rank, "targets": targets,
                      "parameters": sum(t.numel() for t in tensors.values())}))


if __name__ == "__main__":
    main(*sys.argv[1:])
