#!/usr/bin/env bash
# Experiment 9, syntax from scratch (docs/experiment-9-syntax.md): masked LMs trained here on
# English, read on the treebank at every snapshot of their training.
#
#   scripts/experiments/experiment-9.sh [pilot] [seeds] [compare] [tables]  (default: all)
#
# Runs need not outlive a session on this project's machines, so each run's numbers are kept
# as it finishes: scripts/experiments/experiment9_table.py collect writes one record per run,
# docs/experiments/syntax-pilot/RUN.json and docs/experiments/syntax/RUN.json, which are
# committed; a stage skips every run whose record is there.
#
# pilot   configs/experiments/syntax-pilot.toml: one seed, four times configs/text.toml's
#         steps, with snapshots ten a decade (about an hour of training on this project's
#         2-core machine, then about 10 minutes of inspect), into runs/syntax-pilot/syntax-pilot,
#         its report's relation figures copied to docs/experiments/syntax-pilot-*.png.
#         Rerunning continues an interrupted run (train --resume).
# seeds   the pilot's config over seeds 0 to 15 (configs/sweeps/syntax.toml gives the same runs
#         as one sweep), seed 0 being the pilot: each seed whose record is missing trained,
#         inspected and recorded in turn, into runs/syntax/syntax-pilot-sSEED (about 70
#         minutes a seed on 2 cores). SEEDS=N stops after N new seeds, so a session can add
#         what its time allows.
#         Each run is compared with all-MiniLM-L6-v2 before it is recorded, where setup.sh
#         fetched it (imported once into runs/minilm): which of MiniLM's heads does each of
#         its heads match (runs/syntax-compare/minilm-RUN, kept in the record)?
# compare `headlab compare` of the recorded seeds at hand, the pilot as seed 0 where it is
#         here (runs/syntax-compare/seeds, its slot table in docs/experiments/syntax-compare.txt:
#         do the syntax heads sit in the same layer in every seed?); the records say each
#         seed's layers. Then the same seeds with --across-layers (runs/syntax-compare/
#         seeds-across, docs/experiments/syntax-compare-across.txt, and kept as
#         syntax-compare-across.json for the tables): is a head one seed grew in another layer
#         matched to the first seed's?
# tables  experiment9_table.py render: docs/experiments/syntax-pilot.md and syntax.md (the
#         chapter's tables) and their -onsets.png and -labels.png figures, from the records
#         alone, intervals from `headlab sweep stats`.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$#" -eq 0 ]; then set -- pilot seeds compare tables; fi
# HEADLAB names a headlab binary to use instead of building one here.
if [ -z "${HEADLAB:-}" ]; then
    cargo build --release -p headlab --quiet
fi
headlab="${HEADLAB:-${CARGO_TARGET_DIR:-target}/release/headlab}"
machine="$(nproc)-core $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"

# all-MiniLM-L6-v2 imported once (setup.sh fetches it), for each run's comparison with it.
minilm_checkpoint="${HEADLAB_MINILM_DIR:-$HOME/.cache/headlab/all-MiniLM-L6-v2}"
if [ ! -f runs/minilm/run.json ] && [ -f "$minilm_checkpoint/model.safetensors" ]; then
    "$headlab" import "$minilm_checkpoint" --out runs/minilm >/dev/null
fi

# record RUN DIR: RUN compared with MiniLM (where it is imported), then its numbers kept in
# DIR/RUN-NAME.json (experiment9_table.py collect), before anything else can lose them.
record() {
    if [ -f runs/minilm/run.json ]; then
        "$headlab" compare "$1" runs/minilm --quiet \
            --out "runs/syntax-compare/minilm-$(basename "$1")"
    fi
    python3 scripts/experiments/experiment9_table.py collect "$1" "$2" \
        --compared runs/syntax-compare --note "$1, trained $(date +%F) on $machine"
}

for stage in "$@"; do
    case "$stage" in
        pilot)
            pilot=runs/syntax-pilot/syntax-pilot
            if [ -f "docs/experiments/syntax-pilot/syntax-pilot.json" ]; then
                echo "experiment-9: the pilot is recorded (docs/experiments/syntax-pilot/)"
                continue
            fi
            if [ -f "$pilot/run.json" ]; then
                "$headlab" train "$pilot" --resume
            else
                "$headlab" train configs/experiments/syntax-pilot.toml --out "$pilot"
            fi
            "$headlab" inspect "$pilot" --quiet
            record "$pilot" docs/experiments/syntax-pilot
            # Its report's two relation figures, for the chapter (one seed: no table sums it).
            for figure in relations-over-training relations; do
                cp "$pilot/inspect/figures/$figure.png" "docs/experiments/syntax-pilot-$figure.png"
            done
            ;;
        seeds)
            new=0
            for seed in $(seq 0 15); do
                name="syntax-pilot-s$seed"
                run="runs/syntax/$name"
                [ -f "docs/experiments/syntax/$name.json" ] && continue
                # Seed 0 is the pilot: the same config and seed give the same numbers on a
                # CPU backend, so its record is the pilot's.
                if [ "$seed" -eq 0 ] && [ -f docs/experiments/syntax-pilot/syntax-pilot.json ]; then
                    mkdir -p docs/experiments/syntax
                    cp docs/experiments/syntax-pilot/syntax-pilot.json "docs/experiments/syntax/$name.json"
                    continue
                fi
                if [ -n "${SEEDS:-}" ] && [ "$new" -ge "$SEEDS" ]; then break; fi
                if [ -f "$run/run.json" ]; then
                    "$headlab" train "$run" --resume
                else
                    "$headlab" train configs/experiments/syntax-pilot.toml --set "seed=$seed" --out "$run"
                fi
                "$headlab" inspect "$run" --quiet
                record "$run" docs/experiments/syntax
                new=$((new + 1))
            done
            echo "experiment-9: $(ls docs/experiments/syntax/*.json 2>/dev/null | wc -l) of 16 seeds recorded"
            ;;
        compare)
            # Only the recorded runs at hand (trained and inspected on this machine; a seed
            # still training is left out), the pilot first as seed 0 where it is here. Each
            # seed's comparison with MiniLM is already in its record.
            seeds=()
            for run in runs/syntax-pilot/syntax-pilot runs/syntax/syntax-pilot-s*; do
                record="docs/experiments/$(basename "$(dirname "$run")")/$(basename "$run").json"
                [ -f "$run/run.json" ] && [ -f "$record" ] && seeds+=("$run")
            done
            if [ "${#seeds[@]}" -lt 2 ]; then
                echo "experiment-9: fewer than two seeds at hand in runs/ to compare" >&2
                continue
            fi
            # 16 runs' probes share compare's 1 GiB bound: a smaller probe than the default
            # 64 (compare names the largest accepted when one is too large).
            # Its slot table is kept beside the records (the runs may not outlive the session).
            "$headlab" compare "${seeds[@]}" --out runs/syntax-compare/seeds --quiet \
                --probe "${COMPARE_PROBE:-16}" | tee docs/experiments/syntax-compare.txt
            # The same seeds matched over the whole model: a role one seed grew in another
            # layer than the first seed is matched to it here, not in the table above.
            "$headlab" compare "${seeds[@]}" --out runs/syntax-compare/seeds-across --quiet \
                --probe "${COMPARE_PROBE:-16}" --across-layers \
                | tee docs/experiments/syntax-compare-across.txt
            python3 scripts/experiments/experiment9_table.py keep-matching \
                runs/syntax-compare/seeds-across/matching.json docs/experiments/syntax
            ;;
        tables)
            export HEADLAB="$headlab"
            if ! python3 -c 'import matplotlib' 2>/dev/null; then
                echo "experiment-9: the figures need matplotlib (pip install matplotlib)" >&2
                exit 1
            fi
            for set in syntax-pilot syntax; do
                if [ -d "docs/experiments/$set" ]; then
                    python3 scripts/experiments/experiment9_table.py render "docs/experiments/$set"
                fi
            done
            ;;
        *)
            echo "experiment-9: unknown stage $stage (pilot, seeds, compare or tables)" >&2
            exit 2
            ;;
    esac
done
