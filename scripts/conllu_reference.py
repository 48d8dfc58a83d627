#!/usr/bin/env python3
"""Reference reading of headlab's CoNLL-U fixtures by PyPI's `conllu` package (issue 38).

Reads each .conllu file under crates/tasks/tests/fixtures/ with `conllu.parse` and writes
conllu-reference.json beside them: per file, per sentence, the forms, heads and labels of
the words of the basic tree (integer IDs; multiword tokens and empty nodes left out) and the
sent_id / text metadata. crates/tasks/tests/conllu.rs reads the same files with headlab's
reader and compares, so CI needs no Python.

  pip install conllu
  python3 scripts/conllu_reference.py
"""

import json
from pathlib import Path

import conllu

FIXTURES = Path("crates/tasks/tests/fixtures")


def main():
    from importlib.metadata import version
    reference = {"conllu": version("conllu"), "files": {}}
    for path in sorted(FIXTURES.glob("*.conllu")):
        sentences = []
        for sentence in conllu.parse(path.read_text()):
            words = [t for t in sentence if isinstance(t["id"], int)]
            sentences.append({
                "sent_id": sentence.metadata.get("sent_id"),
                "text": sentence.metadata.get("text"),
                "words": [t["form"] for t in words],
                "heads": [t["head"] for t in words],
                "relations": [t["deprel"] for t in words],
            })
        reference["files"][path.name] = sentences
        print(f"{path}: {len(sentences)} sentences")
    (FIXTURES / "conllu-reference.json").write_text(json.dumps(reference, indent=1) + "\n")


if __name__ == "__main__":
    main()
