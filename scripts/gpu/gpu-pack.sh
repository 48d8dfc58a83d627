#!/usr/bin/env bash
# Packs what scripts/gpu/gpu-check.sh needs on a GPU machine that has no Rust toolchain and no
# network: headlab's release binaries (stripped, compressed) and the Vulkan loader with the
# libraries NVIDIA's Vulkan driver loads through (Debian packages, unpacked there with
# `dpkg -x`). The configs and the PyTorch reference are not copied: gpu-check.sh runs from a
# checkout, and the checkout travels with the pack.
#
#   scripts/gpu/gpu-pack.sh              # builds, then writes gpu-pack/ (ignored by git)
#   scripts/gpu/gpu-pack.sh --out DIR    # somewhere else
#
# Prints the pack's size; fails if it is 64 MiB or more (what such a machine takes with
# the checkout). Uses cargo's target directory (CARGO_TARGET_DIR if set, else target/).
set -euo pipefail
cd "$(dirname "$0")/../.."

out=gpu-pack
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "gpu-pack: unknown argument $1 (expected --out DIR)" >&2; exit 2 ;;
    esac
done
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
limit_mib=64
# The binaries gpu-check.sh runs.
binaries=(headlab)
# The Vulkan loader, and the GL vendor-neutral dispatch libraries that NVIDIA's driver
# (its Vulkan ICD lives in libGLX_nvidia) links against. Small: about 1 MiB together.
packages=(libvulkan1 libglvnd0 libglx0 libgl1 libegl1 libopengl0 libgles2)

# Only a pack this script wrote is ever replaced: a directory (not a link) holding exactly
# what it writes. Checked before the work and again before the replacement.
is_pack() {
    [ -d "$1" ] && [ ! -L "$1" ] && [ -f "$1/bin.tar.xz" ] && [ -f "$1/COMMIT" ] &&
        [ -z "$(ls -A "$1" | grep -v -x -e bin.tar.xz -e COMMIT -e debs)" ]
}
refuse_unless_pack() {
    if { [ -e "$out" ] || [ -L "$out" ]; } && ! is_pack "$out"; then
        echo "gpu-pack: $out exists and is not a pack gpu-pack.sh wrote; not replacing it" >&2
        exit 1
    fi
}
refuse_unless_pack

echo "gpu-pack: building the release binaries"
cargo build --release --workspace --bins --quiet

# Written in a new directory beside the pack and renamed at the end: a failed pack never
# leaves a half one, and nothing but what this run made is removed.
mkdir -p "$(dirname "$out")"
staging=$(mktemp -d "$out.partial.XXXXXX")
lists=$(mktemp -d)
trap 'rm -rf -- "$staging" "$lists"' EXIT
mkdir -p "$staging/bin" "$staging/debs"

for binary in "${binaries[@]}"; do
    strip -o "$staging/bin/$binary" "$CARGO_TARGET_DIR/release/$binary"
done
# One compressed archive: the binaries share most of their code (Burn, wgpu), which xz
# finds across files.
tar -C "$staging" -cf - bin | xz -9 -T0 >"$staging/bin.tar.xz"
rm -rf -- "$staging/bin"

echo "gpu-pack: downloading ${packages[*]} (amd64)"
mkdir -p "$lists/partial"
apt_options=(-o APT::Architecture=amd64 -o APT::Architectures=amd64 -o "Dir::State::Lists=$lists"
    -o APT::Sandbox::User=root)
apt-get "${apt_options[@]}" update -qq
(cd "$staging/debs" && apt-get "${apt_options[@]}" download "${packages[@]}" >/dev/null)

git rev-parse HEAD >"$staging/COMMIT" 2>/dev/null || echo unknown >"$staging/COMMIT"
if ! git diff --quiet HEAD -- 2>/dev/null; then
    echo "(plus uncommitted changes)" >>"$staging/COMMIT"
fi

refuse_unless_pack
if [ -e "$out" ]; then
    rm -rf -- "$out"
fi
# mktemp made it 0700; a pack is read by whoever runs the check.
chmod 755 "$staging"
mv -- "$staging" "$out"

bytes=$(du -sb "$out" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "gpu-pack: $out is $mib MiB ($(ls "$out/debs" | wc -l) packages, binaries: ${binaries[*]})"
if [ "$bytes" -ge $((limit_mib * 1048576)) ]; then
    echo "gpu-pack: $out is over ${limit_mib} MiB" >&2
    exit 1
fi
