#!/usr/bin/env bash
# Runs the README's experiments ("why do heads differ?") end to end on CPU: trains every
# arm, inspects it, then writes the summary tables and copies the figures the README shows
# into docs/experiments/ (scripts/summarise_experiments.py).
# Usage: scripts/experiments.sh [OUT_DIR]   (default runs/experiments; about 30 minutes
# on 2 cores once built)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-runs/experiments}"
cargo build --release --workspace --bins
bin="${CARGO_TARGET_DIR:-target}/release"
mkdir -p "$out"

# run NAME CONFIG [KEY=VALUE...]: train into OUT/NAME (overrides as --set), then inspect.
run() {
    local name=$1 config=$2
    shift 2
    local sets=()
    for assignment in "$@"; do sets+=(--set "$assignment"); done
    echo "== $name"
    "$bin/train" "$config" --out "$out/$name" --force --quiet "${sets[@]}" | tail -n 2 | head -n 1
    "$bin/inspect" "$out/$name" > "$out/$name.inspect.txt"
}

# 1. Symmetry breaking: random init, symmetric init, symmetric init with dropout.
for arm in random symmetric symmetric-dropout; do
    run "symmetry-$arm" "configs/experiments/symmetry-$arm.toml"
done

# 2. Specialisation on neighbors: a symmetric rule (sum) and an asymmetric one
# (difference), with 1, 2 and 4 heads in one layer.
for combine in sum difference; do
    for heads in 1 2 4; do
        run "specialise-$combine-h$heads" "configs/experiments/specialise-$combine.toml" \
            "model.n_heads=$heads"
    done
done

# 3. Head layouts: split, wide and narrow at equal d_model on three tasks. 5. Pruning: the
# same runs' inspect reports (pruning.json) say how many heads each can lose.
for task in neighbors sort recall; do
    for layout in split wide narrow; do
        run "layouts-$task-$layout" "configs/experiments/layouts-$task.toml" \
            "model.head_layout=$layout"
    done
done

# 4. Seeds: one config, several seeds, heads matched across seeds by `compare`.
for config in difference recall; do
    case $config in
        difference) seeds=(0 1 2 3 4 5 6 7) ;;
        recall) seeds=(0 1 2 3) ;;
    esac
    runs=()
    for seed in "${seeds[@]}"; do
        run "seeds-$config-s$seed" "configs/experiments/seeds-$config.toml" "seed=$seed"
        runs+=("$out/seeds-$config-s$seed")
    done
    echo "== seeds-$config: matching heads"
    "$bin/compare" "${runs[@]}" --out "$out/seeds-$config-compare" \
        > "$out/seeds-$config-compare.txt"
done

python3 scripts/summarise_experiments.py "$out" docs/experiments
