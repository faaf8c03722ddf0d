#!/usr/bin/env bash
# Takes a GPU run's measurements of our own runtime into docs/, on a build
# machine (the cost model needs LLVM, which a GPU node lacks):
#
#   scripts/gpu-results.sh DIR      DIR: what scripts/gpu-check.sh wrote, or
#                                   the .tgz of it (RLHF_GPU_CHECK_TAR)
#
# Fits a calibration to DIR/runtime-h100.csv (rlhf-bench-gpu-runtime's rows)
# with scripts/fit-calibration.py; only if that succeeds, copies the rows to
# docs/validation/runtime-h100.csv and the fit to
# docs/validation/calibration-runtime-h100.json, then regenerates the
# "Own runtime on H100" tables of docs/cost-model.md: with the built-in
# factors (section runtime-table) and with the fitted ones
# (runtime-calibrated-table). Review with `git diff docs/` and commit.
set -euo pipefail
cd "$(dirname "$0")/.."
die() {
  echo "gpu-results: error: $*" >&2
  exit 1
}
if [ $# -ne 1 ]; then
  echo "usage: scripts/gpu-results.sh DIR   (the results folder of" \
    "scripts/gpu-check.sh, or its .tgz)" >&2
  exit 2
fi
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -f "$src" ]; then
  tar xzf "$src" -C "$tmp" ||
    die "cannot unpack $src; pass the results folder or the .tgz" \
      "scripts/gpu-check.sh wrote"
  src=$tmp
fi
csv=$src/runtime-h100.csv
[ -f "$csv" ] ||
  die "$csv not found; pass the folder scripts/gpu-check.sh wrote (its" \
    "rlhf-bench-gpu-runtime step writes runtime-h100.csv; see" \
    "rlhf-bench-gpu-runtime.log there)"

# The tables and the calibration are an H100's: a run on another GPU (the
# lender can hand out an H200) must not land under that name.
gpu=$(sed -n 's/^gpu: //p' "$src/env.txt" 2>/dev/null | head -n 1 || true)
case "$gpu" in
*H100*) ;;
"") die "$src/env.txt names no GPU; was this run by scripts/gpu-check.sh" \
  "on a GPU node?" ;;
*) die "this run was on '$gpu', not an H100; its rows are not the \"own" \
  "runtime on H100\" tables (keep them under docs/validation/ by hand," \
  "named for that GPU)" ;;
esac

scripts/build.sh rlhf-cost-validate >/dev/null
v=build/bin/rlhf-cost-validate
py=/opt/rlhfc/venv/bin/python3
[ -x "$py" ] || py=python3

# Fit first: a malformed CSV or a failed fit leaves docs/ as it was.
rows=docs/validation/runtime-h100.csv
cal=docs/validation/calibration-runtime-h100.json
"$py" scripts/fit-calibration.py "$csv" --out "$tmp/calibration.json" \
  --validate "$v"
cp "$csv" "$rows"
cp "$tmp/calibration.json" "$cal"
echo "wrote $rows and $cal"

echo
echo "own runtime on H100, built-in factors:"
$v "$rows" --section runtime-table --update docs/cost-model.md | tail -n 1
echo "own runtime on H100, fitted factors ($cal):"
$v "$rows" --section runtime-calibrated-table --calibration "$cal" \
  --update docs/cost-model.md | tail -n 1
echo "updated docs/cost-model.md; review with: git diff docs/"
