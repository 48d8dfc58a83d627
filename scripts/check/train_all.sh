#!/usr/bin/env bash
# Trains every config in configs/ on flex and prints a markdown table: steps run, final eval
# accuracy and wall time. Fails if any run ends below 99% eval token accuracy, or, for the
# grammar configs (masked words, most of which only their class and number predict), below
# 15%.
# Usage: scripts/check/train_all.sh [OUT_DIR]   (default runs/all)
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-runs/all}"
cargo build --release --workspace --bins
bin="${CARGO_TARGET_DIR:-target}/release/headlab"

echo "| config | steps run | eval token acc | eval seq acc | seconds |"
echo "| --- | --- | --- | --- | --- |"
failed=0
for config in configs/*.toml; do
    name=$(basename "$config" .toml)
    start=$(date +%s)
    "$bin" train "$config" --out "$out/$name" --force --quiet > /dev/null
    seconds=$(( $(date +%s) - start ))
    want=0.99
    case "$name" in grammar*) want=0.15 ;; text*) want=0.05 ;; esac
    python3 - "$out/$name/metrics.jsonl" "$name" "$seconds" "$want" <<'PY' || failed=1
import json, sys
path, name, seconds, want = sys.argv[1:]
want = float(want)
last = [r for r in map(json.loads, open(path)) if "eval_token_acc" in r][-1]
token, seq = last["eval_token_acc"], last["eval_seq_acc"]
print(f"| {name} | {last['step']} | {token:.2%} | {seq:.2%} | {seconds} |")
if token < want:
    print(f"FAILED: {name} ended at {token:.2%} eval token accuracy, below {want:.0%}",
          file=sys.stderr)
    sys.exit(1)
PY
done
exit "$failed"
