#!/usr/bin/env bash
# Times `headlab import` and `headlab inspect` (default probe, 64 sentences) of
# all-MiniLM-L6-v2 (scripts/setup/setup.sh fetches it), the figure docs/inspect.md states; any
# further arguments go to inspect (--backend wgpu, --probe 16, ...).
#   scripts/bench/bench-import.sh [CHECKPOINT_DIR [INSPECT_ARG...]]
set -euo pipefail
cd "$(dirname "$0")/../.."
checkpoint="${1:-${HEADLAB_MINILM_DIR:-$HOME/.cache/headlab/all-MiniLM-L6-v2}}"
shift || true
[ -f "$checkpoint/model.safetensors" ] || { echo "no checkpoint in $checkpoint (run scripts/setup/setup.sh)" >&2; exit 1; }
cargo build --release -p headlab --quiet
headlab="${CARGO_TARGET_DIR:-target}/release/headlab"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$(date +%s.%N)
"$headlab" import "$checkpoint" --out "$work/run" >/dev/null
imported=$(date +%s.%N)
"$headlab" inspect "$work/run" "$@" >/dev/null
inspected=$(date +%s.%N)
python3 - "$start" "$imported" "$inspected" <<'PY'
import sys
start, imported, inspected = map(float, sys.argv[1:])
print(f"import {imported - start:.1f} s, inspect {inspected - imported:.1f} s, "
      f"together {inspected - start:.1f} s")
PY
