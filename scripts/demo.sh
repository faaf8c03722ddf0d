#!/usr/bin/env bash
# The main job: set up, build, check the example programs, plan PPO on 2x8
# H100 against the baselines (timeline in ppo-timeline.html), then compile
# examples/tiny_grpo.rlhf to an executable and train it with 4 CPU workers
# through rlhf-run: the progress lines show the exact-match reward rising.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh rlhfc rlhf-run rlhf_runtime
bin=build/bin
echo
for f in examples/*.rlhf; do
  printf '== rlhfc %s: ' "$f"
  "$bin/rlhfc" "$f" && echo ok
done
echo
for planner in heuristic colocated separated search; do
  t=$("$bin/rlhfc" examples/ppo_llama2_7b.rlhf --emit=plan --planner=$planner |
      sed -n 's/.*"predicted_iteration_time_s": \([0-9.]*\).*/\1/p')
  printf '== PPO 7B+7B on 16 H100, planner %-10s predicted iteration %.2f s\n' "$planner" "$t"
done
"$bin/rlhfc" examples/ppo_llama2_7b.rlhf --emit=timeline -o ppo-timeline.html
echo "== wrote ppo-timeline.html (open it in a browser)"
echo
mkdir -p out
echo "== rlhfc examples/tiny_grpo.rlhf --emit=exe -o out/tiny_grpo"
"$bin/rlhfc" examples/tiny_grpo.rlhf --emit=exe -o out/tiny_grpo
echo "== rlhf-run -n 4 out/tiny_grpo --steps 150 --out out/tiny_grpo-run --trace out/tiny_grpo-trace.json"
rm -rf out/tiny_grpo-run
"$bin/rlhf-run" -n 4 out/tiny_grpo --steps 150 --out out/tiny_grpo-run --trace out/tiny_grpo-trace.json
echo "== metrics: out/tiny_grpo-run/metrics.jsonl, checkpoints: out/tiny_grpo-run/checkpoints"
echo "== measured timeline: out/tiny_grpo-trace.json (open it in Perfetto, ui.perfetto.dev)"
