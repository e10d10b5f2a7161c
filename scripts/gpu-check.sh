#!/usr/bin/env bash
# Prepares the GPU run, here (no GPU needed): builds the release CLI (CUDA and wgpu), the CUDA
# test binaries, the op test suite and the Python wheel, strips them into target/gpu-bundle/
# (git-ignored, so the device tool carries it explicitly), and prints the one device-tool call
# that runs scripts/gpu-run.sh on the GPU machine (which has no cargo): every GPU test and
# benchmark in one go, a table last.
#
#   bash scripts/gpu-check.sh
#
# GPU_CHECK_FEATURES overrides the CLI's features (default: "", the shipped set: cuda and wgpu).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

FEATURES=${GPU_CHECK_FEATURES-}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
BUNDLE=target/gpu-bundle

step "release CLI: cargo build --release -p hologram-cli $FEATURES"
# shellcheck disable=SC2086
cargo build --release -p hologram-cli $FEATURES

step "CUDA test binaries (release)"
TESTS_JSON=$(mktemp)
cargo test --release -p hologram-backends --features cuda --no-run \
    --test cuda_gpu --test cuda_codegen --message-format=json >"$TESTS_JSON"
cargo test --release -p hologram-core --features cuda,wgpu --no-run --test ops --test reduce_softmax \
    --test plan --test index --test norm --test conv --test attention --test gemm_shapes --message-format=json >>"$TESTS_JSON"
TEST_EXES=$(python3 - "$TESTS_JSON" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("cuda_gpu", "cuda_codegen", "ops", "reduce_softmax", "plan", "index", "norm", "conv", "attention", "gemm_shapes"):
        print(m["target"]["name"] + "=" + m["executable"])
EOF
)
rm -f "$TESTS_JSON"

step "bundle: $BUNDLE"
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE"
copy_stripped() {
    if command -v strip >/dev/null; then strip -o "$2" "$1"; else cp "$1" "$2"; fi
}
copy_stripped "$TARGET_DIR/release/hologram" "$BUNDLE/hologram"
for entry in $TEST_EXES; do
    copy_stripped "${entry#*=}" "$BUNDLE/${entry%%=*}"
done
chmod +x "$BUNDLE"/*

step "Python wheel (abi3, cuda + wgpu)"
MATURIN=${MATURIN:-$(command -v .venv/bin/maturin || command -v maturin || true)}
if [ -n "$MATURIN" ]; then
    "$MATURIN" build --release --quiet -o "$BUNDLE/wheel"
    # The GPU needs no debug info in the extension: strip it inside the wheel.
    python3 scripts/strip_wheel.py "$BUNDLE"/wheel/*.whl
else
    echo "no maturin (run bash scripts/test.sh once, or pip install maturin): the Python steps will be skipped"
fi
if ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
    echo "note: .gl/ has no Vulkan loader .debs (see /work/.library/device/README.md): the Vulkan step will be skipped"
fi
ls -lR "$BUNDLE"
SIZE_KB=$(du -sk "$BUNDLE" | cut -f1)
echo "bundle size: $((SIZE_KB / 1024)) MiB"
# The working tree and what is carried must stay under 64 MiB together: the bundle travels as
# one xz archive (about a quarter of its size), unpacked on the GPU machine.
tar -C "$(dirname "$BUNDLE")" -cf - "$(basename "$BUNDLE")" | xz -T0 -6 >"$BUNDLE.tar.xz"
ARCHIVE_MB=$(( $(stat -c %s "$BUNDLE.tar.xz") / 1048576 ))
echo "archive: $BUNDLE.tar.xz ($ARCHIVE_MB MiB; the device tool carries at most 64 MiB with the tree)"
if [ "$ARCHIVE_MB" -gt 40 ]; then
    echo "error: the bundle archive is too large to carry" >&2
    exit 1
fi
if command -v objdump >/dev/null; then
    GLIBC=$(objdump -T "$BUNDLE/hologram" | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1)
    echo "the binaries need glibc >= ${GLIBC#GLIBC_} on the GPU machine"
fi

cat <<'EOF'

==> Now make ONE device-tool call (it copies the working tree plus the bundle):

    run(command="tar -C target -xJf target/gpu-bundle.tar.xz; for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; bash scripts/gpu-run.sh",
        carry=[".gl", "target/gpu-bundle.tar.xz"], timeout_s=600)

scripts/gpu-run.sh runs, on the GPU: the conformance suite on CUDA (twice, the second process
must compile nothing), the benchmarks of the CUDA backend against PyTorch, the CUDA tests (out
of bounds, unchecked, async, cuBLAS GEMM, copies, disk cache), the CPU/CUDA cross-check, the
NVRTC compile check with the machine's NVRTC, the demo, the op test suite on CUDA, the cache
statistics, the conformance suite on wgpu through NVIDIA's Vulkan driver, the Python tests on
CUDA, and the benchmark suites (bench/run.py against PyTorch, torch.compile and CuPy; hologram
bench), and prints a table last. What comes back (under the call's files): gpu-run.log,
bench-results/cuda.md and cuda.json, run-cuda.json, rust-bench-cuda.json. Then, here:

    python bench/report.py <files>/run-cuda.json <files>/rust-bench-cuda.json --out bench/results/<gpu>
EOF
