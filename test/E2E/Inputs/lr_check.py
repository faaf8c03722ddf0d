#!/usr/bin/env python3
"""Golden check of a learning-rate schedule: the `lr/MODEL` a run logged at
each step against transformers' scheduler of the same settings, evaluated
at the step (iteration i, 1-based, is the scheduler's step i).

  lr_check.py METRICS --key lr/actor --schedule cosine --lr 2e-3
              --warmup 2 --decay 6 [--min-lr 2e-4] [--steps N]
              [--frozen K]

With --frozen K the model trains from step K + 1: steps 1..K must log no
rate, and step i is the scheduler's step i - K.

Exits non-zero with a message when a step's rate differs by more than 1e-12
relative, when a step has no rate, or when fewer than --steps are logged.
"""
import argparse
import json
import sys

import torch
import transformers


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("metrics")
    ap.add_argument("--key", required=True)
    ap.add_argument("--schedule", choices=["constant", "linear", "cosine"],
                    required=True)
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--decay", type=int, required=True)
    ap.add_argument("--min-lr", type=float, default=0.0)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--frozen", type=int, default=0)
    a = ap.parse_args()

    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=a.lr)
    if a.schedule == "constant":
        sched = transformers.get_constant_schedule_with_warmup(opt, a.warmup)
    elif a.schedule == "linear":
        if a.min_lr:
            fail("transformers' linear schedule decays to 0: give no --min-lr")
        sched = transformers.get_linear_schedule_with_warmup(
            opt, a.warmup, a.decay)
    else:
        sched = transformers.get_cosine_with_min_lr_schedule_with_warmup(
            opt, a.warmup, a.decay, min_lr=a.min_lr)
    lam = sched.lr_lambdas[0]

    with open(a.metrics) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if len(rows) < a.steps:
        fail(f"{a.metrics}: {len(rows)} steps, need {a.steps}")
    for r in rows:
        step = r["step"]
        if step <= a.frozen:
            if a.key in r:
                fail(f"step {step}: {a.key} logged while frozen")
            continue
        if a.key not in r:
            fail(f"step {step}: no {a.key}")
        step -= a.frozen
        # Past the horizon the run holds min_lr, where transformers' cosine
        # would rise again.
        want = a.lr * lam(min(step, a.decay))
        got = r[a.key]
        if abs(got - want) > 1e-12 * max(abs(want), 1e-30):
            fail(f"step {step}: {a.key} {got!r}, transformers {want!r}")
    print(f"OK: {len(rows)} steps of {a.key} match transformers "
          f"{transformers.__version__}'s {a.schedule} schedule")


if __name__ == "__main__":
    main()
