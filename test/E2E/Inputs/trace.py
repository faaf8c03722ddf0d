#!/usr/bin/env python3
"""Checks the measured trace of `PROGRAM --trace FILE` against the plan
(`rlhfc --emit=plan`). Exits non-zero with a message when a check fails.

  trace.py TRACE PLAN --steps N

- the file is whole JSON, with a lane named for every rank;
- in every step, each planned call has a span exactly on the ranks of its
  mesh, and every host function a span on every rank;
- a model's reallocations only touch ranks of its calls' meshes;
- a rank's spans never overlap: it runs one thing at a time;
- every span ends with a sample of its rank's resident memory.

With --ahead (an asynchronous plan), also: every iteration after the first
has its samples made ahead (a "generate @M (ahead)" span) on exactly the
generator's ranks, during the previous iteration, and in at least half of
them while the trainer's ranks ran that iteration's inference or train
calls: the generator ran ahead, overlapping the iterations.
"""
import argparse
import json
import sys
from collections import defaultdict


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("plan")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--ahead", action="store_true")
    ap.add_argument("--no-realloc", action="store_true",
                    help="the plan has no reallocation: expect none")
    a = ap.parse_args()
    events = json.load(open(a.trace))["traceEvents"]
    plan = json.load(open(a.plan))[0]

    ranks = sorted(e["tid"] for e in events if e.get("name") == "thread_name")
    spans = [e for e in events if e.get("ph") == "X"]
    world = set(ranks)

    calls, host, meshes = {}, [], defaultdict(set)
    # The measured spans carry the plan's names ("train_step @actor").
    for c in plan["calls"]:
        if c.get("runs_on") == "controller":
            host.append(c["name"])
            continue
        m = c["mesh"]
        gpus = set(range(m["first_gpu"], m["first_gpu"] + m["gpus"]))
        calls[c["name"]] = gpus
        meshes[c["model"]] |= gpus
    if ranks != list(range(len(ranks))) or not world >= set().union(*calls.values()):
        fail(f"lanes {ranks} do not cover the plan's GPUs")

    on = defaultdict(set)  # (step, name) -> ranks
    for s in spans:
        on[(s["args"]["step"], s["name"])].add(s["tid"])
    for step in range(a.steps):
        for name, gpus in calls.items():
            if on[(step, name)] != gpus:
                fail(f"step {step}: '{name}' ran on ranks "
                     f"{sorted(on[(step, name)])}, planned on {sorted(gpus)}")
        for name in host:
            if on[(step, name)] != world:
                fail(f"step {step}: host function '{name}' ran on ranks "
                     f"{sorted(on[(step, name)])}, not on every rank")
    steps = {s["args"]["step"] for s in spans}
    if steps != set(range(a.steps)):
        fail(f"spans for steps {sorted(steps)}, expected 0..{a.steps - 1}")

    reallocs = 0
    for s in spans:
        if s["cat"] == "realloc":
            reallocs += 1
            model = s["name"]
            for prefix in ("realloc @", "weight update @",
                           "first weight copy @"):
                model = model.removeprefix(prefix)
            if s["tid"] not in meshes[model]:
                fail(f"'{s['name']}' on rank {s['tid']}, outside "
                     f"{model}'s meshes {sorted(meshes[model])}")
    if a.no_realloc and reallocs:
        fail(f"{reallocs} reallocation spans in a plan without any")
    if not a.no_realloc and not reallocs:
        fail("no reallocation in the trace")

    by_rank = defaultdict(list)
    for s in spans:
        if s["dur"] < 0:
            fail(f"negative duration: {s}")
        by_rank[s["tid"]].append((s["ts"], s["ts"] + s["dur"], s["name"]))
    for r, xs in by_rank.items():
        xs.sort()
        for (s0, e0, n0), (s1, e1, n1) in zip(xs, xs[1:]):
            if s1 < e0:
                fail(f"rank {r}: '{n1}' starts at {s1:.0f} us, before "
                     f"'{n0}' ends at {e0:.0f} us")
    for r in ranks:
        gb = [e["args"]["GB"] for e in events if e.get("ph") == "C"
              and e["name"] == f"memory rank {r} (GB)"]
        # Each span's allocator peak, drawn at its start and its end.
        if len(gb) != 2 * len(by_rank[r]) or min(gb, default=0) <= 0:
            fail(f"rank {r}: {len(gb)} memory samples for {len(by_rank[r])} "
                 f"spans, least {min(gb, default=0)} GB")
        for s in spans:
            if s["tid"] == r and not 0 < s["args"]["peak GB"] <= max(gb):
                fail(f"rank {r}: '{s['name']}' has peak "
                     f"{s['args']['peak GB']} GB")
    overlapped = check_ahead(spans, calls, a.steps) if a.ahead else None
    print(f"trace ok: {len(spans)} spans on {len(ranks)} ranks, "
          f"{a.steps} steps, {reallocs} reallocation spans"
          + (f", {overlapped} of {a.steps - 1} iterations generated ahead "
             "while the trainer ran" if a.ahead else ""))


def check_ahead(spans, calls, steps):
    gens = [n for n in calls if n.startswith("generate ")]
    if not gens:
        fail("--ahead: the plan has no generate call")
    overlapped = 0
    for g in gens:
        gpus = calls[g]
        for step in range(1, steps):
            ahead = [s for s in spans
                     if s["name"] == g + " (ahead)" and s["args"]["step"] == step]
            if {s["tid"] for s in ahead} != gpus:
                fail(f"iteration {step}: '{g} (ahead)' ran on ranks "
                     f"{sorted(s['tid'] for s in ahead)}, expected "
                     f"{sorted(gpus)}")
            # The trainer's calls of the previous iteration, off the
            # generator's ranks.
            busy = [s for s in spans
                    if s["args"]["step"] == step - 1 and s["cat"] == "call"
                    and s["tid"] not in gpus
                    and s["name"].startswith(("inference @", "train_step @"))]
            if any(x["ts"] < y["ts"] + y["dur"] and y["ts"] < x["ts"] + x["dur"]
                   for x in ahead for y in busy):
                overlapped += 1
    if 2 * overlapped < len(gens) * (steps - 1):
        fail(f"the generator overlapped the trainer in only {overlapped} of "
             f"{len(gens) * (steps - 1)} iterations")
    return overlapped


if __name__ == "__main__":
    main()
