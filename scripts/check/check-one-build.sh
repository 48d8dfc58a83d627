#!/usr/bin/env bash
# The one-build check: after a build of the whole workspace, building any one package alone
# (what `cargo run -p headlab`, `cargo test -p model`, `cargo test -p inspect` do) must compile
# no crate from outside the workspace. If one does, the package asked for other dependency
# features than the workspace, and a user would wait for Burn to compile a second time.
#
# The workspace-hack crate (kept by `cargo hakari generate`) is what makes this hold; after
# changing a dependency or its features, run `cargo hakari generate && cargo hakari
# manage-deps` (install it with `cargo install cargo-hakari --locked`).
#
# Uses the target directory plain cargo uses (CARGO_TARGET_DIR if set, else target/).
set -euo pipefail
cd "$(dirname "$0")/../.."

packages=(testkit model tasks run hf train inspect report bench sweep headlab)

echo "one-build check: building the workspace (tests included)"
cargo build --release --workspace --all-targets --quiet

failed=0
for package in "${packages[@]}"; do
    # Plain (what `cargo run -p` builds) and with tests (what `cargo test -p` builds).
    for targets in "" "--all-targets"; do
        # shellcheck disable=SC2086
        log=$(cargo build --release -p "$package" $targets 2>&1) || {
            echo "$log"
            echo "one-build check: cargo build -p $package $targets failed" >&2
            exit 1
        }
        # Workspace crates print their path: "Compiling train v0.1.0 (/…/crates/train)".
        outside=$(grep -E '^\s*Compiling ' <<<"$log" | grep -v ' (/' | sed -E 's/^\s*Compiling //' || true)
        if [ -n "$outside" ]; then
            echo "one-build check: 'cargo build --release -p $package $targets' compiled crates from outside the workspace:" >&2
            echo "$outside" | sed 's/^/    /' >&2
            failed=1
        fi
    done
done
if [ "$failed" -ne 0 ]; then
    echo "one-build check FAILED: run 'cargo hakari generate && cargo hakari manage-deps' and commit crates/workspace-hack" >&2
    exit 1
fi
echo "one-build check: every package reuses the workspace's build of its dependencies"
