#!/usr/bin/env bash
# Regenerates the validation tables of docs/cost-model.md from the code: the
# cost model predicts every published measurement in
# docs/validation/published.csv; our own H100 measurements of PyTorch in
# docs/validation/measured-h100.csv with the built-in factors, and their
# unfused-engine decode points with the calibration fitted to them; and our
# own runtime's rows from each GPU window (docs/validation/runtime-TAG.csv,
# TAG h100 or h200) with the built-in factors and with
# calibration-runtime-TAG.json. The last line is the published points'
# median absolute error.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh rlhf-cost-validate > /dev/null
v=build/bin/rlhf-cost-validate
doc=docs/cost-model.md
$v docs/validation/measured-h100.csv --section measured-table \
  --update $doc > /dev/null
$v docs/validation/measured-h100.csv --section measured-calibrated-table \
  --calibration docs/validation/calibration-pytorch-h100.json \
  --ids '^own_h100_decode_[0-9]+$' \
  --update $doc > /dev/null
for rows in docs/validation/runtime-*.csv; do
  [ -f "$rows" ] || continue
  tag=$(basename "$rows" .csv)
  tag=${tag#runtime-}
  $v "$rows" --section runtime-$tag-table --update $doc > /dev/null
  $v "$rows" --section runtime-$tag-calibrated-table \
    --calibration "docs/validation/calibration-runtime-$tag.json" \
    --update $doc > /dev/null
done
$v docs/validation/published.csv --update $doc
