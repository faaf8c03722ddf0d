#!/usr/bin/env python3
"""Starts `rlhf-run ARGS...`, waits until its metrics file has at least
--after lines, sends the launcher SIGUSR1 (a request to checkpoint after the
step in progress and stop) and waits for it. Prints the launcher's output
and its exit status; exits 0 only if the job ended with status 75 within
--timeout seconds, having run fewer steps than --steps, and (with
--checkpoint OUT) OUT/checkpoints/latest names its last metrics line."""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--metrics", required=True)
p.add_argument("--after", type=int, required=True)
p.add_argument("--steps", type=int, required=True)
p.add_argument("--checkpoint")
p.add_argument("--timeout", type=float, default=120)
p.add_argument("cmd", nargs=argparse.REMAINDER)
a = p.parse_args()
if a.cmd[:1] == ["--"]:
    a.cmd = a.cmd[1:]


def rows():
    try:
        with open(a.metrics) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []


job = subprocess.Popen(a.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
deadline = time.time() + a.timeout
while len(rows()) < a.after and job.poll() is None and time.time() < deadline:
    time.sleep(0.05)
job.send_signal(signal.SIGUSR1)
try:
    out, _ = job.communicate(timeout=max(1.0, deadline - time.time()))
except subprocess.TimeoutExpired:
    job.kill()
    sys.exit("FAIL: the job did not stop within %gs" % a.timeout)
sys.stdout.write(out)
print("exit %d" % job.returncode)
done = rows()
if job.returncode != 75:
    sys.exit("FAIL: exit status %d, want 75" % job.returncode)
if not done or len(done) >= a.steps:
    sys.exit("FAIL: %d steps logged, want 1 to %d" % (len(done), a.steps - 1))
if a.checkpoint:
    latest = open(os.path.join(a.checkpoint, "checkpoints", "latest")).read()
    if int(latest) != done[-1]["step"]:
        sys.exit("FAIL: checkpoints/latest is %s, the last step logged %d"
                 % (latest.strip(), done[-1]["step"]))
print("stopped after step %d of %d" % (done[-1]["step"], a.steps))
