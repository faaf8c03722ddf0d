#!/usr/bin/env python3
"""Our runtime's inference, train and decode steps beside PyTorch's, on this
CPU.

The cost model's H100 figures are fitted to scripts/measure-llama-h100.py's
PyTorch rows, so on a machine without a GPU our runtime against that same
script is the nearest check of runtime/model: the same points (cpu_mid,
LLaMA-2's vocabulary at width 1024) through `rlhf-bench-gpu-runtime
--cpu-compare` and `measure-llama-h100.py --cpu`, alternated for two rounds,
the best of each kept. A CPU is compute-bound where an H100 is often
memory-bound, so this finds extra work, not extra bytes. Decode is greedy,
its tokens/s over the prefill and every step: ours runs
LlamaModel::generate, PyTorch its prefill plus eager steps at the mean
context (on a GPU both replay CUDA graphs; here neither does).

  python3 bench/runtime-vs-pytorch-cpu.py [BUILD_DIR] [--fp32|--bf16]
                                                     (default: build)

Both sides compute in bf16 where the CPU has it natively (AVX-512 BF16 or
AMX) and in fp32 elsewhere: emulated bf16 (AVX2) runs about 6 times slower
than fp32 on both sides and measures the conversions, not the runtime.
--fp32 or --bf16 chooses.

Run it with the Python that has torch (/opt/rlhfc/venv/bin/python). The last
line is `runtime/PyTorch on the CPU geomean: X.XX`.
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rows(cmd, pattern):
    """{(category, batch, tokens in, tokens out): tok/s} from the lines of
    `cmd`'s output that `pattern` matches (groups: category, batch, in, out,
    tok/s; out is 0 outside generation)."""
    text = subprocess.run(cmd, check=True, capture_output=True,
                          text=True).stdout
    return {(m[1], int(m[2]), int(m[3]), int(m[4] or 0)): float(m[5])
            for m in re.finditer(pattern, text, re.M)}


def ours(build, out, fp32):
    return rows([os.path.join(build, "bin", "rlhf-bench-gpu-runtime"),
                 "--cpu-compare", "--out", out] + (["--fp32"] if fp32 else []),
                r"^(inference|train|decode)\s+cpu_mid\s+batch\s+(\d+)\s+"
                r"(\d+)\+(\d+)\s+([\d.]+) tok/s")


def pytorch(fp32):
    return rows([sys.executable,
                 os.path.join(ROOT, "scripts", "measure-llama-h100.py"), "--cpu"]
                + (["--fp32"] if fp32 else []),
                r"^(inference|train|generate) model=cpu_mid .*?batch=(\d+) "
                r"(?:seq|prompt)=(\d+) (?:gen=(\d+) )?"
                r".*?tokens_per_sec=([\d.]+)")


def native_bf16():
    import torch
    return torch.cpu._is_avx512_bf16_supported() or \
        torch.cpu._is_amx_tile_supported()


def main():
    ap = argparse.ArgumentParser(description="our runtime beside PyTorch on the CPU")
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"),
                    help="the build folder holding bin/rlhf-bench-gpu-runtime")
    dt = ap.add_mutually_exclusive_group()
    dt.add_argument("--fp32", action="store_true", help="compute in fp32")
    dt.add_argument("--bf16", action="store_true",
                    help="compute in bf16 (emulated, and slow, without AVX-512 BF16 or AMX)")
    args = ap.parse_args()
    build = args.build
    fp32 = args.fp32 or (not args.bf16 and not native_bf16())
    why = "" if args.fp32 or args.bf16 else \
        f" (this CPU {'lacks' if fp32 else 'has'} native bf16)"
    print(f"dtype: {'fp32' if fp32 else 'bf16'}{why}")
    best_ours, best_torch = {}, {}
    with tempfile.TemporaryDirectory() as out:
        for round_ in range(2):
            print(f"round {round_ + 1} of 2 ...", file=sys.stderr, flush=True)
            for got, best in ((ours(build, out, fp32), best_ours),
                              (pytorch(fp32), best_torch)):
                for k, v in got.items():
                    k = ("decode",) + k[1:] if k[0] == "generate" else k
                    best[k] = max(best.get(k, 0.0), v)
    points = sorted(set(best_ours) & set(best_torch))
    if not points or len(points) != len(best_ours):
        sys.exit(f"runtime-vs-pytorch-cpu: the points differ: ours "
                 f"{sorted(best_ours)}, PyTorch's {sorted(best_torch)}")
    print(f"{'call':<10} {'batch':>5} {'tokens':>8} {'runtime tok/s':>14} "
          f"{'PyTorch tok/s':>14} {'runtime/PyTorch':>16}")
    logs = []
    for k in points:
        cat, batch, n_in, n_out = k
        a, b = best_ours[k], best_torch[k]
        logs.append(math.log(a / b))
        tokens = f"{n_in}+{n_out}" if n_out else str(n_in)
        print(f"{cat:<10} {batch:>5} {tokens:>8} {a:>14.1f} {b:>14.1f} "
              f"{a / b:>16.2f}")
    print(f"runtime/PyTorch on the CPU geomean: "
          f"{math.exp(sum(logs) / len(logs)):.2f}")


if __name__ == "__main__":
    main()
