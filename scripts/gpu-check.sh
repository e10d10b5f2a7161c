#!/usr/bin/env bash
# Prepares a GPU run of the CUDA backend, here (no GPU needed): builds the release CLI with the
# cuda feature and the CUDA test binaries, strips them into target/gpu-bundle/ (git-ignored, so
# the device tool carries it explicitly), and prints the one device-tool call that runs
# scripts/gpu-run.sh on the GPU machine (which has no cargo).
#
#   bash scripts/gpu-check.sh
#
# GPU_CHECK_FEATURES overrides the CLI's features (default: "--no-default-features --features
# cuda"; use "" for the shipped default set, which adds wgpu).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

FEATURES=${GPU_CHECK_FEATURES---no-default-features --features cuda}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
BUNDLE=target/gpu-bundle

step "release CLI: cargo build --release -p hologram-cli $FEATURES"
# shellcheck disable=SC2086
cargo build --release -p hologram-cli $FEATURES

step "CUDA test binaries (release)"
TESTS_JSON=$(mktemp)
cargo test --release -p hologram-backends --features cuda --no-run \
    --test cuda_gpu --test cuda_codegen --message-format=json >"$TESTS_JSON"
TEST_EXES=$(python3 - "$TESTS_JSON" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("cuda_gpu", "cuda_codegen"):
        print(m["target"]["name"] + "=" + m["executable"])
EOF
)
rm -f "$TESTS_JSON"

step "bundle: $BUNDLE"
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE"
copy_stripped() {
    if command -v strip >/dev/null; then strip --strip-debug -o "$2" "$1"; else cp "$1" "$2"; fi
}
copy_stripped "$TARGET_DIR/release/hologram" "$BUNDLE/hologram"
for entry in $TEST_EXES; do
    copy_stripped "${entry#*=}" "$BUNDLE/${entry%%=*}"
done
chmod +x "$BUNDLE"/*
ls -l "$BUNDLE"
SIZE_KB=$(du -sk "$BUNDLE" | cut -f1)
echo "bundle size: $((SIZE_KB / 1024)) MiB (the device tool carries at most 64 MiB)"
if [ "$SIZE_KB" -gt $((60 * 1024)) ]; then
    echo "error: the bundle is too large to carry" >&2
    exit 1
fi
if command -v objdump >/dev/null; then
    GLIBC=$(objdump -T "$BUNDLE/hologram" | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1)
    echo "the binaries need glibc >= ${GLIBC#GLIBC_} on the GPU machine"
fi

cat <<'EOF'

==> Now make ONE device-tool call (it copies the working tree plus the bundle):

    run(command="bash scripts/gpu-run.sh", carry=["target/gpu-bundle"], timeout_s=600)

scripts/gpu-run.sh runs, on the GPU: the conformance suite on CUDA (twice, the second process
must compile nothing), the CUDA tests (out of bounds, unchecked, async, cuBLAS GEMM, copies, disk
cache), the NVRTC compile check with the machine's NVRTC, the CPU/CUDA cross-check, the demo and
the benchmarks against PyTorch, and prints a table last. Its log and the benchmark report come back
under the files of the call (gpu-run.log, bench-results/cuda.md, bench-results/cuda.json): copy the
report to bench/results/<gpu>/ and commit it.
EOF
