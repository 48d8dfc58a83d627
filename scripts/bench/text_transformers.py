#!/usr/bin/env python3
"""The `transformers` side of scripts/bench/text-pretraining.sh: masked-LM pretraining of
the class `headlab export` names for configs/text.toml (the same network: shapes, blocks,
head), on the same corpus read by the same tokenizer, with the same batch, masking,
optimiser and threads, timed as headlab's run is.

Usage: text_transformers.py EXPORT_DIR STEPS THREADS

EXPORT_DIR is `headlab export` of a run of configs/text.toml (its config.json gives the class
and sizes, its tokenizer.json the pieces); the model is initialised afresh from that config.
Each step: 128 sequences of 64 pieces packed from the training addresses (each address's
pieces then [SEP], as headlab packs them; a window per step from a fixed random order),
BERT's masking (15% of the pieces: 80% [MASK], 10% a random piece, 10% kept; never [SEP]),
the base model's hidden states gathered at the masked positions only and the head applied
there (as headlab's training does), cross-entropy, AdamW (lr 1e-3, weight decay 0.01,
betas 0.9/0.999) after clipping the gradients' norm to 1 (globally; headlab clips each
parameter's), dropout 0. Prints one JSON line: steps, seconds, pieces per second over the
steps after the first 50 (as
headlab's are timed: both are slower at first), the last loss, and torch's and transformers' versions.
"""

import gzip
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers

CORPUS = Path(__file__).resolve().parents[2] / "data/state-of-the-union/addresses.jsonl.gz"
BATCH, SEQ, WARMUP = 128, 64, 50


def training_stream(tokenizer) -> torch.Tensor:
    """The training addresses (line i with i % 10 != 9) as one stream of piece ids."""
    sep = tokenizer.convert_tokens_to_ids("[SEP]")
    ids = []
    with gzip.open(CORPUS, "rt", encoding="utf-8") as lines:
        for index, line in enumerate(lines):
            if index % 10 == 9:
                continue
            text = json.loads(line)["text"]
            ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
            ids.append(sep)
    return torch.tensor(ids, dtype=torch.int64)


def masked(batch: torch.Tensor, tokenizer, vocab: int, generator) -> tuple:
    """BERT's masking of `batch`: the inputs and the masked positions."""
    special = torch.tensor(tokenizer.all_special_ids)
    chosen = (torch.rand(batch.shape, generator=generator) < 0.15) & ~torch.isin(batch, special)
    roll = torch.rand(batch.shape, generator=generator)
    inputs = batch.clone()
    inputs[chosen & (roll < 0.8)] = tokenizer.mask_token_id
    random_piece = chosen & (roll >= 0.8) & (roll < 0.9)
    inputs[random_piece] = torch.randint(vocab, batch.shape, generator=generator)[random_piece]
    return inputs, chosen


def main(export: Path, steps: int, threads: int) -> None:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = transformers.AutoConfig.from_pretrained(export)
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0
    model = transformers.AutoModelForMaskedLM.from_config(config)
    model.train()
    head = model.lm_head if hasattr(model, "lm_head") else model.cls
    tokenizer = transformers.AutoTokenizer.from_pretrained(export)
    stream = training_stream(tokenizer)
    windows = stream[: len(stream) // SEQ * SEQ].reshape(-1, SEQ)
    generator = torch.Generator().manual_seed(0)
    order = torch.randperm(len(windows), generator=generator)
    optimiser = torch.optim.AdamW(
        model.parameters(), lr=1e-3, weight_decay=0.01, betas=(0.9, 0.999)
    )
    started = None
    for step in range(steps):
        if step == WARMUP:
            started = time.perf_counter()
        rows = order[(step * BATCH + torch.arange(BATCH)) % len(order)]
        batch = windows[rows]  # [batch, seq]
        inputs, chosen = masked(batch, tokenizer, config.vocab_size, generator)
        hidden = model.base_model(input_ids=inputs).last_hidden_state  # [batch, seq, d]
        logits = head(hidden[chosen])  # [masked, vocab]
        loss = F.cross_entropy(logits, batch[chosen])
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
    last = loss.item()
    seconds = time.perf_counter() - started
    timed = steps - WARMUP
    print(
        json.dumps(
            {
                "implementation": f"transformers {type(model).__name__}",
                "timed_steps": timed,
                "seconds": round(seconds, 3),
                "pieces_per_s": round(timed * BATCH * SEQ / seconds, 1),
                "last_loss": round(last, 4),
                "torch": torch.__version__,
                "transformers": transformers.__version__,
            }
        )
    )


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
