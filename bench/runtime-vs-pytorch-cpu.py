#!/usr/bin/env python3
"""Our runtime's inference and train steps beside PyTorch's, on this CPU.

The cost model's H100 figures are fitted to scripts/measure-llama-h100.py's
PyTorch rows, so on a machine without a GPU our runtime against that same
script is the nearest check of runtime/model: the same points (cpu_mid,
LLaMA-2's vocabulary at width 1024, bf16) through `rlhf-bench-gpu-runtime
--cpu-compare` and `measure-llama-h100.py --cpu`, alternated for two rounds,
the best of each kept. A CPU is compute-bound where an H100 is often
memory-bound, so this finds extra work, not extra bytes.

  python3 bench/runtime-vs-pytorch-cpu.py [BUILD_DIR]     (default: build)

Run it with the Python that has torch (/opt/rlhfc/venv/bin/python). The last
line is `runtime/PyTorch on the CPU geomean: X.XX`.
"""
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rows(cmd, pattern):
    """{(category, batch, seq): tok/s} from the lines of `cmd`'s output that
    `pattern` matches (groups: category, batch, seq, tok/s)."""
    text = subprocess.run(cmd, check=True, capture_output=True,
                          text=True).stdout
    return {(m[1], int(m[2]), int(m[3])): float(m[4])
            for m in re.finditer(pattern, text, re.M)}


def ours(build, out):
    return rows([os.path.join(build, "bin", "rlhf-bench-gpu-runtime"),
                 "--cpu-compare", "--out", out],
                r"^(inference|train)\s+cpu_mid\s+batch\s+(\d+)\s+(\d+)\+0\s+"
                r"([\d.]+) tok/s")


def pytorch():
    return rows([sys.executable,
                 os.path.join(ROOT, "scripts", "measure-llama-h100.py"), "--cpu"],
                r"^(inference|train) model=cpu_mid .*?batch=(\d+) seq=(\d+) "
                r".*?tokens_per_sec=([\d.]+)")


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    best_ours, best_torch = {}, {}
    with tempfile.TemporaryDirectory() as out:
        for round_ in range(2):
            print(f"round {round_ + 1} of 2 ...", file=sys.stderr, flush=True)
            for got, best in ((ours(build, out), best_ours),
                              (pytorch(), best_torch)):
                for k, v in got.items():
                    best[k] = max(best.get(k, 0.0), v)
    points = sorted(set(best_ours) & set(best_torch))
    if not points or len(points) != len(best_ours):
        sys.exit(f"runtime-vs-pytorch-cpu: the points differ: ours "
                 f"{sorted(best_ours)}, PyTorch's {sorted(best_torch)}")
    print(f"{'call':<10} {'batch':>5} {'seq':>5} {'runtime tok/s':>14} "
          f"{'PyTorch tok/s':>14} {'runtime/PyTorch':>16}")
    logs = []
    for cat, batch, seq in points:
        a, b = best_ours[(cat, batch, seq)], best_torch[(cat, batch, seq)]
        logs.append(math.log(a / b))
        print(f"{cat:<10} {batch:>5} {seq:>5} {a:>14.1f} {b:>14.1f} "
              f"{a / b:>16.2f}")
    print(f"runtime/PyTorch on the CPU geomean: "
          f"{math.exp(sum(logs) / len(logs)):.2f}")


if __name__ == "__main__":
    main()
