#!/usr/bin/env bash
# Installs the Debian 12 packages rlhfc needs to build and test. Idempotent:
# when every package is present it does nothing. Runs as root (no sudo).
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build g++ make pkg-config python3 git ca-certificates
  # MLIR/LLVM 19 (lit lives in llvm-19-tools; LLVM's CMake needs zstd)
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools libzstd-dev
  # ANTLR4 tool 4.7.2 + C++ runtime 4.9
  antlr4 libantlr4-runtime-dev default-jre-headless
  # LibTorch 1.13 (CPU) with c10d, and Gloo
  libtorch-dev libgloo-dev
  # tests, benchmarks, tokenizer, JSON, fuzzing
  libgtest-dev libgmock-dev libbenchmark-dev
  libsentencepiece-dev sentencepiece nlohmann-json3-dev
  clang libclang-rt-14-dev clang-format
  # headless browser for the timeline rendering test
  chromium
  # the VS Code extension's tests (editors/vscode; skipped without node/npm)
  nodejs
)
# Debian packages npm separately; NodeSource's nodejs bundles it and conflicts
# with Debian's npm, so ask for npm only when the command is missing.
if ! command -v npm >/dev/null 2>&1; then PACKAGES+=(npm); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present; nothing to install"
  exit 0
fi

echo "setup: installing ${#missing[@]} missing package(s): ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: error: apt-get is not available. rlhfc's setup supports Debian 12;" >&2
  echo "       install these packages with your system's package manager: ${missing[*]}" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: error: installing packages needs root; rerun as root (this script does not use sudo)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
