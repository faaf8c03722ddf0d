#!/usr/bin/env bash
# Every GPU check in one go, for a short GPU window. On the GPU node:
#
#   scripts/gpu-check.sh DIR
#
# builds the runtime alone (RLHF_RUNTIME_ONLY: no MLIR, LLVM or ANTLR) against
# the node's PyTorch (python3's torch, or $RLHF_PYTHON) and CUDA, runs the
# ctest tests labelled `gpu`, then the runtime's CPU tests on the same build,
# links the example objects rlhfc compiled elsewhere and trains tiny_grpo on
# the GPU (also with the stdlib's .rlhf functions, against the built-ins),
# and runs the GPU benchmarks. Everything lands in DIR: one log per
# step and summary.txt, a line per step with its exit status.
#
# What a node without Debian packages lacks comes from scripts/gpu-bundle.sh,
# run on a build machine first ($RLHF_GPU_DEPS, default .gpu-deps).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ]; then
  echo "usage: scripts/gpu-check.sh DIR   (results go to DIR)" >&2
  exit 2
fi
out=$(mkdir -p "$1" && cd "$1" && pwd)
deps=$(cd "${RLHF_GPU_DEPS:-.gpu-deps}" 2>/dev/null && pwd) || {
  echo "gpu-check: no dependency bundle; run scripts/gpu-bundle.sh on a build machine" >&2
  exit 2
}
py=${RLHF_PYTHON:-$(command -v python3)}
build=${RLHF_GPU_BUILD:-build-gpu}
jobs=$(nproc)
summary=$out/summary.txt
: >"$summary"
failed=0

# step NAME COMMAND...: runs it with its output in DIR/NAME.log and records
# the exit status; 77 is a skip, as in ctest.
step() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "== $name"
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  local verdict=ok
  [ $rc -eq 77 ] && verdict=skipped
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    verdict=FAILED
    failed=1
    tail -n 30 "$out/$name.log"
  fi
  printf '%-22s %-8s rc=%-3d %4ds\n' "$name" "$verdict" "$rc" $((SECONDS - t0)) | tee -a "$summary"
  return $rc
}

{
  date -u
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown); bundle from $(cat "$deps/commit" 2>/dev/null)"
  nvidia-smi 2>&1 || echo "nvidia-smi: not available"
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())'
  command -v nvcc && nvcc --version | tail -n 2
} >"$out/env.txt" 2>&1

step configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DRLHF_RUNTIME_ONLY=ON -DRLHF_PYTHON="$py" -DCMAKE_PREFIX_PATH="$deps" \
  -DGLOO_INCLUDE_DIR="$deps/include" || { cat "$summary"; exit 1; }
step build cmake --build "$build" -j"$jobs" || { cat "$summary"; exit 1; }

step ctest-gpu ctest --test-dir "$build" -L gpu --output-on-failure -j1 --timeout 900
step ctest-runtime ctest --test-dir "$build" -LE gpu --output-on-failure -j"$jobs" --timeout 900

# tiny_grpo, compiled by rlhfc on the build machine, linked here against the
# runtime (the command docs/runtime.md gives), four ranks sharing the GPU
# over Gloo as its plan has them.
link_and_train() {
  local lib
  lib=$(cd "$build/lib" && pwd)
  cc "$deps/obj/tiny_grpo.o" -o "$build/tiny_grpo" -L"$lib" -lrlhf_runtime \
    -Wl,-rpath,"$lib" || return 1
  if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.device_count() else 1)'; then
    echo "linked $build/tiny_grpo; SKIP: no CUDA device to train it on"
    return 77
  fi
  rm -rf "$out/tiny_grpo-run"
  RLHF_DEVICE=cuda "$py" -m torch.distributed.run --standalone --nproc-per-node 4 \
    --no-python "$build/tiny_grpo" --steps 150 --data sums=examples/data/sums.jsonl \
    --out "$out/tiny_grpo-run" --trace "$out/tiny_grpo-trace.json"
}
step tiny-grpo link_and_train

# The same program with the stdlib's .rlhf functions (fn code evaluated by
# the runtime, autograd through the loss) on the GPU: ten steps each way
# give the same rewards and losses.
fn_on_gpu() {
  local lib
  lib=$(cd "$build/lib" && pwd)
  cc "$deps/obj/tiny_grpo_fn.o" -o "$build/tiny_grpo_fn" -L"$lib" \
    -lrlhf_runtime -Wl,-rpath,"$lib" || return 1
  if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.device_count() else 1)'; then
    echo "linked $build/tiny_grpo_fn; SKIP: no CUDA device to run it on"
    return 77
  fi
  for prog in tiny_grpo tiny_grpo_fn; do
    rm -rf "$out/$prog-10"
    RLHF_DEVICE=cuda "$py" -m torch.distributed.run --standalone \
      --nproc-per-node 4 --no-python "$build/$prog" --steps 10 \
      --data sums=examples/data/sums.jsonl --out "$out/$prog-10" || return 1
  done
  "$py" test/E2E/Inputs/metrics.py same "$out/tiny_grpo-10/metrics.jsonl" \
    "$out/tiny_grpo_fn-10/metrics.jsonl" --keys reward,loss/actor \
    --rtol 1e-3 --atol 1e-5
}
step fn-on-gpu fn_on_gpu

# Beside the cost model's predictions and PyTorch's rows; the last line of
# its log is `runtime/cost-model geomean: X.XX`.
step rlhf-bench-gpu-runtime "$build/bin/rlhf-bench-gpu-runtime" --out "$out" \
  --predicted "$deps/predicted-h100.csv" --pytorch docs/validation/measured-h100.csv

echo
cat "$summary"
exit $failed
