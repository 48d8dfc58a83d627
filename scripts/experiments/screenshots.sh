#!/usr/bin/env bash
# Retakes the book's pictures of the pages (index.html, explore.html, compare.html) from
# today's build: builds headlab, then runs the browser test tests/browser/tests/screenshots.rs
# with HEADLAB_SCREENSHOTS pointing at docs/inspect/. The test trains the README's quick
# start (configs/recall.toml, seeds 0 and 1), inspects and compares them, checks the colour
# bars and labels a reader needs, and writes index-recall.png, explore-recall.png,
# explore-recall-hover.png, explore-patching.png and compare-recall.png (each written whole,
# then renamed). Needs Chromium and chromedriver (scripts/setup/setup.sh installs them).
# Usage: scripts/experiments/screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --workspace --bins
export HEADLAB_REQUIRE_WEBDRIVER=1
HEADLAB_SCREENSHOTS="$PWD/docs/inspect" cargo test --release \
    --manifest-path tests/browser/Cargo.toml --test screenshots -- --nocapture
echo "the pictures are in docs/inspect/ (date them in the book's captions)"
