#!/usr/bin/env python3
"""Writes sums.jsonl for the tiny examples: every "a+b=" with a, b in 0..4,
as {"prompt": "3+4=", "answer": "7"} lines (25 prompts: few enough that a
freshly initialised tiny policy learns them with RL in a couple of minutes
on a CPU)."""
import json
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "sums.jsonl"
with open(out, "w") as f:
    for a in range(5):
        for b in range(5):
            f.write(json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b)}) + "\n")
