#!/usr/bin/env python3
"""Checks an adaptive entropy coefficient a run logged against
Skywork-OR1's controller (its EntController), from the entropy each step
logged:

    value = clip(value + (delta if entropy < target else -delta), min, max)
    on    = entropy < target

and each step uses value if on, else 0 (which the run logs).

  entropy_check.py METRICS --coef entropy_coef/actor --entropy entropy/actor
                   --init 0 --target 0.5 --delta 0.01 --max 0.03 --min 0
                   --steps N

Exits non-zero with a message when a step's coefficient is not the one the
controller gives (within 1e-12 relative), when fewer than N steps are
logged, or when the run never had its entropy both under and over the
target (the check would then not cover both branches).
"""
import argparse

from kl_check import close, fail, logged


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("metrics")
    ap.add_argument("--coef", required=True)
    ap.add_argument("--entropy", required=True)
    for k in ("init", "target", "delta", "max", "min"):
        ap.add_argument("--" + k, type=float, required=True)
    ap.add_argument("--steps", type=int, required=True)
    a = ap.parse_args()

    rows = logged(a.metrics, a.steps, (a.coef, a.entropy))
    value, on = a.init, True
    under = over = False
    for r in rows:
        want = value if on else 0.0
        if not close(r[a.coef], want):
            fail("step %d: %s is %r, the controller gives %r" %
                 (r["step"], a.coef, r[a.coef], want))
        low = r[a.entropy] < a.target
        under, over = under or low, over or not low
        value = min(max(value + (a.delta if low else -a.delta), a.min), a.max)
        on = low
    if not (under and over):
        fail("%s stayed %s the target %g over %d steps" %
             (a.entropy, "under" if under else "at or over", a.target,
              len(rows)))
    print("ok: %s over %d steps: %s" %
          (a.coef, len(rows), " ".join("%.6g" % r[a.coef] for r in rows)))


if __name__ == "__main__":
    main()
