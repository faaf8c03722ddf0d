#!/usr/bin/env python3
"""Checks on the eval.jsonl of held-out evaluation (eval-loss.test,
eval-sources.test).

  eval_check.py before-step RUN --key loss/lm [--rtol R]
      RUN/eval.jsonl's val/KEY at step 0 is RUN/metrics.jsonl's KEY at step
      1: the loss the first train step computed before its update, on the
      same rows (the held-out set is the training set)
  eval_check.py padded ALL HEAD TAIL --key loss/lm --head-rows H
      --tail-rows T [--rtol R]
      the step-0 val/KEY of ALL (H + T rows) is the row-weighted mean of
      HEAD's (its first H rows) and TAIL's (its last T): rows padding a
      short last batch count for nothing
  eval_check.py equal RUN_A KEY_A RUN_B KEY_B [--rtol R]
      the step-0 values of KEY_A in RUN_A and KEY_B in RUN_B agree
  eval_check.py sources RUN DATA --keys val/reward[,...] [--samples K]
      at every step of RUN/eval.jsonl, each key has a value per data_source
      of the rows of DATA (val/SOURCE/LABEL), and the key's value is their
      mean weighted by each source's rows (and, with K > 1, the same of
      KEY/best@K and KEY/maj@K); maj@K lies between 0 and best@K
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
    if abs(got - want) > rtol * abs(want) + 1e-12:
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


def equal(a):
    close(at(f"{a.run_a}/eval.jsonl", 0, a.key_a),
          at(f"{a.run_b}/eval.jsonl", 0, a.key_b), a.rtol,
          f"{a.run_a}'s {a.key_a} and {a.run_b}'s {a.key_b}")


def sources(a):
    counts = {}
    for r in rows(a.data):
        counts[r["data_source"]] = counts.get(r["data_source"], 0) + 1
    if len(counts) < 2:
        sys.exit(f"FAIL: {a.data} has fewer than two data sources")
    n = sum(counts.values())
    evals = rows(f"{a.run}/eval.jsonl")
    for key in a.keys.split(","):
        for suffix in [""] + ([f"/best@{a.samples}", f"/maj@{a.samples}"]
                              if a.samples > 1 else []):
            for r in evals:
                label = key[len("val/"):] + suffix
                parts = {}
                for s in counts:
                    k = f"val/{s}/{label}"
                    if k not in r:
                        sys.exit(f"FAIL: step {r['step']} has no {k}")
                    parts[s] = r[k]
                want = sum(counts[s] * parts[s] for s in counts) / n
                if suffix.startswith("/maj@") and not (
                        0 <= r[key + suffix] <= r[f"{key}/best@{a.samples}"]):
                    sys.exit(f"FAIL: step {r['step']}: {key + suffix} is not "
                             f"between 0 and {key}/best@{a.samples}")
                close(r[key + suffix], want, a.rtol,
                      f"step {r['step']}: {key + suffix} from " +
                      ", ".join(f"{s} {parts[s]:.4g} ({counts[s]} rows)"
                                for s in sorted(counts)))


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
e = sub.add_parser("equal")
for name in ("run_a", "key_a", "run_b", "key_b"):
    e.add_argument(name)
e.add_argument("--rtol", type=float, default=1e-6)
e.set_defaults(fn=equal)
o = sub.add_parser("sources")
o.add_argument("run")
o.add_argument("data")
o.add_argument("--keys", required=True)
o.add_argument("--samples", type=int, default=1)
o.add_argument("--rtol", type=float, default=1e-9)
o.set_defaults(fn=sources)
a = p.parse_args()
a.fn(a)
