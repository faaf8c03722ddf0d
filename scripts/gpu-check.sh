#!/usr/bin/env bash
# Every GPU check in one go, for a short GPU window. On the GPU node:
#
#   scripts/gpu-check.sh DIR
#
# takes the runtime scripts/gpu-bundle.sh built (against the same torch wheel)
# where it loads, else builds the runtime alone (RLHF_RUNTIME_ONLY: no MLIR,
# LLVM or ANTLR) against the node's PyTorch (python3's torch, or
# $RLHF_PYTHON) and CUDA, then runs, in this order: our runtime's benchmark
# beside the cost model; reallocation beside a device-to-device copy through
# CUDA IPC; side by side, the ctest tests labelled `gpu`, tiny_grpo trained
# from the object rlhfc compiled elsewhere, the .rlhf functions on the GPU
# against the CPU, asynchronous GRPO, sequence parallelism, an ema in
# bf16 with a resumed run, generation in waves, dynamic sampling, PPO's
# adaptive KL and frozen warm-up and GRPO's running moments, and SFT
# with its validation loss; on a GPU that
# docs/validation has no PyTorch rows for, PyTorch at the runtime
# benchmark's points (scripts/measure-llama-h100.py --runtime-points); then
# the diagnostics: the fused Adam step and the fused SwiGLU and rotary
# beside separate ops, grouped-query decode attention shared beside
# repeated, ring attention's fused kernel beside its explicit one, a 7B
# decode step's kernels (rlhf-bench-decode-kernels), and reallocation
# through host memory.
# Everything lands in DIR: one log per step and summary.txt, a line per
# step with its exit status.
#
#   RLHF_GPU_CHECK_BUDGET=S   stop starting steps after S seconds in all, and
#                             cut a running step off there (a GPU window is
#                             short; what ran is kept)
#   RLHF_GPU_CHECK_TAR=FILE   after every step, DIR as a .tgz at FILE (so a
#                             run cut short still hands its results back)
#   RLHF_GPU_CHECK_STEPS=A,B  only these steps (names as in summary.txt), e.g.
#                             those an earlier window did not reach; the
#                             runtime's prebuilt/configure/build always run
#   RLHF_GPU_CHECK_CPU_TESTS=1  also the runtime's CPU tests (CI runs them on
#                             the same LibTorch; off by default to save time)
#   RLHF_GPU_PREBUILT=0       build from source even where a prebuilt runtime
#                             would load
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

budget=${RLHF_GPU_CHECK_BUDGET:-0}
only=${RLHF_GPU_CHECK_STEPS:-}
tarball=${RLHF_GPU_CHECK_TAR:-}
start=$SECONDS

# [cap=S] step NAME COMMAND...: runs it (a command or a function of this
# script) with its output in DIR/NAME.log and records the exit status; 77 is
# a skip, as in ctest, and 124 a step cut off by the budget. Under a budget,
# cap bounds the step's own share, so that one slow step cannot starve the
# checks after it.
step() {
  local name=$1
  shift
  local t0=$SECONDS rc verdict
  local left=$((budget - (SECONDS - start)))
  echo "== $name"
  if [ -n "$only" ] && [[ ",$only,prebuilt,configure,build," != *",$name,"* ]]; then
    printf '%-22s %-11s\n' "$name" "not chosen" | tee -a "$summary"
    return 0
  fi
  if [ "$budget" -gt 0 ] && [ "$left" -lt 15 ]; then
    rc=124
    echo "not run: the budget of ${budget} s is spent" >"$out/$name.log"
  elif [ "$budget" -gt 0 ]; then
    [ -n "${cap:-}" ] && [ "$cap" -lt "$left" ] && left=$cap
    timeout --kill-after=10 "$left" bash -c '"$@"' step "$@" >"$out/$name.log" 2>&1
    rc=$?
    [ $rc -eq 124 ] && echo "gpu-check: cut off after ${left} s (its cap, or the budget's end)" >>"$out/$name.log"
  else
    bash -c '"$@"' step "$@" >"$out/$name.log" 2>&1
    rc=$?
  fi
  verdict=ok
  [ $rc -eq 77 ] && verdict=skipped
  [ $rc -eq 124 ] && verdict=OUT-OF-TIME
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    [ $rc -ne 124 ] && verdict=FAILED
    failed=1
    tail -n 30 "$out/$name.log"
  fi
  printf '%-22s %-11s rc=%-3d %4ds\n' "$name" "$verdict" "$rc" $((SECONDS - t0)) | tee -a "$summary"
  [ -n "$tarball" ] && tar czf "$tarball" -C "$out" --exclude checkpoints . 2>/dev/null
  return $rc
}

{
  date -u
  # A copied tree may carry an older .git: --dirty then shows that the files
  # differ from that commit, and the bundle's commit is what was built.
  echo "commit: $(git describe --always --dirty --abbrev=40 2>/dev/null || echo unknown); bundle from $(cat "$deps/commit" 2>/dev/null)"
  # gpu-results.sh reads the first GPU's name from the "gpu:" line.
  echo "gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
  # The sandbox: gVisor reports kernel 4.4.0, a microVM its own (CUDA IPC,
  # counters and timings may differ between them).
  echo "kernel: $(uname -r)"
  nvidia-smi 2>&1 || echo "nvidia-smi: not available"
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())'
  command -v nvcc && nvcc --version | tail -n 2
} >"$out/env.txt" 2>&1

# prebuilt: puts the bundle's runtime where its absolute paths expect it:
# at the build machine's checkout path, linked to this checkout if that path
# is free. Its run paths name the build machine's torch, so the node's
# torch and NVIDIA libraries come first on LD_LIBRARY_PATH. 77 (skipped):
# not usable here; the runtime is then built from source.
prebuilt() {
  local pre=$deps/prebuilt src here
  if [ "${RLHF_GPU_PREBUILT:-1}" != 1 ]; then
    echo "RLHF_GPU_PREBUILT=0: building from source"
    return 77
  fi
  if ! sha256sum --quiet -c "$pre/sources.sha256" >"$out/prebuilt-sources.txt" 2>&1; then
    echo "this checkout's sources differ from those the prebuilt runtime was built from:"
    head -n 5 "$out/prebuilt-sources.txt"
    return 77
  fi
  src=$(cat "$pre/source-dir")
  here=$(pwd -P)
  if [ "$src" != "$here" ]; then
    if [ -e "$src" ] || [ -L "$src" ]; then
      if [ "$(cd "$src" 2>/dev/null && pwd -P)" != "$here" ]; then
        echo "$src, where the prebuilt runtime looks for its sources, is another folder here"
        return 77
      fi
    elif ! mkdir -p "$(dirname "$src")" || ! ln -s "$here" "$src"; then
      echo "cannot link $src to this checkout"
      return 77
    fi
  fi
  # The build machine itself keeps its own build folder as it is.
  if [ "$src" != "$here" ] || [ ! -f "$build/build.ninja" ]; then
    rm -rf "$build" && cp -a "$pre/tree" "$build" || return 77
  fi
  # Every library resolves, and ctest finds the tests.
  "$build/bin/runtime-tests" --gtest_list_tests >/dev/null || return 77
  ctest --test-dir "$build" -N -L gpu | tail -n 1
  echo "using the runtime prebuilt at $src/$build (bundle commit $(cat "$deps/commit"))"
}
# The node's torch/lib and nvidia/*/lib folders.
node_libs=$("$py" -c 'import glob, os, importlib.util as u
t = u.find_spec("torch").submodule_search_locations[0]
print(":".join([t + "/lib"] + sorted(glob.glob(os.path.dirname(t) + "/nvidia/*/lib"))))' 2>/dev/null)

export out deps py build
export -f prebuilt
use_prebuilt=0
if [ -f "$deps/prebuilt/build-dir" ]; then
  build=$(cat "$deps/prebuilt/build-dir")
  libs=$node_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if LD_LIBRARY_PATH=$libs step prebuilt prebuilt; then
    export LD_LIBRARY_PATH=$libs
    use_prebuilt=1
  fi
fi
if [ $use_prebuilt = 0 ]; then
  build=${RLHF_GPU_BUILD:-build-gpu}
  # Ninja where the node has it (the H100 image does), else make.
  gen=Ninja
  command -v ninja >/dev/null || gen="Unix Makefiles"
  step configure cmake -S . -B "$build" -G "$gen" -DCMAKE_BUILD_TYPE=Release \
    -DRLHF_RUNTIME_ONLY=ON -DRLHF_PYTHON="$py" -DCMAKE_PREFIX_PATH="$deps" \
    -DGLOO_INCLUDE_DIR="$deps/include" || { cat "$summary"; exit 1; }
  step build cmake --build "$build" -j"$jobs" || { cat "$summary"; exit 1; }
fi


# link PROG [NAME]: links $deps/obj/PROG.o against the runtime as
# $build/NAME (default PROG; steps that run side by side link apart);
# status 77 (skip) when there is no CUDA device to run it on.
link() {
  local lib
  lib=$(cd "$build/lib" && pwd)
  cc "$deps/obj/$1.o" -o "$build/${2:-$1}" -L"$lib" -lrlhf_runtime \
    -Wl,-rpath,"$lib" || return 1
  if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.device_count() else 1)'; then
    echo "linked $build/${2:-$1}; SKIP: no CUDA device to run it on"
    return 77
  fi
}
# ranks_on DEVICE PROG STEPS OUT [ARGS...]: four ranks of PROG on DEVICE,
# afresh in OUT; on_gpu shares the GPU among them over Gloo, on_cpu is the
# same run on the CPU to compare with. The data is `sums` unless `data`
# names another (data=prefs=FILE on_gpu ...).
ranks_on() {
  local dev=$1 prog=$2 steps=$3 dir=$4
  shift 4
  rm -rf "$dir"
  RLHF_DEVICE=$dev "$py" -m torch.distributed.run --standalone --nproc-per-node 4 \
    --no-python "$build/$prog" --steps "$steps" \
    --data "${data:-sums=examples/data/sums.jsonl}" --out "$dir" "$@"
}
on_gpu() { ranks_on cuda "$@"; }
on_cpu() { ranks_on cpu "$@"; }

# tiny_grpo, compiled by rlhfc on the build machine, linked here against the
# runtime (the command docs/runtime.md gives), four ranks sharing the GPU
# over Gloo as its plan has them.
link_and_train() {
  link tiny_grpo || return
  on_gpu tiny_grpo 150 "$out/tiny_grpo-run" --trace "$out/tiny_grpo-trace.json" ||
    return 1
  # The reward rises as on the CPU (test/E2E/grpo-reward.test, bf16.test).
  "$py" test/E2E/Inputs/metrics.py rise "$out/tiny_grpo-run/metrics.jsonl" \
    --key reward --window 20 --margin 0.1
}

# The stdlib's .rlhf functions (fn code evaluated by the runtime, autograd
# through the loss) on the GPU against the same program on the CPU: ten
# steps each give the same rewards and losses. Both in fp32 (the CPU's
# default): bf16 would flip sampled tokens, and its reward rise is
# tiny-grpo's step.
fn_on_gpu() {
  link tiny_grpo tiny_grpo_fn || return
  export RLHF_PRECISION=fp32
  on_gpu tiny_grpo_fn 10 "$out/tiny_grpo-10" || return 1
  on_cpu tiny_grpo_fn 10 "$out/tiny_grpo-10-cpu" || return 1
  "$py" test/E2E/Inputs/metrics.py same "$out/tiny_grpo-10/metrics.jsonl" \
    "$out/tiny_grpo-10-cpu/metrics.jsonl" --keys reward,loss/actor \
    --rtol 1e-3 --atol 1e-5
}

# Asynchronous GRPO: the generator (ranks 2-3) samples iteration t+1 while
# the trainer (ranks 0-1) trains on t, with its own copy of the weights on
# the GPU; the trace shows the overlap (test/E2E/async.test on the CPU).
async_on_gpu() {
  link tiny_grpo_async || return
  on_gpu tiny_grpo_async 30 "$out/async-run" --trace "$out/async-trace.json" ||
    return 1
  "$py" test/E2E/Inputs/trace.py "$out/async-trace.json" \
    "$deps/obj/tiny_grpo_async.plan.json" --steps 30 --ahead
}

# Sequence parallelism (Ulysses and ring attention, exchanges of CUDA
# tensors) against the same program at sp = 1 (test/E2E/sp.test), in fp32
# as there (gpu.seq-parallel-on-cuda-bf16 has bf16's tolerances).
sp_on_gpu() {
  link tiny_grpo_sp || return
  export RLHF_PRECISION=fp32
  link tiny_grpo_nosp || return
  on_gpu tiny_grpo_sp 8 "$out/sp-run" || return 1
  on_gpu tiny_grpo_nosp 8 "$out/nosp-run" || return 1
  "$py" test/E2E/Inputs/metrics.py same "$out/sp-run/metrics.jsonl" \
    "$out/nosp-run/metrics.jsonl" --keys reward,kl/actor,loss/actor \
    --rtol 1e-3 --atol 1e-5
}

# ref.ema(actor) in bf16 (fp32 master weights) on the GPU, checkpointed
# every step, and a run resumed from step 2 (test/E2E/ema.test on the CPU):
# the blend holds where safetensors is here to read it, and the resumed run
# samples what the uninterrupted one did (rewards equal); its losses agree
# within what CUDA's backward kernels, which may sum in another order, leave.
ema_resume_on_gpu() {
  link tiny_grpo_ema || return
  export RLHF_PRECISION=bf16
  on_gpu tiny_grpo_ema 3 "$out/ema-run" || return 1
  if "$py" -c 'import safetensors' 2>/dev/null; then
    "$py" test/E2E/Inputs/ema_check.py "$out/ema-run" 0.9 --bf16 || return 1
  else
    echo "no safetensors module here: the blend is not checked"
  fi
  on_gpu tiny_grpo_ema 2 "$out/ema-resumed" || return 1
  RLHF_DEVICE=cuda "$py" -m torch.distributed.run --standalone --nproc-per-node 4 \
    --no-python "$build/tiny_grpo_ema" --steps 3 --resume \
    --data sums=examples/data/sums.jsonl --out "$out/ema-resumed" || return 1
  "$py" test/E2E/Inputs/metrics.py same "$out/ema-run/metrics.jsonl" \
    "$out/ema-resumed/metrics.jsonl" --keys reward --rtol 0 --atol 0 || return 1
  "$py" test/E2E/Inputs/metrics.py same "$out/ema-run/metrics.jsonl" \
    "$out/ema-resumed/metrics.jsonl" --keys kl/actor,loss/actor \
    --rtol 1e-2 --atol 1e-4
}

# SFT with its validation loss on held-out counts (test/E2E/sft-example.test
# on the CPU): the loss forward only on the GPU, both losses falling.
sft_eval_on_gpu() {
  link sft_tiny || return
  rm -rf "$out/sft-run"
  RLHF_DEVICE=cuda "$py" -m torch.distributed.run --standalone --nproc-per-node 2 \
    --no-python "$build/sft_tiny" --data text=examples/data/text.jsonl \
    --data held=examples/data/text_held.jsonl --out "$out/sft-run" || return 1
  "$py" test/E2E/Inputs/metrics.py fall "$out/sft-run/metrics.jsonl" \
    --key loss/lm --window 10 --margin 1.5 || return 1
  "$py" test/E2E/Inputs/metrics.py fall "$out/sft-run/eval.jsonl" \
    --key val/loss/lm --window 1 --margin 1.5
}

# Generation in waves (mbs = 4 on pp = 2: a KV cache per wave, CUDA graphs
# at the wave's rows) against the same program generating at once, in fp32:
# the same samples, so the same rewards (test/E2E/generate-waves.test).
waves_on_gpu() {
  link tiny_grpo_once || return
  export RLHF_PRECISION=fp32
  link tiny_grpo_waves || return
  on_gpu tiny_grpo_once 3 "$out/once-run" --trace "$out/once-trace.json" || return 1
  on_gpu tiny_grpo_waves 3 "$out/waves-run" --trace "$out/waves-trace.json" || return 1
  "$py" test/E2E/Inputs/metrics.py same "$out/once-run/metrics.jsonl" \
    "$out/waves-run/metrics.jsonl" --keys reward --rtol 0 --atol 0 || return 1
  "$py" test/E2E/Inputs/metrics.py same "$out/once-run/metrics.jsonl" \
    "$out/waves-run/metrics.jsonl" --keys loss/actor --rtol 1e-3 --atol 1e-5 || return 1
  "$py" test/E2E/Inputs/span_peaks.py "$out/waves-trace.json" \
    "$out/once-trace.json" --name "generate @actor" --less-by 0.05
}

# Dynamic sampling (@filter_groups: rounds gathered, groups kept on every
# rank) on the GPU, a round drawing a batch and three: the trained groups
# that do not vary are those that filled the batch, and three batches a
# round take fewer rounds (test/E2E/dynamic-sampling.test).
dapo_on_gpu() {
  link tiny_dapo_flat || return
  link tiny_dapo_over || return
  on_gpu tiny_dapo_flat 8 "$out/dapo-flat-run" || return 1
  on_gpu tiny_dapo_over 8 "$out/dapo-over-run" || return 1
  "$py" test/E2E/Inputs/metrics.py oversampled "$out/dapo-over-run/metrics.jsonl" \
    "$out/dapo-flat-run/metrics.jsonl" --key flat --groups 16
}

# PPO's controls on the GPU against the same program on the CPU, in fp32:
# the adaptive KL coefficient follows Ziegler's rule from the logged kl
# (test/E2E/adaptive-kl.test), the frozen actor logs no rate until step 3
# and then warms up (frozen-steps.test, where transformers is here to
# check it), and the two runs agree. Then GRPO's running moments of the
# scores, against every score --log-samples wrote (running-moments.test),
# and an adaptive entropy bonus, against Skywork-OR1's rule and the same
# run on the CPU (adaptive-entropy.test).
controls_on_gpu() {
  link tiny_ppo_ctl || return
  link tiny_grpo_norm || return
  link tiny_grpo_ent || return
  export RLHF_PRECISION=fp32
  on_gpu tiny_ppo_ctl 6 "$out/ctl-run" || return 1
  on_cpu tiny_ppo_ctl 6 "$out/ctl-run-cpu" || return 1
  "$py" test/E2E/Inputs/kl_check.py "$out/ctl-run/metrics.jsonl" --coef kl_coef \
    --kl kl --init 0.05 --target 0.02 --horizon 1000 --rows 32 --steps 6 || return 1
  if "$py" -c 'import transformers' 2>/dev/null; then
    "$py" test/E2E/Inputs/lr_check.py "$out/ctl-run/metrics.jsonl" --key lr/actor \
      --schedule constant --lr 3e-3 --warmup 2 --decay 198 --frozen 2 --steps 6 || return 1
  else
    echo "no transformers module here: the actor's rates are not checked"
  fi
  "$py" test/E2E/Inputs/metrics.py same "$out/ctl-run/metrics.jsonl" \
    "$out/ctl-run-cpu/metrics.jsonl" --keys reward,kl,kl_coef,loss/critic \
    --rtol 1e-3 --atol 1e-5 || return 1
  on_gpu tiny_grpo_norm 6 "$out/norm-run" --data all_sums=examples/data/sums.jsonl \
    --log-samples 1 || return 1
  "$py" test/E2E/Inputs/samples_check.py "$out/norm-run" \
    --files step-1,step-2,step-3,step-4,step-5,step-6 --running score_mean,score_std \
    || return 1
  on_gpu tiny_grpo_ent 12 "$out/ent-run" || return 1
  on_cpu tiny_grpo_ent 12 "$out/ent-run-cpu" || return 1
  "$py" test/E2E/Inputs/entropy_check.py "$out/ent-run/metrics.jsonl" \
    --coef entropy_coef/actor --entropy entropy/actor --init 0 --target 2.6 \
    --delta 0.01 --max 0.03 --min 0 --steps 12 || return 1
  "$py" test/E2E/Inputs/metrics.py same "$out/ent-run/metrics.jsonl" \
    "$out/ent-run-cpu/metrics.jsonl" --keys reward,entropy/actor,entropy_coef/actor \
    --rtol 1e-3 --atol 1e-5
}

# Offline preference learning, no generation: DPO on prompt-completion
# pairs and KTO on unpaired rows (a dataset's label and its kl_completion)
# on the GPU against the same programs on the CPU, in fp32: with nothing
# sampled, the losses agree step by step (prompt-completion.test and
# kto.test on the CPU). The accuracies are left out: a margin near 0 may
# fall on either side of it on the two devices.
preference_on_gpu() {
  link dpo_completion || return
  link tiny_kto || return
  export RLHF_PRECISION=fp32
  local prefs=prefs=test/E2E/Inputs/prompt-completion.jsonl
  local rows=feedback=test/E2E/Inputs/kto-feedback.jsonl
  data=$prefs on_gpu dpo_completion 10 "$out/dpo-run" || return 1
  data=$prefs on_cpu dpo_completion 10 "$out/dpo-run-cpu" || return 1
  "$py" test/E2E/Inputs/metrics.py same "$out/dpo-run/metrics.jsonl" \
    "$out/dpo-run-cpu/metrics.jsonl" \
    --keys loss/policy,reward_margin/policy --rtol 1e-3 --atol 1e-5 || return 1
  data=$rows on_gpu tiny_kto 10 "$out/kto-run" || return 1
  data=$rows on_cpu tiny_kto 10 "$out/kto-run-cpu" || return 1
  "$py" test/E2E/Inputs/metrics.py same "$out/kto-run/metrics.jsonl" \
    "$out/kto-run-cpu/metrics.jsonl" --keys loss/policy,kl/policy \
    --rtol 1e-3 --atol 1e-5
}

# Reallocation between layouts of 4 ranks sharing the GPU, beside a
# device-to-device copy of the same bytes on every rank at once: through
# CUDA IPC (one copy per byte), then through host memory (Gloo's staging).
realloc_bench() {
  if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.device_count() else 1)'; then
    echo "SKIP: no CUDA device"
    return 77
  fi
  RLHF_DEVICE=cuda "$py" -m torch.distributed.run --standalone --nproc-per-node 4 \
    --no-python "$build/bin/rlhf-bench-realloc"
}
realloc_bench_host() {
  RLHF_CUDA_IPC=0 realloc_bench
}

# PyTorch at the runtime benchmark's points, on a GPU that docs/validation
# has no PyTorch rows for (an H200: measured-h100.csv is an H100's), into
# measured-<gpu>.csv; scripts/gpu-results.sh sets our rows beside them.
pytorch_reference() {
  local rows hw tag
  rows=$(ls "$out"/runtime-*.csv 2>/dev/null | head -n 1)
  if [ -z "$rows" ]; then
    echo "SKIP: the runtime benchmark wrote no rows, so this GPU's preset is unknown"
    return 77
  fi
  hw=$(awk -F, 'NR == 2 { print $4; exit }' "$rows")
  if cut -d, -f4 docs/validation/measured-*.csv | grep -qx "$hw"; then
    echo "SKIP: docs/validation already has PyTorch's rows on $hw"
    return 77
  fi
  tag=${rows##*/runtime-}
  tag=${tag%.csv}
  "$py" scripts/measure-llama-h100.py --runtime-points --hardware "$hw" \
    --csv "$out/measured-$tag.csv"
}
export -f link ranks_on on_gpu on_cpu link_and_train fn_on_gpu async_on_gpu sp_on_gpu \
  ema_resume_on_gpu waves_on_gpu dapo_on_gpu controls_on_gpu preference_on_gpu realloc_bench \
  realloc_bench_host pytorch_reference

# Under a budget, the checks each acceptance point needs come first, each
# capped so that one slow step cannot starve the rest. Timed steps run alone
# on the GPU: the benchmark beside the cost model (rows are kept as they
# come; the last line of its log is `runtime/cost-model geomean: X.XX`) and
# reallocation beside a device copy. The correctness steps, which time
# nothing, then run side by side (the layout tests, tiny_grpo's training,
# the .rlhf functions, async GRPO, sequence parallelism, ema and resume),
# then PyTorch's
# rows where this GPU has none, and the other benchmarks alone after them,
# within what the budget has left;
# RLHF_GPU_CHECK_STEPS runs any that were cut off in a later window.
# Its rows are priced as the GPU's own preset (H100_SXM, H200) and land in
# runtime-<gpu>.csv (runtime-h100.csv, runtime-h200.csv); PyTorch's rows on
# that GPU, where docs/validation has them, stand beside them.
pytorch_rows=()
for f in docs/validation/measured-*.csv; do
  pytorch_rows+=(--pytorch "$f")
done
cap=180 step rlhf-bench-gpu-runtime "$build/bin/rlhf-bench-gpu-runtime" --out "$out" \
  --predicted "$deps/predicted.csv" "${pytorch_rows[@]}"
cap=45 step realloc-ipc realloc_bench

# Side by side: each step in the background with its own cap; the tarball
# is written once they all end (two at once would write the same file).
tar_each=$tarball
tarball=
cap=300 step ctest-gpu ctest --test-dir "$build" -L gpu --output-on-failure -j3 --timeout 900 &
cap=180 step tiny-grpo link_and_train &
cap=150 step fn-on-gpu fn_on_gpu &
cap=150 step async-on-gpu async_on_gpu &
cap=150 step sp-on-gpu sp_on_gpu &
cap=150 step ema-on-gpu ema_resume_on_gpu &
cap=120 step waves-on-gpu waves_on_gpu &
cap=120 step dapo-on-gpu dapo_on_gpu &
cap=120 step controls-on-gpu controls_on_gpu &
cap=90 step preference-on-gpu preference_on_gpu &
cap=90 step sft-eval-on-gpu sft_eval_on_gpu &
wait
tarball=$tar_each
[ -n "$tarball" ] && tar czf "$tarball" -C "$out" --exclude checkpoints . 2>/dev/null

# PyTorch's figures where this GPU has none yet (an H200): the benchmark's
# rows stand beside them, so they come before the diagnostics below.
cap=180 step pytorch-reference pytorch_reference
# The fused AdamW step beside separate ops, over 1.07B parameters.
cap=45 step adam "$build/bin/rlhf-bench-adam"
# Fused SwiGLU and rotary beside separate ops (decode and train shapes).
cap=30 step fused-ops "$build/bin/rlhf-bench-fused-ops"
# A decode step's attention over grouped KV heads, shared beside repeated.
cap=45 step gqa-decode "$build/bin/rlhf-bench-gqa-decode"
# Ring attention's fused (flash per block) and explicit kernels, one rank.
cap=90 step ring-attention "$build/bin/rlhf-bench-ring-attention"
# Where a 7B decode step's device time goes, kernel by kernel (Kineto).
cap=90 step decode-kernels "$build/bin/rlhf-bench-decode-kernels"
# Reallocation through host memory (Gloo's staging), for comparison.
cap=75 step realloc-host realloc_bench_host
if [ "${RLHF_GPU_CHECK_CPU_TESTS:-0}" = 1 ]; then
  step ctest-runtime ctest --test-dir "$build" -LE gpu --output-on-failure -j"$jobs" --timeout 900
fi

echo
cat "$summary"
# The background steps' statuses live only in the summary.
grep -qE ' (FAILED|OUT-OF-TIME) ' "$summary" && failed=1
exit $failed
