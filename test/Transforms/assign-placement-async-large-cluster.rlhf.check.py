# Compares the plan under staleness with the synchronous one (rlhfc
# --emit=plan JSON): prints whether the actor's train_step runs on GPUs its
# generate does not use, and whether the async plan predicts at most 0.9x
# the synchronous one.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs"))
from plans import gpus, load  # noqa: E402

asynchronous, synchronous = load(sys.argv[1]), load(sys.argv[2])

apart = not (gpus(asynchronous, "train_step @actor") & gpus(asynchronous, "generate @actor"))
ratio = (asynchronous["predicted_iteration_time_s"] /
         synchronous["predicted_iteration_time_s"])
print("actor trains apart from the generation:", "yes" if apart else "no")
print("async at most 0.9x sync:", "yes" if ratio <= 0.9 else "no (%.3f)" % ratio)
