#!/usr/bin/env bash
# Configures rlhfc with the CUDA toolkit hidden (no nvcc on PATH, CUDACXX and
# CUDAToolkit_ROOT pointing nowhere) and builds the runtime, proving the CPU
# build never depends on CUDA.
set -euo pipefail
src=$1
dir=$(mktemp -d /tmp/rlhf-nocuda-XXXXXX)
trap 'rm -rf "$dir"' EXIT
path=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v cuda | paste -sd: -)
env CUDACXX=/nonexistent/nvcc PATH="$path" cmake -S "$src" -B "$dir" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT=/nonexistent \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py > "$dir/configure.log" 2>&1 \
  || { cat "$dir/configure.log"; exit 1; }
grep -q "CUDA/NCCL/cuBLAS : OFF" "$dir/configure.log" \
  || { echo "configure did not report CUDA off:"; cat "$dir/configure.log"; exit 1; }
if [ -e "$dir/runtime/cuda" ]; then echo "runtime/cuda was configured without CUDA"; exit 1; fi
env PATH="$path" cmake --build "$dir" -j2 --target rlhf_runtime rlhf-run
echo "cuda-absent: configure reports CUDA off; runtime built without it"
