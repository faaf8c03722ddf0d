#!/usr/bin/env bash
# The main job, until code generation lands: set up, build, check the
# example programs, plan PPO on 2x8 H100 with the search and the baselines,
# write the plan's timeline, then run the runtime's 2-process Gloo
# all-reduce through rlhf-run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh rlhfc rlhf-run rlhf-comm-worker
bin=build/bin
echo
for f in examples/*.rlhf; do
  printf '== rlhfc %s: ' "$f"
  "$bin/rlhfc" "$f" && echo ok
done
echo
echo "== rlhfc examples/ppo_llama2_7b.rlhf --estimate (default placement)"
"$bin/rlhfc" examples/ppo_llama2_7b.rlhf --estimate
for planner in heuristic colocated separated search; do
  t=$("$bin/rlhfc" examples/ppo_llama2_7b.rlhf --emit=plan --planner=$planner |
      sed -n 's/.*"predicted_iteration_time_s": \([0-9.]*\).*/\1/p')
  printf '== planner %-10s predicted iteration time %.2f s\n' "$planner" "$t"
done
"$bin/rlhfc" examples/ppo_llama2_7b.rlhf --emit=timeline -o ppo-timeline.html
echo "== wrote ppo-timeline.html (open it in a browser)"
echo
echo "== rlhf-run -n 2 rlhf-comm-worker (TCPStore rendezvous + Gloo all-reduce)"
"$bin/rlhf-run" -n 2 "$bin/rlhf-comm-worker"
