#!/usr/bin/env python3
"""Compares the allocator peaks of two measured traces (PROGRAM --trace).

  span_peaks.py A.json B.json --name train_step --less-by F

For every rank, the largest "peak GB" over the spans whose name starts
with NAME must be in A at least the fraction F below B's: a feature that
saves memory (recomputation, ZeRO) shows where it runs, not only in the
plan. Prints both peaks per rank; exits 1 when a rank misses.
"""
import argparse
import json
import sys


def peaks(path, name):
    out = {}
    for e in json.load(open(path))["traceEvents"]:
        if e.get("ph") == "X" and e["name"].startswith(name):
            out[e["tid"]] = max(out.get(e["tid"], 0.0), e["args"]["peak GB"])
    return out


p = argparse.ArgumentParser()
p.add_argument("a")
p.add_argument("b")
p.add_argument("--name", required=True)
p.add_argument("--less-by", type=float, required=True)
args = p.parse_args()
a, b = peaks(args.a, args.name), peaks(args.b, args.name)
if not a or set(a) != set(b):
    sys.exit(f"FAIL: '{args.name}' spans on ranks {sorted(a)} and {sorted(b)}")
bad = False
for r in sorted(a):
    less = 1 - a[r] / b[r]
    print(f"rank {r}: {a[r] * 1e9 / 2**20:.3f} MiB vs {b[r] * 1e9 / 2**20:.3f} "
          f"MiB ({100 * less:.1f}% less)")
    bad |= less < args.less_by
if bad:
    sys.exit(f"FAIL: a rank's peak is not {100 * args.less_by:g}% below")
print(f"OK: every rank's '{args.name}' peak is at least "
      f"{100 * args.less_by:g}% lower")
