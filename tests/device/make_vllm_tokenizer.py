#!/usr/bin/env python
"""Write a stand-in tokenizer for Qwen3.5-35B-A3B with random (dummy) weights: a WordLevel vocabulary that
covers all 248,320 token ids of the model, the special tokens vLLM's chat path and the qwen3 reasoning parser
look up (<|im_start|>, <|im_end|> = eos id 248044, <think>, </think>), and a ChatML chat template.

It exists only so that `vllm serve` on the lent GPU machine can tokenize a prompt and detokenize what random
weights produce; the text means nothing.  The real checkpoint's tokenizer is not available on that machine.

Usage: make_vllm_tokenizer.py OUTDIR   (writes tokenizer.json, tokenizer_config.json, special_tokens_map.json)
Needs the `tokenizers` package (the lent machine has it; here: pip install tokenizers).
"""
import json
import os
import string
import sys

VOCAB_SIZE = 248320
SPECIAL = {  # id -> token; ids as in the model's config (eos_token_id 248044, vision ids 248053..248057)
    248043: "<|endoftext|>", 248044: "<|im_end|>", 248045: "<|im_start|>",
    248053: "<|vision_start|>", 248054: "<|vision_end|>", 248055: "<|vision_pad|>",
    248056: "<|image_pad|>", 248057: "<|video_pad|>",
    248068: "<think>", 248069: "</think>", 248070: "<|unk|>",
}
WORDS = ("the of and to a in is it you that he was for on are with as I his they be at one have this from or had "
         "by word but what some we can out other were all there when up use your how said an each she which do "
         "their time if will way about many then them write would like so these her long make thing see him two "
         "has look more day could go come did number sound no most people my over know water than call first who "
         "may down side been now find Hello name capital France Paris answer question user assistant system").split()

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}")


def main(out):
    from tokenizers import Tokenizer, models, pre_tokenizers, AddedToken

    vocab = {}
    regular = [c for c in string.printable if not c.isspace()] + list(WORDS)
    seen = set()
    ids = iter(i for i in range(VOCAB_SIZE) if i not in SPECIAL)
    for tok in regular:
        if tok in seen:
            continue
        seen.add(tok)
        vocab[tok] = next(ids)
    for i in ids:
        vocab["t%d" % i] = i
    for i, tok in SPECIAL.items():
        vocab[tok] = i
    assert len(vocab) == VOCAB_SIZE and sorted(vocab.values()) == list(range(VOCAB_SIZE))
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for _unused, t in sorted(SPECIAL.items())])
    os.makedirs(out, exist_ok=True)
    tk.save(os.path.join(out, "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 262144,
        "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": "<|unk|>",
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "comment": "stand-in tokenizer for dummy weights (tests/device/make_vllm_tokenizer.py); not Qwen's",
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w") as fh:
        json.dump(config, fh, indent=1)
    with open(os.path.join(out, "special_tokens_map.json"), "w") as fh:
        json.dump({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": "<|unk|>"}, fh, indent=1)
    print("wrote %s: %d tokens" % (out, tk.get_vocab_size()))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tokenizer")
