#!/usr/bin/env bash
# Installs what headlab needs beyond the Rust toolchain: a software Vulkan driver
# (lavapipe, from mesa-vulkan-drivers) so the wgpu backend runs without a GPU.
# Safe to run again; does nothing when the driver is there.
set -euo pipefail

if ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: no apt-get here; install a Vulkan driver yourself to use --backend wgpu" >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing mesa-vulkan-drivers (software Vulkan for the wgpu backend)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq mesa-vulkan-drivers >/dev/null
