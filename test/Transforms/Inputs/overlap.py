"""Reads a Chrome trace of rlhf-schedule and reports how iterations overlap:
whether the generation of iteration t + 1 runs while iteration t trains."""
import json
import sys

events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]


def span(name, iteration):
    es = [e for e in events if e["name"] == name and e["args"]["iteration"] == iteration]
    return min(e["ts"] for e in es), max(e["ts"] + e["dur"] for e in es)


updates = [e for e in events if e["cat"] == "update"]
gpus = sorted({e["tid"] for e in updates})
print("weight updates: %d on GPUs %d-%d" % (len({e["args"]["iteration"] for e in updates}), gpus[0], gpus[-1]))
g1, t0 = span("generate @actor", 1), span("train_step @actor", 0)
print("generate @actor of iteration 1 overlaps train_step @actor of iteration 0:",
      g1[0] < t0[1] and t0[0] < g1[1])
g2, u = span("generate @actor", 2), span("weight update @actor to v1", 0)
print("generate @actor of iteration 2 starts after the update to v1:", g2[0] >= u[1] - 1e-6)
