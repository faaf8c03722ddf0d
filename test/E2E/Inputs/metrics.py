#!/usr/bin/env python3
"""Checks on the metrics.jsonl a compiled rlhf program writes (rank 0, one
JSON object per step). Exits non-zero with a message when a check fails.

  metrics.py rise FILE --key reward --window W --margin M
      the mean of KEY over the last W steps exceeds the first W by M
  metrics.py fall FILE --key loss/lm --window W --margin M
      the mean of KEY over the last W steps is below the first W by M
  metrics.py same A B --keys k1,k2 --rtol R --atol T [--first N]
      both runs have the same steps, at least one (or N), and agree on the
      keys within tolerance (with --first, at the first N steps)
  metrics.py last FILE --key reward --window W [--at-least X] [--at-most Y]
      the mean of KEY over the last W steps is at least X (at most Y)
  metrics.py near FILE --step S --keys k1,k2 --atol T
      at step S each key is within T of 0 (and present)
  metrics.py steps FILE N [--finite k1,k2] [--at 0,2,4]
      steps 1..N (or those given) each appear exactly once, in order (and
      the keys are present and finite at every step)
  metrics.py filtered FILTERED PLAIN --key flat --groups G
      dynamic sampling (@filter_groups) in FILTERED: at every step KEY (the
      trained batch's share of groups that do not vary) times G (the groups
      of a batch) is filter/filled, the groups that filled the batch after
      max_rounds (0 at most steps), and some step drew a second batch;
      PLAIN (the program without the filter) has KEY above 0 at some step,
      so the first check could fail
  metrics.py oversampled OVER BASE --key flat --groups G
      OVER draws more prompts per round than a batch (gen_batch): KEY
      times G is filter/filled at every step, as above, and its steps drew
      fewer rounds on average than BASE's (the same program drawing a batch
      per round), which drew more than one
"""
import argparse
import json
import math
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def last(a):
    rows = load(a.file)
    if len(rows) < a.window:
        fail(f"{a.file}: {len(rows)} steps, need {a.window}")
    mean = sum(r[a.key] for r in rows[-a.window:]) / a.window
    print(f"mean {a.key} over the last {a.window} of {len(rows)} steps: {mean:.4f}")
    if a.at_least is None and a.at_most is None:
        fail("give --at-least or --at-most")
    if a.at_least is not None and not mean >= a.at_least:
        fail(f"{mean:.4f} is below {a.at_least}")
    if a.at_most is not None and not mean <= a.at_most:
        fail(f"{mean:.4f} is above {a.at_most}")


def trend(a):
    """rise (a.sign 1) or fall (a.sign -1) by more than the margin"""
    rows = load(a.file)
    if len(rows) < 2 * a.window:
        fail(f"{a.file}: {len(rows)} steps, need {2 * a.window}")
    first = sum(r[a.key] for r in rows[: a.window]) / a.window
    last = sum(r[a.key] for r in rows[-a.window:]) / a.window
    print(f"mean {a.key}: first {a.window} steps {first:.4f}, last {a.window} steps {last:.4f}")
    moved, verb = a.sign * (last - first), "rose" if a.sign > 0 else "fell"
    if not moved > a.margin:
        fail(f"{a.key} {verb} by {moved:.4f}, less than the margin {a.margin}")
    print("OK: %s by %.4f (margin %.4f)" % (verb, moved, a.margin))


def same(a):
    x, y = load(a.a), load(a.b)
    if [r["step"] for r in x] != [r["step"] for r in y]:
        fail("the runs have different steps")
    # Two empty runs agree on everything: a run that wrote no steps failed.
    if len(x) < max(1, a.first):
        fail(f"{a.a}: {len(x)} steps, need at least {max(1, a.first)}")
    for rx, ry in list(zip(x, y))[: a.first or None]:
        for k in a.keys.split(","):
            if k not in rx or k not in ry:
                fail(f"step {rx['step']}: {k} missing")
            u, v = rx[k], ry[k]
            if not math.isclose(u, v, rel_tol=a.rtol, abs_tol=a.atol):
                fail(f"step {rx['step']}: {k} {u!r} vs {v!r}")
    print(f"OK: {min(len(x), a.first or len(x))} steps agree on {a.keys}")


def near(a):
    rows = [r for r in load(a.file) if r["step"] == a.step]
    if len(rows) != 1:
        fail(f"{a.file}: step {a.step} appears {len(rows)} times")
    for k in a.keys.split(","):
        v = rows[0].get(k)
        if v is None or not abs(v) <= a.atol:
            fail(f"step {a.step}: {k} is {v!r}, not within {a.atol} of 0")
    print(f"OK: step {a.step}: {a.keys} within {a.atol} of 0")


def steps(a):
    got = [r["step"] for r in load(a.file)]
    want = ([int(x) for x in a.at.split(",")] if a.at
            else list(range(1, a.n + 1)))
    if got != want:
        fail(f"steps {got} are not {a.at or f'1..{a.n}'} once each")
    for r in load(a.file):
        for k in filter(None, a.finite.split(",")):
            if k not in r or not math.isfinite(r[k]):
                fail(f"step {r['step']}: {k} is {r.get(k)!r}, not a finite number")
    print(f"OK: steps {a.at or f'1..{a.n}'} once each" +
          (f", {a.finite} finite" if a.finite else ""))


def witnessed(rows, key, groups):
    """The trained groups that do not vary are those that filled the batch."""
    for r in rows:
        for k in (key, "filter/rounds", "filter/varied", "filter/filled"):
            if k not in r:
                fail(f"step {r['step']} has no '{k}'")
        if abs(r[key] * groups - r["filter/filled"]) > 1e-6:
            fail(f"step {r['step']}: {r[key] * groups:g} of the trained "
                 f"groups do not vary, but {r['filter/filled']:g} filled the batch")


def mean_rounds(rows):
    return sum(r["filter/rounds"] for r in rows) / len(rows)


def filtered(a):
    rows, plain = load(a.filtered), load(a.plain)
    if not rows or not plain:
        fail("a run has no steps")
    witnessed(rows, a.key, a.groups)
    extra = [r for r in rows if r["filter/rounds"] > 1]
    if not extra:
        fail("no step drew a second batch")
    flat = [r for r in plain if r[a.key] > 0]
    if not flat:
        fail(f"without the filter no step has {a.key} above 0")
    mean = mean_rounds(rows)
    print(f"OK: {len(extra)} of {len(rows)} steps drew more than one batch "
          f"(mean {mean:.2f}), {sum(r['filter/filled'] for r in rows):.0f} "
          f"groups filled; without the filter {len(flat)} of {len(plain)} "
          f"steps trained on flat groups "
          f"(mean share {sum(r[a.key] for r in plain) / len(plain):.2f})")


def oversampled(a):
    rows, base = load(a.over), load(a.base)
    if not rows or not base:
        fail("a run has no steps")
    witnessed(rows, a.key, a.groups)
    over, once = mean_rounds(rows), mean_rounds(base)
    if once <= 1:
        fail(f"the run drawing a batch per round never drew a second one")
    if over >= once:
        fail(f"drawing more per round took {over:.2f} rounds per step, "
             f"not fewer than the {once:.2f} of a batch per round")
    print(f"OK: {over:.2f} rounds per step, against {once:.2f} drawing a "
          f"batch per round")


p = argparse.ArgumentParser()
sub = p.add_subparsers(dest="cmd", required=True)
r = sub.add_parser("rise")
r.add_argument("file")
r.add_argument("--key", default="reward")
r.add_argument("--window", type=int, default=20)
r.add_argument("--margin", type=float, default=0.05)
r.set_defaults(run=trend, sign=1)
f = sub.add_parser("fall")
f.add_argument("file")
f.add_argument("--key", required=True)
f.add_argument("--window", type=int, default=10)
f.add_argument("--margin", type=float, required=True)
f.set_defaults(run=trend, sign=-1)
l = sub.add_parser("last")
l.add_argument("file")
l.add_argument("--key", default="reward")
l.add_argument("--window", type=int, default=20)
l.add_argument("--at-least", type=float)
l.add_argument("--at-most", type=float)
l.set_defaults(run=last)
s = sub.add_parser("same")
s.add_argument("a")
s.add_argument("b")
s.add_argument("--keys", required=True)
s.add_argument("--rtol", type=float, default=1e-4)
s.add_argument("--atol", type=float, default=1e-5)
s.add_argument("--first", type=int, default=0)
s.set_defaults(run=same)
n = sub.add_parser("near")
n.add_argument("file")
n.add_argument("--step", type=int, default=1)
n.add_argument("--keys", required=True)
n.add_argument("--atol", type=float, required=True)
n.set_defaults(run=near)
t = sub.add_parser("steps")
t.add_argument("file")
t.add_argument("n", type=int)
t.add_argument("--finite", default="")
t.add_argument("--at", default="",
               help="the steps expected instead of 1..N, e.g. 0,2,4 (eval.jsonl)")
t.set_defaults(run=steps)
for name, run, runs in (("filtered", filtered, ("filtered", "plain")),
                        ("oversampled", oversampled, ("over", "base"))):
    d = sub.add_parser(name)
    for r in runs:
        d.add_argument(r)
    d.add_argument("--key", required=True)
    d.add_argument("--groups", type=int, required=True)
    d.set_defaults(run=run)
a = p.parse_args()
a.run(a)
