"""stop-rank.py RANK -- COMMAND...: runs COMMAND (an rlhf-run job), waits
until its worker of rank RANK has started training (its first step's line
in metrics.jsonl is not needed: a few seconds after start), then SIGSTOPs
that worker. Exits 0 when the job ended with an error, as it must."""
import os
import signal
import subprocess
import sys
import time

rank = sys.argv[1]
cmd = sys.argv[sys.argv.index("--") + 1:]
job = subprocess.Popen(cmd)
victim = None
deadline = time.time() + 60
while victim is None and time.time() < deadline:
    time.sleep(0.5)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        if (b"RANK=" + rank.encode() in env and b"RLHF_COMM_TIMEOUT_MS=4000" in env
                and "tiny_grpo" in stat and int(pid) != job.pid):
            victim = int(pid)
time.sleep(3)  # into training, past the rendezvous
os.kill(victim, signal.SIGSTOP)
sys.exit(0 if job.wait(timeout=120) != 0 else 1)
