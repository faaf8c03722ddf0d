#!/usr/bin/env python3
"""Checks on validation losses in eval.jsonl (eval-loss.test).

  eval_loss_check.py before-step RUN --key loss/lm [--rtol R]
      RUN/eval.jsonl's val/KEY at step 0 is RUN/metrics.jsonl's KEY at step
      1: the loss the first train step computed before its update, on the
      same rows (the held-out set is the training set)
  eval_loss_check.py padded ALL HEAD TAIL --key loss/lm --head-rows H
      --tail-rows T [--rtol R]
      the step-0 val/KEY of ALL (H + T rows) is the row-weighted mean of
      HEAD's (its first H rows) and TAIL's (its last T): rows padding a
      short last batch count for nothing
"""
import argparse
import json
import sys


def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def at(path, step, key):
    for r in rows(path):
        if r["step"] == step:
            if key not in r:
                sys.exit(f"FAIL: {path} has no {key} at step {step}")
            return r[key]
    sys.exit(f"FAIL: {path} has no step {step}")


def close(got, want, rtol, what):
    if abs(got - want) > rtol * abs(want):
        sys.exit(f"FAIL: {what}: {got} is not {want} within {rtol}")
    print(f"OK: {what}: {got} vs {want}")


def before_step(a):
    val = at(f"{a.run}/eval.jsonl", 0, "val/" + a.key)
    train = at(f"{a.run}/metrics.jsonl", 1, a.key)
    close(val, train, a.rtol, f"{a.run}: val/{a.key} before step 1")


def padded(a):
    whole = at(f"{a.all}/eval.jsonl", 0, "val/" + a.key)
    head = at(f"{a.head}/eval.jsonl", 0, "val/" + a.key)
    tail = at(f"{a.tail}/eval.jsonl", 0, "val/" + a.key)
    n = a.head_rows + a.tail_rows
    close(whole, (a.head_rows * head + a.tail_rows * tail) / n, a.rtol,
          f"val/{a.key} of {n} rows from {a.head_rows} and {a.tail_rows}")


p = argparse.ArgumentParser()
sub = p.add_subparsers(dest="cmd", required=True)
b = sub.add_parser("before-step")
b.add_argument("run")
b.add_argument("--key", required=True)
b.add_argument("--rtol", type=float, default=1e-5)
b.set_defaults(fn=before_step)
d = sub.add_parser("padded")
for name in ("all", "head", "tail"):
    d.add_argument(name)
d.add_argument("--key", required=True)
d.add_argument("--head-rows", type=int, required=True)
d.add_argument("--tail-rows", type=int, required=True)
d.add_argument("--rtol", type=float, default=1e-5)
d.set_defaults(fn=padded)
a = p.parse_args()
a.fn(a)
