#!/usr/bin/env python3
"""Starts `rlhf-run ARGS...`, waits until its metrics file has at least
--after lines, SIGKILLs the worker whose RANK is --rank, and waits for the
launcher. Prints the launcher's output and exit status; exits 0 only if the
job ended with an error (non-zero status) within --timeout seconds."""
import argparse
import os
import signal
import subprocess
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--metrics", required=True)
p.add_argument("--after", type=int, required=True)
p.add_argument("--rank", type=int, default=2)
p.add_argument("--timeout", type=float, default=120)
p.add_argument("cmd", nargs=argparse.REMAINDER)
a = p.parse_args()
if a.cmd[:1] == ["--"]:
    a.cmd = a.cmd[1:]

job = subprocess.Popen(a.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
deadline = time.time() + a.timeout


def lines():
    try:
        with open(a.metrics) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def worker(rank):
    # The launcher's children that carry RANK=rank in their environment.
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != job.pid:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            if f"RANK={rank}".encode() in env:
                return int(pid)
        except (OSError, ValueError, IndexError):
            continue
    return None


while lines() < a.after:
    if job.poll() is not None:
        print(job.stdout.read())
        sys.exit(f"the job ended (status {job.returncode}) before step {a.after}")
    if time.time() > deadline:
        job.kill()
        sys.exit("timed out waiting for the job to reach the kill point")
    time.sleep(0.05)
pid = worker(a.rank)
if pid is None:
    job.kill()
    sys.exit(f"no worker with RANK={a.rank}")
os.kill(pid, signal.SIGKILL)
print(f"killed rank {a.rank} (pid {pid}) after {lines()} steps")
try:
    out, _ = job.communicate(timeout=max(1.0, deadline - time.time()))
except subprocess.TimeoutExpired:
    job.kill()
    sys.exit("the job hung after a worker was killed")
print(out)
print(f"launcher exit status {job.returncode}")
sys.exit(0 if job.returncode != 0 else "the job succeeded although a worker was killed")
