#!/usr/bin/env bash
# Regenerates the validation tables of docs/cost-model.md from the code: the
# cost model predicts every published measurement in
# docs/validation/published.csv, and our own H100 measurements in
# docs/validation/measured-h100.csv with the built-in factors, and its
# unfused-engine decode points with the calibration fitted to them. The last line is the published points' median
# absolute error.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh rlhf-cost-validate > /dev/null
v=build/bin/rlhf-cost-validate
$v docs/validation/measured-h100.csv --section measured-table \
  --update docs/cost-model.md > /dev/null
$v docs/validation/measured-h100.csv --section measured-calibrated-table \
  --calibration docs/validation/calibration-pytorch-h100.json \
  --ids '^own_h100_decode_[0-9]+$' \
  --update docs/cost-model.md > /dev/null
$v docs/validation/published.csv --update docs/cost-model.md
