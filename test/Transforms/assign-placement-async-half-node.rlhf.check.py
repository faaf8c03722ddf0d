# The asynchronous PPO plan of assign-placement-async-half-node.rlhf
# (rlhfc --emit=plan JSON): the generator's GPUs, the actor's and the
# critic's train meshes, and the predicted iteration time.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs"))
from plans import gpus, load  # noqa: E402

plan = load(sys.argv[1])
gen = gpus(plan, "generate @actor")
actor, critic = gpus(plan, "train_step @actor"), gpus(plan, "train_step @critic")
print("generator on one node:", "yes" if len(gen) == 8 and min(gen) % 8 == 0 else sorted(gen))
print("trainers on 12 GPUs each:", len(actor), len(critic))
print("trainers apart from each other and the generator:",
      "yes" if not (actor & critic) and not ((actor | critic) & gen) else "no")
t = plan["predicted_iteration_time_s"]
print("iteration below 3.5 s:", "yes" if t < 3.5 else "no (%.3f)" % t)
