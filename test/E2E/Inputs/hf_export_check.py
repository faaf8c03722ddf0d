#!/usr/bin/env python3
"""Checks a model a run exported with --export-hf. Exits non-zero with a
message when a check fails.

  hf_export_check.py export EXPORTED INITIAL RUN_CHECKPOINT
      EXPORTED loads in transformers (model and tokenizer); its config.json
      agrees with INITIAL's on the architecture; its weights are the run's
      final ones (RUN_CHECKPOINT, the run's model.safetensors, bit for bit)
      and differ from INITIAL's (training moved them); its tokenizer gives
      INITIAL's ids; and its logits are finite and differ from INITIAL's.
  hf_export_check.py greedy EXPORTED SUMS METRICS
      the fraction of SUMS (JSONL: prompt, answer) that transformers'
      greedy answer gets right with EXPORTED equals step 0's reward in
      METRICS, a run of Inputs/tiny_grpo_hf_greedy.rlhf on EXPORTED: the
      runtime and transformers compute the same model from the export.
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import load_file

ARCH_KEYS = ["model_type", "architectures", "num_hidden_layers", "hidden_size",
             "num_attention_heads", "num_key_value_heads", "intermediate_size",
             "vocab_size", "max_position_embeddings", "rope_theta",
             "rms_norm_eps", "tie_word_embeddings", "hidden_act"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def config(d):
    with open(os.path.join(d, "config.json")) as f:
        return json.load(f)


def load(d):
    return transformers.AutoModelForCausalLM.from_pretrained(
        d, attn_implementation="eager", dtype=torch.float32).eval()


def export(exported, initial, run_ckpt):
    want, got = config(initial), config(exported)
    for k in ARCH_KEYS:
        if got.get(k) != want.get(k):
            fail(f"config.json: {k} is {got.get(k)!r}, the initial "
                 f"checkpoint's is {want.get(k)!r}")
    print(f"config.json: {len(ARCH_KEYS)} architecture keys agree")

    model, start = load(exported), load(initial)
    ours = load_file(run_ckpt)
    moved = 0.0
    state, start_state = model.state_dict(), start.state_dict()
    for name, t in ours.items():
        if name not in state:
            fail(f"the run's tensor {name} is not in the exported model")
        if not torch.equal(state[name], t.float()):
            fail(f"{name}: exported weights differ from the run's checkpoint")
        moved = max(moved, (state[name] - start_state[name]).abs().max().item())
    if moved == 0.0:
        fail("exported weights equal the initial checkpoint's: training "
             "changed nothing")
    print(f"weights: {len(ours)} tensors equal the run's final checkpoint, "
          f"max change from the initial checkpoint {moved:.3g}")

    tok = transformers.AutoTokenizer.from_pretrained(exported)
    ref_tok = transformers.AutoTokenizer.from_pretrained(initial)
    ids = tok("3+4=", return_tensors="pt")["input_ids"]
    if ids.tolist() != ref_tok("3+4=", return_tensors="pt")["input_ids"].tolist():
        fail("the exported tokenizer's ids differ from the initial one's")
    with torch.no_grad():
        logits, before = model(input_ids=ids).logits, start(input_ids=ids).logits
    if not torch.isfinite(logits).all():
        fail("the exported model's logits are not finite")
    if torch.equal(logits, before):
        fail("the exported model's logits equal the initial checkpoint's")
    print(f"transformers: tokenizer and model load; '3+4=' is {ids.tolist()[0]}, "
          f"logits finite, max change {(logits - before).abs().max().item():.3g}")
    print("OK")


def greedy(exported, sums, metrics):
    model = load(exported)
    tok = transformers.AutoTokenizer.from_pretrained(exported)
    with open(sums) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    right = 0
    with torch.no_grad():
        for r in rows:
            ids = tok(r["prompt"], return_tensors="pt")["input_ids"]
            want = tok(r["answer"], add_special_tokens=False)["input_ids"]
            got = model(input_ids=ids).logits[0, -1].argmax().item()
            right += int([got] == want[:1])
    with open(metrics) as f:
        reward = json.loads(f.readline())["reward"]
    print(f"greedy answers right: transformers {right}/{len(rows)}, "
          f"the runtime's reward {reward:.4f}")
    if abs(right / len(rows) - reward) > 1e-6:
        fail("transformers and the runtime answer differently with the "
             "exported weights")
    print("OK")


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("export", "greedy"):
        fail("usage: hf_export_check.py export|greedy ARGS (see the "
             "docstring)")
    (export if sys.argv[1] == "export" else greedy)(*sys.argv[2:])


if __name__ == "__main__":
    main()
