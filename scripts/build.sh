#!/usr/bin/env bash
# Sets up (scripts/setup.sh), configures with the default preset and builds
# with -j2. Extra arguments go to the build (e.g. a target name).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ ! -f build/build.ninja ]; then
  cmake --preset default
fi
cmake --build build -j2 "$@"
