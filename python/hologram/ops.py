"""The seed API's operations on buffers: ``hologram.ops.vector_add(exec, a, b, c)`` and friends.

Each call runs one fused kernel on the executor's device and writes its result into the output
buffer; ``n`` (optional) limits the work to the first ``n`` elements. Reductions and losses
return their value as a float (and write it to ``out[0]`` when ``out`` is given).

The functions are native (``hologram._native.seed_ops``): a call validates its arguments and
runs in one step, with no Python-level work, so tiny calls cost about what a kernel launch does.
"""

from __future__ import annotations

from ._native import seed_ops as _seed

vector_add = _seed.vector_add
vector_sub = _seed.vector_sub
vector_mul = _seed.vector_mul
vector_div = _seed.vector_div
min = _seed.min  # noqa: A001 - the seed API's name
max = _seed.max  # noqa: A001

abs = _seed.abs  # noqa: A001
neg = _seed.neg
relu = _seed.relu
sigmoid = _seed.sigmoid
tanh = _seed.tanh
gelu = _seed.gelu
silu = _seed.silu
exp = _seed.exp
log = _seed.log
sqrt = _seed.sqrt

clip = _seed.clip
scalar_add = _seed.scalar_add
scalar_mul = _seed.scalar_mul

sum = _seed.sum  # noqa: A001
reduce_sum = sum
reduce_min = _seed.reduce_min
reduce_max = _seed.reduce_max
mean = _seed.mean

softmax = _seed.softmax
gemm = _seed.gemm
matvec = _seed.matvec

mse = _seed.mse
binary_cross_entropy = _seed.binary_cross_entropy
cross_entropy = _seed.cross_entropy

copy = _seed.copy
fill = _seed.fill


class _Namespace:
    def __init__(self, **kw: object) -> None:
        self.__dict__.update(kw)


math = _Namespace(vector_add=vector_add, vector_sub=vector_sub, vector_mul=vector_mul, vector_div=vector_div,
                  min=min, max=max, abs=abs, neg=neg, relu=relu, clip=clip, scalar_add=scalar_add, scalar_mul=scalar_mul)
reduce = _Namespace(sum=sum, min=reduce_min, max=reduce_max)
activation = _Namespace(sigmoid=sigmoid, tanh=tanh, gelu=gelu, softmax=softmax)
loss = _Namespace(mse=mse, cross_entropy=cross_entropy, binary_cross_entropy=binary_cross_entropy)
linalg = _Namespace(gemm=gemm, matvec=matvec)
memory = _Namespace(copy=copy, fill=fill)
