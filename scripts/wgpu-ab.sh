#!/usr/bin/env bash
# The wgpu and CUDA backends side by side on the GPU machine, alternating (these machines are
# noisy: compare only rows of one call): `hologram bench --quick` of the given workloads for
# each backend, RUNS times, plus extra wgpu variants named by environment settings.
#
#   RUNS=2 ONLY=latency,softmax MAX_LOG2=20 VARIANTS="NAME=value ..." bash scripts/wgpu-ab.sh
#
# Expects target/gpu-bundle/hologram (unpacked from gpu-check.sh's archive) and the Vulkan loader.
set -uo pipefail
cd "$(dirname "$0")/.."
CLI=${CLI:-target/gpu-bundle/hologram}
RUNS=${RUNS:-2}
ONLY=${ONLY:-latency,softmax}
MAX_LOG2=${MAX_LOG2:-20}
rows() { grep -E "^(hologram bench|workload|tiny|softmax|sum|add|matmul|device)" || true; }
for run in $(seq 1 "$RUNS"); do
    for backend in vulkan cuda; do
        echo "## run $run: $backend"
        "$CLI" bench --backend "$backend" --quick --max-log2 "$MAX_LOG2" --only "$ONLY" 2>&1 | rows
    done
    for v in ${VARIANTS:-}; do
        echo "## run $run: vulkan with $v"
        env "$v" "$CLI" bench --backend vulkan --quick --max-log2 "$MAX_LOG2" --only "$ONLY" 2>&1 | rows
    done
done
