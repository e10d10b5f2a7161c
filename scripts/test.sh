#!/usr/bin/env bash
# The test command: installs what it needs on a fresh machine, then runs formatting, lints,
# docs, the Rust tests of the whole workspace and the conformance suite on every backend this
# machine can run.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain and disk"
cargo --version
# A clean run needs about 10 GB (3.4 GB target/, 5.8 GB .venv with torch): show what is free
# up front, so that a full disk is plain before a step fails on it.
df -h . | tail -1
# Incremental caches only help repeated edits and take gigabytes; pip's cache would hold a
# second copy of torch's wheels.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}" PIP_NO_CACHE_DIR="${PIP_NO_CACHE_DIR:-1}"
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "Vulkan loader and Mesa's lavapipe (software Vulkan) for the wgpu backend's tests"
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1' || ! ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq mesa-vulkan-drivers libvulkan1 >/dev/null
fi
ls /usr/share/vulkan/icd.d/lvp_icd.*.json
# Mesa warns on every run without XDG_RUNTIME_DIR.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/hologram-xdg-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

step "cargo test --workspace"
cargo test --workspace --exclude hologram-py  # the extension has no Rust tests; pytest covers it

step "conformance suite with the portable (non-AVX2) CPU lane functions"
HOLOGRAM_CPU_SIMD=portable cargo test -p hologram-conformance --test cpu

step "wgpu backend: the conformance suite through the CLI on lavapipe (software Vulkan, allowed explicitly)"
HOLOGRAM_WGPU_ALLOW_SOFTWARE=1 cargo run --quiet --release -p hologram-cli -- conformance --backend vulkan

step "wgpu backend without 64-bit shader features (the code paths of Metal and most mobile GPUs)"
HOLOGRAM_WGPU_CORE_ONLY=1 HOLOGRAM_WGPU_ALLOW_SOFTWARE=1 cargo run --quiet --release -p hologram-cli -- conformance --backend vulkan
HOLOGRAM_WGPU_CORE_ONLY=1 cargo test -p hologram-conformance --test wgpu_accuracy

step "wgpu backend: the op, plan, index, norm, convolution and fast-path suites on lavapipe (f64 transcendentals are skipped and listed: WGSL has none)"
HOLOGRAM_TEST_BACKENDS=vulkan HOLOGRAM_WGPU_ALLOW_SOFTWARE=1 cargo test --release -p hologram-core --features wgpu \
    --test ops --test plan --test index --test norm --test conv --test fast_paths

step "macOS: cargo check --target aarch64-apple-darwin of hologram-backends with the wgpu feature"
MACOS_CHECK="passed"
if rustup target list --installed 2>/dev/null | grep -qx aarch64-apple-darwin || rustup target add aarch64-apple-darwin; then
    # blake3 (program digests) would compile C for the target, which needs Apple's toolchain;
    # its pure-Rust build checks the same Rust code.
    CARGO_FEATURE_PURE=1 cargo check -p hologram-backends --features wgpu --target aarch64-apple-darwin
else
    MACOS_CHECK="FAILED: the aarch64-apple-darwin target could not be installed (rustup target add aarch64-apple-darwin); the macOS check did not run"
    printf '\n!!!!!!!!\n!!! %s\n!!!!!!!!\n' "$MACOS_CHECK" >&2
fi

step "CUDA codegen: NVRTC (from PyPI, no GPU or driver needed) compiles every generated program"
# CUDA 13's NVRTC wheel is `nvidia-cuda-nvrtc` (13.x; the -cu12 names are CUDA 12).
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
NVRTC_SO=$(find -L .venv -name 'libnvrtc.so.13' 2>/dev/null | head -1)
if [ -z "$NVRTC_SO" ]; then
    .venv/bin/pip install --quiet "nvidia-cuda-nvrtc>=13,<14"
    NVRTC_SO=$(find -L .venv -name 'libnvrtc.so.13' | head -1)
fi
LD_LIBRARY_PATH="$(cd "$(dirname "$NVRTC_SO")" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    HOLOGRAM_REQUIRE_NVRTC=1 cargo test -p hologram-backends --features cuda --test cuda_codegen
# The tensor library's reduction and softmax templates, in every variant.
LD_LIBRARY_PATH="$(cd "$(dirname "$NVRTC_SO")" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    HOLOGRAM_REQUIRE_NVRTC=1 cargo test -p hologram-core --features cuda --test reduce_cuda_codegen

step "CUDA codegen: generated code run on the host (conformance suite and cross-check vs the CPU)"
cargo test -p hologram-conformance --test cuda_emulation -- --ignored

step "differential test: 1000 random programs on the CPU (native loops, interpreter), emulated CUDA C and lavapipe, every buffer compared"
# Release: naga's WGSL front end is several times slower unoptimized. LP_NUM_THREADS=0 runs
# lavapipe on the calling thread: its worker threads made the run 20 times slower on a busy
# two-core machine. CI runs a fixed seed range (programs found by earlier ranges are kept in
# tests/differential/, and CI must not fail by chance); set HOLOGRAM_DIFF_SEED to
# explore new ranges. Differing programs land in target/differential-failures/.
HOLOGRAM_DIFF_SEED=${HOLOGRAM_DIFF_SEED:-20261125000} LP_NUM_THREADS=0 \
    cargo test --release -p hologram-conformance --test differential -- --ignored

step "python: venv, the abi3 wheel (maturin), pytest"
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/pip install --quiet --upgrade pip
# torch is large (the PyPI wheel pulls CUDA libraries); the seed examples and hologram_torch need it.
.venv/bin/pip install --quiet "numpy<2.5" pytest maturin scikit-learn matplotlib torch torchvision \
    "ruff==0.17.6" "mypy==2.4.1"

step "python: ruff and mypy (configured in pyproject.toml)"
.venv/bin/ruff check python tests/python bench examples scripts
.venv/bin/mypy
rm -rf target/wheels
.venv/bin/maturin build --release --quiet -o target/wheels
.venv/bin/pip install --quiet --force-reinstall --no-deps target/wheels/hologram-*.whl
(cd tests/python && ../../.venv/bin/python -m pytest -q -p no:cacheprovider .)

step "python: the tests again with the wgpu backend on lavapipe added to the CPU"
(cd tests/python && HOLOGRAM_TEST_BACKENDS=vulkan HOLOGRAM_WGPU_ALLOW_SOFTWARE=1 \
    ../../.venv/bin/python -m pytest -q -p no:cacheprovider .)

step "benchmarks: bench/run.py and bench/report.py on a small quick run (the reports' code paths)"
.venv/bin/python bench/run.py --device cpu --quick --only ceiling,latency,compile_time --out target/bench-smoke/run.json
.venv/bin/python bench/report.py target/bench-smoke/run.json --out target/bench-smoke
test -s target/bench-smoke/report.md
# The model benchmark (eager, torch.compile(backend="hologram"), compile_step) at small sizes.
.venv/bin/python bench/models.py --device cpu --small --impls eager,hologram,hologram-step \
    --blocks 1 --per-block 1 --json target/bench-smoke/models.json

step "demo"
cargo run --quiet --release -p hologram-cli -- demo --n 262144

if [ "$MACOS_CHECK" != "passed" ]; then printf '\nmacOS check: %s\n' "$MACOS_CHECK"; fi
printf '\nall checks passed\n'
