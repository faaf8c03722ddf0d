#!/usr/bin/env python3
"""Runs one job as several "nodes" on this host: one launcher per node, all
meeting at 127.0.0.1 on a free port.

  multinode.py [options] -- LAUNCHER [LAUNCHER OPTIONS] PROGRAM [ARGS...]

starts `LAUNCHER --nnodes N --node-rank R --master-addr 127.0.0.1
--master-port P -n K [LAUNCHER OPTIONS] PROGRAM ARGS` for each node R (the
last node first, so the others wait for node 0), writing node R's output to
LOGS/nodeR.log. Prints each launcher's exit status and exits 0 when every
launcher exited 0, all within --timeout seconds. --skip R leaves node R out;
--nproc-of R=K gives node R `-n K`; --slurm passes no node options but sets
the variables of a Slurm step instead (MASTER_PORT for the port).

With --kill (a node's launcher) or --kill-rank (a worker), it waits until
--after FILE:LINES shows progress, sends --signal there, and then expects
every other launcher to exit non-zero within --within seconds; it exits 0
only then. A stopped (SIGSTOP) launcher is killed once the others exited.
The workers of a killed launcher must be gone within --within seconds too.
"""
import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--nodes", type=int, default=2)
p.add_argument("--nproc", type=int, default=2)
p.add_argument("--logs", default=".")
p.add_argument("--timeout", type=float, default=120)
p.add_argument("--kill", type=int, help="node whose launcher gets --signal")
p.add_argument("--kill-rank", type=int, help="rank whose worker gets --signal")
p.add_argument("--signal", default="KILL")
p.add_argument("--after", help="FILE:LINES, the progress to wait for")
p.add_argument("--within", type=float, default=15)
p.add_argument("--skip", type=int, action="append", default=[])
p.add_argument("--nproc-of", action="append", default=[])
p.add_argument("--arg-of", action="append", default=[])
p.add_argument("--slurm", action="store_true")
p.add_argument("--say")
p.add_argument("cmd", nargs=argparse.REMAINDER)
a = p.parse_args()
if a.cmd[:1] == ["--"]:
    a.cmd = a.cmd[1:]
if len(a.cmd) < 2:
    sys.exit("multinode.py: give LAUNCHER PROGRAM after --")


def free_port():
    # Two free ports in a row (the store's and the launchers'), below the
    # kernel's ephemeral range, where tests with port 0 get theirs.
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    for _ in range(200):
        port = random.randrange(10000, min(low, 32768) - 2, 2)
        try:
            for q in (port, port + 1):
                with socket.socket() as s:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind(("", q))
            return port
        except OSError:
            continue
    sys.exit("multinode.py: no free pair of ports")


port = free_port()
launcher, rest = a.cmd[0], a.cmd[1:]
nodes = {}
logs = {}
nproc = {r: a.nproc for r in range(a.nodes)}
for o in a.nproc_of:
    r, k = o.split("=")
    nproc[int(r)] = int(k)
extra = {r: [] for r in range(a.nodes)}
for o in a.arg_of:
    r, word = o.split("=", 1)
    extra[int(r)].append(word)
for r in reversed(range(a.nodes)):
    if r in a.skip or (a.say is not None and r != 0):
        continue
    env = dict(os.environ)
    if a.slurm:
        n = str(a.nodes)
        env.update(SLURM_JOB_ID="77", SLURM_STEP_ID="0", SLURM_PROCID=str(r),
                   SLURM_NODEID=str(r), SLURM_LOCALID="0", SLURM_NTASKS=n,
                   SLURM_NNODES=n, SLURM_STEP_NUM_TASKS=n,
                   SLURM_STEP_NUM_NODES=n, MASTER_PORT=str(port),
                   SLURM_STEP_NODELIST="127.0.0.1,localhost",
                   SLURM_JOB_NODELIST="127.0.0.1,localhost")
        argv = [launcher, "-n", str(nproc[r])] + rest + extra[r]
    else:
        argv = [launcher, "--nnodes", str(a.nodes), "--node-rank", str(r),
                "--master-addr", "127.0.0.1", "--master-port", str(port),
                "-n", str(nproc[r])] + rest + extra[r]
    logs[r] = open(os.path.join(a.logs, f"node{r}.log"), "w")
    nodes[r] = subprocess.Popen(argv, stdout=logs[r], stderr=subprocess.STDOUT,
                                env=env)
deadline = time.time() + a.timeout


def say(line):
    # The launchers meet at the port above the store's.
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port + 1), timeout=10)
            break
        except OSError:
            if time.time() > deadline or nodes[0].poll() is not None:
                return "<nobody listens>"
            time.sleep(0.1)
    with s:
        s.sendall(line.encode() + b"\n")
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    return answer.decode().strip() or "<closed>"


def stop_all():
    for q in nodes.values():
        if q.poll() is None:
            q.kill()
    for q in nodes.values():
        q.wait()


def wait_all(procs, until):
    for r, q in procs.items():
        try:
            q.wait(timeout=max(0.1, until - time.time()))
        except subprocess.TimeoutExpired:
            return r
    return None


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out.append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    return out


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def worker_of(rank):
    for q in nodes.values():
        for pid in children(q.pid):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if f"RANK={rank}".encode() in env:
                return pid
    return None


if a.say is not None:
    print(f"node 0 answers: {say(a.say)}")
    stop_all()
    sys.exit(0)

if a.kill is None and a.kill_rank is None:
    late = wait_all(nodes, deadline)
    if late is not None:
        stop_all()
        sys.exit(f"multinode.py: node {late} did not finish within {a.timeout} s")
    for r in sorted(nodes):
        print(f"node {r}: exit status {nodes[r].returncode}")
    sys.exit(0 if all(q.returncode == 0 for q in nodes.values()) else 1)

path, lines = a.after.rsplit(":", 1)


def progress():
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


while progress() < int(lines):
    if any(q.poll() is not None for q in nodes.values()):
        stop_all()
        sys.exit("multinode.py: a launcher ended before the job made progress")
    if time.time() > deadline:
        stop_all()
        sys.exit("multinode.py: timed out waiting for progress")
    time.sleep(0.05)

sig = getattr(signal, "SIG" + a.signal)
orphans = []
if a.kill is not None:
    victim = nodes[a.kill]
    orphans = children(victim.pid)
    os.kill(victim.pid, sig)
    print(f"sent SIG{a.signal} to node {a.kill}'s launcher")
    others = {r: q for r, q in nodes.items() if r != a.kill}
else:
    pid = worker_of(a.kill_rank)
    if pid is None:
        stop_all()
        sys.exit(f"multinode.py: no worker with RANK={a.kill_rank}")
    os.kill(pid, sig)
    print(f"sent SIG{a.signal} to rank {a.kill_rank}")
    others = nodes
start = time.time()
late = wait_all(others, start + a.within)
if a.kill is not None and a.signal == "STOP":
    nodes[a.kill].kill()  # its workers follow it (PR_SET_PDEATHSIG)
if a.kill is not None:
    nodes[a.kill].wait(timeout=a.within)
if late is not None:
    stop_all()
    sys.exit(f"multinode.py: node {late} still runs {a.within} s after the kill")
for r in sorted(others):
    print(f"node {r}: exit status {others[r].returncode}")
print(f"the others ended {time.time() - start:.1f} s after the signal")
while any(alive(w) for w in orphans) and time.time() < start + a.within:
    time.sleep(0.05)
if any(alive(w) for w in orphans):
    stop_all()
    sys.exit(f"multinode.py: node {a.kill}'s workers outlived its launcher")
if orphans:
    print(f"node {a.kill}'s {len(orphans)} workers are gone")
stop_all()
if any(q.returncode == 0 for q in others.values()):
    sys.exit("multinode.py: a launcher succeeded although the job was broken")
print(f"every other launcher failed within {a.within:g} s")
