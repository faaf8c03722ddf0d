# Checks rlhf-schedule's price of a DPO eval batch against the plan's own
# calls (schedule-eval-loss.test): argv[1] is the plan.
import json
import sys

plan = json.load(open(sys.argv[1]))[0]
refs = [c for c in plan["calls"] if c["name"] == "inference @ref"]
train = next(c for c in plan["calls"] if c["name"] == "train_step @policy")
got = plan["predicted_eval_batch_time_s"]
forward = got - sum(c["predicted_time_s"] for c in refs)
t = train["predicted_time_s"]
print("eval dataset %s every %d steps" % (plan["eval_dataset"], plan["eval_interval"]))
ok = len(refs) == 2 and t / 4 < forward < t / 2
print("an eval batch is the reference's %d inferences and a forward of the "
      "policy's train call:" % len(refs),
      "yes" if ok else "no (%.4g s: %.4g s beside a train call of %.4g s)"
      % (got, forward, t))
