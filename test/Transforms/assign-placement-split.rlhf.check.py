# Compares a searched plan with a colocated one (rlhfc --emit=plan JSON):
# prints whether the critic's train_step runs on GPUs the actor's generate
# does not use, and whether the search predicts at most 0.9x colocated.
import json
import sys


def load(path):
    return json.load(open(path))[0]


search, colocated = load(sys.argv[1]), load(sys.argv[2])


def gpus(plan, name):
    mesh = next(c["mesh"] for c in plan["calls"] if c["name"] == name)
    return set(range(mesh["first_gpu"], mesh["first_gpu"] + mesh["gpus"]))


apart = not (gpus(search, "train_step @critic") & gpus(search, "generate @actor"))
ratio = search["predicted_iteration_time_s"] / colocated["predicted_iteration_time_s"]
print("critic trains apart from the generation:", "yes" if apart else "no")
print("search at most 0.9x colocated:", "yes" if ratio <= 0.9 else "no (%.3f)" % ratio)
