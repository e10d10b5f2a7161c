#!/usr/bin/env bash
# Vector add, c = a + b over N = 2^24 f32 elements, with `hologram run --repeat`: the same
# kernel (examples/kernels/vector_add.hasm) on each backend named (default: cpu vulkan), each
# result checked against Python's sum of the inputs.
#
#   bash bench/vector_add.sh                     # cpu and vulkan (lavapipe allowed here)
#   bash bench/vector_add.sh cpu vulkan cuda     # on a GPU machine
#
# Environment: HOLOGRAM (a prebuilt binary; default: build target/release/hologram), N, REPEAT,
# BLOCK. Software Vulkan adapters (lavapipe) are allowed (HOLOGRAM_WGPU_ALLOW_SOFTWARE=1); a
# hardware adapter is still preferred when there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-16777216}
REPEAT=${REPEAT:-10}
BLOCK=${BLOCK:-256}
BIN=${HOLOGRAM:-}
if [ -z "$BIN" ]; then
    cargo build --release --quiet -p hologram-cli
    BIN=target/release/hologram
fi
export HOLOGRAM_WGPU_ALLOW_SOFTWARE=${HOLOGRAM_WGPU_ALLOW_SOFTWARE:-1}
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/hologram-xdg-$(id -u)}
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
# Inputs: exactly representable values, so every backend's sum is exact.
python3 - "$DIR" "$N" <<'PY'
import struct, sys
from array import array
d, n = sys.argv[1], int(sys.argv[2])
def save(name, arr):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(arr)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(f"{d}/{name}.npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        arr.tofile(f)
save("a", array("f", (float(i % 1000) * 0.5 for i in range(n))))
save("b", array("f", (float(i % 777) * 0.25 for i in range(n))))
PY
GRID=$(( (N + BLOCK - 1) / BLOCK ))
printf 'vector add, n = %d f32, block %d, median of %d launches (hologram run --repeat)\n' "$N" "$BLOCK" "$REPEAT"
for be in "${@:-cpu vulkan}"; do
    for b in $be; do
        out="$DIR/c_$b.npy"
        if ! "$BIN" run examples/kernels/vector_add.hasm --backend "$b" --grid "$GRID" --block "$BLOCK" \
            --arg a=@"$DIR/a.npy" --arg b=@"$DIR/b.npy" --arg c=zeros:"$N" --arg n="$N" \
            --out c="$out" --repeat "$REPEAT"; then
            echo "$b: failed"
            continue
        fi
        python3 - "$DIR" "$N" "$out" <<'PY'
import sys
from array import array
d, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(path):
    raw = open(path, "rb").read()
    hlen = int.from_bytes(raw[8:10], "little")
    a = array("f"); a.frombytes(raw[10 + hlen:]); return a
c = load(out)
bad = sum(1 for i in range(0, n, 997) if c[i] != float(i % 1000) * 0.5 + float(i % 777) * 0.25)
print(f"  result check (every 997th element): {'ok' if bad == 0 and len(c) == n else f'{bad} wrong'}")
PY
    done
done
