#!/usr/bin/env bash
# The import of a base-size checkpoint (issue 53, item 6): makes a random RobertaForMaskedLM
# of roberta-base's shape (scripts/bench/base_size_checkpoint.py; needs PyTorch and
# transformers: PYTHON names an interpreter that has them, default python3), then runs
# `headlab import` on it under GNU time and prints its wall time and peak memory beside the
# size of the weights it read. Nothing is kept.
#   PYTHON=/path/to/venv/bin/python scripts/bench/bench-base-import.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
python="${PYTHON:-python3}"
cargo build --release -p headlab --quiet
headlab="${CARGO_TARGET_DIR:-target}/release/headlab"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" scripts/bench/base_size_checkpoint.py "$work/roberta-base-random"
weights=$(stat -c %s "$work/roberta-base-random/model.safetensors")
/usr/bin/time -v "$headlab" import "$work/roberta-base-random" --out "$work/run" \
    >/dev/null 2>"$work/time.txt"
rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt")
python3 - "$weights" "$rss_kb" "$wall" <<'PY'
import sys
weights, rss_kb, wall = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
print(f"import of a base-size RoBERTa ({weights / 1e6:.0f} MB of weights): {wall} wall, "
      f"peak memory {rss_kb * 1024 / 1e6:.0f} MB = {rss_kb * 1024 / weights:.2f}x the weights")
PY
