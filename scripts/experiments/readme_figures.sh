#!/usr/bin/env bash
# Regenerates the example report shown in the README's `inspect` section: trains
# configs/neighbors.toml, inspects it, and copies two of its figures into docs/inspect/.
# Usage: scripts/experiments/readme_figures.sh [OUT_DIR]   (default runs/readme)
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-runs/readme}"
cargo build --release --workspace --bins
bin="${CARGO_TARGET_DIR:-target}/release"

"$bin/headlab" train configs/neighbors.toml --out "$out/neighbors" --force --quiet
"$bin/headlab" inspect "$out/neighbors"
mkdir -p docs/inspect
for figure in attention divergence; do
    cp "$out/neighbors/inspect/figures/$figure.png" "docs/inspect/neighbors-$figure.png"
done
echo "copied figures to docs/inspect/"
