#!/usr/bin/env bash
# Runs the README's quick start as written: every command of the code blocks in its
# "## Quick start" section, in order, from the repository root, each of which must succeed;
# then checks that the report they make is there and that `cargo install` put exactly one
# binary, `headlab`, on the PATH. `.ci/run` calls it, so a README whose commands stop
# working fails CI.
#
#   scripts/check/quickstart.sh
#
# `scripts/setup/setup.sh` is skipped (CI has run it already). `cargo install` installs into a
# temporary root (its `--root`, added here), which leads the PATH for the commands after it,
# so running this installs nothing for the user; with CARGO_TARGET_DIR set (as in CI and in
# the README's advice) it reuses the workspace's build instead of compiling Burn again.
# Writes runs/reverse/ in the checkout, as the README's commands do (runs/ is git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."

root=$(mktemp -d)
trap 'rm -rf -- "$root"' EXIT
export PATH="$root/bin:$PATH"

# The code blocks of the section, one command per line, comments and blank lines dropped.
mapfile -t commands < <(awk '
    /^## / { in_section = ($0 == "## Quick start") }
    in_section && /^```/ { in_block = !in_block; next }
    in_section && in_block {
        sub(/[[:space:]]+#.*$/, "")
        if ($0 !~ /^[[:space:]]*$/) print
    }' README.md)
if [ "${#commands[@]}" -eq 0 ]; then
    echo "quickstart: README.md has no commands under \"## Quick start\"" >&2
    exit 1
fi

for command in "${commands[@]}"; do
    case "$command" in
    scripts/setup/setup.sh*)
        echo "== (skipped: $command)"
        continue
        ;;
    *"cargo install "*)
        # The README's `CARGO_TARGET_DIR=target` means "the directory the build above used",
        # which here is the exported one.
        command="${command#CARGO_TARGET_DIR=target }"
        command="$command --root $root"
        ;;
    esac
    echo "== $command"
    bash -c "$command" || {
        echo "quickstart: the README's command failed: $command" >&2
        exit 1
    }
done

report=runs/reverse/inspect/index.html
[ -f "$report" ] || {
    echo "quickstart: the README's commands ran but $report is missing" >&2
    exit 1
}
installed=$(ls "$root/bin")
[ "$installed" = headlab ] || {
    echo "quickstart: cargo install put [$installed] on the PATH, not just headlab" >&2
    exit 1
}
echo "quickstart: the README's quick start runs as written ($report, one binary: headlab)"
