#!/usr/bin/env python3
"""Writes examples/hf/tiny/: a tiny Qwen2-style Hugging Face checkpoint for
examples/tiny_grpo_hf.rlhf, made offline with transformers and tokenizers.

- tokenizer.json: a byte-level BPE tokenizer (Qwen2's pre-tokenizer: digits
  one by one) trained on the sums data, with bos, eos and pad special tokens;
  "3+4=" is bos, "3", "+", "4", "=" and "7" is one token.
- config.json, model.safetensors: 2 layers, hidden 64, 4 query heads sharing
  2 key/value heads, q/k/v biases, tied embeddings, a vocabulary of 320,
  built with from_config and save_pretrained. Its random weights are then
  fine-tuned for a few steps on the sums (bos prompt answer eos), so that it
  answers with digits and sometimes the right one: GRPO has a reward to
  learn from from the first step.

Usage (from the repository root, with the venv's python):
  /opt/rlhfc/venv/bin/python examples/hf/make_tiny.py [OUTDIR] [SUMS_JSONL]
"""
import json
import os
import sys

import torch
import transformers
from tokenizers import (Regex, Tokenizer, decoders, models, pre_tokenizers,
                        processors, trainers)

HERE = os.path.dirname(os.path.abspath(__file__))
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
               r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"]
VOCAB = 320
SFT_STEPS = 20


def tokenizer(texts):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated",
                             invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                 use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=300, show_progress=False, special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bos = SPECIALS[0]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos}:0 $A:0", special_tokens=[(bos, tok.token_to_id(bos))])
    return tok


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "tiny")
    sums = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        HERE, "..", "data", "sums.jsonl")
    with open(sums, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    tok = tokenizer([r[k] for r in rows for k in ("prompt", "answer")])
    assert tok.get_vocab_size() <= VOCAB
    bos, eos, pad = (tok.token_to_id(s) for s in SPECIALS)

    cfg = transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=176,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=10000.0,
        tie_word_embeddings=True, use_sliding_window=False,
        bos_token_id=bos, eos_token_id=eos, pad_token_id=pad)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(
        cfg, attn_implementation="eager", dtype=torch.float32)

    # A few steps of supervised fine-tuning on whole sums: loss on the
    # answer and eos only.
    seqs = [tok.encode(r["prompt"]).ids + tok.encode(
        r["answer"], add_special_tokens=False).ids + [eos] for r in rows]
    ids = torch.tensor(seqs)
    labels = ids.clone()
    labels[:, :len(tok.encode(rows[0]["prompt"]).ids)] = -100
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(SFT_STEPS):
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        prompt_len = len(tok.encode(rows[0]["prompt"]).ids)
        guess = model(input_ids=ids[:, :prompt_len]).logits[:, -1].argmax(-1)
        right = (guess == ids[:, prompt_len]).float().mean().item()

    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast",
                   "bos_token": SPECIALS[0], "eos_token": SPECIALS[1],
                   "pad_token": SPECIALS[2]}, f, indent=2)
        f.write("\n")
    print(f"{out}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"{tok.get_vocab_size()} token ids, after {SFT_STEPS} SFT steps "
          f"loss {loss.item():.3f}, greedy answers right {right:.0%}")


if __name__ == "__main__":
    main()
