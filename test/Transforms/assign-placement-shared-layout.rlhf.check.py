# Reads a plan (rlhfc --emit=plan JSON): prints whether the critic's
# inference runs in the mesh and split of its training, and how many
# reallocations of the critic the plan has.
import json
import sys

plan = json.load(open(sys.argv[1]))[0]


def layout(name):
    call = next(c for c in plan["calls"] if c["name"] == name)
    s = call["strategy"]
    return (call["mesh"]["first_gpu"], call["mesh"]["gpus"], s["dp"], s["tp"], s["pp"])


same = layout("inference @critic") == layout("train_step @critic")
print("critic infers in its training layout:", "yes" if same else "no")
print("critic reallocations:", sum(r["model"] == "critic" for r in plan["reallocations"]))
