#!/usr/bin/env bash
# Masked-LM pretraining speed of configs/text.toml against transformers: headlab's run and
# the class `headlab export` names for it (the same network, initialised afresh,
# scripts/bench/text_transformers.py), on the same corpus, tokenizer, batch (128 x 64
# pieces), masking, optimiser and threads, in alternating rounds in one run. Each round
# trains STEPS steps of each; the pieces per second are over the steps after the 50th (both
# are slower over their first steps: allocators and thread pools warming), the peak memory is the process's (GNU time's maximum resident set). Prints a markdown table and
# the medians.
#
#   HEADLAB_PYTHON=/path/to/venv/bin/python scripts/bench/text-pretraining.sh [ROUNDS] [STEPS]
#
# (PyTorch and transformers from PyPI, in a venv outside the repository.) Defaults: 3 rounds
# of 200 steps.
set -euo pipefail
cd "$(dirname "$0")/../.."
python="${HEADLAB_PYTHON:-python3}"
rounds="${1:-3}"
steps="${2:-200}"
threads=$(nproc)
cargo build --release -p headlab --quiet
headlab="${CARGO_TARGET_DIR:-target}/release/headlab"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
quiet_run=(--set train.eval_every=100000 --set train.snapshot_every=0
    --set train.snapshots_per_decade=0 --set train.log_every=1 --quiet)

# The export gives transformers its class, sizes and the run's tokenizer.
"$headlab" train configs/text.toml --out "$work/first" --set train.steps=1 \
    --set train.checkpoint_every=1 "${quiet_run[@]}" >/dev/null
"$headlab" export "$work/first" --out "$work/export" >/dev/null

# Pieces per second of a headlab run from its metrics: steps 50 to the last.
headlab_speed() {
    python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
rows = [r for r in rows if "elapsed_s" in r and r.get("eval_loss") is None]
first = next(r for r in rows if r["step"] == 50)
last = rows[-1]
print(round((last["step"] - first["step"]) * 128 * 64 / (last["elapsed_s"] - first["elapsed_s"]), 1))
PY
}

echo "| round | headlab pieces/s | transformers pieces/s | headlab / transformers | headlab peak MiB | transformers peak MiB |"
echo "| --- | --- | --- | --- | --- | --- |"
for round in $(seq 1 "$rounds"); do
    /usr/bin/time -f %M -o "$work/h$round.mem" "$headlab" train configs/text.toml \
        --out "$work/h$round" --set train.steps="$steps" \
        --set train.checkpoint_every="$steps" "${quiet_run[@]}" >/dev/null
    h=$(headlab_speed "$work/h$round")
    /usr/bin/time -f %M -o "$work/t$round.mem" "$python" scripts/bench/text_transformers.py \
        "$work/export" "$steps" "$threads" >"$work/t$round.json" 2>"$work/t$round.err" ||
        { cat "$work/t$round.err" >&2; exit 1; }
    t=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pieces_per_s"])' "$work/t$round.json")
    hm=$(( $(tail -1 "$work/h$round.mem") / 1024 ))
    tm=$(( $(tail -1 "$work/t$round.mem") / 1024 ))
    echo "| $round | $h | $t | $(python3 -c "print(round($h / $t, 2))") | $hm | $tm |"
    echo "$h $t $hm $tm" >>"$work/rounds"
done
python3 - "$work/rounds" "$work/t1.json" <<'PY'
import json, statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
h, t, hm, tm = (statistics.median(c) for c in zip(*rows))
info = json.load(open(sys.argv[2]))
ratio = statistics.median(r[0] / r[1] for r in rows)
print(f"\nmedians: headlab {h:.0f} pieces/s, {info['implementation']} {t:.0f} pieces/s "
      f"(the rounds' ratios' median {ratio:.2f}x); peak memory {hm:.0f} MiB and {tm:.0f} MiB "
      f"(torch {info['torch']}, transformers {info['transformers']})")
PY
