#!/usr/bin/env python
"""Write a stand-in tokenizer for a model with random (dummy) weights from its config.json: a WordLevel vocabulary
covering every token id of the model (vocab_size), its bos/eos ids as special tokens.  Only so that `vllm serve` on
the lent GPU machine can tokenize a prompt and detokenize what random weights produce; the real tokenizer is not on
that machine.  Usage: make_tokenizer.py CONFIG.json OUTDIR (needs `tokenizers`; the lent machine has it).
"""
import json
import os
import sys


def special_ids(config):
    out = {}
    for key, name in (("bos_token_id", "<s>"), ("eos_token_id", "</s>")):
        ids = config.get(key)
        for n, i in enumerate(ids if isinstance(ids, list) else [ids] if ids is not None else []):
            out.setdefault(i, name if n == 0 else "%s%d" % (name[:-1], n) + ">")
    return out


def main(config_path, out):
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    with open(config_path) as fh:
        config = json.load(fh)
    size = config["vocab_size"]
    special = special_ids(config)
    words = "Hello world the capital of France is Paris a an and to in on for".split()
    vocab, free = {}, (i for i in range(size) if i not in special)
    for word in words:
        vocab[word] = next(free)
    for i in free:
        vocab["t%d" % i] = i
    unk = next(i for i in range(size) if i not in special)
    vocab.update({tok: i for i, tok in special.items()})
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token=[t for t, i in vocab.items() if i == unk][0]))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for _i, t in sorted(special.items())])
    os.makedirs(out, exist_ok=True)
    tk.save(os.path.join(out, "tokenizer.json"))
    eos = special.get(config["eos_token_id"][0] if isinstance(config.get("eos_token_id"), list)
                      else config.get("eos_token_id"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as fh:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 131072, "eos_token": eos,
                   "bos_token": special.get(config.get("bos_token_id")), "pad_token": eos,
                   "chat_template": "{% for m in messages %}{{ m['content'] }} {% endfor %}",
                   "comment": "stand-in tokenizer for dummy weights (tests/device/many_models/make_tokenizer.py)"},
                  fh, indent=1)
    print("wrote %s: %d tokens" % (out, tk.get_vocab_size()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
