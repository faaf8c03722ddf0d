#!/usr/bin/env python3
"""Checks the samples `--log-samples` wrote under OUT/samples against the
run's own logs.

  samples_check.py OUT --files step-2,step-4 --absent step-1,step-3
                   --rows 128 [--group 8] --mean-of reward [--sums]
  samples_check.py OUT --files step-1,...,step-N --running MEAN,STD

Each named file has --rows lines, rows 0.. in order, all of one step (the
number in its name); with --group, each run of G rows shares its prompt.
The mean of their scores is the metric --mean-of logged at that step
(metrics.jsonl; eval.jsonl for eval-S files) within 1e-6. With --sums (the
"a+b=" prompts of examples/data/sums.jsonl, rewarded by exact_match), each
row's answer is the sum, and its score is 1 exactly where the response is
the answer. The --absent files do
not exist.

With --running, the files are every step of the run in order, and the keys
MEAN and STD a function logged from running_mean and running_std of the
scores: at each step they are the mean of all scores of the files so far,
and their standard deviation over count - 1, within 1e-6 relative (the
function's outputs are fp32).

Exits non-zero with a message when a check fails.
"""
import argparse
import json
import math
import os
import statistics
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--files", required=True)
    ap.add_argument("--absent", default="")
    ap.add_argument("--rows", type=int)
    ap.add_argument("--group", type=int, default=1)
    ap.add_argument("--mean-of")
    ap.add_argument("--sums", action="store_true")
    ap.add_argument("--running")
    a = ap.parse_args()
    if a.running:
        return running(a)

    def log(name):
        with open(os.path.join(a.out, name)) as f:
            return {r["step"]: r for r in map(json.loads, f) if r}

    metrics, evals = log("metrics.jsonl"), None
    for name in a.files.split(","):
        kind, step = name.split("-")
        step = int(step)
        path = os.path.join(a.out, "samples", name + ".jsonl")
        if not os.path.exists(path):
            fail("%s is missing" % path)
        with open(path) as f:
            rows = [json.loads(line) for line in f]
        if len(rows) != a.rows:
            fail("%s has %d rows, expected %d" % (name, len(rows), a.rows))
        for i, r in enumerate(rows):
            if r["row"] != i or r["step"] != step:
                fail("%s line %d is row %d of step %d" %
                     (name, i + 1, r["row"], r["step"]))
            if r["prompt"] != rows[i - i % a.group]["prompt"]:
                fail("%s row %d's prompt differs from its group's" % (name, i))
            if a.sums:
                x, y = r["prompt"].rstrip("=").split("+")
                if r.get("answer") != str(int(x) + int(y)):
                    fail("%s row %d: %r has the answer %r" %
                         (name, i, r["prompt"], r.get("answer")))
                right = r["response"] == r["answer"]
                if right != (r["score"] == 1.0):
                    fail("%s row %d: %r -> %r scored %r" %
                         (name, i, r["prompt"], r["response"], r["score"]))
        if kind == "eval":
            evals = evals or log("eval.jsonl")
            logged = evals[step][a.mean_of]
        else:
            logged = metrics[step][a.mean_of]
        mean = sum(r["score"] for r in rows) / len(rows)
        if abs(mean - logged) > 1e-6:
            fail("%s: mean score %r, but %s logged %r" %
                 (name, mean, a.mean_of, logged))
        print("ok: %s, %d rows, mean score %.4g" % (name, len(rows), mean))
    for name in filter(None, a.absent.split(",")):
        if os.path.exists(os.path.join(a.out, "samples", name + ".jsonl")):
            fail("%s was written" % name)


def running(a):
    mean_key, std_key = a.running.split(",")
    with open(os.path.join(a.out, "metrics.jsonl")) as f:
        steps = {r["step"]: r for r in map(json.loads, f) if r}
    seen = []
    for name in a.files.split(","):
        step = int(name.split("-")[1])
        with open(os.path.join(a.out, "samples", name + ".jsonl")) as f:
            seen += [json.loads(line)["score"] for line in f]
        want = {mean_key: statistics.fmean(seen),
                std_key: statistics.stdev(seen)}
        for key, value in want.items():
            got = steps.get(step, {}).get(key)
            if got is None or not math.isclose(got, value, rel_tol=1e-6,
                                               abs_tol=1e-9):
                fail("step %d: %s is %r, the %d scores so far give %r" %
                     (step, key, got, len(seen), value))
    print("ok: %d steps, %d scores, last %s %.6g %s %.6g" %
          (len(steps), len(seen), mean_key, want[mean_key], std_key,
           want[std_key]))


if __name__ == "__main__":
    main()
