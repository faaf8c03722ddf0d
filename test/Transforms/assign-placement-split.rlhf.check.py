# Compares a searched plan with a colocated one (rlhfc --emit=plan JSON):
# prints whether the critic's train_step runs on GPUs the actor's generate
# does not use, and whether the search predicts at most 0.9x colocated.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs"))
from plans import gpus, load  # noqa: E402

search, colocated = load(sys.argv[1]), load(sys.argv[2])

apart = not (gpus(search, "train_step @critic") & gpus(search, "generate @actor"))
ratio = search["predicted_iteration_time_s"] / colocated["predicted_iteration_time_s"]
print("critic trains apart from the generation:", "yes" if apart else "no")
print("search at most 0.9x colocated:", "yes" if ratio <= 0.9 else "no (%.3f)" % ratio)
