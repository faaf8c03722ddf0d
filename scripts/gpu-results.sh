#!/usr/bin/env bash
# Takes a GPU run's measurements of our own runtime into docs/, on a build
# machine (the cost model needs LLVM, which a GPU node lacks):
#
#   scripts/gpu-results.sh DIR      DIR: what scripts/gpu-check.sh wrote, or
#                                   the .tgz of it (RLHF_GPU_CHECK_TAR)
#
# Fits a calibration to DIR/runtime-TAG.csv (rlhf-bench-gpu-runtime's rows,
# priced as the run's GPU: TAG h100 for H100_SXM, h200 for H200) with
# scripts/fit-calibration.py; only if that succeeds, copies the rows to
# docs/validation/runtime-TAG.csv and the fit to
# docs/validation/calibration-runtime-TAG.json, then regenerates that GPU's
# "Own runtime on ..." tables of docs/cost-model.md: with the built-in
# factors (section runtime-TAG-table) and with the fitted ones
# (runtime-TAG-calibrated-table). Where the run measured PyTorch at the
# same points (DIR/measured-TAG.csv, a GPU without PyTorch rows here), copies
# them to docs/validation/ and prints runtime/PyTorch per point. Review with
# `git diff docs/` and commit.
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
csvs=("$src"/runtime-*.csv)
[ -f "${csvs[0]}" ] ||
  die "no runtime-<gpu>.csv in $src; pass the folder scripts/gpu-check.sh" \
    "wrote (its rlhf-bench-gpu-runtime step writes it; see" \
    "rlhf-bench-gpu-runtime.log there)"
[ ${#csvs[@]} -eq 1 ] ||
  die "$src holds ${#csvs[@]} runtime-*.csv files; pass the results of one run"
csv=${csvs[0]}
tag=$(basename "$csv" .csv)
tag=${tag#runtime-}
# The preset the benchmark priced its rows as (their hardware column).
hw=$(awk -F, 'NR == 2 { print $4; exit }' "$csv")
[ -n "$hw" ] || die "$csv has no rows; see rlhf-bench-gpu-runtime.log beside it"
gpu=$(sed -n 's/^gpu: //p' "$src/env.txt" 2>/dev/null | head -n 1 || true)
[ -n "$gpu" ] || die "$src/env.txt names no GPU; was this run by" \
  "scripts/gpu-check.sh on a GPU node?"

# Each GPU has its own tables (scripts/validate-cost-model.sh fills them).
for t in runtime-$tag-table runtime-$tag-calibrated-table; do
  grep -q "<!-- $t:begin -->" docs/cost-model.md ||
    die "docs/cost-model.md has no section for $hw's rows ('$t'); add one" \
      "as \"Own runtime on H200\" is, with <!-- runtime-$tag-table:begin/end -->" \
      "and <!-- runtime-$tag-calibrated-table:begin/end --> markers"
done
echo "run on '$gpu', rows priced as $hw"

scripts/build.sh rlhf-cost-validate >/dev/null
v=build/bin/rlhf-cost-validate
py=/opt/rlhfc/venv/bin/python3
[ -x "$py" ] || py=python3

# Fit first: a malformed CSV or a failed fit leaves docs/ as it was.
rows=docs/validation/runtime-$tag.csv
cal=docs/validation/calibration-runtime-$tag.json
"$py" scripts/fit-calibration.py "$csv" --hardware "$hw" \
  --out "$tmp/calibration.json" --validate "$v"
cp "$csv" "$rows"
cp "$tmp/calibration.json" "$cal"
echo "wrote $rows and $cal"

# PyTorch at the same points on this GPU, where gpu-check.sh measured it
# (its pytorch-reference step: a GPU docs/validation had no PyTorch rows for).
ref=$src/measured-$tag.csv
if [ -f "$ref" ]; then
  cp "$ref" "docs/validation/measured-$tag.csv"
  echo "wrote docs/validation/measured-$tag.csv (PyTorch on $hw); runtime/PyTorch:"
  "$py" - "$rows" "$ref" <<'PY'
import csv, math, sys
key = lambda r: (r["category"], r["model"], r["batch"], r["seq_in"], r["seq_out"])
theirs = {key(r): float(r["value"]) for r in csv.DictReader(open(sys.argv[2]))}
ratios = []
for r in csv.DictReader(open(sys.argv[1])):
    if key(r) in theirs:
        ratios.append(float(r["value"]) / theirs[key(r)])
        print(f"  {r['id']:32} {float(r['value']):10.1f} {theirs[key(r)]:10.1f}"
              f"  {ratios[-1]:5.2f}")
if ratios:
    g = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"runtime/PyTorch geomean: {g:.2f} over {len(ratios)} points")
PY
fi

echo
# Every table from the code (this GPU's among them), as CI checks them.
scripts/validate-cost-model.sh >/dev/null
echo "own runtime on $hw, built-in factors:"
$v "$rows" | tail -n 1
echo "own runtime on $hw, fitted factors ($cal):"
$v "$rows" --calibration "$cal" | tail -n 1
echo "updated docs/cost-model.md; review with: git diff docs/"
