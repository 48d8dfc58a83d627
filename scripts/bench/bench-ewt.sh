#!/usr/bin/env bash
# The natural-text inspect of all-MiniLM-L6-v2 against `transformers` (issue 51): the whole
# `headlab inspect` of the shipped UD English EWT test set (every sentence,
# --relation-sentences 4096) with its wall time, peak resident memory and stage times, and
# the same attention computed by `transformers` on the same threads
# (scripts/bench/ewt_transformers.py: every layer's attention on every sentence, taken back
# to words) in file order and shortest first. headlab's relation stage does more than that
# (it scores every arc of every head and bootstraps the intervals), so the comparison is the
# reference's forward passes against headlab's whole relation stage.
#
#   scripts/bench/bench-ewt.sh [CHECKPOINT_DIR]       # PYTHON=python3 with torch, transformers
#
# MiniLM comes from scripts/setup/setup.sh; `pip install torch transformers` for the
# reference (skipped, and said, without them). Threads: 2, or HEADLAB_BENCH_THREADS.
set -euo pipefail
cd "$(dirname "$0")/../.."
checkpoint="${1:-${HEADLAB_MINILM_DIR:-$HOME/.cache/headlab/all-MiniLM-L6-v2}}"
[ -f "$checkpoint/model.safetensors" ] || { echo "no checkpoint in $checkpoint (run scripts/setup/setup.sh)" >&2; exit 1; }
threads="${HEADLAB_BENCH_THREADS:-2}"
python="${PYTHON:-python3}"
cargo build --release -p headlab --quiet
headlab="${CARGO_TARGET_DIR:-target}/release/headlab"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$headlab" import "$checkpoint" --out "$work/run" >/dev/null
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%F)"
# RAYON_NUM_THREADS bounds headlab's threads as torch.set_num_threads bounds the reference's.
RAYON_NUM_THREADS="$threads" /usr/bin/time -f "headlab inspect: %e s wall, %M KB peak resident" \
    "$headlab" inspect "$work/run" --relation-sentences 4096 --no-patching --out "$work/report" \
    2>&1 >/dev/null | grep -E '^inspect: |^headlab inspect'
if "$python" -c "import torch, transformers" 2>/dev/null; then
    "$python" scripts/bench/ewt_transformers.py "$checkpoint" \
        data/ud-english-ewt/en_ewt-ud-test.conllu "$threads" 32
else
    echo "bench-ewt: no torch and transformers for $python: the reference is skipped"
fi
