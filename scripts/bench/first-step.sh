#!/usr/bin/env bash
# A process's first training step on a GPU backend, with the kernel cache on disk cold and
# warm (issue 68: "a second process's first step within 2 s"). CubeCL keeps its autotune
# results and compiled kernels in a named environment on disk (docs/gpu.md, "The kernel
# cache"); a name never used before is a cold cache, the same name again a warm one.
#
#   scripts/bench/first-step.sh [BACKEND] [REPEATS]      # default: wgpu, 3
#
# Each repeat trains configs/reverse.toml for 10 steps twice, first in a fresh environment
# (cold), then in the same one (warm), and prints one markdown row per run: the whole
# command and the first step's `elapsed_s` (metrics.jsonl: seconds into training). HEADLAB
# names the binary (the GPU check's packed one); otherwise the release build of the target
# directory plain cargo uses.
set -euo pipefail
cd "$(dirname "$0")/../.."
backend="${1:-wgpu}"
repeats="${2:-3}"
if [ -z "${HEADLAB:-}" ]; then
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
    cargo build --release -q -p headlab
    HEADLAB="$CARGO_TARGET_DIR/release/headlab"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "| run | cache | whole command (s) | first step done (s into training) |"
echo "|---|---|---:|---:|"
for repeat in $(seq 1 "$repeats"); do
    environment="headlab-first-step-$$-$repeat"
    for cache in cold warm; do
        out="$work/$cache-$repeat"
        start=$(date +%s.%N)
        CUBECL_ENVIRONMENT="$environment" "$HEADLAB" train configs/reverse.toml \
            --backend "$backend" --out "$out" --set train.steps=10 --set train.eval_every=10 \
            --set train.snapshot_every=0 --set train.log_every=1 --quiet > "$work/log" 2>&1 \
            || { cat "$work/log" >&2; exit 1; }
        end=$(date +%s.%N)
        first=$(head -n 1 "$out/metrics.jsonl" \
            | python3 -c 'import json, sys; print("%.2f" % json.load(sys.stdin)["elapsed_s"])')
        awk -v r="$repeat" -v c="$cache" -v s="$start" -v e="$end" -v f="$first" \
            'BEGIN { printf "| %d | %s | %.1f | %s |\n", r, c, e - s, f }'
    done
done
