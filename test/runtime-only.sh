#!/usr/bin/env bash
# Configures rlhfc with RLHF_RUNTIME_ONLY=ON while MLIR, LLVM and ANTLR are
# out of reach (MLIR_DIR/LLVM_DIR point nowhere, no antlr4 on PATH), then
# builds the torch-free reallocation planner the runtime links. A GPU node
# with LibTorch but no LLVM configures the same way.
set -euo pipefail
src=$1
dir=$(mktemp -d /tmp/rlhf-runtime-only-XXXXXX)
trap 'rm -rf "$dir"' EXIT
path=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v llvm | paste -sd: -)
env PATH="$path" cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DRLHF_RUNTIME_ONLY=ON -DMLIR_DIR=/nonexistent -DLLVM_DIR=/nonexistent \
  -DANTLR4_EXECUTABLE=/nonexistent > "$dir/configure.log" 2>&1 \
  || { cat "$dir/configure.log"; exit 1; }
grep -q "runtime only     : ON" "$dir/configure.log" \
  || { echo "configure did not report a runtime-only build:"; cat "$dir/configure.log"; exit 1; }
for d in compiler dialects lang; do
  if [ -e "$dir/$d" ]; then echo "runtime-only configured $d/"; exit 1; fi
done
grep -q "^build bin/rlhf-model-worker" "$dir/build.ninja" \
  || { echo "runtime-only build has no runtime test workers"; exit 1; }
env PATH="$path" cmake --build "$dir" -j2 --target RLHFReallocPlan
echo "runtime-only: configured without MLIR, LLVM or ANTLR; the runtime's targets are there"
