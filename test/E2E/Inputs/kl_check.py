#!/usr/bin/env python3
"""Checks an adaptive KL coefficient a run logged against the controller of
Ziegler et al. (2019), as TRL's and verl's AdaptiveKLController compute it:

    err  = clip(kl / target - 1, -0.2, 0.2)
    coef = coef * (1 + err * rows / horizon)

after every step, from the `kl` that step logged.

  kl_check.py METRICS --coef kl_coef --kl kl --init 0.05 --target 0.02
              --horizon 1000 --rows 32 --steps N

Exits non-zero with a message when the first step's coefficient is not
`init`, when a step's is not the update of the step before's (within 1e-12
relative: every rank holds the same value, and the log averages them), when
the coefficient never moved, or when fewer than N steps are logged.
"""
import argparse
import json
import math
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def close(a, b):
    return abs(a - b) <= 1e-12 * max(abs(a), abs(b), 1e-300)


def logged(path, steps, keys):
    """The rows of metrics.jsonl at PATH, at least STEPS of them, each with
    a finite value of every key (entropy_check.py uses it too)."""
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if len(rows) < steps:
        fail("%d steps logged, expected %d" % (len(rows), steps))
    for r in rows:
        for key in keys:
            if key not in r or not math.isfinite(r[key]):
                fail("step %d has no finite %s" % (r["step"], key))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("metrics")
    ap.add_argument("--coef", required=True)
    ap.add_argument("--kl", required=True)
    ap.add_argument("--init", type=float, required=True)
    ap.add_argument("--target", type=float, required=True)
    ap.add_argument("--horizon", type=float, required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    a = ap.parse_args()

    rows = logged(a.metrics, a.steps, (a.coef, a.kl))
    if not close(rows[0][a.coef], a.init):
        fail("step 1: %s is %r, not the initial %r" %
             (a.coef, rows[0][a.coef], a.init))
    moved = False
    for prev, cur in zip(rows, rows[1:]):
        err = min(max(prev[a.kl] / a.target - 1.0, -0.2), 0.2)
        want = prev[a.coef] * (1.0 + err * a.rows / a.horizon)
        if not close(cur[a.coef], want):
            fail("step %d: %s is %r; after step %d's %s %r it should be %r" %
                 (cur["step"], a.coef, cur[a.coef], prev["step"], a.kl,
                  prev[a.kl], want))
        moved = moved or not close(cur[a.coef], prev[a.coef])
    if not moved:
        fail("%s never moved over %d steps" % (a.coef, len(rows)))
    print("ok: %s over %d steps: %s" %
          (a.coef, len(rows), " ".join("%.6g" % r[a.coef] for r in rows)))


if __name__ == "__main__":
    main()
