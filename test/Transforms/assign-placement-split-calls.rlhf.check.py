# Reads a plan (rlhfc --emit=plan JSON): prints whether the actor's
# generation uses every GPU and whether the two train_steps share none.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs"))
from plans import gpus, load  # noqa: E402

plan = load(sys.argv[1])

total = plan["cluster"]["nodes"] * plan["cluster"]["gpus_per_node"]
print("generation spans the cluster:",
      "yes" if len(gpus(plan, "generate @actor")) == total else "no")
apart = not (gpus(plan, "train_step @actor") & gpus(plan, "train_step @critic"))
print("trainings on disjoint GPUs:", "yes" if apart else "no")
