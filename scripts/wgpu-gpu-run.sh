#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after the Vulkan loader from .gl/ has been
# unpacked (see scripts/wgpu-gpu-check.sh, which prints the whole device-tool call):
#
#   for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; bash scripts/wgpu-gpu-run.sh
#
# 1. hologram info (the NVIDIA adapter must be listed as a hardware Vulkan adapter),
# 2. the conformance suite on the wgpu backend through NVIDIA's Vulkan driver,
# 3. vector add 2^24: wgpu/Vulkan vs CUDA vs CPU (bench/vector_add.sh), results checked.
# Every step runs even if an earlier one failed; the log goes to $OUT (or a temporary folder).
set -u -o pipefail
cd "$(dirname "$0")/.."
H=${HOLOGRAM:-target/wgpu-bundle/hologram}
OUT=${OUT:-$(mktemp -d /tmp/wgpu-run.XXXXXX)}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/wgpu-gpu-run.log") 2>&1
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/xdg-$(id -u)}
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
# NVIDIA's ICD is not in the default search path on these machines.
NV_ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f "$NV_ICD" ] && [ -z "${VK_DRIVER_FILES:-}" ]; then export VK_DRIVER_FILES=$NV_ICD; fi
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
ldconfig -p | grep libvulkan || echo "no libvulkan: unpack .gl/*.deb first"
nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 || true
# For the CUDA comparison: NVRTC and cuBLAS from the CUDA toolkit or PyTorch's wheels.
for lib in libnvrtc.so libcublas.so; do
    ldconfig -p | grep -q "$lib" && continue
    for dir in /usr/local/cuda/lib64 /usr/local/cuda-*/lib64 \
        $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null | sed 's|\([^ ]*\)|\1/nvidia/*/lib|g'); do
        if ls "$dir/$lib"* >/dev/null 2>&1; then export LD_LIBRARY_PATH="$dir:${LD_LIBRARY_PATH:-}"; break; fi
    done
done
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"

echo; echo "==> hologram info"
timeout 60 "$H" info
echo; echo "==> conformance on the wgpu backend (Vulkan, hardware adapter)"
timeout 600 "$H" conformance --backend vulkan --dir tests/conformance
echo "conformance exit status: $?"
echo; echo "==> vector add 2^24: vulkan vs cuda vs cpu"
HOLOGRAM_WGPU_ALLOW_SOFTWARE=0 HOLOGRAM="$H" REPEAT=${REPEAT:-20} timeout 600 bash bench/vector_add.sh vulkan cuda cpu
echo; echo "log: $OUT/wgpu-gpu-run.log"
