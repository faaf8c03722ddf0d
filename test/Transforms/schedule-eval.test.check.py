# Checks rlhf-schedule's eval batch price against the plan's own calls
# (schedule-eval.test): argv are the plans with eval batches 64 and 256.
import json
import sys

small, full = (json.load(open(path))[0] for path in sys.argv[1:3])


def call(plan, name):
    return next(c for c in plan["calls"] if c["name"] == name)


gen = call(full, "generate @actor")
rm = call(full, "inference @reward")
# The moves the runtime makes before the generate: those at its statement.
moves = sum(r["predicted_time_s"] for r in full["reallocations"]
            if r["model"] == "actor" and r["location"] == gen["location"])
want = gen["predicted_time_s"] + rm["predicted_time_s"] + 2 * moves
got = full["predicted_eval_batch_time_s"]
print("eval dataset %s every %d steps" % (full["eval_dataset"], full["eval_interval"]))
ok = abs(got - want) <= 0.02 * want
print("a batch of 256 is generate + reward inference + the actor's moves "
      "there and back:", "yes" if ok else "no (%.4g s, want %.4g s)" % (got, want))
lo = small["predicted_eval_batch_time_s"]
ok = rm["predicted_time_s"] / 4 < lo < got
print("a batch of 64 costs less, and more than a quarter of the reward "
      "inference:", "yes" if ok else "no (%.4g s)" % lo)
ok = got < full["predicted_iteration_time_s"]
print("an eval batch costs less than an iteration:", "yes" if ok else "no")
