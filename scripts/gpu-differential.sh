#!/usr/bin/env bash
# The differential test and the transcendental accuracy measurement with the real CUDA backend,
# on the GPU machine (which has no cargo). Here:
#
#   bash scripts/gpu-differential.sh
#
# builds them with the conformance crate's `cuda` feature, strips them into
# target/gpu-differential/ (git-ignored) and prints the device-tool call, which runs this script
# again there with `run`: the conformance suite on CUDA, every transcendental measured on CUDA,
# and HOLOGRAM_DIFF_PROGRAMS random programs (default 400) on the CPU, the CUDA C emulated on the
# host and the real CUDA backend. wgpu is left out there (NVIDIA's Vulkan driver flushes f32
# subnormals, which random programs make). Results come back under the call's files.
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE=target/gpu-differential

if [ "${1:-}" = run ]; then
    OUT=${OUT:-$(mktemp -d)}
    # The test binaries find the suite and the emulation's shim through the path they were
    # built in.
    BUILT=$(cat "$BUNDLE/built-in")
    if [ ! -e "$BUILT" ]; then mkdir -p "$(dirname "$BUILT")" && ln -sfn "$PWD" "$BUILT"; fi
    NV=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null || true)
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$NV/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
    export VK_ICD_FILENAMES=/nonexistent.json HOLOGRAM_WGPU_TESTS=skip
    { nvidia-smi -L; command -v c++; } >"$OUT/env.txt" 2>&1 || true
    timeout 150 "$BUNDLE/hologram" conformance --backend cuda >"$OUT/conformance-cuda.txt" 2>&1 || true
    timeout 90 "$BUNDLE/transcendental_ulp" --nocapture >"$OUT/ulp.txt" 2>&1 || true
    HOLOGRAM_DIFF_PROGRAMS=${HOLOGRAM_DIFF_PROGRAMS:-400} timeout "${DIFF_TIMEOUT_S:-240}" \
        "$BUNDLE/differential" --ignored --nocapture >"$OUT/differential.txt" 2>&1 || true
    timeout 60 "$BUNDLE/differential" kept --nocapture >>"$OUT/differential.txt" 2>&1 || true
    tar czf "$OUT/failures.tgz" target/differential-failures 2>/dev/null || true
    tail -n 3 "$OUT"/*.txt
    exit 0
fi

cargo build --release -p hologram-cli
JSON=$(mktemp)
cargo test --release -p hologram-conformance --features cuda --no-run \
    --test differential --test transcendental_ulp --message-format=json >"$JSON"
rm -rf "$BUNDLE" && mkdir -p "$BUNDLE"
python3 - "$JSON" "$BUNDLE" <<'PY'
import json, shutil, subprocess, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        name = m["target"]["name"]
        if name in ("differential", "transcendental_ulp"):
            subprocess.run(["strip", "--strip-debug", "-o", f"{sys.argv[2]}/{name}", m["executable"]], check=True)
PY
rm -f "$JSON"
strip --strip-debug -o "$BUNDLE/hologram" target/release/hologram
(cd crates/hologram-conformance/../.. && pwd) >"$BUNDLE/built-in"
du -sh "$BUNDLE"
cat <<'MSG'

Now one device-tool call:

    run(command="bash scripts/gpu-differential.sh run", carry=["target/gpu-differential"], timeout_s=600)
MSG
