#!/usr/bin/env python3
"""A script_reward worker that fails on purpose (script-reward-failures.test):
at step 1 it exits with status 3 on the request for row 5, at step 2 it
sleeps a minute on the request for row 7; otherwise it scores 1 for a
non-empty response and 0 for an empty one."""
import json
import sys
import time

while True:
    line = sys.stdin.readline()
    if not line:
        break
    req = json.loads(line)
    if (req["step"], req["row"]) == (1, 5):
        print("flaky_verify: crashing on row 5 as asked", file=sys.stderr)
        sys.exit(3)
    if (req["step"], req["row"]) == (2, 7):
        time.sleep(60)
    print(json.dumps({"score": 1.0 if req["response"] else 0.0}), flush=True)
