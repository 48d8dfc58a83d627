#!/usr/bin/env bash
# Experiment 9, syntax from scratch (docs/experiment-9-syntax.md): masked LMs trained here on
# English, read on the treebank at every snapshot of their training.
#
#   scripts/experiments/experiment-9.sh [pilot] [seeds] [compare] [tables]  (default: all)
#
# pilot   configs/experiments/syntax-pilot.toml: one seed, ten times configs/text.toml's steps
#         (about 3.5 hours of training on this project's 2-core machine, then 10 minutes of
#         inspect), into runs/syntax-pilot/syntax-pilot. Rerunning continues an interrupted
#         run (train --resume) and inspects it once it is finished.
# seeds   configs/sweeps/syntax.toml: configs/text.toml over 16 seeds, `headlab sweep run`
#         (about 26 minutes a seed on 2 cores, 7 hours in all; rerunning finishes an
#         interrupted sweep), into runs/syntax.
# compare `headlab compare` of the seeds' final models (runs/syntax-compare/seeds: do the
#         syntax heads sit in the same layer in every seed?) and of each seed against
#         all-MiniLM-L6-v2 where runs/minilm holds its import (headlab import
#         sentence-transformers/all-MiniLM-L6-v2 --out runs/minilm), into
#         runs/syntax-compare/minilm-SEED: which of MiniLM's heads does each head match?
# tables  scripts/experiments/experiment9_table.py: each set of runs collected into
#         docs/experiments/syntax-pilot.json and docs/experiments/syntax.json (the data every
#         number of the chapter is computed from), then rendered into their .md tables and
#         -onsets.png figures, intervals from `headlab sweep stats`.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$#" -eq 0 ]; then set -- pilot seeds compare tables; fi
cargo build --release -p headlab --quiet
headlab="${CARGO_TARGET_DIR:-target}/release/headlab"
machine="$(nproc)-core $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"

for stage in "$@"; do
    case "$stage" in
        pilot)
            pilot=runs/syntax-pilot/syntax-pilot
            if [ -f "$pilot/run.json" ]; then
                "$headlab" train "$pilot" --resume
            else
                "$headlab" train configs/experiments/syntax-pilot.toml --out "$pilot"
            fi
            "$headlab" inspect "$pilot" --quiet
            ;;
        seeds)
            "$headlab" sweep run configs/sweeps/syntax.toml --out runs/syntax
            ;;
        compare)
            seeds=(runs/syntax/text-s*)
            # 16 runs' probes share compare's 1 GiB bound: a smaller probe than the default
            # 64 (compare names the largest accepted when one is too large).
            "$headlab" compare "${seeds[@]}" --out runs/syntax-compare/seeds --quiet \
                --probe "${COMPARE_PROBE:-16}"
            if [ -d runs/minilm ]; then
                for seed in "${seeds[@]}"; do
                    "$headlab" compare "$seed" runs/minilm --quiet \
                        --out "runs/syntax-compare/minilm-$(basename "$seed")"
                done
            fi
            ;;
        tables)
            export HEADLAB="$headlab"
            for set in syntax-pilot syntax; do
                if [ -d "runs/$set" ]; then
                    python3 scripts/experiments/experiment9_table.py collect "runs/$set" \
                        "docs/experiments/$set.json" --note "runs/$set of $(date +%F), $machine"
                fi
                if [ -f "docs/experiments/$set.json" ]; then
                    python3 scripts/experiments/experiment9_table.py render "docs/experiments/$set.json"
                fi
            done
            ;;
        *)
            echo "experiment-9: unknown stage $stage (pilot, seeds, compare or tables)" >&2
            exit 2
            ;;
    esac
done
