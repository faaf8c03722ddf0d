#!/usr/bin/env python3
"""Writes the data of examples/sft_tiny.rlhf: short lines of counting
("count 7: 7 8 9 10 11 12"), as {"text": ...}. A character-level tiny model
learns the pattern in a few dozen SFT steps on a CPU, so its loss visibly
falls.

  make_text.py [OUT]            text.jsonl: counts from 0 to 95
  make_text.py OUT --held-out   text_held.jsonl: counts from 96 to 119,
                                which training never sees (eval = held)
"""
import argparse
import json

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("out", nargs="?")
p.add_argument("--held-out", action="store_true")
a = p.parse_args()
first, count = (96, 24) if a.held_out else (0, 96)
out = a.out or ("text_held.jsonl" if a.held_out else "text.jsonl")
with open(out, "w") as f:
    for start in range(first, first + count):
        n = 4 + start % 5
        nums = " ".join(str(start + i) for i in range(n))
        f.write(json.dumps({"text": f"count {start}: {nums}"}) + "\n")
