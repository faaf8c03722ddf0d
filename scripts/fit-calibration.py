#!/usr/bin/env python3
"""Fits a calibration file for the cost model to measured rows.

Reads a CSV in the columns of docs/validation/measured-h100.csv (what
rlhf-bench-gpu-runtime writes as DIR/runtime-h100.csv or runtime-h200.csv),
picks the rows of one hardware preset (--hardware), and fits the cost
model's efficiency factors (the keys of a
--calibration file, docs/cost-model.md) so that its predictions match them:
least squares on log(predicted / measured). rlhf-cost-validate is the model:
each candidate is written as a calibration file and predicted with
`rlhf-cost-validate CSV --calibration FILE --emit-predictions PRED`, so the
fit always agrees with what the tool (and rlhfc --calibration) computes.

The search is Nelder-Mead over the logarithm of each factor, clamped to
per-factor bounds, from the built-in factors, polished by a few
Gauss-Newton steps (finite differences) that are kept only where they lower
the error. It is deterministic and stops after a bounded number of runs.

Default factors, by the categories of the rows:
  decode               hbm, kernel_overhead (weight and KV-cache streaming,
                       fixed cost per layer per step)
  inference, train     matmul (GEMM rate; attention is a few percent of
                       their time at these lengths, add it with --factors)
  attention            attention
  collective           nvlink, network
A default factor that changes no prediction of the rows is left out.

Prints the fitted factors, every row's error before and after, and the
median abs error before and after; writes the calibration file.

Example (the rows of our own runtime on one H100):
  scripts/fit-calibration.py docs/validation/runtime-h100.csv \\
      --out docs/validation/calibration-runtime-h100.json
  build/bin/rlhf-cost-validate docs/validation/runtime-h100.csv \\
      --calibration docs/validation/calibration-runtime-h100.json
"""
import argparse
import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

PROG = "fit-calibration"
COLUMNS = ["id", "category", "model", "hardware", "gpus", "tp", "pp", "dp",
           "batch", "seq_in", "seq_out", "dtype", "metric", "value", "unit",
           "source", "notes"]
INT_COLUMNS = ["gpus", "tp", "pp", "dp", "batch", "seq_in", "seq_out"]

# Where the search starts: the built-in factors of defaultEfficiency in
# compiler/lib/CostModel/Calibration.cpp (H100/H200 and A100 families). Only
# the starting point: if these drift from the code the fit takes longer, and
# "before" is always predicted with the code's own factors.
BUILTIN = {
    "matmul": 0.60, "attention": 0.34, "hbm": 0.80, "nvlink": 0.80,
    "nvls": 1.06, "network": 0.90, "nvlink_latency": 3e-6,
    "network_latency": 1e-5, "dp_overlap": 0.5, "kernel_overhead": 2.5e-5,
    "gemm_fill": 1.2e6, "gemm_depth": 512.0, "host": 0.80,
}
BUILTIN_A100 = dict(BUILTIN, matmul=0.66, attention=0.50, hbm=0.85,
                    nvlink=0.78, nvls=0.0, gemm_fill=1.2e6 * 108 / 132)

# Search bounds: physically possible values, wide enough not to decide a fit
# (a factor that ends on one is reported).
BOUNDS = {
    "matmul": (0.02, 1.0), "attention": (0.02, 1.0), "hbm": (0.02, 1.0),
    "nvlink": (0.02, 1.0), "nvls": (0.05, 2.0), "network": (0.02, 1.0),
    "nvlink_latency": (1e-8, 1e-3), "network_latency": (1e-8, 1e-3),
    "dp_overlap": (1e-3, 1.0), "kernel_overhead": (1e-7, 1e-2),
    "gemm_fill": (1e3, 1e9), "gemm_depth": (1.0, 1e5), "host": (0.02, 1.0),
}
DEFAULTS_BY_CATEGORY = {
    "decode": ["hbm", "kernel_overhead"],
    "inference": ["matmul"],
    "train": ["matmul"],
    "attention": ["attention"],
    "collective": ["nvlink", "network"],
}
MAX_EVALS_PER_FACTOR = 150  # of the Nelder-Mead search
NM_XTOL = 1e-3              # simplex size (log space) that ends a run
GN_ITERS = 6                # Gauss-Newton polish steps after it
JAC_STEP = 1e-3             # log-space step of finite differences; the
                            # predictions have 3 decimals, so not smaller
PROBE_STEP = 0.2            # log-space step of the sensitivity probe
BAD_PREDICTION = 50.0       # residual for a prediction <= 0


class FitError(Exception):
    pass


def fail(msg):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_rows(path, hardware, ids):
    """The rows of `path` on `hardware` whose id matches `ids`, checked."""
    records = []  # (first line, fields): a quoted field may span lines
    try:
        with open(path, newline="") as f:
            reader, last = csv.reader(f), 0
            for fields in reader:
                records.append((last + 1, fields))
                last = reader.line_num
    except OSError as e:
        raise FitError(f"cannot read {path}: {e.strerror}; pass the CSV that "
                       "rlhf-bench-gpu-runtime wrote (DIR/runtime-<gpu>.csv)")
    except (csv.Error, UnicodeDecodeError) as e:
        raise FitError(f"{path}:{last + 1}: {e}; fix this row")
    if not records or [c.strip() for c in records[0][1]] != COLUMNS:
        raise FitError(f"{path}:1: expected the header {','.join(COLUMNS)}; "
                       "use the columns of docs/validation/measured-h100.csv")
    rows, seen = [], {}
    for n, f in records[1:]:
        if not f or (len(f) == 1 and not f[0].strip()):
            continue
        if len(f) != len(COLUMNS):
            raise FitError(f"{path}:{n}: expected {len(COLUMNS)} columns, got "
                           f"{len(f)}; fix or delete this row")
        row = dict(zip(COLUMNS, f))
        row["line"] = n
        for c in INT_COLUMNS:
            if row[c].strip() and not re.fullmatch(r"\d+", row[c].strip()):
                raise FitError(f"{path}:{n}: column '{c}' is '{row[c]}', "
                               "expected a whole number or nothing; fix or "
                               "delete this row")
        try:
            value = float(row["value"])
        except ValueError:
            value = float("nan")
        if not (value > 0 and math.isfinite(value)):
            raise FitError(f"{path}:{n}: value '{row['value']}' is not a "
                           "positive number; fix or delete this row")
        row["value"] = value
        if row["id"] in seen:
            raise FitError(f"{path}:{n}: id '{row['id']}' is also on line "
                           f"{seen[row['id']]}; give every row its own id")
        seen[row["id"]] = n
        if row["hardware"] == hardware and ids.search(row["id"]):
            rows.append(row)
    if not rows:
        raise FitError(f"no row of {path} is on {hardware} with an id matching "
                       f"'{ids.pattern}'; check --hardware and --ids")
    return rows


def find_validate(explicit):
    if explicit:
        # A path, or a name on PATH (lit's tool directories are there).
        found = explicit if os.access(explicit, os.X_OK) and \
            os.path.isfile(explicit) else shutil.which(explicit)
        if not found:
            raise FitError(f"--validate {explicit} is not an executable; pass "
                           "the path of build/bin/rlhf-cost-validate")
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    built = os.path.join(here, "..", "build", "bin", "rlhf-cost-validate")
    if os.access(built, os.X_OK):
        return os.path.normpath(built)
    found = shutil.which("rlhf-cost-validate")
    if found:
        return found
    raise FitError("cannot find rlhf-cost-validate; build it (cmake --build "
                   "build --target rlhf-cost-validate) or pass --validate PATH")


class Oracle:
    """Predicts the selected rows with rlhf-cost-validate."""

    def __init__(self, exe, rows, hardware, tmp):
        self.exe, self.hardware, self.runs = exe, hardware, 0
        self.csv = os.path.join(tmp, "rows.csv")
        self.cal = os.path.join(tmp, "calibration.json")
        self.pred = os.path.join(tmp, "predictions.csv")
        with open(self.csv, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(COLUMNS)
            for r in rows:
                # The oracle splits rows by line: no newline inside a field.
                w.writerow([str(r[c]).replace("\n", " ").replace("\r", " ")
                            for c in COLUMNS])

    def predict(self, factors):
        """id -> predicted value; factors None: the built-in ones."""
        cmd = [self.exe, self.csv, "--emit-predictions", self.pred]
        if factors is not None:
            write_calibration(self.cal, self.hardware, factors)
            cmd += ["--calibration", self.cal]
        self.runs += 1
        try:
            r = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            raise FitError(f"cannot run {self.exe}: {e.strerror}; pass the "
                           "path of build/bin/rlhf-cost-validate as --validate")
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or ["no message"])[-1]
            raise FitError(f"rlhf-cost-validate failed (exit {r.returncode}): "
                           f"{why}; rerun `{' '.join(cmd)}` to see why")
        with open(self.pred, newline="") as f:
            return {p["id"]: float(p["predicted"]) for p in csv.DictReader(f)}


def write_calibration(path, hardware, factors):
    with open(path, "w") as f:
        json.dump({hardware: factors}, f, indent=2)
        f.write("\n")


def residuals(pred, rows):
    return [math.log(pred[r["id"]] / r["value"]) if pred[r["id"]] > 0
            else BAD_PREDICTION for r in rows]


def nelder_mead(f, x0, lo, hi, step, max_evals):
    """Minimises f over the box [lo, hi] (points clamped into it); returns
    (best x, best f). Deterministic: the start simplex steps each axis."""
    n = len(x0)

    def clamp(x):
        return [min(max(v, a), b) for v, a, b in zip(x, lo, hi)]

    pts = [clamp(x0)]
    for i in range(n):
        x = list(pts[0])
        x[i] += step if x[i] + step <= hi[i] else -step
        pts.append(clamp(x))
    vals = [f(p) for p in pts]
    evals = n + 1
    while evals < max_evals:
        order = sorted(range(n + 1), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        size = max(abs(p[i] - pts[0][i]) for p in pts[1:] for i in range(n))
        if size < NM_XTOL or vals[-1] - vals[0] < 1e-14:
            break
        c = [sum(p[i] for p in pts[:-1]) / n for i in range(n)]
        worst = pts[-1]
        xr = clamp([c[i] + (c[i] - worst[i]) for i in range(n)])
        fr = f(xr)
        evals += 1
        if fr < vals[0]:
            xe = clamp([c[i] + 2 * (c[i] - worst[i]) for i in range(n)])
            fe = f(xe)
            evals += 1
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            towards = xr if fr < vals[-1] else worst
            xc = clamp([c[i] + 0.5 * (towards[i] - c[i]) for i in range(n)])
            fc = f(xc)
            evals += 1
            if fc < min(fr, vals[-1]):
                pts[-1], vals[-1] = xc, fc
            else:  # shrink towards the best point
                for j in range(1, n + 1):
                    pts[j] = [pts[0][i] + 0.5 * (pts[j][i] - pts[0][i])
                              for i in range(n)]
                    vals[j] = f(pts[j])
                evals += n
    best = min(range(n + 1), key=lambda i: vals[i])
    return pts[best], vals[best]


def jacobian(res_at, x, hi):
    """Residuals at x and their finite differences in log space, one column
    per factor (a backward step at an upper bound)."""
    r0 = res_at(x)
    cols = []
    for i in range(len(x)):
        y = list(x)
        h = JAC_STEP if y[i] + JAC_STEP <= hi[i] else -JAC_STEP
        y[i] += h
        cols.append([(a - b) / h for a, b in zip(res_at(y), r0)])
    return r0, cols


def gauss_newton(res_at, x, lo, hi):
    """Polishes the minimum Nelder-Mead found: its last digits cost many
    more runs than a few Gauss-Newton steps. A step is kept only if it lowers
    the sum of squares (halved up to 4 times), so the polish never makes the
    fit worse, e.g. at a kink of the model's max()es."""
    n = len(x)
    for _ in range(GN_ITERS):
        r0, cols = jacobian(res_at, x, hi)
        jtj = [[sum(a * b for a, b in zip(ci, cj)) for cj in cols]
               for ci in cols]
        inv = invert(jtj)
        if inv is None:
            break
        g = [sum(a * b for a, b in zip(c, r0)) for c in cols]
        step = [-sum(inv[i][j] * g[j] for j in range(n)) for i in range(n)]
        base = sum(v * v for v in r0)
        for _ in range(5):
            y = [min(max(v + d, a), b) for v, d, a, b in zip(x, step, lo, hi)]
            if sum(v * v for v in res_at(y)) < base:
                break
            step = [d / 2 for d in step]
        else:
            break
        moved = max(abs(a - b) for a, b in zip(x, y))
        x = y
        if moved < 1e-7:
            break
    return x


def invert(m):
    """Gauss-Jordan inverse of a small symmetric matrix; None if singular."""
    n = len(m)
    a = [list(row) + [float(i == j) for j in range(n)]
         for i, row in enumerate(m)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[piv][col]) < 1e-12:
            return None
        a[col], a[piv] = a[piv], a[col]
        p = a[col][col]
        a[col] = [v / p for v in a[col]]
        for r in range(n):
            if r != col:
                k = a[r][col]
                a[r] = [v - k * w for v, w in zip(a[r], a[col])]
    return [row[n:] for row in a]


def median(v):
    s = sorted(v)
    if not s:
        return 0.0
    k = len(s) // 2
    return s[k] if len(s) % 2 else (s[k - 1] + s[k]) / 2


def pct(p, m):
    return (p - m) / m * 100.0


def fmt(v):
    return f"{v:.4g}"


def parse_args(argv):
    known = ", ".join(BOUNDS)
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("measured", metavar="MEASURED.csv",
                   help="rows in the columns of "
                        "docs/validation/measured-h100.csv")
    p.add_argument("--out", required=True, metavar="CALIB.json",
                   help="calibration file to write (rlhf-cost-validate "
                        "--calibration, rlhfc --calibration)")
    p.add_argument("--hardware", default="H100_SXM",
                   help="hardware preset whose rows to fit and whose factors "
                        "to write (default: H100_SXM)")
    p.add_argument("--factors", metavar="A,B,...",
                   help="factors to fit instead of the defaults; known: "
                        + known)
    p.add_argument("--ids", default="", metavar="REGEX",
                   help="only rows whose id matches this Python regex")
    p.add_argument("--validate", metavar="PATH",
                   help="rlhf-cost-validate to predict with (default: "
                        "build/bin/rlhf-cost-validate, then PATH)")
    return p.parse_args(argv)


def run(args):
    try:
        ids = re.compile(args.ids)
    except re.error as e:
        raise FitError(f"--ids '{args.ids}' is not a regex: {e}; fix the "
                       "pattern")
    explicit = None
    if args.factors is not None:
        explicit = [s.strip() for s in args.factors.split(",") if s.strip()]
        for name in explicit:
            if name not in BOUNDS:
                raise FitError(f"unknown factor '{name}' in --factors; known: "
                               + ", ".join(BOUNDS))
        if not explicit:
            raise FitError("--factors is empty; name at least one factor")
        explicit = list(dict.fromkeys(explicit))
    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder):
        raise FitError(f"cannot write {args.out}: no folder {folder}; create "
                       "it or pass another --out")
    rows = read_rows(args.measured, args.hardware, ids)
    exe = find_validate(args.validate)
    builtin = BUILTIN_A100 if args.hardware.startswith(("A100", "A800")) \
        else BUILTIN
    with tempfile.TemporaryDirectory(prefix="fit-calibration.") as tmp:
        oracle = Oracle(exe, rows, args.hardware, tmp)
        before = oracle.predict(None)
        missing = [r["id"] for r in rows if r["id"] not in before]
        rows = [r for r in rows if r["id"] in before]
        if not rows:
            raise FitError(f"rlhf-cost-validate predicts none of the selected "
                           f"rows of {args.measured} ({', '.join(missing)}); "
                           "use rows of models and metrics it knows")
        cats = sorted({r["category"] for r in rows})
        names = explicit or list(dict.fromkeys(
            f for c in cats for f in DEFAULTS_BY_CATEGORY.get(c, [])))
        if not names:
            raise FitError(f"no default factors for the categories "
                           f"{', '.join(cats)}; name them with --factors")
        start = {k: min(max(builtin[k], BOUNDS[k][0]), BOUNDS[k][1])
                 for k in names}
        cache = {}

        def objective_at(x, keys):
            key = tuple(round(v, 12) for v in x)
            if key not in cache:
                fac = {k: math.exp(v) for k, v in zip(keys, x)}
                res = residuals(oracle.predict(fac), rows)
                cache[key] = (sum(r * r for r in res) / len(res), res)
            return cache[key]

        # A factor that moves no prediction cannot be fitted: probe each once.
        x0 = [math.log(start[k]) for k in names]
        _, r0 = objective_at(x0, names)
        keep = []
        for i, k in enumerate(names):
            x = list(x0)
            up = x[i] + PROBE_STEP <= math.log(BOUNDS[k][1])
            x[i] += PROBE_STEP if up else -PROBE_STEP
            _, r = objective_at(x, names)
            if max(abs(a - b) for a, b in zip(r, r0)) > 1e-6:
                keep.append(k)
            elif explicit:
                raise FitError(f"factor '{k}' changes no prediction of the "
                               f"selected rows; leave it out of --factors")
            else:
                print(f"note: {k} changes no prediction of these rows; not "
                      "fitted")
        names = keep
        if not names:
            raise FitError("none of the default factors changes a prediction "
                           "of these rows; name factors with --factors")
        cache.clear()  # keys are positions in `names`, which may have shrunk
        lo = [math.log(BOUNDS[k][0]) for k in names]
        hi = [math.log(BOUNDS[k][1]) for k in names]

        def f(x):
            return objective_at(x, names)[0]

        budget = MAX_EVALS_PER_FACTOR * max(2, len(names))
        x, _ = nelder_mead(f, [math.log(start[k]) for k in names], lo, hi,
                           0.3, budget)
        res_at = lambda y: objective_at(y, names)[1]  # noqa: E731
        x = gauss_newton(res_at, x, lo, hi)
        fitted = {k: float(fmt(math.exp(v))) for k, v in zip(names, x)}
        note_correlations(names, jacobian(res_at, x, hi)[1])

        # What the written file gives, not the search's last point.
        write_calibration(args.out, args.hardware, fitted)
        after = oracle.predict(fitted)
        runs = oracle.runs
    report(args, rows, missing, names, start, fitted, before, after, runs)


def note_correlations(names, cols):
    """Warns about factors the rows cannot tell apart: the correlation of
    their least-squares estimates, from the Jacobian at the fit."""
    if len(names) < 2:
        return
    jtj = [[sum(a * b for a, b in zip(ci, cj)) for cj in cols] for ci in cols]
    cov = invert(jtj)
    if cov is None:
        print("note: the rows cannot separate the factors " + ", ".join(names)
              + "; fit fewer of them (--factors)")
        return
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            den = math.sqrt(abs(cov[i][i] * cov[j][j]))
            corr = cov[i][j] / den if den > 0 else 0.0
            if abs(corr) > 0.995:
                print(f"note: {names[i]} and {names[j]} are nearly "
                      f"interchangeable on these rows (correlation "
                      f"{corr:+.3f}); their values are uncertain, fit one "
                      "of them (--factors)")


def report(args, rows, missing, names, start, fitted, before, after, runs):
    cats = {}
    for r in rows:
        cats[r["category"]] = cats.get(r["category"], 0) + 1
    print(f"{len(rows)} rows of {args.measured} on {args.hardware} ("
          + ", ".join(f"{c} {n}" for c, n in sorted(cats.items()))
          + f"); fitted {', '.join(names)} with {runs} runs of "
          "rlhf-cost-validate")
    if missing:
        print("not predicted (left out): " + ", ".join(missing))
    print("\nfitted factors (built-in -> fitted):")
    for k in names:
        lo, hi = BOUNDS[k]
        edge = "  (at its bound: check the rows)" if (
            fitted[k] <= lo * 1.001 or fitted[k] >= hi * 0.999) else ""
        print(f"  {k:<16} {fmt(start[k]):>10} -> {fmt(fitted[k])}{edge}")
    w = max(len(r["id"]) for r in rows)
    print("\nper-row error (predicted vs measured):")
    print(f"  {'id':<{w}} {'measured':>12} {'before':>12} {'error':>8} "
          f"{'after':>12} {'error':>8}")
    eb, ea = [], []
    for r in rows:
        m, b, a = r["value"], before[r["id"]], after[r["id"]]
        eb.append(abs(pct(b, m)))
        ea.append(abs(pct(a, m)))
        print(f"  {r['id']:<{w}} {m:>12.6g} {b:>12.6g} {pct(b, m):>+7.2f}% "
              f"{a:>12.6g} {pct(a, m):>+7.2f}%")
    print(f"\nmedian abs error: before {median(eb):.1f}%, after "
          f"{median(ea):.1f}%")
    print(f"wrote {args.out}")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        run(args)
    except FitError as e:
        fail(str(e))
    except BrokenPipeError:
        # The reader of stdout left (| head): stop without a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as e:
        fail(f"{e.filename or args.out}: {e.strerror}; check that the path "
             "is writable")


if __name__ == "__main__":
    main()
