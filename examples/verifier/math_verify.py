#!/usr/bin/env python3
"""A math-answer checker for script_reward (lang/README.md, section 5).

script_reward runs this command as a pool of long-lived workers. Each worker
reads one JSON request per line on stdin, for example

  {"row": 5, "step": 1, "prompt": "3+4=", "response": "7", "answer": "7",
   "fields": {"prompt": "3+4=", "answer": "7"}}

and writes one reply per line on stdout, echoing the row: {"row": 5,
"score": 1.0} (the echo lets the runtime catch a line out of turn). Anything
else goes to stderr. It exits at the end of its input.

The score is 1 when the response's final answer equals the reference's, as
numbers where both are numbers (so "7.0", "7" and "\\frac{14}{2}" agree),
else as text without spaces; otherwise 0. A final answer is the content of
the last \\boxed{...}, else what follows the last "####" (GSM8K), else, in
the response, the last number in the text, and in the reference, all of it.

  --log FILE  append every request with its score to FILE (for tests)
"""
import argparse
import json
import re
import sys
from fractions import Fraction

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")
FRAC = re.compile(r"\\[dt]?frac\{(-?\d+)\}\{(\d+)\}")


def boxed(text):
    """The content of the last \\boxed{...}, braces balanced, or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 1, start + len("\\boxed{")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return None


def final_answer(text, reference=False):
    inner = boxed(text)
    if inner is not None:
        return inner.strip()
    if "####" in text:
        return text.rsplit("####", 1)[1].strip()
    if reference:  # a bare reference is the answer itself
        return text.strip()
    numbers = NUMBER.findall(text)
    return numbers[-1] if numbers else text.strip()


def as_number(text):
    text = FRAC.sub(r"\1/\2", text.strip())
    text = text.rstrip(".").replace(",", "").replace("$", "").replace(" ", "")
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def score(response, answer):
    got, want = final_answer(response), final_answer(answer, reference=True)
    a, b = as_number(got), as_number(want)
    if a is not None and b is not None:
        return 1.0 if a == b else 0.0
    return 1.0 if "".join(got.split()) == "".join(want.split()) else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log")
    args = ap.parse_args()
    log = open(args.log, "a") if args.log else None
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        req = json.loads(line)
        s = score(req["response"], req["answer"])
        if log:
            log.write(json.dumps({"request": req, "score": s}) + "\n")
            log.flush()
        sys.stdout.write(json.dumps({"row": req["row"], "score": s}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
