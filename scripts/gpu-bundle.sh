#!/usr/bin/env bash
# Gathers, on a build machine, what scripts/gpu-check.sh needs on a GPU node
# that has CUDA, CMake and the torch wheel but no Debian packages and no
# network: header-only and static dependencies of the runtime-only build, and
# the example programs compiled by rlhfc to objects (a GPU node has no MLIR).
#
#   scripts/gpu-bundle.sh [DIR]      (default DIR: .gpu-deps, git-ignored)
#
# Carried: Gloo's headers (c10d's ProcessGroupGloo.hpp includes them),
# nlohmann-json, GoogleTest/GoogleMock (headers and static libraries), and
# examples/*.rlhf compiled with `rlhfc --emit=obj` (and variants: generation
# in waves, dynamic sampling), and the cost model's
# predictions for the GPU benchmark's points on each GPU a node may have
# (predicted.csv, H100_SXM and H200 rows: a GPU node has no LLVM to run the
# cost model, and the benchmark picks its GPU's). Not carried: sentencepiece
# (optional there), LLVM (so no rlhf-run; torchrun launches the workers).
#
# Also the runtime built here (prebuilt/: runtime-only, Release, stripped;
# without BPE or sentencepiece, whose libraries a node lacks), against the
# same torch wheel as the node's. gpu-check.sh runs it where it loads and
# builds from source otherwise: the build takes minutes of a short window.
# It keeps this checkout's absolute paths (test inputs, run paths), which
# gpu-check.sh maps onto the node's checkout. RLHF_GPU_PREBUILT=0: none.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.gpu-deps}
scripts/build.sh rlhfc rlhf-cost-validate rlhf-bench-gpu-runtime >/dev/null
rm -rf "$dir"
mkdir -p "$dir/include" "$dir/lib" "$dir/obj"
cp -r /usr/include/gloo /usr/include/nlohmann /usr/include/gtest /usr/include/gmock \
  "$dir/include/"
cp /usr/lib/x86_64-linux-gnu/libgtest.a /usr/lib/x86_64-linux-gnu/libgtest_main.a \
  /usr/lib/x86_64-linux-gnu/libgmock.a /usr/lib/x86_64-linux-gnu/libgmock_main.a "$dir/lib/"
for prog in tiny_grpo tiny_ppo sft_tiny; do
  build/bin/rlhfc "examples/$prog.rlhf" --emit=obj -o "$dir/obj/$prog.o"
done
# Asynchronous GRPO (its plan too, for the trace check) and GRPO with
# sequence parallelism (USP on 2 "nodes" of 2) beside the same at sp = 1.
build/bin/rlhfc examples/tiny_grpo_async.rlhf --emit=obj -o "$dir/obj/tiny_grpo_async.o"
build/bin/rlhfc examples/tiny_grpo_async.rlhf --emit=plan -o "$dir/obj/tiny_grpo_async.plan.json"
build/bin/rlhfc test/E2E/Inputs/tiny_grpo_sp.rlhf --planner=manual --emit=obj -o "$dir/obj/tiny_grpo_sp.o"
nospsrc=$(mktemp --suffix=.rlhf -p test/E2E/Inputs)
sed -e 's/dp = 1, tp = 1, pp = 1, sp = 4/dp = 4, tp = 1, pp = 1/' \
  -e 's/dp = 2, tp = 1, pp = 1, sp = 2/dp = 2, tp = 2, pp = 1/' \
  test/E2E/Inputs/tiny_grpo_sp.rlhf >"$nospsrc"
build/bin/rlhfc "$nospsrc" --planner=manual --emit=obj -o "$dir/obj/tiny_grpo_nosp.o"
rm -f "$nospsrc"
# tiny_grpo with ref.ema(actor), checkpointed every step (test/E2E/ema.test).
emasrc=$(mktemp --suffix=.rlhf -p examples)
sed -e 's|minibatches = 2);|minibatches = 2);\n  ref.ema(actor, decay = 0.9);|' \
  -e 's|save_interval = 20|save_interval = 1|' examples/tiny_grpo.rlhf >"$emasrc"
build/bin/rlhfc "$emasrc" --emit=obj -o "$dir/obj/tiny_grpo_ema.o"
rm -f "$emasrc"
# tiny_grpo's generate pinned to pp = 2, at once and in 4 waves
# (test/E2E/generate-waves.test).
oncesrc=$(mktemp --suffix=.rlhf -p examples)
sed -e 's|^  g   = actor.generate|  @place(mesh = local[0:4], dp = 2, tp = 1, pp = 2)\n  g   = actor.generate|' \
  examples/tiny_grpo.rlhf >"$oncesrc"
build/bin/rlhfc "$oncesrc" --emit=obj -o "$dir/obj/tiny_grpo_once.o"
sed -i 's|pp = 2)$|pp = 2, mbs = 4)|' "$oncesrc"
build/bin/rlhfc "$oncesrc" --emit=obj -o "$dir/obj/tiny_grpo_waves.o"
rm -f "$oncesrc"
# Dynamic sampling with its witness, a round drawing a batch and three
# (test/E2E/dynamic-sampling.test).
build/bin/rlhfc test/E2E/Inputs/tiny_dapo_flat.rlhf --emit=obj -o "$dir/obj/tiny_dapo_flat.o"
oversrc=$(mktemp --suffix=.rlhf -p test/E2E/Inputs)
sed -e 's/@filter_groups(max_rounds = 6, expected_rounds = 2)/@filter_groups(max_rounds = 6, gen_batch = 48)/' \
  test/E2E/Inputs/tiny_dapo_flat.rlhf >"$oversrc"
build/bin/rlhfc "$oversrc" --emit=obj -o "$dir/obj/tiny_dapo_over.o"
rm -f "$oversrc"
# PPO's controls (test/E2E/adaptive-kl.test, frozen-steps.test): an
# adaptive KL coefficient, and the actor frozen for 2 steps, then warming
# up; and GRPO on scores normalised by running moments
# (running-moments.test).
ctlsrc=$(mktemp --suffix=.rlhf -p examples)
sed -e 's|kl = 0.01);|kl = adaptive_kl(0.05, 0.02, horizon = 1000));|' \
  -e 's|ppo_actor_loss(g, adv, clip = 0.2), minibatches = 2);|ppo_actor_loss(g, adv, clip = 0.2), minibatches = 2, frozen_steps = 2);|' \
  -e 's|model actor  : tiny_arith { trainable; optimizer = adam(lr = 3e-3); }|model actor : tiny_arith { trainable; optimizer = adam(lr = 3e-3, warmup_steps = 2); }|' \
  examples/tiny_ppo.rlhf >"$ctlsrc"
build/bin/rlhfc "$ctlsrc" --emit=obj -o "$dir/obj/tiny_ppo_ctl.o"
rm -f "$ctlsrc"
build/bin/rlhfc test/E2E/Inputs/tiny_grpo_running_norm.rlhf --emit=obj \
  -o "$dir/obj/tiny_grpo_norm.o"
# GRPO with an adaptive entropy bonus (test/E2E/adaptive-entropy.test).
entsrc=$(mktemp --suffix=.rlhf -p examples)
sed -e 's|actor.train(grpo_loss(g, adv, lr, kl = 0.05)|actor.train(ppo_entropy_loss(g, adv, entropy = adaptive_entropy(0, 2.6, delta = 0.01, max = 0.03))|' \
  -e '/lr  = ref.inference/d' examples/tiny_grpo.rlhf >"$entsrc"
build/bin/rlhfc "$entsrc" --emit=obj -o "$dir/obj/tiny_grpo_ent.o"
rm -f "$entsrc"
# Offline preference learning on four ranks (gpu-check's preference step):
# DPO on prompt-completion pairs and KTO on unpaired rows.
for prog in dpo_completion tiny_kto; do
  prefsrc=$(mktemp --suffix=.rlhf -p test/E2E/Inputs)
  sed -e 's/gpus_per_node = 2;/gpus_per_node = 4;/' \
    "test/E2E/Inputs/$prog.rlhf" >"$prefsrc"
  build/bin/rlhfc "$prefsrc" --emit=obj -o "$dir/obj/$prog.o"
  rm -f "$prefsrc"
done
build/bin/rlhf-bench-gpu-runtime --list-points --hardware H100_SXM,H200 \
  >"$dir/points.csv"
build/bin/rlhf-cost-validate "$dir/points.csv" \
  --emit-predictions "$dir/predicted.csv" >/dev/null
if [ "${RLHF_GPU_PREBUILT:-1}" = 1 ]; then
  pre=build-gpu-pre
  echo "gpu-bundle: building the runtime for GPU nodes in $pre (minutes the first time)"
  cmake -S . -B "$pre" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRLHF_RUNTIME_ONLY=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_ICU=ON \
    -DRLHF_SENTENCEPIECE=OFF >"$dir/prebuilt.log" 2>&1 &&
    cmake --build "$pre" -j2 >>"$dir/prebuilt.log" 2>&1 || {
    tail -n 30 "$dir/prebuilt.log" >&2
    echo "gpu-bundle: the runtime-only build failed (log: $dir/prebuilt.log)" >&2
    exit 1
  }
  # What ctest and the programs read: test lists, and the binaries and
  # shared libraries the build now has (ninja's targets, not leftovers of an
  # earlier configuration); not objects or the toolkit's links.
  mkdir -p "$dir/prebuilt/tree"
  (cd "$pre" && {
    find . \( -name CMakeFiles -o -name Testing -o -name cuda-toolkit \) -prune \
      -o -type f -name '*.cmake' -print
    ninja -t targets all | cut -d: -f1 | grep -E '^(bin/|lib/[^/]*\.so$)'
  } | tar -T - -cf -) | tar -xf - -C "$dir/prebuilt/tree"
  find "$dir/prebuilt/tree/bin" "$dir/prebuilt/tree/lib" -type f -exec strip --strip-unneeded {} +
  pwd -P >"$dir/prebuilt/source-dir"
  # What the build compiled, as it stood: a node whose checkout differs
  # builds from source rather than test stale binaries.
  git ls-files -z CMakeLists.txt cmake runtime test/unit bench | xargs -0 sha256sum \
    >"$dir/prebuilt/sources.sha256"
  echo "$pre" >"$dir/prebuilt/build-dir"
fi
git rev-parse HEAD >"$dir/commit"
echo "gpu-bundle: wrote $dir ($(du -sh "$dir" | cut -f1)); carry it to the GPU node"
