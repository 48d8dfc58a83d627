#!/usr/bin/env bash
# Checks that a change which should not change behaviour (a refactor) writes the same files:
# trains every shipped config for a few steps, inspects each run (and one at a checkpoint),
# compares two runs, imports and inspects the BERT test fixtures (and all-MiniLM-L6-v2 where
# scripts/setup/setup.sh fetched it), runs and reports a tiny sweep, and diffs every file written against a
# reference recorded before the change.
#
#   scripts/check/same-outputs.sh record DIR   # before the change: run, keep as DIR/reference
#   scripts/check/same-outputs.sh check DIR    # after it: run again into DIR/current, diff
#
# Both runs write under the same path (DIR/work, renamed afterwards), so file names that
# the outputs mention are equal. Files are compared byte for byte, except the fields that
# hold wall-clock time, which are blanked in both before the diff: `tokens_per_s` and
# `elapsed_s` (metrics.jsonl, checkpoints' state.json) and `ms_per_step` (the sweep report's
# sweep.csv, estimates.csv, report.json, report.md, and its ms_per_step.png figure, which is
# skipped), the
# size and hash that a manifest records of those files and of Burn's records, and
# the sweep's own logs (progress lines with times) and claims (lock files). Burn's own files
# are not byte-stable from one process to the next: safetensors files are compared with their header's keys sorted
# (Burn writes a map in random order; headlab sorts model.safetensors's header since
# 2026-11-25, but a reference recorded before that has Burn's order), and checkpoints' .bpk records are left out (Burn's
# records differ from process to process; what they hold shows in the metrics, snapshots and
# final weights after them, which are compared), as are lock files (they hold a process id);
# a report of a checkpoint names that record's SHA-256, which is replaced in both.
#
# Uses the release binaries in cargo's target directory (CARGO_TARGET_DIR, else target/);
# build them first (`cargo build --release --workspace --bins`).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

usage() {
    echo "usage: scripts/check/same-outputs.sh record|check DIR" >&2
    exit 2
}
[ $# -eq 2 ] || usage
mode=$1
dir=$2
case "$mode" in record | check) ;; *) usage ;; esac
# Only a directory this script made (it holds the marker) has its work/, reference/ and
# current/ replaced.
marker=.headlab-same-outputs
if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ] && [ ! -f "$dir/$marker" ]; then
    echo "same-outputs: $dir exists and is not this script's directory; give another DIR" >&2
    exit 1
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
echo "made by scripts/check/same-outputs.sh" > "$dir/$marker"
bin="${CARGO_TARGET_DIR:-$root/target}/release"
for b in headlab; do
    [ -x "$bin/$b" ] || {
        echo "no $bin/$b: run cargo build --release --workspace --bins first" >&2
        exit 1
    }
done

# Few steps, but enough for evaluations, checkpoints and snapshots to happen.
short=(--set train.steps=40 --set train.eval_every=20 --set train.checkpoint_every=20
    --set train.snapshot_every=10 --set train.log_every=10 --set train.eval_size=128
    --set train.target_accuracy=1.0 --quiet)

produce() {
    local work=$1
    rm -rf "$work"
    mkdir -p "$work/runs"
    for config in configs/*.toml configs/experiments/*.toml; do
        name=$(basename "$config" .toml)
        echo "  train + inspect $name"
        "$bin/headlab" train "$config" --out "$work/runs/$name" "${short[@]}" > /dev/null
        "$bin/headlab" inspect "$work/runs/$name" --probe 16 > "$work/runs/$name.inspect.txt"
    done
    echo "  inspect a checkpoint"
    "$bin/headlab" inspect "$work/runs/recall" --checkpoint step-20 --probe 16 \
        --out "$work/runs/recall-step-20" > "$work/runs/recall-step-20.txt"
    echo "  compare two seeds"
    "$bin/headlab" train configs/copy.toml --out "$work/runs/copy-s1" --set seed=1 "${short[@]}" > /dev/null
    "$bin/headlab" compare "$work/runs/copy" "$work/runs/copy-s1" --out "$work/compare" --probe 16 \
        > "$work/compare.txt"
    echo "  import the BERT fixtures, inspect them (the grammar probe, the shipped treebank, a"
    echo "  treebank file, masked relations on another grammar) and compare two imports"
    local fixtures=crates/model/tests/fixtures/bert
    mkdir -p "$work/imports"
    for fixture in one-layer three-layers-mlm; do
        "$bin/headlab" import "$fixtures/$fixture" --out "$work/imports/$fixture" > /dev/null
        "$bin/headlab" inspect "$work/imports/$fixture" --probe 8 --probe-task \
            > "$work/imports/$fixture.inspect.txt"
    done
    "$bin/headlab" inspect "$work/imports/three-layers-mlm" --probe 8 \
        --out "$work/imports/mlm-shipped" > "$work/imports/mlm-shipped.txt"
    "$bin/headlab" inspect "$work/imports/three-layers-mlm" --probe 8 \
        --probe-conllu crates/tasks/tests/fixtures/ud-sample.conllu \
        --out "$work/imports/mlm-treebank" > "$work/imports/mlm-treebank.txt"
    "$bin/headlab" inspect "$work/imports/three-layers-mlm" --probe 8 --relations-masked \
        --set task.lexicon=classes --set task.selection=1 --relation-sentences 64 \
        --out "$work/imports/mlm-classes" > "$work/imports/mlm-classes.txt"
    "$bin/headlab" import "$fixtures/one-layer" --out "$work/imports/one-layer-again" > /dev/null
    "$bin/headlab" compare "$work/imports/one-layer" "$work/imports/one-layer-again" \
        --out "$work/imports/compare" --probe 8 > "$work/imports/compare.txt"
    # A real model where setup.sh fetched it (all-MiniLM-L6-v2).
    local minilm="${HEADLAB_MINILM_DIR:-$HOME/.cache/headlab/all-MiniLM-L6-v2}"
    if [ -f "$minilm/model.safetensors" ]; then
        echo "  import and inspect all-MiniLM-L6-v2"
        "$bin/headlab" import "$minilm" --out "$work/imports/minilm" > /dev/null
        "$bin/headlab" inspect "$work/imports/minilm" --probe 16 --relation-sentences 64 --probe-task \
            > "$work/imports/minilm.inspect.txt"
    else
        echo "  no all-MiniLM-L6-v2 at $minilm (scripts/setup/setup.sh fetches it): left out"
    fi
    echo "  a tiny sweep"
    cat > "$work/tiny.toml" <<EOF
name = "tiny"
configs = ["$root/configs/copy.toml", "$root/configs/grammar.toml"]
seeds = [0, 1]

[grid]
"model.n_heads" = [1, 2]

[set]
"train.steps" = 30
"train.eval_every" = 10
"train.checkpoint_every" = 10
"train.snapshot_every" = 10
"train.eval_size" = 64
"train.target_accuracy" = 1.0

[inspect]
probe = 8
EOF
    "$bin/headlab" sweep run "$work/tiny.toml" --out "$work/sweep" --workers 2 --quiet > /dev/null
    "$bin/headlab" sweep report "$work/tiny.toml" --out "$work/sweep" > "$work/sweep-report.txt"
}

# Blanks the wall-clock fields of every file that has them, in place.
normalise() {
    python3 - "$1" <<'PY'
import json, pathlib, re, sys
root = pathlib.Path(sys.argv[1])
timing = {"tokens_per_s", "elapsed_s", "ms_per_step"}

def scrub(value):
    if isinstance(value, dict):
        return {k: (None if k in timing else scrub(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value

# A report of a checkpoint names the checkpoint's Burn record by its SHA-256 (provenance.json,
# the pages' summary line), which differs from process to process as the record does: the
# hash is replaced, and the manifest's size and hash of a file that held it blanked.
bpk_hashes = set()
for provenance in root.rglob("provenance.json"):
    for name, entry in json.loads(provenance.read_text()).get("inputs", {}).items():
        if name.endswith(".bpk") and isinstance(entry, dict) and entry.get("sha256"):
            bpk_hashes.add(entry["sha256"])
held_a_record_hash = set()
for path in root.rglob("*"):
    if bpk_hashes and path.is_file() and path.suffix in (".html", ".json"):
        text = new = path.read_text()
        for full in bpk_hashes:
            new = new.replace(full, "BPK-SHA256").replace(full[:12], "BPK-SHA256")
        if new != text:
            path.write_text(new)
            held_a_record_hash.add(path)

for path in root.rglob("*"):
    if not path.is_file():
        continue
    if path.name == "metrics.jsonl":
        lines = [json.dumps(scrub(json.loads(l))) for l in path.read_text().splitlines()]
        path.write_text("\n".join(lines) + "\n")
    elif path.name in ("state.json", "report.json"):
        path.write_text(json.dumps(scrub(json.loads(path.read_text())), indent=1))
    elif path.name == "sweep.csv":
        rows = [l.split(",") for l in path.read_text().splitlines()]
        if rows and "ms_per_step" in rows[0]:
            i = rows[0].index("ms_per_step")
            for r in rows[1:]:
                if len(r) > i:
                    r[i] = ""
        path.write_text("\n".join(",".join(r) for r in rows) + "\n")
    elif path.name == "estimates.csv":
        # One row per number: the ms_per_step rows' estimates are wall-clock.
        rows = [l.split(",") for l in path.read_text().splitlines()]
        for r in rows[1:]:
            if len(r) > 2 and r[1] == "ms_per_step":
                r[4:] = [""] * len(r[4:])
        path.write_text("\n".join(",".join(r) for r in rows) + "\n")
    elif path.name in ("report.md", "sweep-report.txt"):
        # Markdown tables: blank the "ms per step" column wherever a header has it.
        out, column = [], None
        for line in path.read_text().split("\n"):
            cells = line.split(" | ")
            if line.startswith("|") and "ms per step" in cells:
                column = cells.index("ms per step")
            elif not line.startswith("|"):
                column = None
            elif column is not None and len(cells) > column and not line.startswith("| ---"):
                cells[column] = ""
            out.append(" | ".join(cells))
        path.write_text("\n".join(out))
    elif path.suffix == ".safetensors":
        # Burn writes its __metadata__ map in a random order: compare the header as JSON.
        data = path.read_bytes()
        n = int.from_bytes(data[:8], "little")
        header = json.dumps(json.loads(data[8:8 + n]), sort_keys=True).encode()
        path.write_bytes(len(header).to_bytes(8, "little") + header + data[8 + n:])
    elif path.name == "manifest.json":
        # A manifest's size and hash of a file that holds wall-clock times (blanked above) or
        # a Burn record (left out below) differ from run to run as that file does.
        manifest = json.loads(path.read_text())
        varying = ("metrics.jsonl", "state.json", "report.json", "sweep.csv", "report.md",
                   "estimates.csv")
        for name, entry in manifest.get("files", {}).items():
            base = name.rsplit("/", 1)[-1]
            if base in varying or base.endswith(".bpk") or path.parent / name in held_a_record_hash:
                entry["bytes"] = entry["sha256"] = None
        path.write_text(json.dumps(manifest, indent=1))
    elif path.suffix == ".bpk" or path.name == ".lock" or path.parent.name in ("logs", "claims"):
        path.unlink()
PY
}

echo "same-outputs: producing into $dir/work"
produce "$dir/work"
normalise "$dir/work"
if [ "$mode" = record ]; then
    rm -rf "$dir/reference"
    mv "$dir/work" "$dir/reference"
    echo "same-outputs: reference recorded in $dir/reference ($(find "$dir/reference" -type f | wc -l) files)"
    exit 0
fi
rm -rf "$dir/current"
mv "$dir/work" "$dir/current"
echo "same-outputs: comparing $dir/current with $dir/reference"
if diff -rq "$dir/reference" "$dir/current"; then
    echo "same-outputs: all $(find "$dir/current" -type f | wc -l) files identical"
else
    echo "same-outputs: the files above differ" >&2
    exit 1
fi
