#!/usr/bin/env python3
"""Writes the Hologram conformance suite: every NAME.hasm and NAME.json in this directory.

Each test below is a function that returns the kernel text and a model of what the kernel does.
The expected outputs are computed here, independently of any Hologram implementation, with
NumPy (ml_dtypes for bfloat16), Python integers (exact wrap-around arithmetic) and, where a
correctly rounded reference is needed (fma, conversions, transcendentals), exact rationals
(`fractions`) and 150-digit decimals (`decimal`) rounded once to the target type. Random inputs
come from a generator seeded by the test's name, so the output is deterministic.

    python3 -m venv /tmp/conf && /tmp/conf/bin/pip install numpy ml_dtypes
    /tmp/conf/bin/python tests/conformance/generate.py

Semantics assumed (crates/hologram-isa/README.md): integers wrap; div truncates toward zero,
x/0 = x, MIN/-1 = MIN; rem has the sign of the dividend, x rem 0 = 0; shift amounts are taken
modulo the bit width; float min/max return the other operand when one is NaN; float rem is fmod;
mad on floats rounds twice, fma once; f16/bf16 instructions widen to f32, compute in f32 and round
back to nearest-even; cvt float->int truncates toward zero and saturates (NaN -> 0), int->int
wraps (extension by the source type), everything else rounds to nearest-even; subnormals are not
flushed to zero.
"""

import copy
import json
import math
import re
import sys
import zlib
from decimal import Decimal, getcontext
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np

HERE = Path(__file__).resolve().parent

# --------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------

SINT = ["i8", "i16", "i32", "i64"]
UINT = ["u8", "u16", "u32", "u64"]
INTS = SINT + UINT
FLOATS = ["f16", "bf16", "f32", "f64"]
BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
        "f16": 16, "bf16": 16, "f32": 32, "f64": 64}
NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
      "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
      "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}
UBITS = {16: np.uint16, 32: np.uint32, 64: np.uint64}
NAN = float("nan")
INF = float("inf")


def is_int(t):
    return t in INTS


def int_range(t):
    b = BITS[t]
    if t in SINT:
        return -(1 << (b - 1)), (1 << (b - 1)) - 1
    return 0, (1 << b) - 1


def wrap(v, t):
    """v modulo 2^bits, as a value of the integer type t."""
    b = BITS[t]
    v = int(v) & ((1 << b) - 1)
    if t in SINT and v >> (b - 1):
        v -= 1 << b
    return v


# precision (bits, with the hidden one), smallest normal exponent, largest exponent
FMT = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127), "f64": (53, -1022, 1023)}


def round_exact(x, t):
    """Rounds the exact rational x to the float type t, nearest-even, with gradual underflow and
    overflow to infinity. Returns a Python float holding the exact value (0 gives +0.0)."""
    x = Fraction(x)
    if x == 0:
        return 0.0
    p, emin, emax = FMT[t]
    neg = x < 0
    if neg:
        x = -x
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if x < Fraction(2) ** e:
        e -= 1
    e = max(e, emin)
    scale = Fraction(2) ** (p - 1 - e)  # one unit in the last place becomes 1
    y = x * scale
    q, r = divmod(y.numerator, y.denominator)
    r2 = 2 * r
    if r2 > y.denominator or (r2 == y.denominator and q % 2 == 1):
        q += 1
    v = Fraction(q) / scale
    if v > (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax:
        res = INF
    else:
        res = float(v)
    return -res if neg else res


def to_type(x, t):
    """Rounds a Python number to the float type t (keeps NaN, infinities and the sign of zero)."""
    x = float(x) if not isinstance(x, Fraction) else x
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x) or x == 0):
        return x
    return round_exact(Fraction(x), t)


def representable(x, t):
    x = float(x)
    return math.isnan(x) or math.isinf(x) or x == 0 or round_exact(Fraction(x), t) == x


def f_bits(x, t):
    """The bit pattern of the float x (exactly representable in t) as an unsigned integer."""
    return int(np.array([x], dtype=NP[t]).view(UBITS[BITS[t]])[0])


def ulp_diff(a, b, t):
    """Distance in units in the last place between two values of float type t."""
    if math.isnan(a) or math.isnan(b):
        return 0 if math.isnan(a) and math.isnan(b) else 1 << 62

    def ordered(x):
        u = f_bits(x, t)
        s = 1 << (BITS[t] - 1)
        return -(u & (s - 1)) if u & s else u

    return abs(ordered(a) - ordered(b))


def same(a, b):
    """Bitwise-equal floats, any NaN matching any NaN."""
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b and (not isinstance(a, float) or math.copysign(1, a) == math.copysign(1, b))


def arr(t, values):
    """A NumPy array of type t holding the given (exactly representable) values."""
    for v in values:
        assert representable(v, t) if not is_int(t) else int_range(t)[0] <= v <= int_range(t)[1], (t, v)
    return np.array([float(v) for v in values] if not is_int(t) else [int(v) for v in values],
                    dtype=NP[t])


def flist(a):
    return [float(v) for v in np.asarray(a).ravel()]


def fop(t, fn, *args):
    """Applies a NumPy float operation the ISA way: f16/bf16 operands widen to f32, the operation
    runs in f32, and the result rounds back to nearest-even; f32/f64 compute natively."""
    with np.errstate(all="ignore"):
        if t in ("f16", "bf16"):
            xs = [arr(t, a).astype(np.float32) for a in args]
            r = np.asarray(fn(*xs))
            assert r.dtype == np.float32, r.dtype
            return flist(r.astype(NP[t]))
        xs = [arr(t, a) for a in args]
        r = np.asarray(fn(*xs))
        assert r.dtype == NP[t], (r.dtype, t)
        return flist(r)


def fma_exact(a, b, c, t):
    """a*b+c rounded once to t (IEEE fusedMultiplyAdd)."""
    if any(math.isnan(v) for v in (a, b, c)):
        return NAN
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return NAN
        prod = math.copysign(INF, a) * math.copysign(1, b)
        if math.isinf(c) and c != prod:
            return NAN
        return prod
    if math.isinf(c):
        return c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        prod_neg = (math.copysign(1, a) * math.copysign(1, b)) < 0
        if a * b == 0 and c == 0 and prod_neg and math.copysign(1, c) < 0:
            return -0.0
        return 0.0
    return round_exact(exact, t)


# --------------------------------------------------------------------------------------------
# High-precision references for transcendental functions
# --------------------------------------------------------------------------------------------

getcontext().prec = 150
EPS = Decimal(10) ** -145


def _atan_inv(n):
    x = Decimal(1) / n
    x2 = x * x
    term, s, k = x, x, 1
    while True:
        term *= -x2
        k += 2
        t = term / k
        if abs(t) < EPS:
            return s
        s += t


PI = 16 * _atan_inv(5) - 4 * _atan_inv(239)
LN2 = Decimal(2).ln()
LN10 = Decimal(10).ln()


def d_sin_cos(x):
    k = (x / (2 * PI)).to_integral_value()
    r = x - k * 2 * PI
    r2 = r * r
    s, term, n = r, r, 1
    while abs(term) > EPS:
        term *= -r2 / ((n + 1) * (n + 2))
        n += 2
        s += term
    c, term, n = Decimal(1), Decimal(1), 0
    while abs(term) > EPS:
        term *= -r2 / ((n + 1) * (n + 2))
        n += 2
        c += term
    return s, c


def d_erf(x):
    if abs(x) > 6:
        return Decimal(1) if x > 0 else Decimal(-1)  # erfc(6) < 2.2e-17: rounds to +-1 in f64
    x2 = x * x
    term, s, n = x, x, 0
    while True:
        term *= -x2 / (n + 1)
        n += 1
        t = term / (2 * n + 1)
        s += t
        if abs(t) < EPS:
            break
    return 2 / PI.sqrt() * s


D_UNARY = {
    "exp": lambda x: x.exp(),
    "exp2": lambda x: (x * LN2).exp(),
    "log": lambda x: x.ln(),
    "log2": lambda x: x.ln() / LN2,
    "log10": lambda x: x.ln() / LN10,
    "sqrt": lambda x: x.sqrt(),
    "rsqrt": lambda x: 1 / x.sqrt(),
    "sin": lambda x: d_sin_cos(x)[0],
    "cos": lambda x: d_sin_cos(x)[1],
    "tan": lambda x: (lambda s, c: s / c)(*d_sin_cos(x)),
    "tanh": lambda x: (lambda e: (e - 1) / (e + 1))((2 * x).exp()),
    "sigmoid": lambda x: 1 / (1 + (-x).exp()),
    "erf": d_erf,
}

# Double-precision library values used only to cross-check the decimal references.
M_UNARY = {
    "exp": math.exp, "exp2": lambda x: 2.0 ** x, "log": math.log, "log2": math.log2,
    "log10": math.log10, "sqrt": math.sqrt, "rsqrt": lambda x: 1 / math.sqrt(x), "sin": math.sin,
    "cos": math.cos, "tan": math.tan, "tanh": math.tanh,
    "sigmoid": lambda x: 1 / (1 + math.exp(-x)), "erf": math.erf,
}


def ref_exact(fname, x, y=None):
    """The exact (150-digit) value of fname at the float x (and y for pow) as a Fraction."""
    d = Decimal(x)
    if fname == "pow":
        assert x > 0
        v = (Decimal(y) * d.ln()).exp()
    else:
        v = D_UNARY[fname](d)
    return Fraction(v)


def ref_round(fname, x, t, y=None):
    """fname(x) correctly rounded to t, cross-checked against the double-precision library."""
    v = round_exact(ref_exact(fname, x, y), t)
    m = math.pow(x, y) if fname == "pow" else M_UNARY[fname](x)
    if t == "f64":
        assert ulp_diff(v, m, "f64") <= 2, (fname, x, y, v, m)
    else:
        assert ulp_diff(v, to_type(m, t), t) <= 1, (fname, x, y, v, m)
    return v


def near_midpoint(exact, t, rel=Fraction(1, 1 << 17)):
    """True when a result within `rel` (relative) of exact could round to another value of t."""
    a = round_exact(exact * (1 - rel), t)
    b = round_exact(exact * (1 + rel), t)
    return a != b


# --------------------------------------------------------------------------------------------
# Test description and output
# --------------------------------------------------------------------------------------------

PARAM_RE = re.compile(r"^\.param\s+\.(buf\.)?(\w+)\s+(\w+)(\s+\.rw)?\s*(//.*)?$")
ARRAY_RE = re.compile(r"^\.(shared|scratch)\s+\.(\w+)\s+(\w+)\[(\d+)\]")


def jval(t, v):
    if is_int(t):
        v = int(v)
        lo, hi = int_range(t)
        assert lo <= v <= hi, (t, v)
        return v
    v = float(v)
    assert representable(v, t), (t, v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


class Test:
    def __init__(self, name, description, hasm, grid, block):
        self.name = name
        self.description = description
        self.hasm = hasm.strip("\n") + "\n"
        self.grid = list(grid)
        self.block = list(block)
        self.params = {}  # name -> (type, is_buffer, writable)
        self.arrays = {}
        for line in self.hasm.splitlines():
            s = line.strip()
            m = PARAM_RE.match(s)
            if m:
                self.params[m.group(3)] = (m.group(2), bool(m.group(1)), bool(m.group(4)))
            m = ARRAY_RE.match(s)
            if m:
                self.arrays[m.group(3)] = (m.group(2), int(m.group(4)))
        self.args = {}
        self.expect = {}
        self.expect_error = None
        self.unchanged = None
        self.requires = []  # device properties the test needs (harness: Unsupported without them)
        self.timeout_s = None  # the launch's own timeout (LaunchConfig::timeout), if any
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))

    def ty(self, name):
        return self.params[name][0]

    def buf(self, name, data):
        t, is_buf, _ = self.params[name]
        assert is_buf, name
        self.args[name] = {"data": [jval(t, v) for v in data]}
        return list(data)

    def fill(self, name, value, length):
        t, is_buf, _ = self.params[name]
        assert is_buf, name
        self.args[name] = {"fill": jval(t, value), "len": length}
        return [value] * length

    def scalar(self, name, value):
        t, is_buf, _ = self.params[name]
        assert not is_buf, name
        self.args[name] = {"scalar": jval(t, value)}
        return value

    def out(self, name, data, ulp=0, abs_tol=None):
        t, is_buf, rw = self.params[name]
        assert is_buf and rw, name
        e = {"data": [jval(t, v) for v in data]}
        if ulp or not is_int(t):
            e["ulp"] = ulp
        if abs_tol is not None:
            e["abs"] = abs_tol
        self.expect[name] = e

    def error(self, kind, array, length, index=None, unchanged=()):
        self.expect_error = {"kind": kind, "array": array, "len": length}
        if index is not None:
            self.expect_error["index"] = index
        self.unchanged = list(unchanged)

    def fails(self, kind, unchanged=(), **fields):
        """The launch must fail with error `kind` (e.g. "BarrierDivergence", "LaunchTimeout"),
        leaving the `unchanged` buffers as they were."""
        self.expect_error = dict(kind=kind, **fields)
        self.unchanged = list(unchanged)

    def check(self):
        assert self.hasm.startswith("// "), self.name
        assert re.search(r"^\.kernel %s$" % self.name, self.hasm, re.M), self.name
        assert set(self.args) == set(self.params), (self.name, set(self.args) ^ set(self.params))
        assert (self.expect_error is None) != (not self.expect), self.name
        for name in list(self.expect) + (self.unchanged or []):
            assert name in self.params and self.params[name][1], (self.name, name)
        for name, e in self.expect.items():
            a = self.args[name]
            n = len(a["data"]) if "data" in a else a["len"]
            assert len(e["data"]) == n, (self.name, name, len(e["data"]), n)
        if self.expect_error is not None and "array" in self.expect_error:
            arr_name = self.expect_error["array"]
            assert arr_name in self.arrays or self.params[arr_name][1], (self.name, arr_name)

    def json_text(self):
        def dumps(v):
            return json.dumps(v, sort_keys=True, allow_nan=False)

        def block(d):
            lines = ['    %s: %s' % (dumps(k), dumps(d[k])) for k in sorted(d)]
            return "{\n" + ",\n".join(lines) + "\n  }"

        top = {"args": block(self.args), "block": dumps(self.block),
               "description": dumps(self.description), "grid": dumps(self.grid)}
        if self.requires:
            top["requires"] = dumps(self.requires)
        if self.timeout_s is not None:
            top["timeout_s"] = dumps(self.timeout_s)
        if self.expect_error is not None:
            top["expect_error"] = dumps(self.expect_error)
            top["unchanged"] = dumps(self.unchanged)
        else:
            top["expect"] = block(self.expect)
        body = ",\n".join('  "%s": %s' % (k, top[k]) for k in sorted(top))
        return "{\n" + body + "\n}\n"


TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def guard_n():
    return """    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;"""


def rand_ints(rng, t, count, lo=None, hi=None):
    tlo, thi = int_range(t)
    lo = tlo if lo is None else max(lo, tlo)
    hi = thi if hi is None else min(hi, thi)
    return [int(v) for v in rng.integers(lo, hi, size=count, endpoint=True, dtype=NP[t])]


def rand_floats(rng, t, count, lo_exp, hi_exp, signed=True):
    """Random values of type t with magnitudes spread over 2^lo_exp .. 2^hi_exp."""
    m = rng.uniform(1, 2, count) * np.exp2(rng.integers(lo_exp, hi_exp, count, endpoint=True).astype(float))
    if signed:
        m *= rng.choice([-1.0, 1.0], count)
    return [to_type(v, t) for v in m]


def rand_uniform(rng, t, count, lo, hi):
    return [to_type(v, t) for v in rng.uniform(lo, hi, count)]


def launch_1d(n, block):
    return [(n + block - 1) // block, 1, 1], [block, 1, 1]


F32_MIN_NORMAL = 2.0 ** -126


def f32_subnormal(v):
    """True for a nonzero value below f32's smallest normal (also bf16's: same exponent range)."""
    v = float(v)  # also reads "nan"/"inf"
    return v == v and v != 0 and abs(v) < F32_MIN_NORMAL


def split_subnormal_lanes(T, n, extra=lambda i: False):
    """Splits a lane-wise test T of n lanes (a buffer of k*n elements gives lane i its elements
    k*i .. k*i+k-1; the scalar 'n' is the lane count) in two: T with the lanes where no f32 or
    bf16 input or expected output is subnormal (nor extra(i)), and NAME_subnormal with the others,
    which requires a device that keeps f32 subnormals ("requires": ["f32_subnormals"]; WGSL lets
    devices flush them, and NVIDIA's Vulkan driver does). Together they run every lane of T."""
    def lanes_of(name, data):
        k = len(data) // n
        assert k * n == len(data), (T.name, name)
        return k

    def sub(i):
        if extra(i):
            return True
        for name, (t, is_buf, _) in T.params.items():
            if not is_buf or t not in ("f32", "bf16"):
                continue
            for d in (T.args[name].get("data"), T.expect.get(name, {}).get("data")):
                if d is not None:
                    k = lanes_of(name, d)
                    if any(f32_subnormal(v) for v in d[k * i:k * i + k]):
                        return True
        return False

    flags = [sub(i) for i in range(n)]
    assert any(flags) and not all(flags), T.name

    def part(keep, name, comment):
        P = copy.deepcopy(T)
        idx = [i for i in range(n) if flags[i] == keep]
        m = len(idx)
        P.name = name
        if name != T.name:
            P.hasm = re.sub(r"^\.kernel %s$" % T.name, ".kernel " + name, P.hasm, flags=re.M)
            P.hasm = "// " + comment + P.hasm[3:]
            P.description = comment + T.description
            P.requires = ["f32_subnormals"]
        for d in [P.args, P.expect]:
            for key, a in d.items():
                if "data" in a:
                    k = lanes_of(key, a["data"])
                    a["data"] = [v for i in idx for v in a["data"][k * i:k * i + k]]
                elif "len" in a:
                    a["len"] = a["len"] // n * m
        P.args["n"] = {"scalar": m}
        P.grid, P.block = launch_1d(m, T.block[0])
        return P

    return [part(False, T.name, ""),
            part(True, T.name + "_subnormal", "f32 subnormal cases (lanes moved here from %s; need a device that keeps f32 subnormals): " % T.name)]


# --------------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------------

def idiv(a, b, t):
    if b == 0:
        return a
    q = abs(a) // abs(b)
    if (a < 0) != (b < 0):
        q = -q
    return wrap(q, t)


def irem(a, b, t):
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    if (a < 0) != (b < 0):
        q = -q
    return wrap(a - b * q, t)


INT_OPS = ["add", "sub", "mul", "div", "rem", "min", "max", "mad"]


def int_model(op, a, b, c, t):
    return {
        "add": lambda: wrap(a + b, t),
        "sub": lambda: wrap(a - b, t),
        "mul": lambda: wrap(a * b, t),
        "div": lambda: idiv(a, b, t),
        "rem": lambda: irem(a, b, t),
        "min": lambda: min(a, b),
        "max": lambda: max(a, b),
        "mad": lambda: wrap(a * b + c, t),
        "abs": lambda: wrap(abs(a), t),
        "neg": lambda: wrap(-a, t),
    }[op]()


def arith_int(t, n, block):
    name = "arith_" + t
    signed = t in SINT
    ops = INT_OPS + (["abs", "neg"] if signed else [])
    rules = "wrap-around, div truncates toward zero, x/0 = x, x rem 0 = 0"
    if signed:
        rules += ", MIN/-1 = MIN, MIN rem -1 = 0, rem takes the dividend's sign, abs(MIN) = MIN"
    lines = ["// %s on %s: %s" % (" ".join(ops), t, rules), ".kernel " + name,
             ".param .buf.%s a" % t, ".param .buf.%s b" % t, ".param .buf.%s c" % t]
    lines += [".param .buf.%s out_%s .rw" % (t, op) for op in ops]
    lines += [".param .u32 n", guard_n(),
              "    ld.%s %%a, a[%%i];" % t, "    ld.%s %%b, b[%%i];" % t, "    ld.%s %%c, c[%%i];" % t]
    for op in ops:
        if op == "mad":
            lines.append("    mad.%s %%r, %%a, %%b, %%c;" % t)
        elif op in ("abs", "neg"):
            lines.append("    %s.%s %%r, %%a;" % (op, t))
        else:
            lines.append("    %s.%s %%r, %%a, %%b;" % (op, t))
        lines.append("    st.%s out_%s[%%i], %%r;" % (t, op))
    grid, blk = launch_1d(n, block)
    T = Test(name, "integer arithmetic on %s with edge cases (%s)" % (t, rules), "\n".join(lines), grid, blk)
    lo, hi = int_range(t)
    if signed:
        edges = [(lo, -1), (lo, 1), (hi, 1), (hi, -1), (lo, 0), (hi, 0), (0, 0), (-7, 0), (-7, 2),
                 (7, -2), (-7, -2), (7, 2), (lo, lo), (hi, hi), (lo, hi), (-1, -1), (lo + 1, -1),
                 (lo, 2), (hi, 2), (-100, 7), (100, -7), (5, 100), (-5, 100), (lo, -2), (0, -1)]
    else:
        edges = [(hi, 1), (0, 1), (hi, 0), (0, 0), (7, 0), (7, 2), (hi, hi), (hi, 2), (1, hi),
                 (hi - 1, hi), (100, 7), (5, 100), (hi // 2 + 1, 2), (hi, hi // 2 + 1), (0, hi)]
    rng = T.rng
    rest = n - len(edges)
    half = rest // 2
    a = [e[0] for e in edges] + rand_ints(rng, t, half) + rand_ints(rng, t, rest - half, -300, 300)
    b = [e[1] for e in edges] + rand_ints(rng, t, half) + rand_ints(rng, t, rest - half, -40, 40)
    c = rand_ints(rng, t, n)
    c[0], c[1], c[2] = hi, lo, 1
    T.buf("a", a)
    T.buf("b", b)
    T.buf("c", c)
    T.scalar("n", n)
    for op in ops:
        T.fill("out_" + op, 0, n)
        T.out("out_" + op, [int_model(op, x, y, z, t) for x, y, z in zip(a, b, c)])
    return T


for _t, _n, _b in [("i8", 100, 32), ("i16", 100, 64), ("i32", 200, 64), ("i64", 130, 128),
                   ("u8", 100, 32), ("u16", 90, 64), ("u32", 200, 128), ("u64", 130, 64)]:
    test(lambda t=_t, n=_n, b=_b: arith_int(t, n, b))


FLOAT_OPS = ["add", "sub", "mul", "div", "rem", "min", "max", "mad", "fma", "abs", "neg"]


def float_model(t, op, a, b, c):
    if op == "add":
        return fop(t, lambda x, y: x + y, a, b)
    if op == "sub":
        return fop(t, lambda x, y: x - y, a, b)
    if op == "mul":
        return fop(t, lambda x, y: x * y, a, b)
    if op == "div":
        return fop(t, lambda x, y: x / y, a, b)
    if op == "rem":
        return fop(t, np.fmod, a, b)
    if op == "min":
        return fop(t, np.fmin, a, b)
    if op == "max":
        return fop(t, np.fmax, a, b)
    if op == "mad":
        return fop(t, lambda x, y, z: (x * y) + z, a, b, c)
    if op == "fma":
        if t in ("f32", "f64"):
            return [fma_exact(x, y, z, t) for x, y, z in zip(a, b, c)]
        # f16/bf16: the f32 fma rounded back (a*b is exact in f32 for 16-bit inputs)
        r32 = [fma_exact(x, y, z, "f32") for x, y, z in zip(a, b, c)]
        return [to_type(v, t) for v in r32]
    if op == "abs":
        return fop(t, np.abs, a)
    if op == "neg":
        return fop(t, np.negative, a)
    raise ValueError(op)


def half_mad_unambiguous(t, x, y, z):
    """For f16/bf16 a*b+c, every reading of 'compute in f32, round back' agrees with rounding the
    exact result once, and with rounding the product to t first: no double-rounding corner."""
    a = float_model(t, "mad", [x], [y], [z])[0]
    f = float_model(t, "fma", [x], [y], [z])[0]
    if any(math.isnan(v) or math.isinf(v) for v in (x, y, z)):
        return same(a, f)
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    once = round_exact(exact, t) if exact != 0 else a
    prod = to_type(float(np.float32(x) * np.float32(y)), t)
    two = fop(t, lambda p, q: p + q, [prod], [z])[0]
    return same(a, f) and same(a, once) and same(a, two)


def arith_float(t, n, block):
    name = "arith_" + t
    half = t in ("f16", "bf16")
    rules = ("min/max return the other operand when one is NaN, rem is fmod, mad rounds twice, "
             "fma once, subnormals are kept")
    if half:
        rules = "each instruction widens to f32, computes in f32 and rounds back to %s (nearest-even); " % t + rules
    lines = ["// %s on %s: %s" % (" ".join(FLOAT_OPS), t, rules), ".kernel " + name,
             ".param .buf.%s a" % t, ".param .buf.%s b" % t, ".param .buf.%s c" % t]
    lines += [".param .buf.%s out_%s .rw" % (t, op) for op in FLOAT_OPS]
    lines += [".param .u32 n", guard_n(),
              "    ld.%s %%a, a[%%i];" % t, "    ld.%s %%b, b[%%i];" % t, "    ld.%s %%c, c[%%i];" % t]
    for op in FLOAT_OPS:
        if op in ("mad", "fma"):
            lines.append("    %s.%s %%r, %%a, %%b, %%c;" % (op, t))
        elif op in ("abs", "neg"):
            lines.append("    %s.%s %%r, %%a;" % (op, t))
        else:
            lines.append("    %s.%s %%r, %%a, %%b;" % (op, t))
        lines.append("    st.%s out_%s[%%i], %%r;" % (t, op))
    grid, blk = launch_1d(n, block)
    T = Test(name, "float arithmetic on %s with special values (%s)" % (t, rules), "\n".join(lines), grid, blk)
    rng = T.rng
    p, emin, emax = FMT[t]
    big = float((2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax)  # largest finite
    tiny = float(Fraction(2) ** (emin - p + 1))  # smallest subnormal
    norm = float(Fraction(2) ** emin)  # smallest normal
    # (a, b): a is never zero, so neg never has to produce -0.0 from +0.0
    edges = [(NAN, 1.0), (1.0, NAN), (NAN, NAN), (INF, 1.0), (INF, -INF), (INF, INF), (-INF, 2.0),
             (INF, 0.0), (1.0, 0.0), (-1.0, 0.0), (1.0, -0.0), (3.0, INF), (-3.0, -INF),
             (big, big), (big, -big), (-big, 2.0), (big, 0.5), (tiny, 0.5), (tiny, 1.5), (tiny, -tiny),
             (norm, 0.25), (-norm, 3.0), (3 * tiny, 2.0), (1.5, -1.5), (5.5, 2.0), (-5.5, 2.0),
             (5.5, -2.0), (7.0, 0.75), (-0.1, 0.03), (2.0, NAN), (NAN, -0.0), (0.1, 0.2),
             (1e10, 3.0), (1.0, 3.0), (2.0, 3.0)]
    edges = [(to_type(x, t), to_type(y, t)) for x, y in edges]
    rest = n - len(edges)
    lo_exp, hi_exp = (-14, 14) if t == "f16" else (-30, 30)
    if t == "f64":
        lo_exp, hi_exp = -60, 60
    ra = rand_floats(rng, t, rest, lo_exp, hi_exp)
    rb = rand_floats(rng, t, rest, lo_exp, hi_exp)
    # half of the random pairs have magnitudes close to each other (cancellation, fmod)
    for k in range(0, rest, 2):
        rb[k] = to_type(ra[k] * rng.uniform(-3, 3), t) or to_type(1.0, t)
    a = [e[0] for e in edges] + ra
    b = [e[1] for e in edges] + rb
    c = rand_floats(rng, t, n, lo_exp, hi_exp)
    c[:6] = [to_type(v, t) for v in (NAN, INF, -INF, 1.0, -1.0, 0.0)]
    # fma differs from mad where a*b+c cancels: c = -round(a*b)
    for k in range(len(edges), n, 3):
        pr = fop(t, lambda x, y: x * y, [a[k]], [b[k]])[0]
        if not (math.isinf(pr) or math.isnan(pr)) and pr != 0:
            c[k] = -pr
    if half:
        for k in range(n):
            tries = 0
            while not half_mad_unambiguous(t, a[k], b[k], c[k]):
                c[k] = rand_floats(rng, t, 1, lo_exp, hi_exp)[0]
                tries += 1
                assert tries < 100
    assert all(x != 0 for x in a)
    T.buf("a", a)
    T.buf("b", b)
    T.buf("c", c)
    T.scalar("n", n)
    for op in FLOAT_OPS:
        T.fill("out_" + op, 0.0, n)
        T.out("out_" + op, float_model(t, op, a, b, c))
    if t in ("f32", "bf16"):
        # mad's product is an f32 intermediate too
        prod = fop("f32", lambda x, y: x * y, a, b)
        return split_subnormal_lanes(T, n, lambda i: f32_subnormal(prod[i]))
    return T


for _t, _n, _b in [("f16", 160, 64), ("bf16", 160, 32), ("f32", 200, 128), ("f64", 150, 64)]:
    test(lambda t=_t, n=_n, b=_b: arith_float(t, n, b))


@test
def arith_fma_vs_mad():
    hasm = """// fma rounds once, mad rounds twice and is never contracted: with p = a*b rounded, fma(a, b, -p) is the exact rounding error of the product while mad(a, b, -p) is 0 (f32 and f64)
.kernel arith_fma_vs_mad
.param .buf.f32 a32
.param .buf.f32 b32
.param .buf.f64 a64
.param .buf.f64 b64
.param .buf.f32 err_fma32 .rw
.param .buf.f32 err_mad32 .rw
.param .buf.f64 err_fma64 .rw
.param .buf.f64 err_mad64 .rw
.param .buf.f32 sum_fma32 .rw
.param .buf.f64 sum_fma64 .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.f32 %a, a32[%i];
    ld.f32 %b, b32[%i];
    mul.f32 %m, %a, %b;
    neg.f32 %nm, %m;
    fma.f32 %e, %a, %b, %nm;
    st.f32 err_fma32[%i], %e;
    mad.f32 %e, %a, %b, %nm;
    st.f32 err_mad32[%i], %e;
    fma.f32 %s, %a, %b, 1.0;
    st.f32 sum_fma32[%i], %s;
    ld.f64 %x, a64[%i];
    ld.f64 %y, b64[%i];
    mul.f64 %q, %x, %y;
    neg.f64 %nq, %q;
    fma.f64 %d, %x, %y, %nq;
    st.f64 err_fma64[%i], %d;
    mad.f64 %d, %x, %y, %nq;
    st.f64 err_mad64[%i], %d;
    fma.f64 %t, %x, %y, 1.0;
    st.f64 sum_fma64[%i], %t;
"""
    n = 96
    T = Test("arith_fma_vs_mad", "fma is a single rounding (recovers the product's rounding error), mad is two roundings",
             hasm, *launch_1d(n, 32))
    rng = T.rng
    a32 = rand_uniform(rng, "f32", n, -4, 4)
    b32 = rand_uniform(rng, "f32", n, -4, 4)
    a64 = rand_uniform(rng, "f64", n, -4, 4)
    b64 = rand_uniform(rng, "f64", n, -4, 4)
    a32[0], b32[0] = to_type(1 + 2 ** -12, "f32"), to_type(1 + 2 ** -12, "f32")
    a64[0], b64[0] = 1 + 2 ** -27, 1 + 2 ** -27
    a32[1], b32[1] = to_type(1 + 2 ** -12, "f32"), to_type(1 - 2 ** -12, "f32")
    a64[1], b64[1] = 1 + 2 ** -27, 1 - 2 ** -27
    T.buf("a32", a32)
    T.buf("b32", b32)
    T.buf("a64", a64)
    T.buf("b64", b64)
    T.scalar("n", n)
    for t, a, b, suf in (("f32", a32, b32, "32"), ("f64", a64, b64, "64")):
        m = fop(t, lambda x, y: x * y, a, b)
        nm = [-v for v in m]
        T.fill("err_fma" + suf, 0.0, n)
        T.fill("err_mad" + suf, 0.0, n)
        T.fill("sum_fma" + suf, 0.0, n)
        e_fma = [fma_exact(x, y, z, t) for x, y, z in zip(a, b, nm)]
        assert sum(1 for v in e_fma if v != 0) > n // 2
        T.out("err_fma" + suf, e_fma)
        T.out("err_mad" + suf, fop(t, lambda x, y, z: x * y + z, a, b, nm))
        T.out("sum_fma" + suf, [fma_exact(x, y, 1.0, t) for x, y in zip(a, b)])
    return T


@test
def float_nan_inf():
    hasm = """// NaN and infinity propagation through f32 and f64 arithmetic, compares (every compare with NaN is false except ne), min/max (NaN yields the other operand), sqrt, cvt to int (NaN -> 0, +-inf saturate), overflow to inf
.kernel float_nan_inf
.param .buf.f32 x
.param .buf.f64 y
.param .buf.f32 o32 .rw
.param .buf.f64 o64 .rw
.param .buf.i32 oi .rw
.param .buf.u32 flags .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.f32 %x, x[%i];
    ld.f64 %y, y[%i];
    mul.u32 %o, %i, 8;
    mul.f32 %r, %x, inf;
    st.f32 o32[%o], %r;
    add.u32 %o, %o, 1;
    sub.f32 %r, %x, %x;
    st.f32 o32[%o], %r;
    add.u32 %o, %o, 1;
    div.f32 %r, %x, 0.0;
    st.f32 o32[%o], %r;
    add.u32 %o, %o, 1;
    div.f32 %r, 1.0, %x;
    st.f32 o32[%o], %r;
    add.u32 %o, %o, 1;
    sqrt.f32 %r, %x;
    st.f32 o32[%o], %r;
    add.u32 %o, %o, 1;
    min.f32 %r, %x, 5.0;
    st.f32 o32[%o], %r;
    add.u32 %o, %o, 1;
    mul.f32 %r, %x, 3.0e38;
    st.f32 o32[%o], %r;
    add.u32 %o, %o, 1;
    add.f32 %r, %x, -inf;
    st.f32 o32[%o], %r;
    mul.u32 %o, %i, 6;
    mul.f64 %s, %y, -inf;
    st.f64 o64[%o], %s;
    add.u32 %o, %o, 1;
    sub.f64 %s, %y, %y;
    st.f64 o64[%o], %s;
    add.u32 %o, %o, 1;
    div.f64 %s, %y, -0.0;
    st.f64 o64[%o], %s;
    add.u32 %o, %o, 1;
    max.f64 %s, %y, -7.0;
    st.f64 o64[%o], %s;
    add.u32 %o, %o, 1;
    mul.f64 %s, %y, 1e300;
    st.f64 o64[%o], %s;
    add.u32 %o, %o, 1;
    cvt.f64.f32 %s, %x;
    add.f64 %s, %s, %y;
    st.f64 o64[%o], %s;
    mul.u32 %o, %i, 2;
    cvt.i32.f32 %k, %x;
    st.i32 oi[%o], %k;
    add.u32 %o, %o, 1;
    cvt.i32.f64 %k, %y;
    st.i32 oi[%o], %k;
    mov.u32 %f, 0;
    setp.eq.f32 %c, %x, %x;
    selp.u32 %b, 1, 0, %c;
    or.u32 %f, %f, %b;
    setp.ne.f32 %c, %x, %x;
    selp.u32 %b, 2, 0, %c;
    or.u32 %f, %f, %b;
    setp.lt.f32 %c, %x, inf;
    selp.u32 %b, 4, 0, %c;
    or.u32 %f, %f, %b;
    setp.ge.f32 %c, %x, -inf;
    selp.u32 %b, 8, 0, %c;
    or.u32 %f, %f, %b;
    setp.eq.f64 %c, %y, %y;
    selp.u32 %b, 16, 0, %c;
    or.u32 %f, %f, %b;
    setp.ne.f64 %c, %y, 0.0;
    selp.u32 %b, 32, 0, %c;
    or.u32 %f, %f, %b;
    setp.gt.f64 %c, %y, -inf;
    selp.u32 %b, 64, 0, %c;
    or.u32 %f, %f, %b;
    setp.le.f64 %c, %y, inf;
    selp.u32 %b, 128, 0, %c;
    or.u32 %f, %f, %b;
    st.u32 flags[%i], %f;
"""
    xs = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 2.5, -1e-3, 3.4028234663852886e38, -3.4028234663852886e38,
          1.401298464324817e-45, 4.0, -4.0, 100.0, 1e-30]
    ys = [NAN, -INF, INF, -0.0, 0.0, -2.0, 1e300, -1e300, 1.7976931348623157e308, 5e-324, 3.0, -3.0,
          1e-10, NAN, INF, 2.5]
    xs = [to_type(v, "f32") for v in xs]
    n = len(xs)
    T = Test("float_nan_inf", "NaN/inf propagation through arithmetic, compares, min/max, sqrt and cvt",
             hasm, [1, 1, 1], [32, 1, 1])
    T.buf("x", xs)
    T.buf("y", ys)
    T.scalar("n", n)
    T.fill("o32", 0.0, 8 * n)
    T.fill("o64", 0.0, 6 * n)
    T.fill("oi", 0, 2 * n)
    T.fill("flags", 0, n)
    f = lambda fn, *a: fop("f32", fn, *a)
    g = lambda fn, *a: fop("f64", fn, *a)
    c = lambda v: [v] * n
    rows32 = [f(lambda a, b: a * b, xs, c(INF)), f(lambda a, b: a - b, xs, xs), f(lambda a, b: a / b, xs, c(0.0)),
              f(lambda a, b: a / b, c(1.0), xs), f(np.sqrt, xs), f(np.fmin, xs, c(5.0)),
              f(lambda a, b: a * b, xs, c(to_type(3.0e38, "f32"))), f(lambda a, b: a + b, xs, c(-INF))]
    x64 = [float(v) for v in xs]
    rows64 = [g(lambda a, b: a * b, ys, c(-INF)), g(lambda a, b: a - b, ys, ys), g(lambda a, b: a / b, ys, c(-0.0)),
              g(np.fmax, ys, c(-7.0)), g(lambda a, b: a * b, ys, c(1e300)), g(lambda a, b: a + b, x64, ys)]
    T.out("o32", [rows32[k][i] for i in range(n) for k in range(8)])
    T.out("o64", [rows64[k][i] for i in range(n) for k in range(6)])

    def f2i(v):
        if math.isnan(v):
            return 0
        if math.isinf(v):
            return int_range("i32")[1] if v > 0 else int_range("i32")[0]
        return max(min(math.trunc(v), 2 ** 31 - 1), -2 ** 31)

    T.out("oi", [f2i(v) for i in range(n) for v in (xs[i], ys[i])])
    fl = []
    for x, y in zip(xs, ys):
        bits = [x == x, x != x, x < INF, x >= -INF, y == y, y != 0.0, y > -INF, y <= INF]
        fl.append(sum(1 << k for k, v in enumerate(bits) if v))
    T.out("flags", fl)
    return split_subnormal_lanes(T, n)


@test
def int_wraparound():
    lines = ["// integer wrap-around with literals at the type limits for every integer type: a+MAX, 0-a, a*a, a*MAX+MAX, a<<(bits-1), a+(-1) (a literal -1 is MAX for unsigned types)",
             ".kernel int_wraparound"]
    lines += [".param .buf.%s a_%s" % (t, t) for t in INTS]
    lines += [".param .buf.%s out_%s .rw" % (t, t) for t in INTS]
    lines += [".param .u32 n", guard_n(), "    mul.u32 %o, %i, 6;"]
    for t in INTS:
        lo, hi = int_range(t)
        mx = str(hi) if t in SINT else hex(hi)
        lines += ["    ld.%s %%a_%s, a_%s[%%i];" % (t, t, t),
                  "    add.%s %%r_%s, %%a_%s, %s;" % (t, t, t, mx),
                  "    st.%s out_%s[%%o], %%r_%s;" % (t, t, t),
                  "    add.u32 %%o_%s, %%o, 1;" % t,
                  "    sub.%s %%r_%s, 0, %%a_%s;" % (t, t, t),
                  "    st.%s out_%s[%%o_%s], %%r_%s;" % (t, t, t, t),
                  "    add.u32 %%o_%s, %%o_%s, 1;" % (t, t),
                  "    mul.%s %%r_%s, %%a_%s, %%a_%s;" % (t, t, t, t),
                  "    st.%s out_%s[%%o_%s], %%r_%s;" % (t, t, t, t),
                  "    add.u32 %%o_%s, %%o_%s, 1;" % (t, t),
                  "    mad.%s %%r_%s, %%a_%s, %s, %s;" % (t, t, t, mx, mx),
                  "    st.%s out_%s[%%o_%s], %%r_%s;" % (t, t, t, t),
                  "    add.u32 %%o_%s, %%o_%s, 1;" % (t, t),
                  "    shl.%s %%r_%s, %%a_%s, %d;" % (t, t, t, BITS[t] - 1),
                  "    st.%s out_%s[%%o_%s], %%r_%s;" % (t, t, t, t),
                  "    add.u32 %%o_%s, %%o_%s, 1;" % (t, t),
                  "    add.%s %%r_%s, %%a_%s, -1;" % (t, t, t),
                  "    st.%s out_%s[%%o_%s], %%r_%s;" % (t, t, t, t)]
    n = 24
    T = Test("int_wraparound", "integer wrap-around at the limits of every integer type, with literal operands",
             "\n".join(lines), [1, 1, 1], [n, 1, 1])
    T.scalar("n", n)
    for t in INTS:
        lo, hi = int_range(t)
        vals = [lo, hi, lo + 1, hi - 1, 0, 1, 2, 3, hi // 2, hi // 2 + 1, lo // 2]
        if t in SINT:
            vals += [-1, -2, -3]
        vals = vals + rand_ints(T.rng, t, n - len(vals))
        T.buf("a_" + t, vals)
        T.fill("out_" + t, 0, 6 * n)
        res = []
        for a in vals:
            res += [wrap(a + hi, t), wrap(-a, t), wrap(a * a, t), wrap(a * hi + hi, t),
                    wrap(a << (BITS[t] - 1), t), wrap(a - 1, t)]
        T.out("out_" + t, res)
    return T


# --------------------------------------------------------------------------------------------
# Data movement: cvt
# --------------------------------------------------------------------------------------------

def f2i(x, t):
    """cvt float -> integer: truncate toward zero, saturate, NaN -> 0."""
    if math.isnan(x):
        return 0
    lo, hi = int_range(t)
    if math.isinf(x):
        return hi if x > 0 else lo
    return max(lo, min(hi, math.trunc(x)))


def cvt_float_to_int(name, srcs, n):
    lines = ["// cvt from %s to every integer type: truncation toward zero, saturation at the type limits, NaN -> 0, +-inf -> MAX/MIN" % "/".join(srcs),
             ".kernel " + name]
    lines += [".param .buf.%s x_%s" % (s, s) for s in srcs]
    lines += [".param .buf.%s %s_from_%s .rw" % (t, t, s) for s in srcs for t in INTS]
    lines += [".param .u32 n", guard_n()]
    for s in srcs:
        lines.append("    ld.%s %%x_%s, x_%s[%%i];" % (s, s, s))
        for t in INTS:
            lines.append("    cvt.%s.%s %%v_%s, %%x_%s;" % (t, s, t, s))
            lines.append("    st.%s %s_from_%s[%%i], %%v_%s;" % (t, t, s, t))
    T = Test(name, "cvt %s -> all integer types (truncate toward zero, saturate, NaN -> 0)" % "/".join(srcs),
             "\n".join(lines), *launch_1d(n, 64))
    T.scalar("n", n)
    edges = [NAN, INF, -INF, 0.0, -0.0, 0.5, -0.5, 0.999, -0.999, 1.5, -1.5, 2.5, -2.5, 127.5, 128.0,
             -128.75, -129.0, 255.9, 256.0, 300.7, -300.7, 32767.9, 32768.0, -32768.9, -32769.0, 65535.5,
             65536.0, 2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0, 4294967040.0, 4294967296.0,
             2147483647.9, -2147483648.9, 4294967295.5, -1.0, -1e-30, 1e-30,
             9223371487098961920.0, 9223372036854775808.0, -9223372036854775808.0, -9223373136366403584.0,
             18446742974197923840.0, 18446744073709551616.0, 1e30, -1e30, 3.4e38, -3.4e38,
             9007199254740993.0, 9223372036854774784.0, 18446744073709549568.0, -9223372036854777856.0,
             1e300, -1e300, 65504.0, -65504.0, 1000.25, -1000.25, 4096.5]
    for s in srcs:
        vals = []
        for v in edges:
            r = to_type(v, s)
            if not math.isinf(r) or math.isinf(v):
                vals.append(r)
        # random values at every magnitude
        rest = n - len(vals)
        hi = {"f16": 15, "bf16": 70, "f32": 70, "f64": 70}[s]
        vals += rand_floats(T.rng, s, rest, -3, hi)
        vals = vals[:n]
        T.buf("x_" + s, vals)
        for t in INTS:
            T.fill("%s_from_%s" % (t, s), 0, n)
            T.out("%s_from_%s" % (t, s), [f2i(v, t) for v in vals])
    return T


test(lambda: cvt_float_to_int("cvt_f32_to_int", ["f32"], 128))
test(lambda: cvt_float_to_int("cvt_f64_to_int", ["f64"], 128))
test(lambda: cvt_float_to_int("cvt_half_to_int", ["f16", "bf16"], 96))

INT_EDGES = [0, 1, -1, 2, -2, 127, 128, -128, -129, 255, 256, 300, -300, 32767, 32768, -32768, -32769,
             65535, 65536, 70000, -70000, 2 ** 31 - 1, 2 ** 31, -2 ** 31, -2 ** 31 - 1, 2 ** 32 - 1, 2 ** 32,
             2 ** 32 + 5, 2 ** 63 - 1, -2 ** 63, 2 ** 63, 2 ** 64 - 1, 0x123456789abcdef0, -0x123456789abcdef]


def cvt_int_to_int(name, srcs):
    kind = "signed" if srcs[0] in SINT else "unsigned"
    lines = ["// cvt from %s integer types to every integer type: the value is extended by the SOURCE type (%s extension) and wraps modulo 2^bits of the destination" % (kind, "sign" if kind == "signed" else "zero"),
             ".kernel " + name]
    lines += [".param .buf.%s x_%s" % (s, s) for s in srcs]
    lines += [".param .buf.%s %s_from_%s .rw" % (t, t, s) for s in srcs for t in INTS]
    lines += [".param .u32 n", guard_n()]
    for s in srcs:
        lines.append("    ld.%s %%x_%s, x_%s[%%i];" % (s, s, s))
        for t in INTS:
            lines.append("    cvt.%s.%s %%v_%s, %%x_%s;" % (t, s, t, s))
            lines.append("    st.%s %s_from_%s[%%i], %%v_%s;" % (t, t, s, t))
    n = 48
    T = Test(name, "cvt between integer types from %s sources (extension by the source type, wrap-around)" % kind,
             "\n".join(lines), [2, 1, 1], [32, 1, 1])
    T.scalar("n", n)
    for s in srcs:
        lo, hi = int_range(s)
        vals = [v for v in INT_EDGES if lo <= v <= hi]
        vals += [lo, hi, lo + 1, hi - 1]
        vals += rand_ints(T.rng, s, n - len(vals))
        T.buf("x_" + s, vals)
        for t in INTS:
            T.fill("%s_from_%s" % (t, s), 0, n)
            T.out("%s_from_%s" % (t, s), [wrap(v, t) for v in vals])
    return T


test(lambda: cvt_int_to_int("cvt_int_signed_src", SINT))
test(lambda: cvt_int_to_int("cvt_int_unsigned_src", UINT))


def cvt_to_float(v, dst):
    """Exact rational/float -> float type dst, rounded once to nearest-even."""
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v) or v == 0):
        return v
    return round_exact(Fraction(v), dst)


def half_cvt_unambiguous(v, dst):
    """For f16/bf16 destinations, rounding once equals rounding to f32 first: a backend may
    convert through f32 (the ISA computes 16-bit types in f32) without changing the result."""
    if dst not in ("f16", "bf16"):
        return True
    once = cvt_to_float(v, dst)
    twice = cvt_to_float(cvt_to_float(v, "f32"), dst)
    return same(once, twice)


@test
def cvt_int_to_float():
    lines = ["// cvt from every integer type to f16, bf16, f32 and f64: round to nearest-even (ties to even, f16 overflow -> inf); i64 -> f32 is rounded once, not through f64",
             ".kernel cvt_int_to_float"]
    lines += [".param .buf.%s x_%s" % (s, s) for s in INTS]
    lines += [".param .buf.%s %s_from_%s .rw" % (t, t, s) for s in INTS for t in FLOATS]
    lines += [".param .u32 n", guard_n()]
    for s in INTS:
        lines.append("    ld.%s %%x_%s, x_%s[%%i];" % (s, s, s))
        for t in FLOATS:
            lines.append("    cvt.%s.%s %%v_%s, %%x_%s;" % (t, s, t, s))
            lines.append("    st.%s %s_from_%s[%%i], %%v_%s;" % (t, t, s, t))
    n = 64
    T = Test("cvt_int_to_float", "cvt integer -> float types, round to nearest-even", "\n".join(lines),
             [1, 1, 1], [64, 1, 1])
    T.scalar("n", n)
    edges = INT_EDGES + [2049, 2051, 2047, 4097, 4099, 65504, 65519, 65520, 65535, -65520, -65519, 257, 259,
                         261, 16777216, 16777217, 16777218, 16777219, 2 ** 53 + 1, 2 ** 53 + 3, 2 ** 60 + 2 ** 36 + 1,
                         -(2 ** 60 + 2 ** 36 + 1), 2 ** 62 + 2 ** 38 + 2 ** 9 + 1, 2 ** 64 - 2 ** 39,
                         2 ** 24 + 2 ** 16, 2 ** 31 - 64, 2 ** 31 - 65, 2 ** 32 - 129, 2 ** 32 - 128, 123456789]
    for s in INTS:
        lo, hi = int_range(s)
        vals = []
        for v in edges:
            if lo <= v <= hi and v not in vals and all(half_cvt_unambiguous(v, d) for d in FLOATS):
                vals.append(v)
        while len(vals) < n:
            # a random bit pattern of the type, shifted right to a random magnitude
            v = rand_ints(T.rng, s, 1)[0] >> int(T.rng.integers(0, BITS[s]))
            if all(half_cvt_unambiguous(v, d) for d in FLOATS):
                vals.append(v)
        vals = vals[:n]
        T.buf("x_" + s, vals)
        for t in FLOATS:
            T.fill("%s_from_%s" % (t, s), 0.0, n)
            T.out("%s_from_%s" % (t, s), [cvt_to_float(v, t) for v in vals])
    # the i64 -> f32 case that double rounding through f64 gets wrong is present
    assert 2 ** 60 + 2 ** 36 + 1 in T.args["x_i64"]["data"]
    return T


@test
def cvt_float_to_float():
    pairs = [("f32", "f64"), ("f16", "f64"), ("bf16", "f64"), ("f64", "f32"), ("f16", "f32"), ("bf16", "f32"),
             ("f32", "f16"), ("f64", "f16"), ("bf16", "f16"), ("f32", "bf16"), ("f64", "bf16"), ("f16", "bf16")]
    lines = ["// cvt between float types: widening is exact, narrowing rounds to nearest-even with gradual underflow and overflow to inf (f32 -> f16 above 65504, f64 -> f32), NaN stays NaN",
             ".kernel cvt_float_to_float"]
    lines += [".param .buf.%s x_%s" % (s, s) for s in FLOATS]
    lines += [".param .buf.%s %s_from_%s .rw" % (t, t, s) for t, s in pairs]
    lines += [".param .u32 n", guard_n()]
    for s in FLOATS:
        lines.append("    ld.%s %%x_%s, x_%s[%%i];" % (s, s, s))
    for t, s in pairs:
        lines.append("    cvt.%s.%s %%v_%s, %%x_%s;" % (t, s, t, s))
        lines.append("    st.%s %s_from_%s[%%i], %%v_%s;" % (t, t, s, t))
    n = 100
    T = Test("cvt_float_to_float", "cvt between float types (round to nearest-even, overflow -> inf, subnormals)",
             "\n".join(lines), *launch_1d(n, 32))
    T.scalar("n", n)
    f32max = float((2 - Fraction(2) ** -23) * Fraction(2) ** 127)
    edges = [NAN, INF, -INF, 0.0, -0.0, 0.1, -0.1, 1 / 3, 2 / 3, 1e39, -1e39, f32max, f32max + 2.0 ** 103,
             f32max + 2.0 ** 103 - 2.0 ** 75, 1e-40, -1e-40, 1e-46, 2.0 ** -150, 2.0 ** -150 * (1 + 2 ** -40),
             1.5 * 2.0 ** -149, 65504.0, 65519.0, 65519.99, 65520.0, -65520.0, 65536.0, 1e5, 2.0 ** -24, 2.0 ** -25,
             2.0 ** -25 * (1 + 2 ** -20), 3 * 2.0 ** -26, 1e-8, 6e-8, 6.1e-5, 2.0 ** -14, 1 + 2.0 ** -11,
             1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, 3.0e38,
             3.3895313892515355e38, 3.39e38, 1.0, -1.0, 2.5, 1e10, 123.456, -7.75]
    rng = T.rng
    for s in FLOATS:
        vals = []
        for v in edges:
            r = to_type(v, s)
            if (math.isinf(r) and not math.isinf(v)) or any(same(r, w) for w in vals):
                continue
            if all(half_cvt_unambiguous(r, t) for t, s2 in pairs if s2 == s):
                vals.append(r)
        lo_exp, hi_exp = {"f16": (-24, 15), "bf16": (-133, 127), "f32": (-149, 127), "f64": (-160, 140)}[s]
        while len(vals) < n:
            r = rand_floats(rng, s, 1, lo_exp, hi_exp)[0]
            if s == "f64" and rng.uniform() < 0.5:
                r = rand_floats(rng, s, 1, -30, 20)[0]
            if not math.isinf(r) and all(half_cvt_unambiguous(r, t) for t, s2 in pairs if s2 == s):
                vals.append(r)
        vals = vals[:n]
        T.buf("x_" + s, vals)
    for t, s in pairs:
        src = [float(v) for v in T.args["x_" + s]["data"]]  # float() also reads "nan"/"inf"
        T.fill("%s_from_%s" % (t, s), 0.0, n)
        T.out("%s_from_%s" % (t, s), [cvt_to_float(v, t) for v in src])
    # cross-check with NumPy / ml_dtypes conversions (these round once too)
    for t, s in pairs:
        src = arr(s, [float(v) for v in T.args["x_" + s]["data"]])
        want = [float(v) for v in T.expect["%s_from_%s" % (t, s)]["data"]]
        got = flist(src.astype(NP[t]))
        for w, g, v in zip(want, got, src):
            assert same(w, g), (s, t, float(v), w, g)
    return split_subnormal_lanes(T, n)


# --------------------------------------------------------------------------------------------
# Data movement: mov, ld/st, scalar parameters, shared and scratch arrays
# --------------------------------------------------------------------------------------------

def literal_value(text, t):
    """The value of a .hasm literal used as type t (integers modulo 2^bits; floats rounded once
    from the decimal text, checked to equal rounding the f64 parse, and the f32 path for 16-bit)."""
    if is_int(t):
        v = int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text)
        return wrap(v, t)
    if text in ("inf", "-inf", "nan"):
        return float(text)
    if text.startswith("0d"):
        f = float(np.array([int(text[2:], 16)], dtype=np.uint64).view(np.float64)[0])
    else:
        f = float(int(text)) if re.fullmatch(r"-?\d+", text) else float(text)
    if f == 0:
        return f
    exact = Fraction(text) if not text.startswith("0d") else Fraction(f)
    once = round_exact(exact, t)
    assert same(once, round_exact(Fraction(f), t)), (text, t)
    if t in ("f16", "bf16"):
        assert same(once, round_exact(Fraction(round_exact(Fraction(f), "f32")), t)), (text, t)
    return once


MOV_LITERALS = {
    "i8": ["-128", "127", "0xff", "-1", "0x7f", "0"],
    "u8": ["255", "0xff", "-1", "-128", "0", "7"],
    "i16": ["-32768", "32767", "0xffff", "0x8000", "-2"],
    "u16": ["65535", "-1", "0x8000", "12345"],
    "i32": ["-2147483648", "2147483647", "0xffffffff", "0x80000000", "-7"],
    "u32": ["4294967295", "-1", "0x80000000", "-2147483648", "0xdeadbeef"],
    "i64": ["-9223372036854775808", "9223372036854775807", "0xffffffffffffffff", "0x8000000000000000", "-3"],
    "u64": ["18446744073709551615", "-1", "0x8000000000000000", "-9223372036854775808", "0x0123456789abcdef"],
    "f16": ["65504.0", "-65504.0", "6.103515625e-05", "5.960464477539063e-08", "inf", "-inf", "nan", "1", "0.5",
            "0.1", "-3"],
    "bf16": ["3.3895313892515355e38", "1.0", "-2.5", "9.183549615799121e-41", "inf", "0d3ff0000000000000", "0.1",
             "-100"],
    "f32": ["3.4028234663852886e38", "1.401298464324817e-45", "0.1", "-0.0", "16777217", "-inf", "nan",
            "1.1754943508222875e-38", "0d3fd5555555555555"],
    "f64": ["0d400921fb54442d18", "1e-300", "5e-324", "-0.0", "0.1", "1.7976931348623157e308",
            "9007199254740993", "-inf", "2.5e-3"],
}


@test
def mov_literals():
    lines = ["// mov of literals of every type: integers are taken modulo 2^bits (-1 and 0xff.. are the same value), floats round to nearest-even, 0d gives exact f64 bits; st of a literal; mov register to register",
             ".kernel mov_literals"]
    lines += [".param .buf.%s out_%s .rw" % (t, t) for t in INTS + FLOATS]
    for t in INTS + FLOATS:
        for k, lit in enumerate(MOV_LITERALS[t]):
            lines.append("    mov.%s %%a_%s, %s;" % (t, t, lit))
            lines.append("    mov.%s %%b_%s, %%a_%s;" % (t, t, t))
            lines.append("    st.%s out_%s[%d], %%b_%s;" % (t, t, k, t))
        lines.append("    st.%s out_%s[%d], %s;" % (t, t, len(MOV_LITERALS[t]), MOV_LITERALS[t][0]))
    T = Test("mov_literals", "mov of literals of every type (integer literals modulo 2^bits, float literals round to nearest-even)",
             "\n".join(lines), [1, 1, 1], [1, 1, 1])
    for t in INTS + FLOATS:
        vals = [literal_value(l, t) for l in MOV_LITERALS[t]]
        vals.append(vals[0])
        T.fill("out_" + t, 0, len(vals))
        T.out("out_" + t, vals)
    return T


SCALARS = {"i8": -100, "u8": 200, "i16": -30000, "u16": 60000, "i32": -2000000000, "u32": 4000000000,
           "i64": -9000000000000000000, "u64": 18000000000000000000, "f16": 0.333251953125,
           "bf16": -3.140625, "f32": 1.1754943508222875e-38, "f64": -2.718281828459045}
# the largest f32 subnormal and the smallest bf16 subnormal
SUBNORMAL_SCALARS = {"f32": 1.1754942106924411e-38, "bf16": 9.183549615799121e-41}


@test
def scalar_params():
    return scalar_params_test("scalar_params", INTS + FLOATS, SCALARS,
                              "scalar parameters of every type: each lane stores the scalar, and the scalar plus the lane index converted to the type",
                              "scalar parameters of every type reach every lane")


@test
def scalar_params_subnormal():
    T = scalar_params_test("scalar_params_subnormal", ["f32", "bf16"], SUBNORMAL_SCALARS,
                           "subnormal f32 and bf16 scalar parameters (need a device that keeps f32 subnormals): each lane stores the scalar, and the scalar plus the lane index converted to the type",
                           "subnormal f32 and bf16 scalar parameters reach every lane")
    T.requires = ["f32_subnormals"]
    return T


def scalar_params_test(name, types, scalars, comment, description):
    lines = ["// " + comment, ".kernel " + name]
    lines += [".param .%s s_%s" % (t, t) for t in types]
    lines += [".param .buf.%s out_%s .rw" % (t, t) for t in types]
    lines += [".param .u32 n", guard_n(), "    add.u32 %j, %i, n;"]
    for t in types:
        lines += ["    st.%s out_%s[%%i], s_%s;" % (t, t, t),
                  "    cvt.%s.u32 %%c_%s, %%i;" % (t, t),
                  "    add.%s %%v_%s, s_%s, %%c_%s;" % (t, t, t, t),
                  "    st.%s out_%s[%%j], %%v_%s;" % (t, t, t)]
    n = 10
    T = Test(name, description, "\n".join(lines), [1, 1, 1], [16, 1, 1])
    T.scalar("n", n)
    for t in types:
        s = T.scalar("s_" + t, scalars[t])
        T.fill("out_" + t, 0, 2 * n)
        if is_int(t):
            T.out("out_" + t, [s] * n + [wrap(s + i, t) for i in range(n)])
        else:
            T.out("out_" + t, [s] * n + fop(t, lambda a, b: a + b, [s] * n, [float(i) for i in range(n)]))
    return T


@test
def ldst_all_types():
    types = INTS + FLOATS
    idx_types = {"i8": "u32", "u8": "i32", "i16": "u64", "u16": "i64", "i32": "u16", "u32": "u32", "i64": "i32",
                 "u64": "u64", "f16": "u32", "bf16": "i64", "f32": "u32", "f64": "u64"}
    lines = ["// ld and st of every element type through registers, with the index held in several integer types: out[i] = in[n-1-i]",
             ".kernel ldst_all_types"]
    lines += [".param .buf.%s in_%s" % (t, t) for t in types]
    lines += [".param .buf.%s out_%s .rw" % (t, t) for t in types]
    lines += [".param .u32 n", guard_n(), "    sub.u32 %r, n, 1;", "    sub.u32 %r, %r, %i;"]
    for t in types:
        it = idx_types[t]
        if it == "u32":
            src, dst = "%r", "%i"
        else:
            lines += ["    cvt.%s.u32 %%r_%s, %%r;" % (it, t), "    cvt.%s.u32 %%i_%s, %%i;" % (it, t)]
            src, dst = "%r_" + t, "%i_" + t
        lines += ["    ld.%s %%v_%s, in_%s[%s];" % (t, t, t, src), "    mov.%s %%w_%s, %%v_%s;" % (t, t, t),
                  "    st.%s out_%s[%s], %%w_%s;" % (t, t, dst, t)]
    n = 70
    T = Test("ldst_all_types", "load/store round trip of every element type (bit exact, NaN stays NaN)",
             "\n".join(lines), [3, 1, 1], [32, 1, 1])
    T.scalar("n", n)
    for t in types:
        if is_int(t):
            lo, hi = int_range(t)
            vals = [lo, hi, 0, -1 if t in SINT else 1] + rand_ints(T.rng, t, n - 4)
        else:
            p, emin, emax = FMT[t]
            vals = [NAN, INF, -INF, -0.0, 0.0, float(Fraction(2) ** (emin - p + 1)),
                    -float((2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax)]
            vals += rand_floats(T.rng, t, n - len(vals), emin - 3, emax - 1)
        T.buf("in_" + t, vals)
        T.fill("out_" + t, 0, n)
        T.out("out_" + t, vals[::-1])
    return T


@test
def ldst_shared_scratch():
    hasm = """// .shared arrays (one per block, start zeroed, shared by the block's lanes) and .scratch arrays (one per lane, start zeroed) of several element types
.kernel ldst_shared_scratch
.param .buf.f64 x
.param .buf.f64 out_neighbour .rw
.param .buf.i16 out_i16 .rw
.param .buf.u8 out_u8 .rw
.param .buf.i32 out_scratch .rw
.param .buf.f32 out_zero .rw
.shared .f64 sh_f64[64]
.shared .i16 sh_i16[64]
.shared .u8 sh_u8[80]
.scratch .i32 sc[16]
.scratch .f32 scf[4]
    mov.u32 %t, %tid.x;
    mov.u32 %i, %gid;
    ld.f64 %v, x[%i];
    st.f64 sh_f64[%t], %v;
    mul.u32 %w, %i, 1000;
    cvt.i16.u32 %h, %w;
    st.i16 sh_i16[%t], %h;
    cvt.u8.u32 %b, %i;
    add.u8 %b, %b, 200;
    st.u8 sh_u8[%t], %b;
    barrier;
    add.u32 %nb, %t, 1;
    rem.u32 %nb, %nb, %ntid.x;
    ld.f64 %v, sh_f64[%nb];
    st.f64 out_neighbour[%i], %v;
    sub.u32 %rv, %ntid.x, 1;
    sub.u32 %rv, %rv, %t;
    ld.i16 %h, sh_i16[%rv];
    st.i16 out_i16[%i], %h;
    ld.u8 %b, sh_u8[%nb];
    ld.u8 %z, sh_u8[70];
    add.u8 %b, %b, %z;
    st.u8 out_u8[%i], %b;
    mov.u32 %k, 0;
FILL:
    mul.u32 %e, %i, %k;
    add.u32 %e, %e, %k;
    cvt.i32.u32 %ei, %e;
    st.i32 sc[%k], %ei;
    add.u32 %k, %k, 1;
    setp.lt.u32 %more, %k, 12;
@%more bra FILL;
    mov.i32 %acc, 0;
    mov.u32 %k, 0;
SUM:
    ld.i32 %e2, sc[%k];
    mul.i32 %e2, %e2, %e2;
    sub.i32 %acc, %e2, %acc;
    add.u32 %k, %k, 1;
    setp.lt.u32 %more, %k, 16;
@%more bra SUM;
    st.i32 out_scratch[%i], %acc;
    st.f32 scf[1], 2.5;
    ld.f32 %f0, scf[0];
    ld.f32 %f1, scf[1];
    ld.f32 %f3, scf[3];
    add.f32 %f0, %f0, %f1;
    add.f32 %f0, %f0, %f3;
    st.f32 out_zero[%i], %f0;
"""
    block, grid = 64, 3
    n = block * grid
    T = Test("ldst_shared_scratch", "shared arrays (per block) and scratch arrays (per lane), zero-initialised",
             hasm, [grid, 1, 1], [block, 1, 1])
    x = rand_floats(T.rng, "f64", n, -20, 20)
    T.buf("x", x)
    for name, t in (("out_neighbour", 0.0), ("out_i16", 0), ("out_u8", 0), ("out_scratch", 0), ("out_zero", 0.0)):
        T.fill(name, t, n)
    nbr, i16, u8, scr = [], [], [], []
    for i in range(n):
        b, t = divmod(i, block)
        j = b * block + (t + 1) % block
        nbr.append(x[j])
        r = b * block + block - 1 - t
        i16.append(wrap(r * 1000, "i16"))
        u8.append(wrap(wrap(j, "u8") + 200, "u8"))
        sc = [wrap(i * k + k, "i32") for k in range(12)] + [0] * 4
        acc = 0
        for k in range(16):
            acc = wrap(wrap(sc[k] * sc[k], "i32") - acc, "i32")
        scr.append(acc)
    T.out("out_neighbour", nbr)
    T.out("out_i16", i16)
    T.out("out_u8", u8)
    T.out("out_scratch", scr)
    T.out("out_zero", [2.5] * n)
    return T


# --------------------------------------------------------------------------------------------
# Logic and shifts
# --------------------------------------------------------------------------------------------

LOGIC_OPS = ["and", "or", "xor", "not", "shl", "shr", "shl_lit", "shr_lit"]


def logic_test(name, types, n, block):
    lines = ["// and or xor not shl shr on %s: shift amounts are taken modulo the bit width (also for literal amounts), shr is arithmetic for signed and logical for unsigned types" % ", ".join(types),
             ".kernel " + name]
    for t in types:
        lines += [".param .buf.%s a_%s" % (t, t), ".param .buf.%s b_%s" % (t, t), ".param .buf.%s s_%s" % (t, t)]
    lines += [".param .buf.%s out_%s .rw" % (t, t) for t in types]
    lines += [".param .u32 n", guard_n(), "    mul.u32 %%o, %%i, %d;" % len(LOGIC_OPS)]
    for t in types:
        bits = BITS[t]
        lines += ["    ld.%s %%a_%s, a_%s[%%i];" % (t, t, t), "    ld.%s %%b_%s, b_%s[%%i];" % (t, t, t),
                  "    ld.%s %%s_%s, s_%s[%%i];" % (t, t, t), "    mov.u32 %%k_%s, %%o;" % t]
        for op in LOGIC_OPS:
            if op == "not":
                lines.append("    not.%s %%r_%s, %%a_%s;" % (t, t, t))
            elif op == "shl_lit":
                lines.append("    shl.%s %%r_%s, %%a_%s, %d;" % (t, t, t, bits + 3))
            elif op == "shr_lit":
                lines.append("    shr.%s %%r_%s, %%a_%s, %d;" % (t, t, t, min(2 * bits - 1, int_range(t)[1])))
            elif op in ("shl", "shr"):
                lines.append("    %s.%s %%r_%s, %%a_%s, %%s_%s;" % (op, t, t, t, t))
            else:
                lines.append("    %s.%s %%r_%s, %%a_%s, %%b_%s;" % (op, t, t, t, t))
            lines.append("    st.%s out_%s[%%k_%s], %%r_%s;" % (t, t, t, t))
            lines.append("    add.u32 %%k_%s, %%k_%s, 1;" % (t, t))
    T = Test(name, "bitwise logic and shifts on %s (amount modulo the width; arithmetic shr for signed)" % ", ".join(types),
             "\n".join(lines), *launch_1d(n, block))
    T.scalar("n", n)
    for t in types:
        bits = BITS[t]
        lo, hi = int_range(t)
        a = [lo, hi, -1 if t in SINT else hi, 1, 0] + rand_ints(T.rng, t, n - 5)
        b = rand_ints(T.rng, t, n)
        smax = min(3 * bits, hi)
        s = [0, 1, bits - 1, bits, bits + 1] + rand_ints(T.rng, t, n - 5, 0, smax)
        s[5:10] = [bits - 1, bits, bits + 1, 2 * bits - 1, min(2 * bits + 1, hi)]
        T.buf("a_" + t, a)
        T.buf("b_" + t, b)
        T.buf("s_" + t, s)
        T.fill("out_" + t, 0, len(LOGIC_OPS) * n)
        lit_r = min(2 * bits - 1, hi) % bits
        res = []
        for x, y, z in zip(a, b, s):
            res += [wrap(x & y, t), wrap(x | y, t), wrap(x ^ y, t), wrap(~x, t),
                    wrap(x << (z % bits), t), wrap(x >> (z % bits), t),  # Python >> is arithmetic on signed values
                    wrap(x << ((bits + 3) % bits), t), wrap(x >> lit_r, t)]
        T.out("out_" + t, res)
    return T


test(lambda: logic_test("logic_u32", ["u32"], 100, 32))
test(lambda: logic_test("logic_narrow", ["i8", "u8", "i16", "u16"], 80, 64))
test(lambda: logic_test("logic_wide", ["i32", "i64", "u64"], 80, 128))


@test
def logic_pred():
    hasm = """// and or xor not on pred, pred literals, setp.eq/ne on pred, selp driven by computed predicates, guards on computed predicates
.kernel logic_pred
.param .buf.u8 a
.param .buf.u8 b
.param .buf.u32 flags .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.u8 %x, a[%i];
    ld.u8 %y, b[%i];
    setp.ne.u8 %pa, %x, 0;
    setp.ne.u8 %pb, %y, 0;
    mov.u32 %f, 0;
    and.pred %q, %pa, %pb;
    selp.u32 %bit, 1, 0, %q;
    or.u32 %f, %f, %bit;
    or.pred %q, %pa, %pb;
    selp.u32 %bit, 2, 0, %q;
    or.u32 %f, %f, %bit;
    xor.pred %q, %pa, %pb;
    selp.u32 %bit, 4, 0, %q;
    or.u32 %f, %f, %bit;
    not.pred %q, %pa;
    selp.u32 %bit, 8, 0, %q;
    or.u32 %f, %f, %bit;
    setp.eq.pred %q, %pa, %pb;
    selp.u32 %bit, 16, 0, %q;
    or.u32 %f, %f, %bit;
    setp.ne.pred %q, %pa, true;
    selp.u32 %bit, 32, 0, %q;
    or.u32 %f, %f, %bit;
    xor.pred %q, %pb, 1;
    and.pred %q, %q, %pa;
    not.pred %q, %q;
    selp.u32 %bit, 64, 0, %q;
    or.u32 %f, %f, %bit;
    mov.pred %t, false;
    or.pred %t, %t, %pb;
@%t or.u32 %f, %f, 128;
@!%pa or.u32 %f, %f, 256;
    selp.pred %s, %pa, %pb, %pb;
    selp.u32 %bit, 512, 0, %s;
    or.u32 %f, %f, %bit;
    st.u32 flags[%i], %f;
"""
    n = 40
    T = Test("logic_pred", "logic operations on predicates", hasm, [1, 1, 1], [64, 1, 1])
    a = [0, 0, 1, 1] + [int(v) for v in T.rng.integers(0, 4, n - 4)]
    b = [0, 1, 0, 1] + [int(v) for v in T.rng.integers(0, 2, n - 4)]
    a = [v if v < 2 else 255 for v in a]  # any non-zero byte is true
    T.buf("a", a)
    T.buf("b", b)
    T.scalar("n", n)
    T.fill("flags", 0, n)
    out = []
    for x, y in zip(a, b):
        pa, pb = x != 0, y != 0
        bits = [pa and pb, pa or pb, pa != pb, not pa, pa == pb, pa != True, not ((pb != True) and pa),
                pb, not pa, pa and pb]
        out.append(sum(1 << k for k, v in enumerate(bits) if v))
    T.out("flags", out)
    return T


# --------------------------------------------------------------------------------------------
# Compare and select
# --------------------------------------------------------------------------------------------

CMPS = ["eq", "ne", "lt", "le", "gt", "ge"]
PYCMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
         "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def setp_test(name, types, values, n, comment):
    lines = ["// " + comment, ".kernel " + name]
    for t in types:
        lines += [".param .buf.%s a_%s" % (t, t), ".param .buf.%s b_%s" % (t, t)]
    lines += [".param .buf.u32 mask_%s .rw" % t for t in types]
    lines += [".param .u32 n", guard_n()]
    for t in types:
        lines += ["    ld.%s %%a_%s, a_%s[%%i];" % (t, t, t), "    ld.%s %%b_%s, b_%s[%%i];" % (t, t, t),
                  "    mov.u32 %%m_%s, 0;" % t]
        for k, c in enumerate(CMPS):
            lines += ["    setp.%s.%s %%p_%s, %%a_%s, %%b_%s;" % (c, t, t, t, t),
                      "    selp.u32 %%v_%s, %d, 0, %%p_%s;" % (t, 1 << k, t),
                      "    or.u32 %%m_%s, %%m_%s, %%v_%s;" % (t, t, t)]
        lines.append("    st.u32 mask_%s[%%i], %%m_%s;" % (t, t))
    T = Test(name, comment, "\n".join(lines), *launch_1d(n, 64))
    T.scalar("n", n)
    for t in types:
        a, b = values(T, t)
        assert len(a) == n and len(b) == n
        T.buf("a_" + t, a)
        T.buf("b_" + t, b)
        T.fill("mask_" + t, 0, n)
        T.out("mask_" + t, [sum(1 << k for k, c in enumerate(CMPS) if PYCMP[c](x, y)) for x, y in zip(a, b)])
    return T


@test
def setp_int():
    n = 64
    # signed and unsigned types of one width see the same bit patterns
    pats = {}

    def values(T, t):
        bits = BITS[t]
        if bits not in pats:
            m = (1 << bits) - 1
            top = 1 << (bits - 1)
            a = [0, 1, m, top, top - 1, top, m, 5, 5, m, 0, top, 3]
            b = [0, m, 1, top - 1, top, top, m, 5, 6, 0, m, 0, m]
            # random, with many equal pairs
            ra = [v & m for v in rand_ints(T.rng, "u" + str(bits), n - len(a))]
            rb = [v & m for v in rand_ints(T.rng, "u" + str(bits), n - len(a))]
            for k in range(0, len(rb), 4):
                rb[k] = ra[k]
            pats[bits] = (a + ra, b + rb)
        a, b = pats[bits]
        return [wrap(v, t) for v in a], [wrap(v, t) for v in b]

    return setp_test("setp_int", INTS, values, n,
                     "setp eq ne lt le gt ge on every integer type; signed and unsigned types compare the same bit patterns differently (mask bit k = comparison k)")


@test
def setp_float():
    n = 48

    def values(T, t):
        p, emin, emax = FMT[t]
        tiny = float(Fraction(2) ** (emin - p + 1))
        big = float((2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax)
        pairs = [(NAN, NAN), (NAN, 1.0), (1.0, NAN), (NAN, INF), (INF, INF), (-INF, INF), (INF, -INF), (0.0, -0.0),
                 (-0.0, 0.0), (tiny, 0.0), (-tiny, 0.0), (tiny, tiny), (big, INF), (-big, -INF), (1.0, 1.0),
                 (1.0, 2.0), (2.0, 1.0), (-1.0, -2.0), (-2.0, 1.0), (0.5, 0.5)]
        rest = n - len(pairs)
        ra = rand_floats(T.rng, t, rest, -5, 5)
        rb = rand_floats(T.rng, t, rest, -5, 5)
        for k in range(0, rest, 3):
            rb[k] = ra[k]
        return [x for x, _ in pairs] + ra, [y for _, y in pairs] + rb

    T = setp_test("setp_float", FLOATS, values, n,
                  "setp eq ne lt le gt ge on f16 bf16 f32 f64: with a NaN operand every comparison is false except ne; -0 == +0; infinities and subnormals order normally")
    return split_subnormal_lanes(T, n)


@test
def selp_types():
    types = INTS + FLOATS
    lines = ["// selp.T d, a, b, p = p ? a : b for every type, with register and literal operands",
             ".kernel selp_types", ".param .buf.u8 c"]
    for t in types:
        lines += [".param .buf.%s a_%s" % (t, t), ".param .buf.%s b_%s" % (t, t)]
    lines += [".param .buf.%s out_%s .rw" % (t, t) for t in types]
    lines += [".param .u32 n", guard_n(), "    ld.u8 %c, c[%i];", "    setp.ne.u8 %q, %c, 0;",
              "    add.u32 %j, %i, n;"]
    for t in types:
        lit = "3" if is_int(t) else "1.5"
        lines += ["    ld.%s %%a_%s, a_%s[%%i];" % (t, t, t), "    ld.%s %%b_%s, b_%s[%%i];" % (t, t, t),
                  "    selp.%s %%r_%s, %%a_%s, %%b_%s, %%q;" % (t, t, t, t),
                  "    st.%s out_%s[%%i], %%r_%s;" % (t, t, t),
                  "    selp.%s %%r_%s, %s, %%b_%s, %%q;" % (t, t, lit, t),
                  "    st.%s out_%s[%%j], %%r_%s;" % (t, t, t)]
    n = 40
    T = Test("selp_types", "selp on every type", "\n".join(lines), [1, 1, 1], [64, 1, 1])
    T.scalar("n", n)
    c = [int(v) for v in T.rng.integers(0, 2, n)]
    T.buf("c", c)
    for t in types:
        if is_int(t):
            a, b, lit = rand_ints(T.rng, t, n), rand_ints(T.rng, t, n), 3
        else:
            a, b, lit = rand_floats(T.rng, t, n, -10, 10), rand_floats(T.rng, t, n, -10, 10), 1.5
            a[0], b[1], a[2] = NAN, INF, -0.0
        T.buf("a_" + t, a)
        T.buf("b_" + t, b)
        T.fill("out_" + t, 0, 2 * n)
        T.out("out_" + t, [x if q else y for x, y, q in zip(a, b, c)] + [lit if q else y for y, q in zip(b, c)])
    return T


# --------------------------------------------------------------------------------------------
# Transcendentals and rounding
# --------------------------------------------------------------------------------------------

# which input buffer each function reads
TRANSC = [("exp", "x"), ("exp2", "x"), ("log", "xp"), ("log2", "xp"), ("log10", "xp"), ("sqrt", "xp"),
          ("rsqrt", "xp"), ("sin", "xt"), ("cos", "xt"), ("tan", "xt"), ("tanh", "x"), ("sigmoid", "x"),
          ("erf", "x"), ("pow", "xp"), ("floor", "x"), ("ceil", "x"), ("round", "x"), ("trunc", "x")]
EXACT_FNS = {"sqrt", "floor", "ceil", "round", "trunc"}


def np_round_fn(fname):
    return {"floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc}[fname]


def transc_test(name, t, n, block, ulp):
    lines = ["// transcendentals on %s with inputs in their ordinary ranges: exact results for sqrt floor ceil round (half to even) trunc, %d ulp for the others" % (t, ulp),
             ".kernel " + name, ".param .buf.%s x" % t, ".param .buf.%s xp" % t, ".param .buf.%s xt" % t,
             ".param .buf.%s y" % t]
    lines += [".param .buf.%s out_%s .rw" % (t, f) for f, _ in TRANSC]
    lines += [".param .u32 n", guard_n()]
    for b in ("x", "xp", "xt", "y"):
        lines.append("    ld.%s %%%s, %s[%%i];" % (t, b, b))
    for f, src in TRANSC:
        if f == "pow":
            lines.append("    pow.%s %%r, %%xp, %%y;" % t)
        else:
            lines.append("    %s.%s %%r, %%%s;" % (f, t, src))
        lines.append("    st.%s out_%s[%%i], %%r;" % (t, f))
    T = Test(name, "transcendental functions on %s (%d ulp; sqrt and rounding exact)" % (t, ulp), "\n".join(lines),
             *launch_1d(n, block))
    T.scalar("n", n)
    rng = T.rng
    x = rand_uniform(rng, t, n, -10, 10)
    x[:12] = [to_type(v, t) for v in (0.5, -0.5, 1.5, -2.5, 3.5, 0.25, -0.75, 1e-3, -1e-3, 9.5, -9.5, 7.0)]
    xp = [to_type(v, t) for v in np.exp(rng.uniform(math.log(1e-4), math.log(1e4), n))]
    xp[:6] = [1.0, 2.0, 10.0, 0.5, 4.0, 1e3]
    xt = rand_uniform(rng, t, n, -100, 100)
    xt[:6] = [to_type(v, t) for v in (1.0, -1.0, 3.0, 0.1, 50.0, -99.0)]
    y = rand_uniform(rng, t, n, -4, 4)
    y[:6] = [to_type(v, t) for v in (0.5, 2.0, -1.0, 3.0, 0.0, 1.5)]
    # keep pow results inside the normal range of t
    for k in range(n):
        e = float(y[k]) * math.log2(xp[k])
        if not -120 < e < 120:
            y[k] = to_type(-y[k] * 0.1, t)
    bufs = {"x": x, "xp": xp, "xt": xt, "y": y}
    for b, v in bufs.items():
        T.buf(b, v)
    for f, src in TRANSC:
        vals = bufs[src]
        if f in ("floor", "ceil", "round", "trunc"):
            res = fop(t, np_round_fn(f), vals)
        elif f == "sqrt":
            res = fop(t, np.sqrt, vals)
        elif f == "pow":
            res = [ref_round("pow", a, t, b) for a, b in zip(xp, y)]
        else:
            res = [ref_round(f, v, t) for v in vals]
        T.fill("out_" + f, 0.0, n)
        T.out("out_" + f, res, ulp=0 if f in EXACT_FNS else ulp)
    return T


test(lambda: transc_test("transc_f32", "f32", 256, 128, 4))
test(lambda: transc_test("transc_f64", "f64", 128, 64, 2))


@test
def transc_f16():
    fns = [("exp", "x"), ("log", "xp"), ("sin", "x"), ("tanh", "x"), ("sigmoid", "x"), ("sqrt", "xp"),
           ("rsqrt", "xp"), ("pow", "xp"), ("floor", "x")]
    lines = ["// transcendentals on f16: widen to f32, compute in f32, round back to f16 (inputs chosen away from f16 rounding boundaries; 1 ulp, sqrt and floor exact)",
             ".kernel transc_f16", ".param .buf.f16 x", ".param .buf.f16 xp", ".param .buf.f16 y"]
    lines += [".param .buf.f16 out_%s .rw" % f for f, _ in fns]
    lines += [".param .u32 n", guard_n(), "    ld.f16 %x, x[%i];", "    ld.f16 %xp, xp[%i];", "    ld.f16 %y, y[%i];"]
    for f, src in fns:
        if f == "pow":
            lines.append("    pow.f16 %r, %xp, %y;")
        else:
            lines.append("    %s.f16 %%r, %%%s;" % (f, src))
        lines.append("    st.f16 out_%s[%%i], %%r;" % f)
    n = 128
    T = Test("transc_f16", "f16 transcendentals (computed in f32, rounded to f16)", "\n".join(lines),
             *launch_1d(n, 64))
    T.scalar("n", n)
    rng = T.rng

    def ok(xv, xpv, yv):
        for f, src in fns:
            a = xv if src == "x" else xpv
            if f in ("floor", "sqrt"):
                continue
            ex = ref_exact(f, a, yv if f == "pow" else None)
            r = round_exact(ex, "f16")
            if near_midpoint(ex, "f16") or math.isinf(r) or abs(r) < 2.0 ** -14:
                return False
        return True

    x, xp, y = [], [], []
    while len(x) < n:
        a = to_type(rng.uniform(-4, 4), "f16")
        b = to_type(math.exp(rng.uniform(math.log(1 / 16), math.log(64))), "f16")
        c = to_type(rng.uniform(-2, 2), "f16")
        if a != 0 and ok(a, b, c):
            x.append(a)
            xp.append(b)
            y.append(c)
    T.buf("x", x)
    T.buf("xp", xp)
    T.buf("y", y)
    bufs = {"x": x, "xp": xp}
    for f, src in fns:
        vals = bufs[src]
        if f == "floor":
            res = fop("f16", np.floor, vals)
        elif f == "sqrt":
            res = fop("f16", np.sqrt, vals)
        elif f == "pow":
            res = [round_exact(ref_exact("pow", a, b), "f16") for a, b in zip(xp, y)]
        else:
            res = [round_exact(ref_exact(f, v), "f16") for v in vals]
            # the f32 reference rounded to f16 agrees
            assert all(same(r, to_type(ref_round(f, v, "f32"), "f16")) for r, v in zip(res, vals))
        T.fill("out_" + f, 0.0, n)
        T.out("out_" + f, res, ulp=0 if f in ("floor", "sqrt") else 1)
    return T


SPECIAL_IN = {
    "exp": [NAN, INF, -INF, 0.0, -0.0], "exp2": [NAN, INF, -INF, 0.0, -0.0],
    "log": [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0], "log2": [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0],
    "log10": [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0],
    "sqrt": [NAN, INF, -INF, 0.0, -0.0, -1.0, 4.0, 2.25], "rsqrt": [NAN, INF, -INF, 0.0, -0.0, -1.0],
    "sin": [NAN, INF, -INF, 0.0, -0.0], "cos": [NAN, INF, -INF, 0.0, -0.0], "tan": [NAN, INF, -INF, 0.0, -0.0],
    "tanh": [NAN, INF, -INF, 0.0, -0.0], "sigmoid": [NAN, INF, -INF, 0.0, -0.0],
    "erf": [NAN, INF, -INF, 0.0, -0.0], "floor": [NAN, INF, -INF, 0.0, -0.0],
    "ceil": [NAN, INF, -INF, 0.0, -0.0], "round": [NAN, INF, -INF, 0.0, -0.0],
    "trunc": [NAN, INF, -INF, 0.0, -0.0],
}
POW_SPECIAL = [(NAN, 2.0), (2.0, NAN), (0.0, 2.0), (INF, 2.0), (2.0, -INF), (2.0, INF), (0.5, INF), (2.0, 0.0),
               (1.0, 3.0), (INF, -1.0), (0.0, -1.0), (NAN, 1.0)]


def special_value(f, x):
    """C99 Annex F results of f at special operands."""
    if math.isnan(x):
        return NAN
    if f in ("exp", "exp2"):
        return {INF: INF, -INF: 0.0}.get(x, 1.0 if x == 0 else None)
    if f in ("log", "log2", "log10"):
        if x < 0:
            return NAN
        return {INF: INF, 0.0: -INF, 1.0: 0.0}[x]
    if f == "sqrt":
        return NAN if x < 0 else math.sqrt(x) if not math.isinf(x) else INF
    if f == "rsqrt":
        if x == 0:
            return math.copysign(INF, x)
        return NAN if x < 0 else 0.0
    if f in ("sin", "tan", "erf", "tanh"):
        if math.isinf(x):
            return NAN if f in ("sin", "tan") else math.copysign(1.0, x)
        return x  # +-0 keeps its sign
    if f == "cos":
        return NAN if math.isinf(x) else 1.0
    if f == "sigmoid":
        return {INF: 1.0, -INF: 0.0}.get(x, 0.5)
    if f in ("floor", "ceil", "round", "trunc"):
        return x
    raise ValueError(f)


def pow_special(a, b):
    if math.isnan(a) or math.isnan(b):
        return NAN
    return math.pow(a, b) if not (a == 0 and b < 0) else INF


@test
def transc_special():
    lines = ["// special operands of every transcendental and rounding function on f32 and f64, exact results (C99 Annex F): log(0) = -inf, log(-1) = NaN, sqrt(-0) = -0, rsqrt(+-0) = +-inf, sin(inf) = NaN, tanh(-inf) = -1, sigmoid(-inf) = 0, pow with NaN, 0 and inf operands",
             ".kernel transc_special"]
    fns = list(SPECIAL_IN)
    for t in ("f32", "f64"):
        for f in fns:
            lines += [".param .buf.%s in_%s_%s" % (t, f, t), ".param .buf.%s out_%s_%s .rw" % (t, f, t)]
        lines += [".param .buf.%s pa_%s" % (t, t), ".param .buf.%s pb_%s" % (t, t),
                  ".param .buf.%s out_pow_%s .rw" % (t, t)]
    lines += ["    mov.u32 %i, %tid.x;"]
    for t in ("f32", "f64"):
        for f in fns:
            k = len(SPECIAL_IN[f])
            lines += ["    setp.lt.u32 %%p, %%i, %d;" % k,
                      "@%%p ld.%s %%v_%s, in_%s_%s[%%i];" % (t, t, f, t),
                      "@%%p %s.%s %%v_%s, %%v_%s;" % (f, t, t, t),
                      "@%%p st.%s out_%s_%s[%%i], %%v_%s;" % (t, f, t, t)]
        lines += ["    setp.lt.u32 %%p, %%i, %d;" % len(POW_SPECIAL),
                  "@%%p ld.%s %%a_%s, pa_%s[%%i];" % (t, t, t), "@%%p ld.%s %%b_%s, pb_%s[%%i];" % (t, t, t),
                  "@%%p pow.%s %%v_%s, %%a_%s, %%b_%s;" % (t, t, t, t),
                  "@%%p st.%s out_pow_%s[%%i], %%v_%s;" % (t, t, t)]
    T = Test("transc_special", "transcendental and rounding functions at NaN, infinities, zeros and domain errors (exact)",
             "\n".join(lines), [1, 1, 1], [16, 1, 1])
    for t in ("f32", "f64"):
        for f in fns:
            ins = SPECIAL_IN[f]
            T.buf("in_%s_%s" % (f, t), ins)
            T.fill("out_%s_%s" % (f, t), 7.0, len(ins))
            T.out("out_%s_%s" % (f, t), [special_value(f, v) for v in ins])
        T.buf("pa_" + t, [a for a, _ in POW_SPECIAL])
        T.buf("pb_" + t, [b for _, b in POW_SPECIAL])
        T.fill("out_pow_" + t, 7.0, len(POW_SPECIAL))
        T.out("out_pow_" + t, [pow_special(a, b) for a, b in POW_SPECIAL])
    # cross-check the C99 table with NumPy where NumPy has the function
    npf = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10, "sqrt": np.sqrt,
           "sin": np.sin, "cos": np.cos, "tan": np.tan, "tanh": np.tanh, "floor": np.floor, "ceil": np.ceil,
           "round": np.rint, "trunc": np.trunc}
    for f, fn in npf.items():
        got = fop("f64", fn, SPECIAL_IN[f])
        assert all(same(g, special_value(f, v)) for g, v in zip(got, SPECIAL_IN[f])), f
    got = fop("f64", np.power, [a for a, _ in POW_SPECIAL], [b for _, b in POW_SPECIAL])
    assert all(same(g, pow_special(a, b)) for g, (a, b) in zip(got, POW_SPECIAL))
    return T


@test
def rounding_modes():
    fns = ["floor", "ceil", "round", "trunc"]
    lines = ["// floor ceil round trunc on f16 bf16 f32 f64: round is half to even, results keep the sign of the input (ceil(-0.3) = -0.0), large values are already integral",
             ".kernel rounding_modes"]
    for t in FLOATS:
        lines.append(".param .buf.%s x_%s" % (t, t))
        lines += [".param .buf.%s %s_%s .rw" % (t, f, t) for f in fns]
    lines += [".param .u32 n", guard_n()]
    for t in FLOATS:
        lines.append("    ld.%s %%x_%s, x_%s[%%i];" % (t, t, t))
        for f in fns:
            lines += ["    %s.%s %%r_%s, %%x_%s;" % (f, t, t, t), "    st.%s %s_%s[%%i], %%r_%s;" % (t, f, t, t)]
    n = 64
    T = Test("rounding_modes", "floor/ceil/round-half-even/trunc on every float type (exact)", "\n".join(lines),
             *launch_1d(n, 32))
    T.scalar("n", n)
    base = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, -3.5, 0.49999997, -0.49999997, 0.3, -0.3, 1.0, -1.0, 0.0, -0.0,
            NAN, INF, -INF, 2.0 ** 22 + 0.5, 2.0 ** 22 + 1.5, -(2.0 ** 22 + 0.5), 2.0 ** 52 + 0.5, 2.0 ** 52 + 1.5,
            1e10, -1e10, 1e300, 7.75, -7.25, 1023.5, 1024.5, -1025.5, 0.999, -0.999, 1e-30, -1e-30, 255.5, 256.5]
    for t in FLOATS:
        vals = []
        for v in base:
            r = to_type(v, t)
            if math.isinf(r) and not math.isinf(v):
                continue
            if not any(same(r, w) for w in vals):
                vals.append(r)
        vals += [to_type(v * 4, t) / 4 if not math.isinf(to_type(v * 4, t)) else to_type(v, t)
                 for v in T.rng.uniform(-600, 600, n - len(vals))]
        vals = vals[:n]
        T.buf("x_" + t, vals)
        for f in fns:
            T.fill("%s_%s" % (f, t), 0.0, n)
            T.out("%s_%s" % (f, t), fop(t, np_round_fn(f), vals))
    return T


# --------------------------------------------------------------------------------------------
# Control flow
# --------------------------------------------------------------------------------------------

@test
def ctrl_divergent_if_else():
    hasm = """// divergent if/else on lane parity with a nested data-dependent if in the else arm; the lanes reconverge at JOIN and keep working, then diverge again in a data-dependent loop
.kernel ctrl_divergent_if_else
.param .buf.i32 x
.param .buf.i32 out .rw
.param .buf.u32 steps .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.i32 %v, x[%i];
    and.u32 %odd, %i, 1;
    setp.eq.u32 %even, %odd, 0;
@!%even bra ELSE;
    mul.i32 %r, %v, 3;
    add.i32 %r, %r, 1;
    bra JOIN;
ELSE:
    setp.lt.i32 %neg, %v, 0;
@%neg bra ELSE_NEG;
    sub.i32 %r, %v, 7;
    bra JOIN;
ELSE_NEG:
    neg.i32 %r, %v;
    shl.i32 %r, %r, 1;
JOIN:
    mul.i32 %r, %r, 2;
    add.i32 %r, %r, %v;
    st.i32 out[%i], %r;
    mov.u32 %s, 0;
    and.i32 %w, %v, 15;
WHILE:
    setp.eq.i32 %done, %w, 0;
@%done bra END;
    sub.i32 %w, %w, 1;
    add.u32 %s, %s, %i;
    bra WHILE;
END:
    st.u32 steps[%i], %s;
"""
    n = 150
    T = Test("ctrl_divergent_if_else", "divergent branches that reconverge, nested branches, data-dependent loops",
             hasm, *launch_1d(n, 64))
    x = rand_ints(T.rng, "i32", n, -1000, 1000)
    T.buf("x", x)
    T.scalar("n", n)
    T.fill("out", -1, n)
    T.fill("steps", 0, n)
    out, steps = [], []
    for i, v in enumerate(x):
        if i % 2 == 0:
            r = v * 3 + 1
        elif v < 0:
            r = (-v) << 1
        else:
            r = v - 7
        out.append(wrap(r * 2 + v, "i32"))
        steps.append(wrap((v & 15) * i, "u32"))
    T.out("out", out)
    T.out("steps", steps)
    return T


@test
def ctrl_nested_loops():
    hasm = """// nested loops with per-lane trip counts: out[i] = sum over j < (i mod 7) + 1, k <= j of (j*k + x[i]) (u32, wrapping), and a triple loop with a uniform count
.kernel ctrl_nested_loops
.param .buf.u32 x
.param .buf.u32 out .rw
.param .buf.u32 cube .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.u32 %v, x[%i];
    rem.u32 %m, %i, 7;
    add.u32 %m, %m, 1;
    mov.u32 %acc, 0;
    mov.u32 %j, 0;
OUTER:
    mov.u32 %k, 0;
INNER:
    mad.u32 %t, %j, %k, %v;
    add.u32 %acc, %acc, %t;
    add.u32 %k, %k, 1;
    setp.le.u32 %more, %k, %j;
@%more bra INNER;
    add.u32 %j, %j, 1;
    setp.lt.u32 %more, %j, %m;
@%more bra OUTER;
    st.u32 out[%i], %acc;
    mov.u32 %c, 0;
    mov.u32 %a, 0;
LA:
    mov.u32 %b, 0;
LB:
    mov.u32 %d, 0;
LC:
    mul.u32 %t, %a, 100;
    mad.u32 %t, %b, 10, %t;
    add.u32 %t, %t, %d;
    xor.u32 %c, %c, %t;
    add.u32 %c, %c, %i;
    add.u32 %d, %d, 1;
    setp.lt.u32 %more, %d, 3;
@%more bra LC;
    add.u32 %b, %b, 1;
    setp.lt.u32 %more, %b, 4;
@%more bra LB;
    add.u32 %a, %a, 1;
    setp.lt.u32 %more, %a, 2;
@%more bra LA;
    st.u32 cube[%i], %c;
"""
    n = 100
    T = Test("ctrl_nested_loops", "nested loops (double loop with per-lane bounds, triple loop)", hasm,
             *launch_1d(n, 32))
    x = rand_ints(T.rng, "u32", n)
    T.buf("x", x)
    T.scalar("n", n)
    T.fill("out", 0, n)
    T.fill("cube", 0, n)
    out, cube = [], []
    for i, v in enumerate(x):
        acc = 0
        for j in range(i % 7 + 1):
            for k in range(j + 1):
                acc += j * k + v
        out.append(wrap(acc, "u32"))
        c = 0
        for a in range(2):
            for b in range(4):
                for d in range(3):
                    c = wrap((c ^ (a * 100 + b * 10 + d)) + i, "u32")
        cube.append(c)
    T.out("out", out)
    T.out("cube", cube)
    return T


@test
def ctrl_loop_instruction():
    hasm = """// loop %c, L decrements the integer counter and branches while it is not zero (a do-while: a counter starting at k >= 1 runs the body k times); per-lane counts, an i64 counter and an i16 counter
.kernel ctrl_loop_instruction
.param .buf.u32 counts
.param .buf.u32 out .rw
.param .buf.i64 out64 .rw
.param .buf.i16 out16 .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.u32 %c, counts[%i];
    mov.u32 %acc, 0;
    mov.u32 %k, 0;
BODY:
    add.u32 %k, %k, 1;
    mad.u32 %acc, %acc, 3, %k;
    loop %c, BODY;
    add.u32 %acc, %acc, %c;
    st.u32 out[%i], %acc;
    mov.i64 %c2, 5;
    cvt.i64.u32 %s, %i;
    add.i64 %s, %s, 1;
L2:
    mul.i64 %s, %s, -3;
    loop %c2, L2;
    st.i64 out64[%i], %s;
    cvt.i16.u32 %c3, %i;
    and.i16 %c3, %c3, 7;
    add.i16 %c3, %c3, 1;
    mov.i16 %h, 0;
L3:
    add.i16 %h, %h, %c3;
    loop %c3, L3;
    st.i16 out16[%i], %h;
"""
    n = 70
    T = Test("ctrl_loop_instruction", "the loop instruction (decrement, branch while non-zero)", hasm, *launch_1d(n, 64))
    counts = [int(v) for v in T.rng.integers(1, 21, n)]
    T.buf("counts", counts)
    T.scalar("n", n)
    T.fill("out", 0, n)
    T.fill("out64", 0, n)
    T.fill("out16", 0, n)
    out, o64, o16 = [], [], []
    for i, c in enumerate(counts):
        acc, k = 0, 0
        for _ in range(c):
            k += 1
            acc = wrap(acc * 3 + k, "u32")
        out.append(acc)  # the counter ends at 0
        o64.append(wrap((i + 1) * (-3) ** 5, "i64"))
        c3 = (i & 7) + 1
        # h += c3 with c3 decreasing: c3 + (c3-1) + ... + 1
        o16.append(c3 * (c3 + 1) // 2)
    T.out("out", out)
    T.out("out64", o64)
    T.out("out16", o16)
    return T


@test
def ctrl_call_ret():
    hasm = """// call/ret: subroutine F is called from three places (one call guarded), F calls G (call depth 2), G is also called directly; ret returns to the instruction after the call
.kernel ctrl_call_ret
.param .buf.u32 x
.param .buf.u32 out .rw
.param .buf.u32 trace .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.u32 %arg, x[%i];
    mov.u32 %acc, 0;
    mov.u32 %tr, 0;
    call F;
    add.u32 %arg, %arg, 7;
    call F;
    call G;
    and.u32 %odd, %i, 1;
    setp.eq.u32 %isodd, %odd, 1;
@%isodd call F;
    st.u32 out[%i], %acc;
    st.u32 trace[%i], %tr;
    exit;
F:
    mul.u32 %t, %arg, %arg;
    add.u32 %acc, %acc, %t;
    shl.u32 %tr, %tr, 2;
    or.u32 %tr, %tr, 1;
    call G;
    add.u32 %acc, %acc, 1;
    ret;
G:
    xor.u32 %acc, %acc, 0x5a5a;
    shl.u32 %tr, %tr, 2;
    or.u32 %tr, %tr, 2;
    ret;
"""
    n = 80
    T = Test("ctrl_call_ret", "call/ret with a subroutine called from several places and nested calls", hasm,
             *launch_1d(n, 32))
    x = rand_ints(T.rng, "u32", n)
    T.buf("x", x)
    T.scalar("n", n)
    T.fill("out", 0, n)
    T.fill("trace", 0, n)
    out, trace = [], []
    for i, v in enumerate(x):
        st = {"acc": 0, "tr": 0, "arg": v}

        def G():
            st["acc"] ^= 0x5A5A
            st["tr"] = wrap((st["tr"] << 2) | 2, "u32")

        def F():
            st["acc"] = wrap(st["acc"] + st["arg"] * st["arg"], "u32")
            st["tr"] = wrap((st["tr"] << 2) | 1, "u32")
            G()
            st["acc"] = wrap(st["acc"] + 1, "u32")

        F()
        st["arg"] = wrap(st["arg"] + 7, "u32")
        F()
        G()
        if i % 2 == 1:
            F()
        out.append(st["acc"])
        trace.append(st["tr"])
    T.out("out", out)
    T.out("trace", trace)
    return T


@test
def ctrl_exit_mid():
    hasm = """// exit in the middle of the kernel and inside a loop: a lane that exits stops, its later stores never happen, the other lanes carry on
.kernel ctrl_exit_mid
.param .buf.u32 a .rw
.param .buf.u32 b .rw
.param .buf.u32 c .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    add.u32 %v, %i, 1000;
    st.u32 a[%i], %v;
    rem.u32 %m, %i, 3;
    setp.eq.u32 %q, %m, 0;
@%q exit;
    st.u32 b[%i], %v;
    rem.u32 %lim, %i, 5;
    mov.u32 %k, 0;
LOOP:
    add.u32 %k, %k, 1;
    st.u32 c[%i], %k;
    setp.ge.u32 %stop, %k, %lim;
@%stop exit;
    setp.lt.u32 %more, %k, 3;
@%more bra LOOP;
    st.u32 c[%i], 99;
"""
    n = 60
    T = Test("ctrl_exit_mid", "exit in the middle of the kernel and inside a loop", hasm, *launch_1d(n, 64))
    T.scalar("n", n)
    T.fill("a", 5, n)
    T.fill("b", 5, n)
    T.fill("c", 5, n)
    a, b, c = [], [], []
    for i in range(n):
        a.append(i + 1000)
        if i % 3 == 0:
            b.append(5)
            c.append(5)
            continue
        b.append(i + 1000)
        lim = i % 5
        k = 0
        val = 5
        while True:
            k += 1
            val = k
            if k >= lim:
                break
            if k < 3:
                continue
            val = 99
            break
        c.append(val)
    T.out("a", a)
    T.out("b", b)
    T.out("c", c)
    return T


@test
def ctrl_guarded():
    hasm = """// guarded instructions (@%p and @!%p) of every kind: mov, arithmetic, ld, st, setp, cvt, call, bra; a lane whose guard is false skips the instruction and keeps the register's old value
.kernel ctrl_guarded
.param .buf.i32 x
.param .buf.i32 out .rw
.param .buf.i32 only_pos .rw
.param .buf.f32 fout .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.i32 %v, x[%i];
    setp.gt.i32 %pos, %v, 0;
    mov.i32 %r, 10;
@%pos add.i32 %r, %r, %v;
@!%pos sub.i32 %r, %r, %v;
@%pos st.i32 only_pos[%i], %v;
    and.u32 %m, %i, 3;
    setp.eq.u32 %z, %m, 0;
@%z ld.i32 %r, x[0];
@!%z setp.lt.i32 %pos, %v, -50;
@%pos mul.i32 %r, %r, 2;
    mov.f32 %f, 0.5;
@%z cvt.f32.i32 %f, %v;
@!%pos call NEGATE;
    st.i32 out[%i], %r;
@%pos bra SKIP;
    add.f32 %f, %f, 1.0;
SKIP:
    st.f32 fout[%i], %f;
    exit;
NEGATE:
    neg.i32 %r, %r;
    ret;
"""
    n = 90
    T = Test("ctrl_guarded", "guarded instructions of every kind", hasm, *launch_1d(n, 32))
    x = rand_ints(T.rng, "i32", n, -100, 100)
    x[0] = 33
    T.buf("x", x)
    T.scalar("n", n)
    T.fill("out", 0, n)
    T.fill("only_pos", -1, n)
    T.fill("fout", 0.0, n)
    out, op, fo = [], [], []
    for i, v in enumerate(x):
        pos = v > 0
        r = 10 + v if pos else 10 - v
        op.append(v if pos else -1)
        z = i % 4 == 0
        if z:
            r = x[0]
        else:
            pos = v < -50
        if pos:
            r = wrap(r * 2, "i32")
        f = float(v) if z else 0.5
        if not pos:
            r = wrap(-r, "i32")
        out.append(r)
        if not pos:
            f = float(np.float32(f) + np.float32(1.0))
        fo.append(f)
    T.out("out", out)
    T.out("only_pos", op)
    T.out("fout", fo)
    return T


@test
def ctrl_ret_top_level():
    hasm = """// ret outside any subroutine ends the lane like exit (guarded and unguarded), while ret inside a subroutine returns to its caller
.kernel ctrl_ret_top_level
.param .buf.u32 out .rw
.param .buf.u32 out2 .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p ret;
    st.u32 out[%i], 1;
    setp.lt.u32 %early, %i, 10;
@%early ret;
    st.u32 out[%i], 2;
    call SUB;
    st.u32 out2[%i], %x;
    ret;
    st.u32 out[%i], 3;
SUB:
    mad.u32 %x, %i, 3, 5;
    ret;
"""
    n = 40
    T = Test("ctrl_ret_top_level", "ret at top level ends the lane", hasm, [2, 1, 1], [32, 1, 1])
    T.scalar("n", n)
    T.fill("out", 0, n + 4)
    T.fill("out2", 0, n + 4)
    T.out("out", [1 if i < 10 else 2 for i in range(n)] + [0] * 4)
    T.out("out2", [0 if i < 10 else i * 3 + 5 for i in range(n)] + [0] * 4)
    return T


@test
def ctrl_uninit_reads_zero():
    hasm = """// a register that some path reads before any write reads zero: guarded writes seen by lanes that skipped them (u32, f64, i8, pred), and an accumulator that is never initialised
.kernel ctrl_uninit_reads_zero
.param .buf.u32 out_u32 .rw
.param .buf.f64 out_f64 .rw
.param .buf.i8 out_i8 .rw
.param .buf.u32 out_acc .rw
.param .buf.u32 out_q .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    and.u32 %odd, %i, 1;
    setp.eq.u32 %isodd, %odd, 1;
@%isodd mov.u32 %x, 77;
    st.u32 out_u32[%i], %x;
@%isodd mov.f64 %d, 2.5;
    add.f64 %d, %d, 1.0;
    st.f64 out_f64[%i], %d;
@%isodd mov.i8 %b, -3;
    add.i8 %b, %b, 1;
    st.i8 out_i8[%i], %b;
    mov.u32 %k, 4;
LOOP:
    add.u32 %acc, %acc, %i;
    loop %k, LOOP;
    st.u32 out_acc[%i], %acc;
@%isodd setp.eq.u32 %q, %i, %i;
@%q st.u32 out_q[%i], 9;
"""
    n = 50
    T = Test("ctrl_uninit_reads_zero", "registers read before any write read zero", hasm, *launch_1d(n, 32))
    T.scalar("n", n)
    for nm, v in (("out_u32", 5), ("out_f64", 5.0), ("out_i8", 5), ("out_acc", 5), ("out_q", 5)):
        T.fill(nm, v, n)
    T.out("out_u32", [77 if i % 2 else 0 for i in range(n)])
    T.out("out_f64", [3.5 if i % 2 else 1.0 for i in range(n)])
    T.out("out_i8", [-2 if i % 2 else 1 for i in range(n)])
    T.out("out_acc", [4 * i for i in range(n)])
    T.out("out_q", [9 if i % 2 else 5 for i in range(n)])
    return T


@test
def ctrl_while_collatz():
    hasm = """// a data-dependent while loop with a branch inside (Collatz steps), every lane running a different number of iterations
.kernel ctrl_while_collatz
.param .buf.u32 x
.param .buf.u32 steps .rw
.param .buf.u32 peak .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.u32 %v, x[%i];
    mov.u32 %s, 0;
    mov.u32 %top, %v;
WHILE:
    setp.le.u32 %done, %v, 1;
@%done bra END;
    and.u32 %odd, %v, 1;
    setp.eq.u32 %isodd, %odd, 1;
@%isodd bra ODD;
    shr.u32 %v, %v, 1;
    bra NEXT;
ODD:
    mad.u32 %v, %v, 3, 1;
    max.u32 %top, %top, %v;
NEXT:
    add.u32 %s, %s, 1;
    bra WHILE;
END:
    st.u32 steps[%i], %s;
    st.u32 peak[%i], %top;
"""
    n = 200
    T = Test("ctrl_while_collatz", "divergent data-dependent while loop", hasm, *launch_1d(n, 128))
    x = [1, 2, 3, 27, 97, 871] + [int(v) for v in T.rng.integers(1, 3000, n - 6)]
    T.buf("x", x)
    T.scalar("n", n)
    T.fill("steps", 0, n)
    T.fill("peak", 0, n)
    st, pk = [], []
    for v in x:
        s, top = 0, v
        while v > 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            top = max(top, v)
            s += 1
        st.append(s)
        pk.append(top)
    T.out("steps", st)
    T.out("peak", pk)
    return T


# --------------------------------------------------------------------------------------------
# Synchronisation through shared memory
# --------------------------------------------------------------------------------------------

@test
def sync_tree_reduction():
    hasm = """// block-level tree reduction through .shared memory with barriers: block 256, each block writes one partial sum; f32 adds in the fixed tree order tile[t] += tile[t + s] for s = 128, 64, ..., 1 (lanes past n contribute 0)
.kernel sync_tree_reduction
.param .buf.f32 x
.param .buf.f32 partial .rw
.param .buf.u32 count .rw
.param .u32 n
.shared .f32 tile[256]
.shared .u32 ones[256]
    mov.u32 %t, %tid.x;
    mov.u32 %i, %gid;
    mov.f32 %v, 0.0;
    mov.u32 %one, 0;
    setp.lt.u32 %in, %i, n;
@%in ld.f32 %v, x[%i];
@%in mov.u32 %one, 1;
    st.f32 tile[%t], %v;
    st.u32 ones[%t], %one;
    barrier;
    shr.u32 %s, %ntid.x, 1;
STEP:
    setp.lt.u32 %act, %t, %s;
@!%act bra SKIP;
    add.u32 %j, %t, %s;
    ld.f32 %a, tile[%t];
    ld.f32 %b, tile[%j];
    add.f32 %a, %a, %b;
    st.f32 tile[%t], %a;
    ld.u32 %c, ones[%t];
    ld.u32 %d, ones[%j];
    add.u32 %c, %c, %d;
    st.u32 ones[%t], %c;
SKIP:
    fence.block;
    barrier;
    shr.u32 %s, %s, 1;
    setp.ne.u32 %more, %s, 0;
@%more bra STEP;
    setp.ne.u32 %lead, %t, 0;
@%lead exit;
    ld.f32 %r, tile[0];
    st.f32 partial[%ctaid.x], %r;
    ld.u32 %q, ones[0];
    st.u32 count[%ctaid.x], %q;
"""
    block, grid = 256, 6
    n = block * grid - 77
    T = Test("sync_tree_reduction", "shared-memory tree reduction with barriers, one partial sum per block", hasm,
             [grid, 1, 1], [block, 1, 1])
    x = rand_uniform(T.rng, "f32", n, -100, 100)
    T.buf("x", x)
    T.scalar("n", n)
    T.fill("partial", 0.0, grid)
    T.fill("count", 0, grid)
    xs = np.zeros(block * grid, dtype=np.float32)
    xs[:n] = np.array(x, dtype=np.float32)
    parts, counts = [], []
    for b in range(grid):
        tile = xs[b * block:(b + 1) * block].copy()
        s = block // 2
        while s:
            tile[:s] = tile[:s] + tile[s:2 * s]
            s //= 2
        parts.append(float(tile[0]))
        counts.append(max(0, min(block, n - b * block)))
    T.out("partial", parts)
    T.out("count", counts)
    return T


@test
def sync_block_reverse():
    hasm = """// reverse each block's slice through .shared memory: every lane stores, barrier, every lane loads the mirrored element (i64 and f64 in two shared arrays)
.kernel sync_block_reverse
.param .buf.i64 x
.param .buf.f64 y
.param .buf.i64 xr .rw
.param .buf.f64 yr .rw
.shared .i64 tx[128]
.shared .f64 ty[128]
    mov.u32 %t, %tid.x;
    mov.u32 %i, %gid;
    ld.i64 %v, x[%i];
    st.i64 tx[%t], %v;
    ld.f64 %w, y[%i];
    st.f64 ty[%t], %w;
    barrier;
    sub.u32 %r, %ntid.x, 1;
    sub.u32 %r, %r, %t;
    ld.i64 %v, tx[%r];
    ld.f64 %w, ty[%r];
    fence.device;
    st.i64 xr[%i], %v;
    st.f64 yr[%i], %w;
"""
    block, grid = 128, 4
    n = block * grid
    T = Test("sync_block_reverse", "block reverse through shared memory", hasm, [grid, 1, 1], [block, 1, 1])
    x = rand_ints(T.rng, "i64", n)
    y = rand_floats(T.rng, "f64", n, -50, 50)
    T.buf("x", x)
    T.buf("y", y)
    T.fill("xr", 0, n)
    T.fill("yr", 0.0, n)
    perm = [b * block + block - 1 - t for b in range(grid) for t in range(block)]
    T.out("xr", [x[j] for j in perm])
    T.out("yr", [y[j] for j in perm])
    return T


@test
def sync_stencil():
    hasm = """// 1D three-point stencil with a .shared tile and halo cells loaded by the edge lanes; lanes past n load zeros but still reach the barrier; out = (l + r) * 0.25 + c * 0.5 in f32
.kernel sync_stencil
.param .buf.f32 x
.param .buf.f32 out .rw
.param .u32 n
.shared .f32 tile[66]
    mov.u32 %t, %tid.x;
    mov.u32 %i, %gid;
    add.u32 %s, %t, 1;
    mov.f32 %v, 0.0;
    setp.lt.u32 %in, %i, n;
@%in ld.f32 %v, x[%i];
    st.f32 tile[%s], %v;
    setp.eq.u32 %first, %t, 0;
    setp.ne.u32 %notzero, %i, 0;
    and.pred %lh, %first, %notzero;
    mov.f32 %h, 0.0;
    sub.u32 %il, %i, 1;
@%lh ld.f32 %h, x[%il];
@%first st.f32 tile[0], %h;
    sub.u32 %last, %ntid.x, 1;
    setp.eq.u32 %islast, %t, %last;
    add.u32 %ir, %i, 1;
    setp.lt.u32 %rin, %ir, n;
    and.pred %rh, %islast, %rin;
    mov.f32 %g, 0.0;
@%rh ld.f32 %g, x[%ir];
    add.u32 %e, %ntid.x, 1;
@%islast st.f32 tile[%e], %g;
    barrier;
    ld.f32 %l, tile[%t];
    ld.f32 %c, tile[%s];
    add.u32 %s2, %s, 1;
    ld.f32 %r, tile[%s2];
    add.f32 %lr, %l, %r;
    mul.f32 %lr, %lr, 0.25;
    mul.f32 %c, %c, 0.5;
    add.f32 %o, %lr, %c;
@%in st.f32 out[%i], %o;
"""
    block, n = 64, 300
    grid = (n + block - 1) // block
    T = Test("sync_stencil", "1D stencil through shared memory with halos", hasm, [grid, 1, 1], [block, 1, 1])
    x = rand_uniform(T.rng, "f32", n, -10, 10)
    T.buf("x", x)
    T.scalar("n", n)
    T.fill("out", 0.0, n)
    xp = np.zeros(n + 2, dtype=np.float32)
    xp[1:n + 1] = np.array(x, dtype=np.float32)
    l, c, r = xp[:n], xp[1:n + 1], xp[2:]
    o = (l + r) * np.float32(0.25) + c * np.float32(0.5)
    assert o.dtype == np.float32
    T.out("out", flist(o))
    return T


@test
def sync_inclusive_scan():
    hasm = """// Hillis-Steele inclusive prefix sum of each block through .shared memory, two barriers per step (read, then write); the guarded load is skipped, not evaluated, by lanes t < d
.kernel sync_inclusive_scan
.param .buf.u32 x
.param .buf.u32 out .rw
.shared .u32 tile[128]
    mov.u32 %t, %tid.x;
    mov.u32 %i, %gid;
    ld.u32 %v, x[%i];
    st.u32 tile[%t], %v;
    barrier;
    mov.u32 %d, 1;
STEP:
    mov.u32 %add, 0;
    setp.ge.u32 %has, %t, %d;
    sub.u32 %j, %t, %d;
@%has ld.u32 %add, tile[%j];
    barrier;
    ld.u32 %cur, tile[%t];
    add.u32 %cur, %cur, %add;
    st.u32 tile[%t], %cur;
    barrier;
    shl.u32 %d, %d, 1;
    setp.lt.u32 %more, %d, %ntid.x;
@%more bra STEP;
    ld.u32 %r, tile[%t];
    st.u32 out[%i], %r;
"""
    block, grid = 128, 3
    n = block * grid
    T = Test("sync_inclusive_scan", "per-block inclusive scan in shared memory", hasm, [grid, 1, 1], [block, 1, 1])
    x = rand_ints(T.rng, "u32", n)
    T.buf("x", x)
    T.fill("out", 0, n)
    out = []
    for b in range(grid):
        acc = 0
        for t in range(block):
            acc = wrap(acc + x[b * block + t], "u32")
            out.append(acc)
    T.out("out", out)
    return T


# --------------------------------------------------------------------------------------------
# Atomics
# --------------------------------------------------------------------------------------------

@test
def atomic_histogram():
    hasm = """// histogram with atom.add.u32 on a global .rw buffer from many blocks: bins[v & 63] += 1, plus a total counter
.kernel atomic_histogram
.param .buf.u32 values
.param .buf.u32 bins .rw
.param .buf.u32 total .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.u32 %v, values[%i];
    and.u32 %b, %v, 63;
    atom.add.u32 %old, bins[%b], 1;
    atom.add.u32 %old, total[0], 1;
"""
    n = 4096
    T = Test("atomic_histogram", "global atomic add histogram over 32 blocks", hasm, *launch_1d(n, 128))
    v = [int(a) for a in T.rng.integers(0, 2 ** 32, n, dtype=np.uint64)]
    T.buf("values", v)
    T.scalar("n", n)
    T.fill("bins", 0, 64)
    T.buf("total", [10, 20])
    T.out("bins", [int(c) for c in np.bincount(np.array(v, dtype=np.uint64) & 63, minlength=64)])
    T.out("total", [10 + n, 20])
    return T


@test
def atomic_min_max():
    types = ["i32", "u32", "i64", "u64"]
    lines = ["// atom.min and atom.max on i32 u32 i64 u64 from many lanes into 8 groups (group = gid mod 8): the final values are the group minimum/maximum (signed vs unsigned order)",
             ".kernel atomic_min_max"]
    lines += [".param .buf.%s v_%s" % (t, t) for t in types]
    lines += [".param .buf.%s mn_%s .rw" % (t, t) for t in types]
    lines += [".param .buf.%s mx_%s .rw" % (t, t) for t in types]
    lines += [".param .u32 n", guard_n(), "    and.u32 %g, %i, 7;"]
    for t in types:
        lines += ["    ld.%s %%v_%s, v_%s[%%i];" % (t, t, t),
                  "    atom.min.%s %%o_%s, mn_%s[%%g], %%v_%s;" % (t, t, t, t),
                  "    atom.max.%s %%o_%s, mx_%s[%%g], %%v_%s;" % (t, t, t, t)]
    n = 600
    T = Test("atomic_min_max", "global atomic min/max on 32- and 64-bit integers", "\n".join(lines),
             *launch_1d(n, 256))
    T.scalar("n", n)
    for t in types:
        v = rand_ints(T.rng, t, n)
        T.buf("v_" + t, v)
        lo, hi = int_range(t)
        init_mn = [hi] * 7 + [0]  # the last group starts at 0, below every unsigned value
        init_mx = [lo] * 7 + [0]
        T.buf("mn_" + t, init_mn)
        T.buf("mx_" + t, init_mx)
        mn = [min([init_mn[g]] + v[g::8]) for g in range(8)]
        mx = [max([init_mx[g]] + v[g::8]) for g in range(8)]
        T.out("mn_" + t, mn)
        T.out("mx_" + t, mx)
    return T


@test
def atomic_exch():
    hasm = """// atom.exch where every contender stores the same value, so the final memory is deterministic; exactly one lane per cell sees the initial value (counted with atom.add), all others see the new value; u32, u64 and f32 cells, one cell per block too
.kernel atomic_exch
.param .buf.u32 cell .rw
.param .buf.u64 cell64 .rw
.param .buf.f32 fcell .rw
.param .buf.u32 per_block .rw
.param .buf.u32 counts .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    atom.exch.u32 %old, cell[0], 42;
    setp.eq.u32 %first, %old, 7;
@%first atom.add.u32 %z, counts[0], 1;
    setp.eq.u32 %later, %old, 42;
@%later atom.add.u32 %z, counts[1], 1;
    atom.exch.u64 %o64, cell64[1], 0xfedcba9876543210;
    setp.eq.u64 %first, %o64, 3;
@%first atom.add.u32 %z, counts[2], 1;
    atom.exch.f32 %of, fcell[0], -2.5;
    setp.eq.f32 %first, %of, 1.25;
@%first atom.add.u32 %z, counts[3], 1;
    mul.u32 %bv, %ctaid.x, 10;
    add.u32 %bv, %bv, 1;
    atom.exch.u32 %ob, per_block[%ctaid.x], %bv;
    setp.eq.u32 %first, %ob, 0;
@%first atom.add.u32 %z, counts[4], 1;
"""
    n = 700
    grid, blk = launch_1d(n, 128)
    T = Test("atomic_exch", "atomic exchange with deterministic final values", hasm, grid, blk)
    T.scalar("n", n)
    T.buf("cell", [7, 8])
    T.buf("cell64", [1, 3])
    T.buf("fcell", [1.25])
    T.fill("per_block", 0, grid[0])
    T.fill("counts", 0, 5)
    T.out("cell", [42, 8])
    T.out("cell64", [1, 0xFEDCBA9876543210])
    T.out("fcell", [-2.5])
    T.out("per_block", [10 * b + 1 for b in range(grid[0])])
    T.out("counts", [1, n - 1, 1, 1, grid[0]])
    return T


@test
def atomic_cas_first_writer():
    hasm = """// lock-free "first writer wins" with atom.cas: the lanes contending for a slot all try to swap 0 for the same value, exactly one succeeds (old == 0) and every other sees the winner's value; u32 and u64 slots
.kernel atomic_cas_first_writer
.param .buf.u32 slots .rw
.param .buf.u64 slots64 .rw
.param .buf.u32 wins .rw
.param .buf.u32 saw_winner .rw
.param .buf.u32 wins64 .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    rem.u32 %s, %i, 37;
    add.u32 %val, %s, 100;
    atom.cas.u32 %old, slots[%s], 0, %val;
    setp.eq.u32 %won, %old, 0;
@%won atom.add.u32 %z, wins[%s], 1;
    setp.eq.u32 %saw, %old, %val;
@%saw atom.add.u32 %z, saw_winner[%s], 1;
    and.u32 %s8, %i, 7;
    cvt.u64.u32 %v64, %s8;
    add.u64 %v64, %v64, 0x10000000000;
    atom.cas.u64 %o64, slots64[%s8], 5, %v64;
    setp.eq.u64 %won64, %o64, 5;
@%won64 atom.add.u32 %z, wins64[%s8], 1;
"""
    n = 1000
    T = Test("atomic_cas_first_writer", "compare-and-swap first writer wins, deterministic outcome", hasm,
             *launch_1d(n, 64))
    T.scalar("n", n)
    T.fill("slots", 0, 40)
    T.fill("slots64", 5, 8)
    T.fill("wins", 0, 40)
    T.fill("saw_winner", 0, 40)
    T.fill("wins64", 0, 8)
    contenders = [len(range(s, n, 37)) for s in range(37)]
    T.out("slots", [s + 100 for s in range(37)] + [0, 0, 0])
    T.out("wins", [1] * 37 + [0, 0, 0])
    T.out("saw_winner", [c - 1 for c in contenders] + [0, 0, 0])
    T.out("slots64", [s + (1 << 40) for s in range(8)])
    T.out("wins64", [1] * 8)
    return T


@test
def atomic_cas_loop():
    hasm = """// lock-free read-modify-write built from an atom.cas retry loop (each lane adds its own increment to one counter, u32 and u64); the final value is the sum however the lanes interleave
.kernel atomic_cas_loop
.param .buf.u32 inc
.param .buf.u32 counter .rw
.param .buf.u64 counter64 .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.u32 %d, inc[%i];
    atom.add.u32 %cur, counter[0], 0;
RETRY:
    add.u32 %new, %cur, %d;
    atom.cas.u32 %old, counter[0], %cur, %new;
    setp.ne.u32 %again, %old, %cur;
    mov.u32 %cur, %old;
@%again bra RETRY;
    cvt.u64.u32 %d64, %d;
    shl.u64 %d64, %d64, 32;
    add.u64 %d64, %d64, %d64;
    ld.u64 %c64, counter64[0];
RETRY64:
    add.u64 %n64, %c64, %d64;
    atom.cas.u64 %o64, counter64[0], %c64, %n64;
    setp.ne.u64 %again, %o64, %c64;
    mov.u64 %c64, %o64;
@%again bra RETRY64;
"""
    n = 500
    T = Test("atomic_cas_loop", "atomic add emulated with a compare-and-swap retry loop", hasm, *launch_1d(n, 64))
    inc = rand_ints(T.rng, "u32", n, 0, 1 << 31)
    T.buf("inc", inc)
    T.scalar("n", n)
    T.buf("counter", [123])
    T.buf("counter64", [7])
    T.out("counter", [wrap(123 + sum(inc), "u32")])
    T.out("counter64", [wrap(7 + sum((d << 33) for d in inc), "u64")])
    return T


@test
def atomic_float_add():
    hasm = """// atom.add on f32 and f64 with values that are small multiples of a power of two, so every partial sum is exact and the result does not depend on the order; also i64 and u64 atom.add (wrapping, order-independent)
.kernel atomic_float_add
.param .buf.f32 a
.param .buf.f64 b
.param .buf.i64 c
.param .buf.f32 sum32 .rw
.param .buf.f64 sum64 .rw
.param .buf.i64 sumi .rw
.param .buf.u64 sumu .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    and.u32 %g, %i, 15;
    ld.f32 %x, a[%i];
    atom.add.f32 %o, sum32[%g], %x;
    ld.f64 %y, b[%i];
    atom.add.f64 %o64, sum64[%g], %y;
    ld.i64 %z, c[%i];
    atom.add.i64 %oi, sumi[%g], %z;
    cvt.u64.i64 %u, %z;
    mul.u64 %u, %u, 0x9e3779b97f4a7c15;
    atom.add.u64 %ou, sumu[0], %u;
"""
    n = 2000
    T = Test("atomic_float_add", "float atomic add with exactly representable sums; 64-bit integer atomic add",
             hasm, *launch_1d(n, 128))
    T.scalar("n", n)
    a = [float(k) * 0.25 for k in T.rng.integers(-64, 65, n)]
    b = [float(k) * 2.0 ** -10 for k in T.rng.integers(-(1 << 20), (1 << 20) + 1, n)]
    c = rand_ints(T.rng, "i64", n)
    T.buf("a", a)
    T.buf("b", b)
    T.buf("c", c)
    T.fill("sum32", 0.5, 16)
    T.fill("sum64", -1.0, 16)
    T.fill("sumi", 0, 16)
    T.fill("sumu", 0, 1)
    s32 = [0.5 + sum(a[g::16]) for g in range(16)]
    s64 = [-1.0 + sum(b[g::16]) for g in range(16)]
    # exactness: the sums and every partial sum fit the significand
    assert all(abs(v) * 4 < 2 ** 24 for v in s32) and all(abs(v) * 1024 < 2 ** 53 for v in s64)
    assert sum(abs(v) for v in a) * 4 < 2 ** 24 and sum(abs(v) for v in b) * 1024 < 2 ** 53
    T.out("sum32", s32)
    T.out("sum64", s64)
    T.out("sumi", [wrap(sum(c[g::16]), "i64") for g in range(16)])
    T.out("sumu", [wrap(sum(wrap(v, "u64") * 0x9E3779B97F4A7C15 for v in c), "u64")])
    return T


@test
def atomic_shared():
    hasm = """// atomics on .shared arrays: a per-block histogram with atom.add.u32 on shared memory, a shared atom.max.i32, barrier, then lanes 0..31 copy the block's results to global memory; lanes past n skip the atomics but reach the barrier
.kernel atomic_shared
.param .buf.u32 values
.param .buf.u32 hist .rw
.param .buf.i32 bmax .rw
.param .u32 n
.shared .u32 sh[32]
.shared .i32 smax[1]
    mov.u32 %t, %tid.x;
    mov.u32 %i, %gid;
    setp.lt.u32 %in, %i, n;
@%in ld.u32 %v, values[%i];
    and.u32 %b, %v, 31;
@%in atom.add.u32 %old, sh[%b], 1;
    cvt.i32.u32 %sv, %v;
    sub.i32 %sv, %sv, 1000;
@%in atom.max.i32 %o2, smax[0], %sv;
    barrier;
    setp.ge.u32 %w, %t, 32;
@%w exit;
    ld.u32 %h, sh[%t];
    mad.u32 %o, %ctaid.x, 32, %t;
    st.u32 hist[%o], %h;
    setp.ne.u32 %lead, %t, 0;
@%lead exit;
    ld.i32 %m, smax[0];
    st.i32 bmax[%ctaid.x], %m;
"""
    block, grid = 256, 6
    n = block * grid - 36
    T = Test("atomic_shared", "shared-memory atomics, per-block histogram", hasm, [grid, 1, 1], [block, 1, 1])
    v = [int(x) for x in T.rng.integers(0, 2000, n)]
    v[0] = 0  # block 0 has a value below 1000, but shared smax starts at 0
    T.buf("values", v)
    T.scalar("n", n)
    T.fill("hist", 0, 32 * grid)
    T.fill("bmax", -1, grid)
    hist, bm = [], []
    for b in range(grid):
        part = v[b * block:min(n, (b + 1) * block)]
        hist += [int(c) for c in np.bincount(np.array(part) & 31, minlength=32)]
        bm.append(max([0] + [x - 1000 for x in part]))
    T.out("hist", hist)
    T.out("bmax", bm)
    return T


@test
def atomic_uncontended():
    ints = ["i32", "u32", "i64", "u64"]
    flts = ["f32", "f64"]
    lines = ["// every atom op on an element that only one lane touches, so the returned old value is deterministic: add min max exch cas (cas succeeds on even lanes, fails on odd lanes) for i32 u32 i64 u64, add and exch for f32 f64",
             ".kernel atomic_uncontended"]
    for t in ints + flts:
        ops = ["add", "min", "max", "exch", "cas"] if t in ints else ["add", "exch"]
        lines += [".param .buf.%s v_%s" % (t, t)]
        lines += [".param .buf.%s m%s_%s .rw" % (t, op, t) for op in ops]
        lines += [".param .buf.%s old_%s .rw" % (t, t)]
    lines += [".param .u32 n", guard_n(), "    and.u32 %odd, %i, 1;", "    setp.eq.u32 %even, %odd, 0;"]
    for t in ints + flts:
        ops = ["add", "min", "max", "exch", "cas"] if t in ints else ["add", "exch"]
        lines += ["    ld.%s %%v_%s, v_%s[%%i];" % (t, t, t), "    mul.u32 %%o_%s, %%i, %d;" % (t, len(ops))]
        for op in ops:
            if op == "cas":
                lines += ["    ld.%s %%e_%s, mcas_%s[%%i];" % (t, t, t),
                          "@!%%even add.%s %%e_%s, %%e_%s, 1;" % (t, t, t),
                          "    atom.cas.%s %%r_%s, mcas_%s[%%i], %%e_%s, %%v_%s;" % (t, t, t, t, t)]
            else:
                lines.append("    atom.%s.%s %%r_%s, m%s_%s[%%i], %%v_%s;" % (op, t, t, op, t, t))
            lines += ["    st.%s old_%s[%%o_%s], %%r_%s;" % (t, t, t, t), "    add.u32 %%o_%s, %%o_%s, 1;" % (t, t)]
    n = 40
    T = Test("atomic_uncontended", "return values and effects of every atomic operation without contention",
             "\n".join(lines), [1, 1, 1], [64, 1, 1])
    T.scalar("n", n)
    for t in ints + flts:
        ops = ["add", "min", "max", "exch", "cas"] if t in ints else ["add", "exch"]
        if is_int(t):
            v = rand_ints(T.rng, t, n)
            v[:4] = [int_range(t)[1], int_range(t)[0], 0, 1]
            mem = {op: rand_ints(T.rng, t, n) for op in ops}
            mem["add"][0] = 5  # MAX + 5 wraps
        else:
            v = [float(k) * 0.5 for k in T.rng.integers(-100, 100, n)]
            mem = {op: [float(k) * 0.25 for k in T.rng.integers(-100, 100, n)] for op in ops}
        T.buf("v_" + t, v)
        old = []
        new = {op: [] for op in ops}
        for i in range(n):
            for op in ops:
                m, x = mem[op][i], v[i]
                old.append(m)
                if op == "add":
                    r = wrap(m + x, t) if is_int(t) else m + x
                elif op == "min":
                    r = min(m, x)
                elif op == "max":
                    r = max(m, x)
                elif op == "exch":
                    r = x
                else:  # cas: the expected value equals the element on even lanes only
                    r = x if i % 2 == 0 else m
                new[op].append(r)
        for op in ops:
            T.buf("m%s_%s" % (op, t), mem[op])
            T.out("m%s_%s" % (op, t), new[op])
        T.fill("old_" + t, 0, len(ops) * n)
        T.out("old_" + t, old)
    return T


# --------------------------------------------------------------------------------------------
# Special registers and launch shapes
# --------------------------------------------------------------------------------------------

SPECIALS = ["tid.x", "tid.y", "tid.z", "ntid.x", "ntid.y", "ntid.z", "ctaid.x", "ctaid.y", "ctaid.z",
            "nctaid.x", "nctaid.y", "nctaid.z", "gid.x", "gid.y", "gid.z", "gid"]


def lanes(grid, block):
    """Every lane of a launch with its special registers, in no particular order."""
    for cz in range(grid[2]):
        for cy in range(grid[1]):
            for cx in range(grid[0]):
                for tz in range(block[2]):
                    for ty in range(block[1]):
                        for tx in range(block[0]):
                            gx, gy, gz = cx * block[0] + tx, cy * block[1] + ty, cz * block[2] + tz
                            width, height = grid[0] * block[0], grid[1] * block[1]
                            lin = gx + gy * width + gz * width * height  # x fastest over the launch
                            yield {"tid.x": tx, "tid.y": ty, "tid.z": tz, "ntid.x": block[0], "ntid.y": block[1],
                                   "ntid.z": block[2], "ctaid.x": cx, "ctaid.y": cy, "ctaid.z": cz,
                                   "nctaid.x": grid[0], "nctaid.y": grid[1], "nctaid.z": grid[2],
                                   "gid.x": cx * block[0] + tx, "gid.y": cy * block[1] + ty,
                                   "gid.z": cz * block[2] + tz, "gid": lin}


def special_regs_test(name, grid, block, comment):
    k = len(SPECIALS)
    lines = ["// " + comment, ".kernel " + name, ".param .buf.u32 rec .rw", ".param .buf.u32 grid_img .rw",
             ".param .u32 width", ".param .u32 height",
             "    mul.u32 %%o, %%gid, %d;" % k]
    for s in SPECIALS:
        lines += ["    mov.u32 %%v, %%%s;" % s, "    st.u32 rec[%o], %v;", "    add.u32 %o, %o, 1;"]
    lines += ["    mul.u32 %row, %gid.z, height;", "    add.u32 %row, %row, %gid.y;", "    mad.u32 %pix, %row, width, %gid.x;",
              "    st.u32 grid_img[%pix], %gid;"]
    T = Test(name, comment, "\n".join(lines), grid, block)
    total = math.prod(grid) * math.prod(block)
    width, height = grid[0] * block[0], grid[1] * block[1]
    T.scalar("width", width)
    T.scalar("height", height)
    T.fill("rec", 0, total * k)
    T.fill("grid_img", 0, total)
    rec = [0] * (total * k)
    img = [0] * total
    for L in lanes(grid, block):
        for j, s in enumerate(SPECIALS):
            rec[L["gid"] * k + j] = L[s]
        img[(L["gid.z"] * height + L["gid.y"]) * width + L["gid.x"]] = L["gid"]
    assert sorted(img) == list(range(total))
    T.out("rec", rec)
    T.out("grid_img", img)
    return T


test(lambda: special_regs_test("special_regs_2d", [3, 2, 1], [8, 4, 1],
                               "special registers in a 2D launch (grid 3x2, block 8x4): every lane records %tid.*, %ntid.*, %ctaid.*, %nctaid.*, %gid.* and %gid (global linear id: %gid.x + %gid.y * 24, x fastest over the whole launch)"))
test(lambda: special_regs_test("special_regs_3d", [2, 3, 2], [4, 2, 3],
                               "special registers in a 3D launch (grid 2x3x2, block 4x2x3): %gid = %gid.x + %gid.y * (nctaid.x*ntid.x) + %gid.z * (nctaid.x*ntid.x) * (nctaid.y*ntid.y)"))


@test
def launch_many_blocks():
    hasm = """// a launch with many small blocks (512 blocks of 8 lanes, 4096 elements): out[gid] = x[gid] * 3 + ctaid.x, and each block's lane 0 records nctaid.x
.kernel launch_many_blocks
.param .buf.u32 x
.param .buf.u32 out .rw
.param .buf.u32 nblocks .rw
    mov.u32 %i, %gid;
    ld.u32 %v, x[%i];
    mad.u32 %v, %v, 3, %ctaid.x;
    st.u32 out[%i], %v;
    setp.eq.u32 %lead, %tid.x, 0;
@%lead st.u32 nblocks[%ctaid.x], %nctaid.x;
"""
    grid, block = 512, 8
    n = grid * block
    T = Test("launch_many_blocks", "512 blocks of 8 lanes", hasm, [grid, 1, 1], [block, 1, 1])
    x = rand_ints(T.rng, "u32", n, 0, 1 << 20)
    T.buf("x", x)
    T.fill("out", 0, n)
    T.fill("nblocks", 0, grid)
    T.out("out", [wrap(v * 3 + i // block, "u32") for i, v in enumerate(x)])
    T.out("nblocks", [grid] * grid)
    return T


@test
def launch_block1():
    hasm = """// blocks of a single lane (grid 37, block 1): %tid.x is always 0, %ctaid.x and %gid are the element index
.kernel launch_block1
.param .buf.f64 x
.param .buf.f64 out .rw
.param .buf.u32 ids .rw
    mov.u32 %i, %gid;
    ld.f64 %v, x[%i];
    mul.f64 %w, %v, %v;
    cvt.f64.u32 %c, %ctaid.x;
    add.f64 %w, %w, %c;
    st.f64 out[%i], %w;
    mul.u32 %o, %i, 3;
    st.u32 ids[%o], %tid.x;
    add.u32 %o, %o, 1;
    st.u32 ids[%o], %ntid.x;
    add.u32 %o, %o, 1;
    st.u32 ids[%o], %ctaid.x;
"""
    n = 37
    T = Test("launch_block1", "one lane per block", hasm, [n, 1, 1], [1, 1, 1])
    x = rand_floats(T.rng, "f64", n, -10, 10)
    T.buf("x", x)
    T.fill("out", 0.0, n)
    T.fill("ids", 7, 3 * n)
    T.out("out", fop("f64", lambda a, c: a * a + c, x, [float(i) for i in range(n)]))
    T.out("ids", [v for i in range(n) for v in (0, 1, i)])
    return T


@test
def launch_block1000():
    hasm = """// blocks of 1000 lanes (not a power of two) over n = 2500 elements (the last block is partly idle): each block reverses its slice through .shared memory and adds the neighbour, lanes past n load zeros but reach the barrier
.kernel launch_block1000
.param .buf.i32 x
.param .buf.i32 out .rw
.param .u32 n
.shared .i32 tile[1000]
    mov.u32 %t, %tid.x;
    mov.u32 %i, %gid;
    setp.lt.u32 %in, %i, n;
    mov.i32 %v, 0;
@%in ld.i32 %v, x[%i];
    st.i32 tile[%t], %v;
    barrier;
    sub.u32 %r, %ntid.x, 1;
    sub.u32 %r, %r, %t;
    ld.i32 %a, tile[%r];
    add.u32 %nb, %t, 1;
    rem.u32 %nb, %nb, %ntid.x;
    ld.i32 %b, tile[%nb];
    mul.i32 %b, %b, 1000;
    add.i32 %a, %a, %b;
@%in st.i32 out[%i], %a;
"""
    block, n = 1000, 2500
    grid = 3
    T = Test("launch_block1000", "block size 1000 with a partial last block", hasm, [grid, 1, 1], [block, 1, 1])
    x = rand_ints(T.rng, "i32", n, -100000, 100000)
    T.buf("x", x)
    T.scalar("n", n)
    T.fill("out", 0, n)
    xs = x + [0] * (grid * block - n)
    out = []
    for i in range(n):
        b, t = divmod(i, block)
        a = xs[b * block + block - 1 - t]
        nb = xs[b * block + (t + 1) % block]
        out.append(wrap(a + nb * 1000, "i32"))
    T.out("out", out)
    return T


@test
def launch_2d_uneven():
    hasm = """// a 2D launch whose blocks (8x8) do not divide the 37x23 matrix: guarded on both axes, out = transpose of in (i16), with %gid.x / %gid.y as coordinates
.kernel launch_2d_uneven
.param .buf.i16 m
.param .buf.i16 mt .rw
.param .u32 w
.param .u32 h
    mov.u32 %x, %gid.x;
    mov.u32 %y, %gid.y;
    setp.ge.u32 %ox, %x, w;
    setp.ge.u32 %oy, %y, h;
    or.pred %out, %ox, %oy;
@%out exit;
    mad.u32 %src, %y, w, %x;
    ld.i16 %v, m[%src];
    mad.u32 %dst, %x, h, %y;
    add.i16 %v, %v, 1;
    st.i16 mt[%dst], %v;
"""
    w, h = 37, 23
    T = Test("launch_2d_uneven", "2D grid that does not divide the problem", hasm, [5, 3, 1], [8, 8, 1])
    mat = rand_ints(T.rng, "i16", w * h)
    T.buf("m", mat)
    T.scalar("w", w)
    T.scalar("h", h)
    T.fill("mt", 0, w * h)
    M = np.array(mat, dtype=np.int64).reshape(h, w)
    T.out("mt", [wrap(v + 1, "i16") for v in M.T.ravel()])
    return T


@test
def launch_saxpy_block32():
    hasm = """// saxpy y = a*x + y (mul then add: two roundings) with block 32 over n = 1000 (bounds guard; 1024 lanes)
.kernel launch_saxpy_block32
.param .f32 a
.param .buf.f32 x
.param .buf.f32 y .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.f32 %x, x[%i];
    ld.f32 %y, y[%i];
    mul.f32 %t, a, %x;
    add.f32 %y, %t, %y;
    st.f32 y[%i], %y;
"""
    n = 1000
    T = Test("launch_saxpy_block32", "saxpy with block 32 and a guard", hasm, *launch_1d(n, 32))
    a = T.scalar("a", to_type(1.7, "f32"))
    x = rand_uniform(T.rng, "f32", n, -10, 10)
    y = rand_uniform(T.rng, "f32", n, -10, 10)
    T.buf("x", x)
    T.buf("y", y)
    T.scalar("n", n)
    T.out("y", fop("f32", lambda p, q, r: p * q + r, [a] * n, x, y))
    return T


# --------------------------------------------------------------------------------------------
# Out of bounds
# --------------------------------------------------------------------------------------------

@test
def oob_store_global():
    hasm = """// a store one past the end of a global buffer stops the launch with OutOfBounds (array y, index 256, len 256) and writes nothing; single lane, so the failing index is deterministic
.kernel oob_store_global
.param .buf.f32 x
.param .buf.f32 y .rw
.param .u32 n
    ld.f32 %v, x[0];
    st.f32 y[n], %v;
"""
    T = Test("oob_store_global", "store past the end of a global buffer", hasm, [1, 1, 1], [1, 1, 1])
    T.buf("x", [1.5, 2.5, 3.5, 4.5])
    T.fill("y", 0.25, 256)
    T.scalar("n", 256)
    T.error("OutOfBounds", "y", 256, index=256, unchanged=["x", "y"])
    return T


@test
def oob_load_negative_index():
    hasm = """// a load with a negative i32 index (-1) is out of bounds: the launch stops with OutOfBounds on x (len 64) and the later store never happens; single lane
.kernel oob_load_negative_index
.param .buf.u32 x
.param .buf.u32 y .rw
    mov.i32 %k, 5;
    sub.i32 %k, %k, 6;
    ld.u32 %v, x[%k];
    st.u32 y[0], %v;
"""
    T = Test("oob_load_negative_index", "load with index -1 (i32)", hasm, [1, 1, 1], [1, 1, 1])
    T.buf("x", list(range(100, 164)))
    T.fill("y", 3, 8)
    T.error("OutOfBounds", "x", 64, unchanged=["x", "y"])
    return T


@test
def oob_store_all_lanes():
    hasm = """// every lane of a multi-block launch stores past the end of y (index gid + len): the launch fails with OutOfBounds on y and y keeps its contents
.kernel oob_store_all_lanes
.param .buf.u32 y .rw
.param .u32 len
    add.u32 %k, %gid, len;
    st.u32 y[%k], %gid;
"""
    T = Test("oob_store_all_lanes", "all lanes store out of bounds", hasm, [4, 1, 1], [64, 1, 1])
    T.buf("y", list(range(200)))
    T.scalar("len", 200)
    T.error("OutOfBounds", "y", 200, unchanged=["y"])
    return T


@test
def oob_shared_dynamic():
    hasm = """// a dynamic index past the end of a .shared array (tile[64], index tid + 64) is OutOfBounds on 'tile'; every lane's access is out of bounds, and nothing reaches the global buffer
.kernel oob_shared_dynamic
.param .buf.f32 out .rw
.shared .f32 tile[64]
    mov.u32 %t, %tid.x;
    add.u32 %k, %t, 64;
    st.f32 tile[%k], 1.0;
    ld.f32 %v, tile[%t];
    st.f32 out[%t], %v;
"""
    T = Test("oob_shared_dynamic", "shared array indexed past its end", hasm, [1, 1, 1], [32, 1, 1])
    T.fill("out", 9.0, 32)
    T.error("OutOfBounds", "tile", 64, unchanged=["out"])
    return T


@test
def oob_scratch_dynamic():
    hasm = """// a dynamic index past the end of a per-lane .scratch array (buf[8], index 8 from a parameter) is OutOfBounds on 'buf'; single lane, nothing is written to the global buffer
.kernel oob_scratch_dynamic
.param .buf.u32 out .rw
.param .u32 k
.scratch .u32 buf[8]
    st.u32 buf[k], 5;
    ld.u32 %v, buf[0];
    st.u32 out[0], %v;
"""
    T = Test("oob_scratch_dynamic", "scratch array indexed past its end", hasm, [1, 1, 1], [1, 1, 1])
    T.fill("out", 1, 4)
    T.scalar("k", 8)
    T.error("OutOfBounds", "buf", 8, index=8, unchanged=["out"])
    return T


@test
def oob_load_huge_u64_index():
    hasm = """// a load whose u64 index is far past the end (0xffffffffffffffff) fails with OutOfBounds on x rather than wrapping to a valid element; all lanes fail, y is untouched
.kernel oob_load_huge_u64_index
.param .buf.i64 x
.param .buf.i64 y .rw
    mov.u64 %k, 0xffffffffffffffff;
    ld.i64 %v, x[%k];
    st.i64 y[%gid], %v;
"""
    T = Test("oob_load_huge_u64_index", "u64 index far out of range", hasm, [2, 1, 1], [16, 1, 1])
    T.buf("x", list(range(-16, 16)))
    T.fill("y", 0, 32)
    T.error("OutOfBounds", "x", 32, unchanged=["x", "y"])
    return T


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------

def self_check():
    """The rounding helpers agree with NumPy / ml_dtypes conversions (which round once)."""
    np.seterr(all="ignore")
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2 ** 32, 20000, dtype=np.uint64).astype(np.uint32)
    f32 = bits.view(np.float32)
    for t in ("f16", "bf16"):
        conv = f32.astype(NP[t])
        for v, c in zip(flist(f32), flist(conv)):
            assert same(to_type(v, t), c), (t, v, c)
    f64 = rng.integers(0, 2 ** 63, 20000, dtype=np.uint64).view(np.float64)
    for v, c in zip(flist(f64), flist(f64.astype(np.float32))):
        assert same(to_type(v, "f32"), c), (v, c)
    assert to_type(65520.0, "f16") == INF and to_type(65519.99, "f16") == 65504.0
    assert to_type(2.0 ** -25, "f16") == 0.0 and to_type(3 * 2.0 ** -26, "f16") == 2.0 ** -24
    assert idiv(-7, 2, "i32") == -3 and irem(-7, 2, "i32") == -1 and irem(7, -2, "i32") == 1
    assert idiv(-2 ** 31, -1, "i32") == -2 ** 31 and irem(-2 ** 31, -1, "i32") == 0 and idiv(5, 0, "i32") == 5


def main():
    self_check()
    only = set(sys.argv[1:])
    names = set()
    total = 0
    for fn in TESTS:
        made = fn()
        for T in made if isinstance(made, list) else [made]:
            assert T.name not in names, T.name
            names.add(T.name)
            if only and T.name not in only:
                continue
            T.check()
            (HERE / (T.name + ".hasm")).write_text(T.hasm)
            text = T.json_text()
            json.loads(text)
            (HERE / (T.name + ".json")).write_text(text)
            total += len(text) + len(T.hasm)
    # remove files of tests that no longer exist
    if not only:
        for p in list(HERE.glob("*.hasm")) + list(HERE.glob("*.json")):
            if p.stem not in names:
                p.unlink()
    print("%d tests, %.0f KiB" % (len(names), total / 1024))


def load_extra_generators():
    """Imports every `gen_*.py` beside this file: each groups the tests of one idea and registers
    them with `@test` from this module (imported as `generate`, so both see one `TESTS`)."""
    import importlib
    sys.modules.setdefault("generate", sys.modules[__name__])
    sys.path.insert(0, str(HERE))
    for path in sorted(HERE.glob("gen_*.py")):
        importlib.import_module(path.stem)


if __name__ == "__main__":
    load_extra_generators()
    main()
