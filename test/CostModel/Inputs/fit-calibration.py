"""Helpers of fit-calibration.test.

  synth MEASURED PRED   MEASURED's rows that PRED predicts, with the
                        prediction as the measured value (a perfect fit exists)
  check CALIB HW NAME=VALUE... [--tol T]
                        CALIB's factors for HW within T (relative) of VALUE
"""
import csv
import json
import sys


def synth(measured, pred):
    with open(pred, newline="") as f:
        predicted = {p["id"]: p["predicted"] for p in csv.DictReader(f)}
    with open(measured, newline="") as f:
        rows = list(csv.reader(f))
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(rows[0])
    value = rows[0].index("value")
    for r in rows[1:]:
        if r and r[0] in predicted:
            r[value] = predicted[r[0]]
            out.writerow(r)


def check(path, hw, wants, tol):
    with open(path) as f:
        got = json.load(f)[hw]
    ok = True
    for want in wants:
        name, value = want.split("=")
        v = got.get(name)
        rel = abs(v / float(value) - 1) if v is not None else float("inf")
        print(f"{name}: fitted {v}, true {value}, off by {rel:.2%}")
        ok &= rel <= tol
    if set(got) != {w.split("=")[0] for w in wants}:
        print(f"factors fitted: {sorted(got)}")
        ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    if sys.argv[1] == "synth":
        synth(sys.argv[2], sys.argv[3])
    else:
        args = sys.argv[2:]
        tol = 0.02
        if "--tol" in args:
            i = args.index("--tol")
            tol = float(args[i + 1])
            del args[i:i + 2]
        check(args[0], args[1], args[2:], tol)
