#!/usr/bin/env python3
"""Prints the named fields of every JSONL record, concatenated, one record per
line: a corpus to train a sentencepiece tokenizer on.

  jsonl_text.py FILE FIELD[,FIELD...]
"""
import json
import sys

fields = sys.argv[2].split(",")
with open(sys.argv[1]) as f:
    for line in f:
        if line.strip():
            record = json.loads(line)
            print("".join(record[k] for k in fields))
