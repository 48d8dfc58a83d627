#!/usr/bin/env python3
"""The reference half of scripts/bench/bench-ewt.sh: Hugging Face `transformers` computing
what `headlab inspect`'s relation stage computes from MiniLM on a treebank, every layer's
attention on every sentence taken back to words, on the same CPU threads.

Reads the CoNLL-U file's sentences (integer-ID words; `conllu` is not needed), runs
`BertModel` (eager attention, float32, `torch.set_num_threads(THREADS)`) on their words
pre-split (`is_split_into_words`), in batches of BATCH padded to their longest with the
padding masked, and takes each layer's attention to words (to a word: the sum over its
pieces; from a word: the mean; scripts/fixtures/word_attention.py, each sentence's padding
cut first). Prints one line per ordering: the sentences in file order
(as a first script would batch them) and by number of words, shortest first (as headlab
batches them, by pieces).

    python3 scripts/bench/ewt_transformers.py CHECKPOINT_DIR FILE.conllu [THREADS] [BATCH]
"""

import sys
import time
from pathlib import Path

import torch
import transformers
from transformers import BertModel, BertTokenizerFast

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
from word_attention import aggregate_torch  # noqa: E402  (scripts/fixtures/word_attention.py)


def sentences(path):
    words, out = [], []
    for line in open(path, encoding="utf-8"):
        if not line.strip():
            if words:
                out.append(words)
            words = []
        elif not line.startswith("#"):
            cells = line.split("\t")
            if cells[0].isdigit():
                words.append(cells[1])
    if words:
        out.append(words)
    return out


def run(model, tokenizer, batches):
    start = time.perf_counter()
    for batch in batches:
        encoded = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
        with torch.no_grad():
            out = model(**encoded, output_attentions=True)
        for b in range(len(batch)):
            # BERT pads on the right: the real pieces, [CLS] to [SEP], come first.
            real = int(encoded["attention_mask"][b].sum())
            ids = encoded.word_ids(b)[:real]
            for layer in out.attentions:
                # [heads, n + 2, n + 2] over [CLS], the words, [SEP]
                aggregate_torch(layer[b, :, :real, :real], ids)
    return time.perf_counter() - start


def main():
    checkpoint, path = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 32
    torch.set_num_threads(threads)
    tokenizer = BertTokenizerFast(tokenizer_file=f"{checkpoint}/tokenizer.json")
    model = BertModel.from_pretrained(checkpoint, attn_implementation="eager").eval()
    every = sentences(path)
    for name, order in [("file order", every), ("shortest first", sorted(every, key=len))]:
        batches = [order[i:i + size] for i in range(0, len(order), size)]
        seconds = run(model, tokenizer, batches)
        print(f"transformers {transformers.__version__}, torch {torch.__version__} ({name}, "
              f"{threads} threads, batches of {size}): {len(every)} sentences in {seconds:.1f} s")


if __name__ == "__main__":
    main()
