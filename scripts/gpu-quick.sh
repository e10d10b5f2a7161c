#!/usr/bin/env bash
# A short GPU run of the plan/graph-compiler work: the plan and index tests on CUDA, and
# bench/models.py for the MLP and the GPT (eager, inductor, hologram). Bundle: target/gpu-quick
# (the wheel and the two test binaries).
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-quick}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu-quick.log") 2>&1
python3 -m pip install -q --no-deps --target /tmp/hgsite target/gpu-quick/*.whl && export PYTHONPATH=/tmp/hgsite
for d in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))'); do
  for l in "$d"/nvidia/*/lib; do [ -d "$l" ] && export LD_LIBRARY_PATH="$l:${LD_LIBRARY_PATH:-}"; done
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== plan + index tests on CUDA"
HOLOGRAM_TEST_BACKENDS=cuda timeout 120 target/gpu-quick/plan 2>&1 | tail -4
HOLOGRAM_TEST_BACKENDS=cuda timeout 120 target/gpu-quick/index 2>&1 | tail -4
HOLOGRAM_TEST_BACKENDS=cuda timeout 120 target/gpu-quick/norm 2>&1 | tail -4
HOLOGRAM_TEST_BACKENDS=cuda timeout 120 target/gpu-quick/conv 2>&1 | tail -4
echo "== models"
timeout ${MODELS_TIMEOUT:-400} python3 bench/models.py --device cuda ${MODELS_ARGS:---only mlp,mlp_infer64,gpt} --json "$OUT/models-cuda.json"
