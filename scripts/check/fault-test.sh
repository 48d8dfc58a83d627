#!/usr/bin/env bash
# The sweep fault test: a small sweep run once as the reference, then from scratch again and
# again while faults are injected at random moments (kill -9 of `sweep run` or of one of its
# children, SIGTERM, a second runner beside the first, writes failing with EFBIG; and, while
# a runner runs or between two, same-size damage of a run's weights or of a report, another
# run's report written over one, a report measured with other options than the sweep's, a
# `train` killed in its first 30 ms), `sweep run` started again after each until the sweep
# is done (`sweep verify` after same-size damage); then one table: faults by kind, runs and
# sweep reports equal to the reference byte for byte, runs redone after a checkpoint,
# spurious failure records, processes left running, stuck sweeps, hung runners. Exits 1
# unless all is well. See scripts/check/fault_test.py.
#
#   scripts/check/fault-test.sh                  # 50 faults, seed 0 (a few minutes)
#   scripts/check/fault-test.sh --faults 8 --seed 3 --runs 4 --steps 200 --out runs/fault-test
#   scripts/check/fault-test.sh --kinds weights-flip,report-flip --verbose  # some faults only
#
# Linux only (it reads /proc). Uses the release binaries in cargo's target directory
# (CARGO_TARGET_DIR, else target/), built first.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --workspace --bins --quiet
exec python3 scripts/check/fault_test.py --bin "${CARGO_TARGET_DIR:-target}/release" "$@"
