#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with the binaries that scripts/gpu-check.sh
# built (target/gpu-bundle/; there is no cargo there):
#
#   bash scripts/gpu-run.sh
#
# Every step runs even if an earlier one failed; each command is echoed before it runs; the
# last thing printed is a table of the steps. The log and the benchmark report are written
# under $OUT (the device tool brings that folder back) or a temporary folder.
set -u -o pipefail
cd "$(dirname "$0")/.."

BUNDLE=${BUNDLE:-target/gpu-bundle}
H=$BUNDLE/hologram
OUT=${OUT:-$(mktemp -d /tmp/gpu-run.XXXXXX)}
mkdir -p "$OUT"
LOG="$OUT/gpu-run.log"
exec > >(tee -a "$LOG") 2>&1
SCRATCH=$(mktemp -d /tmp/hologram-gpu.XXXXXX)
CONF=tests/conformance
STEPS=()

# record NAME STATUS DETAIL (tab-separated in STEPS)
# A step left out by GPU_RUN_SKIP / GPU_RUN_ONLY is recorded as such, whatever its status says.
record() {
    if [ "${LAST_NOT_RUN:-0}" = 1 ]; then
        STEPS+=("$1"$'\t'"not run"$'\t'"left out by GPU_RUN_SKIP / GPU_RUN_ONLY")
        LAST_NOT_RUN=0
        return
    fi
    STEPS+=("$1"$'\t'"$2"$'\t'"$3")
}

# The whole run must end, table printed, before the device tool's limit (600 s by default).
BUDGET=${GPU_RUN_BUDGET_S:-560}

# step NAME TIMEOUT CMD...: echoes and runs CMD with a time limit (cut to what is left of the
# budget), output to the log and to $SCRATCH/NAME.out; returns CMD's status.
# GPU_RUN_SKIP / GPU_RUN_ONLY: space-separated step names to leave out / to run alone (a full run
# takes more than one device call: split it, e.g. GPU_RUN_SKIP="bench runpy models profile rustbench"
# then GPU_RUN_ONLY="info bench runpy models profile rustbench").
step() {
    local name=$1 limit=$2
    shift 2
    LAST_NOT_RUN=0
    if [[ " ${GPU_RUN_SKIP:-} " == *" $name "* ]] || { [ -n "${GPU_RUN_ONLY:-}" ] && [[ " $GPU_RUN_ONLY " != *" $name "* ]]; }; then
        LAST_NOT_RUN=1
        printf '\n==> %s: not in this run\n' "$name"
        echo "not in this run" >"$SCRATCH/$name.out"
        return 98
    fi
    local left=$((BUDGET - SECONDS - 15))
    if [ "$left" -lt 20 ]; then
        printf '\n==> %s: skipped, out of time\n' "$name"
        echo "skipped: out of time" >"$SCRATCH/$name.out"
        return 99
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    printf '\n==> %s (limit %s s)\n+ %s\n' "$name" "$limit" "$*"
    timeout "$limit" "$@" 2>&1 | tee "$SCRATCH/$name.out"
    local rc=${PIPESTATUS[0]}
    [ "$rc" = 124 ] && echo "(timed out after $limit s)"
    return "$rc"
}

# The CUDA libraries: libcuda from the driver; NVRTC and cuBLAS from the system, the CUDA
# toolkit, or Python wheels (torch's nvidia-* packages), whichever is found first.
find_lib() {
    local name=$1 dir
    if ldconfig -p 2>/dev/null | grep "$name" >/dev/null; then return 0; fi
    local ldp=${LD_LIBRARY_PATH:-}
    for dir in ${ldp//:/ } /usr/local/cuda/lib64 /usr/local/cuda-*/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
        if ls "$dir/$name"* >/dev/null 2>&1; then export LD_LIBRARY_PATH="$dir:${LD_LIBRARY_PATH:-}"; return 0; fi
    done
    local site
    for site in $(python3 -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
        for dir in "$site"/nvidia/*/lib; do
            if ls "$dir/$name"* >/dev/null 2>&1; then export LD_LIBRARY_PATH="$dir:${LD_LIBRARY_PATH:-}"; return 0; fi
        done
    done
    return 1
}
printf '==> environment\n'
for lib in libcuda.so libnvrtc.so libcublas.so libnccl.so; do
    if find_lib "$lib"; then echo "found $lib"; else echo "NOT FOUND: $lib"; fi
done
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
# NVLink multicast (NVLS) stays off for every NCCL user here (issue 16).
export NCCL_NVLS_ENABLE=0
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
echo "GPUs: ${GPUS:-0}; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || echo "nvidia-smi failed"
ls -l "$BUNDLE" || echo "no bundle at $BUNDLE: run scripts/gpu-check.sh first and carry target/gpu-bundle"

# 1. What Hologram sees.
if step info 60 "$H" info && grep -q "cuda    available" "$SCRATCH/info.out"; then
    record "hologram info" ok "$(grep 'cuda ' "$SCRATCH/info.out" | head -1 | sed 's/  */ /g')"
else
    record "hologram info" FAIL "$(grep 'cuda ' "$SCRATCH/info.out" 2>/dev/null | head -1 | sed 's/  */ /g')"
fi

# 2. The conformance suite on CUDA, in a fresh cache, then again in a second process (which
# must compile nothing). A first run that times out (a hang) is not repeated.
CACHE="$SCRATCH/cache"
conformance() {
    local run=$1 s=ok
    HOLOGRAM_CACHE_DIR="$CACHE" step "conformance$run" 150 "$H" conformance --backend cuda --dir "$CONF" || s=FAIL
    record "conformance on CUDA (process $run)" "$s" "$(grep -E '^[0-9]+ tests:' "$SCRATCH/conformance$run.out"); $(grep -o 'nvrtc_compiles=[0-9]* memory_hits=[0-9]* disk_hits=[0-9]*' "$SCRATCH/conformance$run.out")"
}
conformance 1
if grep -q 'timed out' "$SCRATCH/conformance1.out"; then
    record "conformance on CUDA (process 2)" skipped "the first run hung"
else
    conformance 2
fi
if grep -q 'nvrtc_compiles=0 ' "$SCRATCH/conformance2.out" 2>/dev/null && grep -q 'disk_hits=[1-9]' "$SCRATCH/conformance2.out"; then
    record "second process: zero NVRTC compiles" ok "$(grep -o 'nvrtc_compiles=[0-9]* memory_hits=[0-9]* disk_hits=[0-9]*' "$SCRATCH/conformance2.out")"
else
    record "second process: zero NVRTC compiles" FAIL "$(grep 'cuda kernel cache' "$SCRATCH/conformance2.out" 2>/dev/null)"
fi

# Later steps reuse the warm cache.
export HOLOGRAM_CACHE_DIR="$CACHE"

# 3. Benchmarks against PyTorch, in one run (report and raw numbers under $OUT/bench-results).
if step bench 240 python3 bench/cuda_bench.py --hologram "$H" --out-dir "$OUT/bench-results"; then s=ok; else s="FAIL or target missed"; fi
record "benchmarks vs PyTorch" "$s" "report: $OUT/bench-results/cuda.md"

# 4. CUDA-specific tests (out of bounds, unchecked, async/sync, cuBLAS GEMM, copies, disk cache).
if HOLOGRAM_REQUIRE_GPU=1 step cudatests 120 "$BUNDLE/cuda_gpu" --test-threads=1 --nocapture; then s=ok; else s=FAIL; fi
record "CUDA tests (cuda_gpu)" "$s" "$(grep -E '^test result|^test .* FAILED' "$SCRATCH/cudatests.out" | tr '\n' ' ')"

# 4b. NCCL on one GPU: communicators of size 1 (buffers and tensors), gradient buckets, copies
# between two executors of one GPU. (The NCCL tests live in the cuda_gpu and plan binaries: the
# bundle has no room for binaries of their own.)
if HOLOGRAM_REQUIRE_GPU=1 HOLOGRAM_REQUIRE_NCCL=1 step nccl 120 bash -c "\"$BUNDLE/cuda_gpu\" --test-threads=1 --nocapture nccl::single_gpu nccl::missing && \"$BUNDLE/plan\" --test-threads=1 --nocapture collective::single_gpu"; then s=ok; else s=FAIL; fi
record "NCCL, one GPU (cuda_gpu, plan: single_gpu)" "$s" "$(grep -E '^NCCL |^test result|^test .* FAILED' "$SCRATCH/nccl.out" | tr '\n' ' ')"
# 4c. NCCL across every GPU: each collective from one thread and one thread per GPU, peer copies,
# gradient buckets averaged across ranks.
if [ "${GPUS:-0}" -ge 2 ]; then
    if HOLOGRAM_REQUIRE_GPU=1 HOLOGRAM_REQUIRE_NCCL=1 step multigpu 180 bash -c "\"$BUNDLE/cuda_gpu\" --test-threads=1 --nocapture nccl::all_gpus && \"$BUNDLE/plan\" --test-threads=1 --nocapture collective::all_gpus"; then s=ok; else s=FAIL; fi
    record "NCCL, all $GPUS GPUs (cuda_gpu, plan: all_gpus)" "$s" "$(grep -E '^test result|^test .* FAILED|skipped' "$SCRATCH/multigpu.out" | tr '\n' ' ')"
else
    echo "multigpu: skipped, this machine has ${GPUS:-0} GPU (the all-GPU collectives need 2 or more)"
    record "NCCL, all GPUs (all_gpus tests)" skipped "${GPUS:-0} GPU: needs 2 or more"
fi

# 5. CPU and CUDA compared on every buffer of every program.
if step crosscheck 120 "$H" cross-check --backend cuda --reference cpu --dir "$CONF"; then s=ok; else s=FAIL; fi
record "cross-check CPU vs CUDA" "$s" "$(tail -1 "$SCRATCH/crosscheck.out")"

# 6. The NVRTC compile-only check, with this machine's NVRTC.
if HOLOGRAM_REQUIRE_NVRTC=1 HOLOGRAM_CONFORMANCE_DIR="$CONF" step nvrtc 120 "$BUNDLE/cuda_codegen" --nocapture; then s=ok; else s=FAIL; fi
record "NVRTC compiles every generated program" "$s" "$(grep -E 'NVRTC [0-9]|sources compiled|^test result' "$SCRATCH/nvrtc.out" | tr '\n' ' ')"

# 7. The demo (saxpy, reduction, histogram, divergence, caught out-of-bounds store).
if step demo 60 "$H" demo --backend cuda; then s=ok; else s=FAIL; fi
record "hologram demo --backend cuda" "$s" "$(tail -1 "$SCRATCH/demo.out")"

# 8. The op test suite (every tensor op against a float64 reference) on CUDA.
if [ -x "$BUNDLE/ops" ]; then
    if HOLOGRAM_TEST_BACKENDS=cuda step ops 120 "$BUNDLE/ops" --test-threads=4; then s=ok; else s=FAIL; fi
    record "op test suite on CUDA" "$s" "$(grep -E '^test result' "$SCRATCH/ops.out" | tr '\n' ' ')"
fi
if [ -x "$BUNDLE/reduce_softmax" ]; then
    if HOLOGRAM_TEST_BACKENDS=cuda step reducesoftmax 120 "$BUNDLE/reduce_softmax" --test-threads=4; then s=ok; else s=FAIL; fi
    record "reductions and fused softmax on CUDA" "$s" "$(grep -E '^test result' "$SCRATCH/reducesoftmax.out" | tr '\n' ' ')"
fi

# Plans (CUDA graphs), gather/scatter, fused layer norm, convolutions (cuDNN, then im2col
# with cuDNN turned off), attention (outer-batched GEMMs)
# on CUDA (the fast-path suite stays out: the bundle must fit 64 MiB).
for t in plan index norm conv attention; do
    if [ -x "$BUNDLE/$t" ]; then
        if HOLOGRAM_TEST_BACKENDS=cuda step "core-$t" 120 "$BUNDLE/$t" --test-threads=2; then s=ok; else s=FAIL; fi
        record "core tests/$t.rs on CUDA" "$s" "$(grep -E '^test result' "$SCRATCH/core-$t.out" | tr '\n' ' ')"
    fi
done
if [ -x "$BUNDLE/conv" ]; then
    if HOLOGRAM_CUDNN=0 HOLOGRAM_TEST_BACKENDS=cuda step conv-im2col 120 "$BUNDLE/conv"; then s=ok; else s=FAIL; fi
    record "core tests/conv.rs on CUDA without cuDNN" "$s" "$(grep -E '^test result' "$SCRATCH/conv-im2col.out" | tr '\n' ' ')"
fi

# 9. Cache statistics: a sample workload twice per backend.
if step stats 60 "$H" info --stats; then s=ok; else s=FAIL; fi
record "hologram info --stats" "$s" "$(grep -A1 '^cuda (' "$SCRATCH/stats.out" | tail -1 | sed 's/^ *//' | cut -c1-150)"

# 10. The wgpu backend through NVIDIA's Vulkan driver (the loader comes from .gl/, unpacked by
# the device command).
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/xdg-$(id -u)}
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
NV_ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f "$NV_ICD" ] && [ -z "${VK_DRIVER_FILES:-}" ]; then export VK_DRIVER_FILES=$NV_ICD; fi
# (grep without -q: with pipefail, grep -q's early exit can fail the pipeline through SIGPIPE)
if ldconfig -p | grep libvulkan >/dev/null; then
    if step vulkan 150 "$H" conformance --backend vulkan --dir "$CONF"; then s=ok; else s=FAIL; fi
    record "conformance on wgpu (Vulkan, NVIDIA)" "$s" "$(grep -E '^[0-9]+ tests:' "$SCRATCH/vulkan.out"; grep -m1 '^conformance on' "$SCRATCH/vulkan.out")"
    # The wgpu backend's GEMM kernel (and every other GEMM path) on odd shapes and layouts,
    # against the CPU, through NVIDIA's Vulkan driver and CUDA.
    if HOLOGRAM_TEST_BACKENDS=vulkan,cuda step wgpugemm 120 "$BUNDLE/gemm_shapes" --test-threads=1; then s=ok; else s=FAIL; fi
    record "GEMM shapes on Vulkan and CUDA (gemm_shapes)" "$s" "$(grep 'test result' "$SCRATCH/wgpugemm.out")"
    # The same vector-add kernel over 2^24 f32 on CUDA, Vulkan and the CPU, in one run.
    if HOLOGRAM="$H" step vadd 90 bash bench/vector_add.sh cuda vulkan cpu; then s=ok; else s=FAIL; fi
    cp "$SCRATCH/vadd.out" "$OUT/vector-add-backends.txt" 2>/dev/null
    record "vector add 2^24: cuda, vulkan, cpu" "$s" "$(grep -oE '^[a-z]+ on [^(]*|launch [0-9.]+ ms' "$SCRATCH/vadd.out" | paste -sd' ' | sed 's/ launch/:/g')"
else
    record "conformance on wgpu (Vulkan, NVIDIA)" skipped "no Vulkan loader (carry .gl and unpack it)"
fi

# 11. The Python SDK and hologram_torch on CUDA (the wheel from the bundle).
WHEEL=$(ls "$BUNDLE"/wheel/*.whl 2>/dev/null | head -1)
if [ -n "$WHEEL" ] && python3 -m pip install -q --no-deps --no-compile --target /tmp/hg-site "$WHEEL"; then
    export PYTHONPATH=/tmp/hg-site:${PYTHONPATH:-}
    if HOLOGRAM_TEST_BACKENDS=cuda step pytest 200 python3 -m pytest -q -p no:cacheprovider tests/python; then s=ok; else s=FAIL; fi
    record "Python tests (CPU and CUDA executors)" "$s" "$(tail -1 "$SCRATCH/pytest.out")"
    # 12. Hologram against PyTorch eager, torch.compile and CuPy, in one process.
    if PYTHONUNBUFFERED=1 step runpy 200 python3 bench/run.py --device cuda --out "$OUT/run-cuda.json"; then s=ok; else s=FAIL; fi
    record "bench/run.py --device cuda" "$s" "$(grep -E '^relu\(a\+b\)\*b +268435456' "$SCRATCH/runpy.out" | sed 's/  */ /g' | tr '\n' ';')"
    # 12b. Whole models: eager, torch.compile(backend="hologram"), compile_step, inductor.
    if PYTHONUNBUFFERED=1 step models 420 python3 bench/models.py --device cuda --impls "${MODELS_IMPLS:-eager,hologram,hologram-step,inductor}" --blocks 3 --per-block 10 --json "$OUT/models-cuda.json" --md "$OUT/models-cuda.md"; then s=ok; else s=FAIL; fi
    record "bench/models.py --device cuda" "$s" "$(grep -cE ' (train|infer) ' "$SCRATCH/models.out") cases"
    # 12c. Where the GPU time of the slowest cases goes: kernels per step (torch's profiler) and
    # Hologram's own per-step profile.
    if PYTHONUNBUFFERED=1 step profile 200 bash -c 'python3 bench/profile_model.py --only gpt --mode train --impls eager,hologram-step --steps 3 --top 30 --plan-profile >"$0/profile-gpt-train.txt" 2>&1; python3 bench/profile_model.py --only resnet18,mlp_infer64 --mode infer --impls eager,hologram --steps 5 --top 25 --plan-profile >"$0/profile-infer.txt" 2>&1; grep -hE "=====|GPU busy" "$0"/profile-*.txt' "$OUT"; then s=ok; else s=FAIL; fi
    record "bench/profile_model.py (gpt, resnet18, mlp)" "$s" "$(grep -c '=====' "$SCRATCH/profile.out") profiles under \$OUT"
    # 12d. Several GPUs: all-reduce bandwidth against torch.distributed, and data-parallel GPT
    # training (1 GPU vs all, same global batch; the loss curves must agree within 1%).
    if [ "${GPUS:-0}" -ge 2 ]; then
        if PYTHONUNBUFFERED=1 step allreduce 240 python3 bench/allreduce.py --json "$OUT/allreduce.json"; then s=ok; else s=FAIL; fi
        record "bench/allreduce.py ($GPUS GPUs)" "$s" "$(grep -E '^(hologram|torch) |busbw =' "$SCRATCH/allreduce.out" | sed 's/  */ /g' | tr '\n' ';')"
        if PYTHONUNBUFFERED=1 step ddp 300 python3 examples/ddp_train.py --steps "${DDP_STEPS:-30}" --json "$OUT/ddp.json"; then s=ok; else s=FAIL; fi
        record "examples/ddp_train.py ($GPUS GPUs)" "$s" "$(grep -E 'speedup|largest relative' "$SCRATCH/ddp.out" | sed 's/  */ /g' | tr '\n' ';')"
    else
        echo "allreduce, ddp: skipped, this machine has ${GPUS:-0} GPU (they need 2 or more)"
        record "bench/allreduce.py, examples/ddp_train.py" skipped "${GPUS:-0} GPU: needs 2 or more"
    fi
else
    record "Python tests and bench/run.py" skipped "no wheel in $BUNDLE/wheel"
fi

# 13. The Rust benchmark (tensor workloads through hologram-core).
if step rustbench 150 "$H" bench --backend cuda --json "$OUT/rust-bench-cuda.json"; then s=ok; else s=FAIL; fi
record "hologram bench --backend cuda" "$s" "$(grep -c . "$SCRATCH/rustbench.out") lines"

printf '\n==> summary after %s s (log: %s)\n' "$SECONDS" "$LOG"
printf '%-42s %-8s %s\n' STEP STATUS DETAIL
for s in "${STEPS[@]}"; do
    IFS=$'\t' read -r name status detail <<<"$s"
    printf '%-42s %-8s %s\n' "$name" "$status" "$detail"
done
if [ -f "$OUT/bench-results/cuda.md" ]; then
    printf '\nbenchmarks (Hologram | PyTorch | ratio | target | met):\n'
    grep -E '^\| (vector|tiny|sgemm|bounds)' "$OUT/bench-results/cuda.md"
fi
rm -rf "$SCRATCH"
