#!/usr/bin/env bash
# The project's test command: the book's links, the scripts' Python tests, the workspace's
# tests, then the browser tests.
#
#   scripts/check/test.sh                  # everything
#   scripts/check/test.sh --no-fail-fast   # arguments go to the workspace's `cargo test`
#
# The browser tests (tests/browser, their own Cargo workspace; see the README's Testing
# section) drive Chromium through chromedriver on pages written by the release binaries, so
# those are built first. Without chromedriver they skip, unless HEADLAB_REQUIRE_WEBDRIVER=1.
# Uses the target directory plain cargo uses (CARGO_TARGET_DIR if set, else target/), for all
# three commands: the browser tests find the binaries in its release/.
set -euo pipefail
cd "$(dirname "$0")/../.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

echo "== scripts/check/check-docs.sh (the book builds; every link and anchor of README.md and docs/ resolves)"
scripts/check/check-docs.sh

echo "== Python tests (scripts/fixtures/test_word_attention.py: the scripts' word-level attention equals the Rust reading's;"
echo "   scripts/experiments/test_onset_windows.py: the Python onsets equal the Rust ones, and the loss's second fall)"
# Standard library only (the torch case skips without torch); -B: no __pycache__ in scripts/.
python3 -B -m unittest discover --start-directory scripts/fixtures --pattern 'test_*.py'
python3 -B -m unittest discover --start-directory scripts/experiments --pattern 'test_*.py'

echo "== cargo test --workspace --release $*"
cargo test --workspace --release "$@"

echo "== cargo build --release --workspace --bins (for the browser tests)"
cargo build --release --workspace --bins

echo "== browser tests (tests/browser)"
# Every test file even after a failure; --nocapture: the 256-token test prints how long a
# hover takes.
cargo test --release --manifest-path tests/browser/Cargo.toml --no-fail-fast -- --nocapture
