#!/usr/bin/env bash
# Builds the book (docs/, mdbook) and checks every relative link and #anchor of README.md and
# docs/**/*.md: fails if mdbook fails or a link is broken (scripts/check/check_links.py, which
# first shows on planted broken links that it catches them).
#
#   scripts/check/check-docs.sh        # the book goes to ${CARGO_TARGET_DIR:-target}/book
#
# mdbook comes from crates.io through scripts/setup/setup.sh. Never writes into docs/.
set -euo pipefail
cd "$(dirname "$0")/../.."

target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
out="$target/book"

if ! command -v mdbook >/dev/null 2>&1; then
    echo "check-docs: mdbook is not on PATH; scripts/setup/setup.sh installs it (cargo install mdbook)" >&2
    exit 1
fi
python3 scripts/check/check_links.py --self-test
python3 scripts/check/check_links.py
mdbook build docs -d "$out"
echo "check-docs: the book is in $out (open $out/index.html)"
