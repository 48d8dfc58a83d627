#!/usr/bin/env python3
"""Writes data/sample.jsonl, the sample dataset for the `file` task.

Each record is a random sequence of 8 tokens from a vocabulary of 8, and its target is the
sequence rotated left by one: target[i] = input[(i + 1) % 8]. A fixed seed keeps the file
reproducible, so rerunning this script leaves it unchanged.
"""

import json
import random
from pathlib import Path

SEED = 20240601
RECORDS = 400
SEQ_LEN = 8
VOCAB = 8


def main() -> None:
    rng = random.Random(SEED)
    out = Path(__file__).resolve().parent.parent / "data" / "sample.jsonl"
    lines = []
    for _ in range(RECORDS):
        tokens = [rng.randrange(VOCAB) for _ in range(SEQ_LEN)]
        target = [tokens[(i + 1) % SEQ_LEN] for i in range(SEQ_LEN)]
        lines.append(json.dumps({"input": tokens, "target": target}, separators=(",", ":")))
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
