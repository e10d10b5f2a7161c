#!/usr/bin/env bash
# Runs bench/saxpy.py: builds the CLI in release mode and a venv with NumPy if needed.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p hologram-cli --quiet
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/python -c "import numpy" 2>/dev/null || .venv/bin/pip install --quiet numpy
.venv/bin/python bench/saxpy.py "$@"
