#!/usr/bin/env bash
# The test command: installs what it needs on a fresh machine, then runs formatting, lints,
# docs, the Rust tests of the whole workspace and the conformance suite on every backend this
# machine can run.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain"
cargo --version
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

step "cargo test --workspace"
cargo test --workspace

step "conformance suite with the portable (non-AVX2) CPU lane functions"
HOLOGRAM_CPU_SIMD=portable cargo test -p hologram-conformance --test cpu

step "demo"
cargo run --quiet --release -p hologram-cli -- demo --n 262144

printf '\nall checks passed\n'
