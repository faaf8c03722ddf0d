#!/usr/bin/env bash
# The main job, until code generation lands: set up, build, check the
# example programs and show what the compiler knows about one of them, then
# run the runtime's 2-process Gloo all-reduce through rlhf-run.
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
echo "== rlhfc examples/ppo_llama2_7b.rlhf --emit=ast (typed dataflow of the run)"
"$bin/rlhfc" examples/ppo_llama2_7b.rlhf --emit=ast | sed -n '/^Instance/,$p'
echo
echo "== rlhf-run -n 2 rlhf-comm-worker (TCPStore rendezvous + Gloo all-reduce)"
"$bin/rlhf-run" -n 2 "$bin/rlhf-comm-worker"
