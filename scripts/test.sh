#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite: lit, then ctest (GoogleTest
# and the other ctest-registered checks). The last lines are lit's and
# ctest's own summaries.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
status=0
cmake --build build --target check-rlhfc -j2 || status=$?
(cd build && ctest -j2 --output-on-failure) || status=$?
exit $status
