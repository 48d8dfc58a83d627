#!/usr/bin/env bash
# Training and inference speed of headlab's encoder against Burn's built-in
# TransformerEncoder and, when the interpreter in HEADLAB_PYTHON (default python3) can import
# torch, a PyTorch reference of the same model (crates/bench/python/reference.py), at two
# sizes, on flex and ndarray: builds, runs, prints a markdown table and keeps it (and every
# case's figures as JSON) under runs/bench/. torch is optional: without it the PyTorch
# column is skipped with a note.
#
#   scripts/bench/bench.sh                                   # the README's table, about 3 minutes
#   scripts/bench/bench.sh --sizes small --backends flex     # one row
#   scripts/bench/bench.sh --backends flex,ndarray,wgpu      # add the GPU (or a software driver)
#   HEADLAB_PYTHON=/path/to/venv/bin/python scripts/bench/bench.sh --impl headlab,burn,pytorch --rounds 3
#   scripts/bench/bench.sh --to-accuracy 0.99                # time to 99% on reverse instead
#   scripts/bench/bench.sh --help                            # every option
set -euo pipefail
cd "$(dirname "$0")/../.."

# The target directory plain cargo uses, so this reuses the build of `cargo run`.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
cargo build --release --workspace --bins

out=runs/bench
mkdir -p "$out"
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
"$CARGO_TARGET_DIR/release/headlab" bench --out "$out/bench-$stamp.md" --json "$out/bench-$stamp.json" "$@"
echo "table: $out/bench-$stamp.md; figures: $out/bench-$stamp.json" >&2
