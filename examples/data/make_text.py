#!/usr/bin/env python3
"""Writes text.jsonl for examples/sft_tiny.rlhf: 96 short lines of counting
("count 7: 7 8 9 10 11 12"), as {"text": ...}. A character-level tiny model
learns the pattern in a few dozen SFT steps on a CPU, so its loss visibly
falls."""
import json
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "text.jsonl"
with open(out, "w") as f:
    for start in range(96):
        n = 4 + start % 5
        nums = " ".join(str(start + i) for i in range(n))
        f.write(json.dumps({"text": f"count {start}: {nums}"}) + "\n")
