#!/usr/bin/env bash
# Prepares the wgpu backend's run on an NVIDIA GPU through its Vulkan driver, here (no GPU
# needed): builds the release CLI with the shipped features (cuda + wgpu), strips it into
# target/wgpu-bundle/ (git-ignored; the device tool carries it), checks .gl/ (the Vulkan loader
# .debs, see /work/.library/device/README.md) and prints the device-tool call that runs
# scripts/wgpu-gpu-run.sh there (that machine has no cargo).
#
#   bash scripts/wgpu-gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET_DIR=${CARGO_TARGET_DIR:-target}
BUNDLE=target/wgpu-bundle

printf '==> release CLI (default features: cuda, wgpu)\n'
cargo build --release -p hologram-cli
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE"
if command -v strip >/dev/null; then
    strip --strip-debug -o "$BUNDLE/hologram" "$TARGET_DIR/release/hologram"
else
    cp "$TARGET_DIR/release/hologram" "$BUNDLE/hologram"
fi
chmod +x "$BUNDLE/hologram"
ls -l "$BUNDLE"
if command -v objdump >/dev/null; then
    echo "newest glibc symbol needed: $(objdump -T "$BUNDLE/hologram" | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1)"
fi
if ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
    echo "error: .gl/ has no libvulkan1 .deb; make it as /work/.library/device/README.md says" >&2
    exit 1
fi
cat <<'CALL'

==> device-tool call (run, kind nvidia-h100-x1):
  carry: [".gl", "target/wgpu-bundle"]
  command: for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; bash scripts/wgpu-gpu-run.sh
CALL
