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
record() { STEPS+=("$1"$'\t'"$2"$'\t'"$3"); }

# step NAME TIMEOUT CMD...: echoes and runs CMD with a time limit, output to the log and to
# $SCRATCH/NAME.out; returns CMD's status.
step() {
    local name=$1 limit=$2
    shift 2
    printf '\n==> %s\n+ %s\n' "$name" "$*"
    timeout "$limit" "$@" 2>&1 | tee "$SCRATCH/$name.out"
    local rc=${PIPESTATUS[0]}
    [ "$rc" = 124 ] && echo "(timed out after $limit s)"
    return "$rc"
}

# The CUDA libraries: libcuda from the driver; NVRTC and cuBLAS from the system, the CUDA
# toolkit, or Python wheels (torch's nvidia-* packages), whichever is found first.
find_lib() {
    local name=$1 dir
    if ldconfig -p 2>/dev/null | grep -q "$name"; then return 0; fi
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
for lib in libcuda.so libnvrtc.so libcublas.so; do
    if find_lib "$lib"; then echo "found $lib"; else echo "NOT FOUND: $lib"; fi
done
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || echo "nvidia-smi failed"
ls -l "$BUNDLE" || echo "no bundle at $BUNDLE: run scripts/gpu-check.sh first and carry target/gpu-bundle"

# 1. What Hologram sees.
if step info 60 "$H" info && grep -q "cuda    available" "$SCRATCH/info.out"; then
    record "hologram info" ok "$(grep 'cuda ' "$SCRATCH/info.out" | head -1 | sed 's/  */ /g')"
else
    record "hologram info" FAIL "$(grep 'cuda ' "$SCRATCH/info.out" 2>/dev/null | head -1 | sed 's/  */ /g')"
fi

# 2. The conformance suite on CUDA, in a fresh cache, then again in a second process.
CACHE="$SCRATCH/cache"
for run in 1 2; do
    if HOLOGRAM_CACHE_DIR="$CACHE" step "conformance$run" 300 "$H" conformance --backend cuda --dir "$CONF"; then s=ok; else s=FAIL; fi
    record "conformance on CUDA (process $run)" "$s" "$(grep -E '^[0-9]+ tests:' "$SCRATCH/conformance$run.out"); $(grep -o 'nvrtc_compiles=[0-9]* memory_hits=[0-9]* disk_hits=[0-9]*' "$SCRATCH/conformance$run.out")"
done
if grep -q 'nvrtc_compiles=0 ' "$SCRATCH/conformance2.out" && grep -q 'disk_hits=[1-9]' "$SCRATCH/conformance2.out"; then
    record "second process: zero NVRTC compiles" ok "$(grep -o 'nvrtc_compiles=[0-9]* memory_hits=[0-9]* disk_hits=[0-9]*' "$SCRATCH/conformance2.out")"
else
    record "second process: zero NVRTC compiles" FAIL "$(grep 'cuda kernel cache' "$SCRATCH/conformance2.out")"
fi

# Later steps reuse the warm cache.
export HOLOGRAM_CACHE_DIR="$CACHE"

# 3. CPU and CUDA compared on every buffer of every program.
if step crosscheck 300 "$H" cross-check --backend cuda --reference cpu --dir "$CONF"; then s=ok; else s=FAIL; fi
record "cross-check CPU vs CUDA" "$s" "$(tail -1 "$SCRATCH/crosscheck.out")"

# 4. CUDA-specific tests (out of bounds, unchecked, async/sync, cuBLAS GEMM, copies, disk cache).
if HOLOGRAM_REQUIRE_GPU=1 step cudatests 300 "$BUNDLE/cuda_gpu" --test-threads=1 --nocapture; then s=ok; else s=FAIL; fi
record "CUDA tests (cuda_gpu)" "$s" "$(grep -E '^test result' "$SCRATCH/cudatests.out" | tail -1)"

# 5. The NVRTC compile-only check, with this machine's NVRTC.
if HOLOGRAM_REQUIRE_NVRTC=1 HOLOGRAM_CONFORMANCE_DIR="$CONF" step nvrtc 300 "$BUNDLE/cuda_codegen" --nocapture; then s=ok; else s=FAIL; fi
record "NVRTC compiles every generated program" "$s" "$(grep -E 'NVRTC [0-9]|sources compiled|^test result' "$SCRATCH/nvrtc.out" | tr '\n' ' ')"

# 6. The demo (saxpy, reduction, histogram, divergence, caught out-of-bounds store).
if step demo 120 "$H" demo --backend cuda; then s=ok; else s=FAIL; fi
record "hologram demo --backend cuda" "$s" "$(tail -1 "$SCRATCH/demo.out")"

# 7. Benchmarks against PyTorch, in one run.
if step bench 400 python3 bench/cuda_bench.py --hologram "$H" --out-dir "$OUT/bench-results"; then s=ok; else s="FAIL (or a target missed)"; fi
record "benchmarks vs PyTorch" "$s" "report: $OUT/bench-results/cuda.md"

printf '\n==> summary (log: %s)\n' "$LOG"
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
