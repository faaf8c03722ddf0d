#!/usr/bin/env bash
# Sets up (scripts/setup.sh), configures with the default preset and builds
# with -j2. Arguments name targets to build (default: everything).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ ! -f build/build.ninja ]; then
  cmake --preset default
fi
if [ $# -gt 0 ]; then
  cmake --build build -j2 --target "$@"
else
  cmake --build build -j2
fi
