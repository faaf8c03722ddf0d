#!/usr/bin/env bash
# Installs what rlhfc needs to build and test: the Debian 12 packages, then the
# pinned Python packages of scripts/requirements.txt (LibTorch inside the torch
# wheel, PyPI's CUDA toolkit pieces) into a venv, /opt/rlhfc/venv or $RLHF_VENV.
# Idempotent: when everything is present it does nothing. Runs as root (no sudo).
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build g++ make pkg-config python3 git ca-certificates ccache
  # MLIR/LLVM 19 (lit lives in llvm-19-tools; LLVM's CMake needs zstd)
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools libzstd-dev
  # ANTLR4 tool 4.7.2 + C++ runtime 4.9
  antlr4 libantlr4-runtime-dev default-jre-headless
  # the venv that holds the torch wheel
  python3-venv
  # Gloo's headers only: c10d's ProcessGroupGloo.hpp includes them, and the
  # wheel ships none. Gloo itself is the copy inside libtorch_cpu; gloo types
  # reach our code only behind pointers, so the header snapshot is enough.
  libgloo-dev
  # tests, benchmarks, tokenizer, JSON, fuzzing
  libgtest-dev libgmock-dev libbenchmark-dev
  libsentencepiece-dev sentencepiece nlohmann-json3-dev
  # byte-level BPE (tokenizer.json): pre-tokenizer regexes, NFC
  libpcre2-dev libicu-dev
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

install_debian() {
  if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all ${#PACKAGES[@]} Debian packages present"
    return
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
}

# The venv remembers the requirements it was made from; a changed pin
# reinstalls. Debian's python3 makes it (PATH may hold another one).
install_python() {
  local venv=${RLHF_VENV:-/opt/rlhfc/venv}
  local req
  req="$(cd "$(dirname "$0")" && pwd)/requirements.txt"
  if [ -x "$venv/bin/python3" ] && cmp -s "$req" "$venv/.rlhfc-requirements"; then
    echo "setup: pinned Python packages present in $venv"
    return
  fi
  local py=/usr/bin/python3
  [ -x "$py" ] || py=$(command -v python3)
  echo "setup: installing the pinned Python packages into $venv (torch with CUDA: about 5 GB)"
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv"
  "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/.rlhfc-requirements"
}

install_debian
install_python
echo "setup: done"
