#!/usr/bin/env python3
"""near.py OUT.json KEY=JSON... : each KEY of the JSON object in OUT.json
equals the given JSON value (numbers or nested lists) within 1e-5 relative
or absolute. Prints what it compared; exits 1 on the first mismatch."""
import json
import math
import sys


def close(a, b, path):
    if isinstance(b, list):
        if not isinstance(a, list) or len(a) != len(b):
            sys.exit(f"FAIL: {path}: got {a!r}, want {b!r}")
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, f"{path}[{i}]")
    elif not math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-5):
        sys.exit(f"FAIL: {path}: got {a!r}, want {b!r}")


out = json.load(open(sys.argv[1]))
for arg in sys.argv[2:]:
    key, want = arg.split("=", 1)
    if key not in out:
        sys.exit(f"FAIL: no output '{key}' in {sorted(out)}")
    close(out[key], json.loads(want), key)
    print(f"OK: {key}")
