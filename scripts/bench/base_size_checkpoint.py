#!/usr/bin/env python3
"""A random base-size RoBERTa checkpoint for timing `headlab import` (issue 53, item 6).

Writes DIR/config.json and DIR/model.safetensors of a RobertaForMaskedLM with roberta-base's
shape (12 layers, 12 heads, width 768, feed-forward 3072, 50,265 pieces, 514 positions;
about 125M parameters, 499 MB in float32) and random weights, as `save_pretrained` writes
them, and DIR/tokenizer.json: a WordPiece tokenizer of 50,265 made-up pieces (the import
checks only that its vocabulary is the embeddings' size; what the pieces are does not change
the import's time or memory). Nothing is downloaded; not committed (scripts/bench/
bench-base-import.sh makes it in a temporary directory).

  pip install torch transformers tokenizers
  python3 scripts/bench/base_size_checkpoint.py DIR
"""

import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import RobertaConfig, RobertaForMaskedLM

VOCAB = 50265


def main():
    out = Path(sys.argv[1])
    torch.manual_seed(0)
    config = RobertaConfig(vocab_size=VOCAB, max_position_embeddings=514, type_vocab_size=1,
                           pad_token_id=1, layer_norm_eps=1e-5)
    RobertaForMaskedLM(config).eval().save_pretrained(out, safe_serialization=True)
    for extra in out.iterdir():
        if extra.name not in ("config.json", "model.safetensors"):
            extra.unlink()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    pieces = specials + [f"piece{i}" for i in range(VOCAB - len(specials))]
    tokenizer = Tokenizer(models.WordPiece({p: i for i, p in enumerate(pieces)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(out / "tokenizer.json"))
    size = (out / "model.safetensors").stat().st_size
    print(f"wrote {out}: RobertaForMaskedLM, {size / 1e6:.0f} MB of weights")


if __name__ == "__main__":
    main()
