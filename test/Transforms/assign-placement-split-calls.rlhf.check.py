# Reads a plan (rlhfc --emit=plan JSON): prints whether the actor's
# generation uses every GPU and whether the two train_steps share none.
import json
import sys

plan = json.load(open(sys.argv[1]))[0]


def gpus(name):
    mesh = next(c["mesh"] for c in plan["calls"] if c["name"] == name)
    return set(range(mesh["first_gpu"], mesh["first_gpu"] + mesh["gpus"]))


total = plan["cluster"]["nodes"] * plan["cluster"]["gpus_per_node"]
print("generation spans the cluster:",
      "yes" if len(gpus("generate @actor")) == total else "no")
apart = not (gpus("train_step @actor") & gpus("train_step @critic"))
print("trainings on disjoint GPUs:", "yes" if apart else "no")
