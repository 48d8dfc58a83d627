#!/usr/bin/env bash
# Fuzzes the config parser (with --set overrides) and the JSONL dataset reader for a bounded
# time (crates/train/tests/fuzz.rs, `fuzz_for_a_while`), then reports how long it ran, how
# many inputs it tried, how many distinct outcomes they reached (accepted, or refused with a
# message of each kind) and the line coverage of the code under test.
#
#   scripts/check/fuzz.sh [SECONDS]          (default 60; HEADLAB_FUZZ_SEED=N picks another seed)
#
# Coverage needs the LLVM tools of the Rust toolchain (`rustup component add llvm-tools`).
# With them, the train crate is built with -C instrument-coverage in a target directory of
# its own ($CARGO_TARGET_DIR-coverage), seeded with hard links to the dependencies already
# built in $CARGO_TARGET_DIR, so Burn is not compiled again: only headlab's crates are.
# Without them the fuzzer runs uninstrumented and says that coverage was not measured.
# Output (outcomes.txt, any failing input, coverage.txt) goes to $HEADLAB_FUZZ_OUT (default
# $CARGO_TARGET_DIR/fuzz; the target directory is cargo's, target/ unless CARGO_TARGET_DIR says).
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds="${1:-60}"
# The target directory plain cargo uses.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
out="${HEADLAB_FUZZ_OUT:-$CARGO_TARGET_DIR/fuzz}"

# Empties a directory this script made before (it holds .headlab-fuzz), or makes a new one;
# refuses any other non-empty directory, so a mistyped HEADLAB_FUZZ_OUT deletes nothing.
fresh_dir() {
    local dir="$1"
    if [[ -L "$dir" ]]; then
        echo "fuzz.sh: $dir is a symbolic link; not clearing it" >&2
        exit 1
    fi
    if [[ -d "$dir" && -n "$(ls -A "$dir")" && ! -f "$dir/.headlab-fuzz" ]]; then
        echo "fuzz.sh: $dir is not empty and was not made by fuzz.sh; choose another directory" >&2
        exit 1
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    touch "$dir/.headlab-fuzz"
}
fresh_dir "$out"
export HEADLAB_FUZZ_SECONDS="$seconds" HEADLAB_FUZZ_OUT="$out"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"

host=$(rustc -vV | sed -n 's/^host: //p')
tools="$(rustc --print sysroot)/lib/rustlib/$host/bin"
if [[ ! -x "$tools/llvm-profdata" || ! -x "$tools/llvm-cov" ]]; then
    echo "== fuzzing for ${seconds} s (coverage not measured: no llvm-tools in $tools)"
    cargo test --release -p train --test fuzz -- --ignored --exact fuzz_for_a_while --nocapture
    exit 0
fi

# The main build first, so the seed below holds every dependency at its current version.
cargo test --release -p train --test fuzz --no-run
main="$CARGO_TARGET_DIR/release"
cov_target="$CARGO_TARGET_DIR-coverage"
cov="$cov_target/release"
fresh_dir "$cov_target"
mkdir -p "$cov/deps"
# Cargo rewrites fingerprints and dep-info files in place, so those are copied; rustc and
# the linker replace their outputs rather than write into them, so the rest is hard-linked.
cp -a "$main/.fingerprint" "$cov/.fingerprint"
cp -al "$main/build" "$cov/build"
find "$main/deps" -maxdepth 1 -type f ! -name '*.d' -exec ln -t "$cov/deps" {} +
find "$main/deps" -maxdepth 1 -type f -name '*.d' -exec cp -p -t "$cov/deps" {} +

echo "== building the instrumented fuzzer in $cov_target"
exe=$(CARGO_TARGET_DIR="$cov_target" CARGO_INCREMENTAL=0 \
    RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/check/coverage-rustc.sh" \
    cargo test --release -p train --test fuzz --no-run --message-format=json |
    sed -n 's/.*"executable":"\([^"]*\/fuzz-[0-9a-f]*\)".*/\1/p' | tail -1)
[[ -x "$exe" ]] || { echo "no fuzz executable was built" >&2; exit 1; }

echo "== fuzzing for ${seconds} s (instrumented)"
LLVM_PROFILE_FILE="$out/profraw/fuzz-%p-%m.profraw" \
    "$exe" --ignored --exact fuzz_for_a_while --nocapture

"$tools/llvm-profdata" merge -sparse "$out"/profraw/*.profraw -o "$out/fuzz.profdata"
sources=(crates/run/src/config.rs crates/tasks/src/task.rs crates/tasks/src/generators/file.rs)
echo "== coverage of the code under test (whole files)"
"$tools/llvm-cov" report "$exe" -instr-profile="$out/fuzz.profdata" \
    "${sources[@]/#/$PWD/}" | sed "s|$PWD/||"
"$tools/llvm-cov" show "$exe" -instr-profile="$out/fuzz.profdata" -format=text \
    -show-line-counts-or-regions "${sources[@]/#/$PWD/}" >"$out/coverage.txt"
echo "line by line: $out/coverage.txt; outcomes: $out/outcomes.txt"
