#!/usr/bin/env bash
# Runs the README's quick start as written: every command of the code blocks in its
# "## Quick start" section, in order, from the repository root, each of which must succeed;
# then checks that the report they make is there, that it shows heads that differ (the
# README's "What to look at"), and that `cargo install` put exactly one binary, `headlab`,
# on the PATH. `.ci/run` calls it, so a README whose commands stop
# working fails CI.
#
#   scripts/check/quickstart.sh
#
# `scripts/setup/setup.sh` is skipped (CI has run it already). `cargo install` installs into a
# temporary root (its `--root`, added here), which leads the PATH for the commands after it,
# so running this installs nothing for the user; with CARGO_TARGET_DIR set (as in CI and in
# the README's advice) it reuses the workspace's build instead of compiling Burn again.
# Writes runs/recall/ in the checkout, as the README's commands do (runs/ is git-ignored).
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

report=runs/recall/inspect/index.html
[ -f "$report" ] || {
    echo "quickstart: the README's commands ran but $report is missing" >&2
    exit 1
}
# The report answers the project's question, as the README's "What to look at" says: a
# phase change in training, heads of different roles, ablations that separate them and
# patching that is not all zero. The thresholds are loose; the README has the numbers.
python3 - runs/recall <<'EOF_PY' || exit 1
import json, sys
run = sys.argv[1]
def fail(message):
    sys.exit(f"quickstart: the quick start's report does not show differing heads: {message}")
evals = [m for m in map(json.loads, open(f"{run}/metrics.jsonl")) if "eval_token_acc" in m]
plateau = [m["step"] for m in evals if m["step"] >= 1000 and m["eval_token_acc"] < 0.5]
if not plateau or evals[-1]["eval_token_acc"] < 0.99:
    fail("no phase change (eval token accuracy under 50% after step 1000, then 99%)")
heads = json.load(open(f"{run}/inspect/heads.json"))
roles = {h["role"] for h in heads}
if len(roles) < 2:
    fail(f"every head has the role {roles}")
drops = [h["resample_ablation_drop"] for h in heads]
if max(drops) - min(drops) < 0.1:
    fail(f"resample ablation drops span only {min(drops):.3f} to {max(drops):.3f}")
patching = json.load(open(f"{run}/inspect/patching.json"))
for pairs in ("answer", "route"):
    restored = max(h["restored"] for h in patching[pairs]["heads"])
    if restored < 0.2:
        fail(f"no head restores 0.2 of the {pairs} pairs' logit difference (best {restored:.3f})")
print(f"quickstart: the report shows roles {sorted(roles)}, resample drops "
      f"{min(drops):.3f} to {max(drops):.3f}, a plateau until step {plateau[-1]}")
EOF_PY
installed=$(ls "$root/bin")
[ "$installed" = headlab ] || {
    echo "quickstart: cargo install put [$installed] on the PATH, not just headlab" >&2
    exit 1
}
echo "quickstart: the README's quick start runs as written ($report, one binary: headlab)"
