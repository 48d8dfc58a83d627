#!/usr/bin/env bash
# Runs the README's experiments ("why do heads differ?") as sweeps, one per file in
# configs/sweeps/, on this machine: every run trained and inspected (`sweep run`), then
# `sweep report` (means with 95% intervals over seeds, roles against untrained models,
# heads matched across seeds). Copies each report and the figures the README shows into
# docs/experiments/, and beside the report of a sweep of a word task, NAME.json: its
# report.json's relation heads across seeds (`points[].relations`), the data experiment 8
# reads.
#
# Usage: scripts/experiments/experiments.sh [SWEEP...]   (default: all nine, then minilm: experiment 8,
#   scripts/experiments/experiment-8.sh, which reads the grammar sweeps' NAME.json in docs/experiments/)
#   WORKERS=N  runs at once (default: the cores)
# Rerunning finishes an interrupted sweep: done runs are skipped, interrupted ones resumed.
# On this project's 2-core machine the first six took about 4 hours with 2 workers (before
# the fused kernels; symmetry and specialise now take 9 and 5 minutes), grammar-selection
# about 90 minutes, grammar-ditransitive about 55, grammar-selection-long about 45.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --workspace --bins
bin="${CARGO_TARGET_DIR:-target}/release"
docs=docs/experiments
mkdir -p "$docs"

if [ "$#" -eq 0 ]; then
    set -- symmetry specialise seeds-difference seeds-recall layouts grammar grammar-selection \
        grammar-selection-long grammar-ditransitive minilm
fi
workers=()
if [ -n "${WORKERS:-}" ]; then workers=(--workers "$WORKERS"); fi

# copy SOURCE TARGET: a figure into docs/experiments, if the run that draws it is done.
copy() {
    if [ -f "$1" ]; then cp "$1" "$docs/$2"; fi
}

# relations_json SWEEP REPORT_JSON TARGET: report.json's points with their relations only (a
# few tens of kB where the whole report.json holds every run's relations.json), when any
# point has relations.
relations_json() {
    python3 - "$@" <<'EOF'
import datetime
import json
import sys

sweep, report, target = sys.argv[1:]
with open(report) as f:
    points = [{"point": p["point"], "relations": p["relations"]} for p in json.load(f)["points"]]
if any(p["relations"] for p in points):
    source = (f"runs/{sweep}/_sweep/report/report.json of {datetime.date.today()}, its points' "
              "relations, copied by scripts/experiments/experiments.sh")
    with open(target, "w") as f:
        json.dump({"sweep": sweep, "source": source, "points": points}, f, indent=1,
                  ensure_ascii=False)
        f.write("\n")
EOF
}

for sweep in "$@"; do
    if [ "$sweep" = minilm ]; then
        # Experiment 8: a real model beside the toys, from the grammar sweeps' reports.
        scripts/experiments/experiment-8.sh
        continue
    fi
    file="configs/sweeps/$sweep.toml"
    echo "== $sweep"
    start=$(date +%s)
    "$bin/headlab" sweep run "$file" "${workers[@]}"
    echo "== $sweep: $(($(date +%s) - start)) s"
    "$bin/headlab" sweep report "$file" >/dev/null
    report="runs/$sweep/_sweep/report"
    cp "$report/report.md" "$docs/$sweep.md"
    relations_json "$sweep" "$report/report.json" "$docs/$sweep.json"
    for figure in "$report"/figures/*.png "$report"/figures/*.svg; do
        [ -f "$figure" ] || continue
        cp "$figure" "$docs/$sweep-$(basename "$figure")"
    done
done

# Single runs the README shows (seed 0 of each).
copy runs/symmetry/symmetry-symmetric-dropout-s0/inspect/figures/divergence.png \
    symmetry-symmetric-dropout-divergence.png
copy runs/symmetry/symmetry-random-s0/inspect/figures/divergence.png symmetry-random-divergence.png
copy runs/specialise/specialise-difference-2-s0/inspect/figures/attention.png \
    specialise-difference-h2-attention.png
copy runs/specialise/specialise-sum-2-s0/inspect/figures/attention.png specialise-sum-h2-attention.png
copy runs/layouts/layouts-recall-split-s0/inspect/figures/pruning.png layouts-recall-split-pruning.png
copy runs/seeds-difference/_sweep/report/matching/seeds-difference/matched-attention.png \
    seeds-difference-matched.png
copy runs/seeds-recall/_sweep/report/matching/seeds-recall/matched-attention.png \
    seeds-recall-matched.png
copy runs/grammar/grammar-s0/inspect/figures/relations.png grammar-relations.png
copy runs/grammar/grammar-s0/inspect/figures/attention.png grammar-attention.png
copy runs/grammar-selection/grammar-selection-1.0-s0/inspect/figures/relations.png \
    grammar-selection-1.0-relations.png
