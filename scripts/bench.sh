#!/usr/bin/env bash
# Training and inference speed of headlab's encoder against Burn's built-in
# TransformerEncoder, at two sizes, on flex and ndarray: builds, runs, prints a markdown
# table and keeps it (and every case's figures as JSON) under runs/bench/.
#
#   scripts/bench.sh                                   # the README's table, about 3 minutes
#   scripts/bench.sh --sizes small --backends flex     # one row
#   scripts/bench.sh --backends flex,ndarray,wgpu      # add the GPU (or a software driver)
#   scripts/bench.sh --help                            # every option
set -euo pipefail
cd "$(dirname "$0")/.."

# The target directory plain cargo uses, so this reuses the build of `cargo run`.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
cargo build --release --workspace --bins

out=runs/bench
mkdir -p "$out"
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
"$CARGO_TARGET_DIR/release/bench" --out "$out/bench-$stamp.md" --json "$out/bench-$stamp.json" "$@"
echo "table: $out/bench-$stamp.md; figures per case: $out/bench-$stamp.json" >&2
