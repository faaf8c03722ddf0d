#!/usr/bin/env python3
"""Checks the requests a script_reward verifier logged (math_verify.py --log)
against the run's metrics.jsonl:

  script_requests.py LOG METRICS --rows N --verifier PATH/math_verify.py

Every step of METRICS asked rows 0..N-1 exactly once; every request has
the fields of the protocol, its prompt and answer are its dataset row's
(fields), and it scored what the verifier scores for it; each step's reward
metric is the mean of its scores."""
import argparse
import importlib.util
import json
import sys
from collections import defaultdict


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


ap = argparse.ArgumentParser()
ap.add_argument("log")
ap.add_argument("metrics")
ap.add_argument("--rows", type=int, required=True)
ap.add_argument("--verifier", required=True)
a = ap.parse_args()

spec = importlib.util.spec_from_file_location("math_verify", a.verifier)
verify = importlib.util.module_from_spec(spec)
spec.loader.exec_module(verify)

scores = defaultdict(dict)
with open(a.log) as f:
    for line in f:
        entry = json.loads(line)
        req, s = entry["request"], entry["score"]
        keys = {"row", "step", "prompt", "response", "answer", "fields"}
        if set(req) != keys:
            fail(f"request keys {sorted(req)}, want {sorted(keys)}")
        step, row = req["step"], req["row"]
        if row in scores[step]:
            fail(f"step {step}: row {row} asked twice")
        if req["prompt"] != req["fields"]["prompt"]:
            fail(f"step {step} row {row}: prompt {req['prompt']!r} is not "
                 f"the dataset's {req['fields']['prompt']!r}")
        if req["answer"] != req["fields"]["answer"]:
            fail(f"step {step} row {row}: answer {req['answer']!r} is not "
                 f"the dataset's {req['fields']['answer']!r}")
        if s != verify.score(req["response"], req["answer"]):
            fail(f"step {step} row {row}: scored {s}")
        scores[step][row] = s

with open(a.metrics) as f:
    metrics = [json.loads(line) for line in f if line.strip()]
for m in metrics:
    got = scores.get(m["step"], {})
    if sorted(got) != list(range(a.rows)):
        fail(f"step {m['step']}: rows {sorted(got)[:10]}..., want 0..{a.rows - 1}")
    mean = sum(got.values()) / a.rows
    if abs(mean - m["reward"]) > 1e-6:
        fail(f"step {m['step']}: reward {m['reward']} but the scores' mean is {mean}")
if sorted(scores) != [m["step"] for m in metrics]:
    fail(f"logged steps {sorted(scores)}, metrics steps {[m['step'] for m in metrics]}")
print(f"OK: {len(metrics)} steps of {a.rows} requests")
