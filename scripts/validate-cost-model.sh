#!/usr/bin/env bash
# Regenerates the validation table of docs/cost-model.md from the code: the
# cost model predicts every published measurement in
# docs/validation/published.csv. The last line is the median absolute error.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh rlhf-cost-validate > /dev/null
build/bin/rlhf-cost-validate docs/validation/published.csv --update docs/cost-model.md
