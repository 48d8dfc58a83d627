"""The unigram baseline of a text run: the cross-entropy (nats per piece) of the held-out
documents of the shipped State of the Union corpus under the training documents' piece
frequencies (add-one smoothed), read with the run's own tokenizer.json. A masked LM that has
learned anything from context predicts masked pieces below it.

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers==0.23.2
    /tmp/tokvenv/bin/python scripts/experiments/text_unigram_baseline.py RUN/tokenizer.json

The held-out rule is the text task's (crates/tasks/src/generators/text/corpus.rs): every
document at a 0-based position of 9 mod 10 in file order.
"""
import collections
import gzip
import json
import math
import pathlib
import sys

from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
docs = [json.loads(l)["text"] for l in gzip.open(pathlib.Path(__file__).resolve().parents[2] / 'data/state-of-the-union/addresses.jsonl.gz','rt')]
train = [d for i,d in enumerate(docs) if i % 10 != 9]; held = [d for i,d in enumerate(docs) if i % 10 == 9]
c = collections.Counter()
for e in tok.encode_batch(train, add_special_tokens=False): c.update(e.ids)
total = sum(c.values()); V = tok.get_vocab_size()
ll = 0; n = 0
for e in tok.encode_batch(held, add_special_tokens=False):
    for i in e.ids:
        ll += math.log((c[i] + 1) / (total + V)); n += 1
print("docs", len(docs), "train pieces", total, "held pieces", n, "unigram held-out cross-entropy (nats)", -ll/n)
