#!/usr/bin/env bash
# Seed-steps per second of `train --seeds` (S seeds as one batched model) against S
# separate runs of one seed each, on the configs the README reports. Training only: no
# snapshots, one evaluation at the end, no checkpoint before it.
#
#   scripts/bench/bench_seed_groups.sh [STEPS] [S ...]     # default: 200 steps, S = 1 4 16
#
# Uses the release `train` binary in the target directory plain cargo uses.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release -q -p headlab
HEADLAB="$CARGO_TARGET_DIR/release/headlab"
STEPS="${1:-200}"
shift || true
SIZES=("${@:-1 4 16}")
read -r -a SIZES <<< "${SIZES[*]}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
SETS=(--set "train.steps=$STEPS" --set train.snapshot_every=0 --set "train.eval_every=$STEPS"
      --set "train.checkpoint_every=$STEPS" --set train.target_accuracy=1.0 --quiet)

seconds() { local start end; start=$(date +%s.%N); "$@" > /dev/null; end=$(date +%s.%N); awk "BEGIN { print $end - $start }"; }

printf "%-28s %4s %14s %14s %8s\n" config S "separate s*st/s" "group s*st/s" speedup
for config in configs/experiments/symmetry-random.toml configs/experiments/specialise-difference.toml configs/recall.toml; do
  one=$(seconds "$HEADLAB" train "$config" --out "$WORK/one" --force "${SETS[@]}")
  for s in "${SIZES[@]}"; do
    group=$(seconds "$HEADLAB" train "$config" --seeds "0-$((s - 1))" --out "$WORK/g{seed}" --force "${SETS[@]}")
    awk -v name="$(basename "$config" .toml)" -v s="$s" -v steps="$STEPS" -v one="$one" -v group="$group" \
      'BEGIN { separate = steps / one; grouped = s * steps / group;
               printf "%-28s %4d %14.0f %14.0f %7.2fx\n", name, s, separate, grouped, grouped / separate }'
  done
done
