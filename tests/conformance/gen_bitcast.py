"""`bitcast.TO.FROM`: reinterpreting bits between types of one width (issue 17, item 8), written
from the ISA README: the bits of a float as an integer and back, sign/exponent/mantissa fields,
and float atomics built from `atom.cas` on the float's bits.

Bit patterns that are signalling NaNs are left out: a NaN's payload is unspecified (wgpu keeps
f16/bf16 in f32 registers and quiets their NaNs); quiet NaNs keep their payload everywhere."""

import math
import struct

import numpy as np

from generate import Test, test, to_type, wrap

FLOAT_OF = {16: "f16", 32: "f32", 64: "f64"}
UINT_OF = {8: "u8", 16: "u16", 32: "u32", 64: "u64"}
SINT_OF = {8: "i8", 16: "i16", 32: "i32", 64: "i64"}


def float_from_bits(t, b):
    if t == "f16":
        return float(np.array([b], dtype=np.uint16).view(np.float16)[0])
    if t == "bf16":
        return struct.unpack("<f", struct.pack("<I", b << 16))[0]
    if t == "f32":
        return struct.unpack("<f", struct.pack("<I", b))[0]
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def bits_of_float(t, v):
    if t == "f16":
        return int(np.array([v], dtype=np.float16).view(np.uint16)[0])
    if t == "bf16":
        b = struct.unpack("<I", struct.pack("<f", v))[0]
        assert b & 0xffff == 0, v
        return b >> 16
    if t == "f32":
        return struct.unpack("<I", struct.pack("<f", v))[0]
    return struct.unpack("<Q", struct.pack("<d", v))[0]


F64_BODY = '''    ld.f64 %y, y[%i];
    bitcast.u64.f64 %d, %y;
    shr.u64 %dsign, %d, 63;
    shr.u64 %dexp, %d, 52;
    and.u64 %dexp, %dexp, 0x7ff;
    and.u64 %dman, %d, 0xfffffffffffff;
    mul.u32 %o, %i, 3;
    st.u64 f64_fields[%o], %dsign;
    add.u32 %o, %o, 1;
    st.u64 f64_fields[%o], %dexp;
    add.u32 %o, %o, 1;
    st.u64 f64_fields[%o], %dman;
'''


FMT_BITS = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52)}


def is_nan_bits(t, b):
    e, m = FMT_BITS[t]
    return (b >> m) & ((1 << e) - 1) == (1 << e) - 1 and b & ((1 << m) - 1) != 0


def is_signalling_nan_bits(t, b):
    _, m = FMT_BITS[t]
    return is_nan_bits(t, b) and not (b >> (m - 1)) & 1


def is_subnormal_bits(t, b):
    e, m = FMT_BITS[t]
    return (b >> m) & ((1 << e) - 1) == 0 and b & ((1 << m) - 1) != 0


def random_patterns(rng, t, n):
    """Random bit patterns of the float type t: every class (zeros, subnormals when the type is not
    f32/bf16, normals, infinities, quiet NaNs with payloads), never a signalling NaN. f32 and bf16
    subnormals are left to `bitcast_f32_subnormal` (devices may flush them)."""
    bits = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[t]
    e, m = FMT_BITS[t]
    special = [0, 1 << (bits - 1), ((1 << e) - 1) << m, (((1 << e) - 1) << m) | (1 << (m - 1)) | 5,
               (1 << (bits - 1)) | (((1 << e) - 1) << m) | (1 << (m - 1))]
    if t in ("f16", "f64"):
        special.append(1)
    out = list(special)
    while len(out) < n:
        b = int(rng.integers(0, 1 << 62)) * 4 + int(rng.integers(0, 4))
        b &= (1 << bits) - 1
        if is_signalling_nan_bits(t, b):
            continue
        if t in ("f32", "bf16") and is_subnormal_bits(t, b):
            continue
        out.append(b)
    return out


def as_signed(b, bits):
    return b - (1 << bits) if b >> (bits - 1) else b


def width_test(name, bits, floats, n=256):
    """Float bits to both integer types and back, in an element-wise map (so the CPU's native
    loops and CUDA's vectorized maps run it too)."""
    u, s = UINT_OF[bits], SINT_OF[bits]
    lines = ["// bitcast between the %d-bit types: each float's bits as %s and %s, and %s bits as each float (an element-wise map over n = %d)"
             % (bits, u, s, u, n - 6), ".kernel " + name]
    for f in floats:
        lines.append(".param .buf.%s x_%s" % (f, f))
        lines.append(".param .buf.%s bits_%s .rw" % (u, f))
        lines.append(".param .buf.%s sbits_%s .rw" % (s, f))
        lines.append(".param .buf.%s back_%s .rw" % (f, f))
    lines.append(".param .buf.%s raw" % u)
    lines.append(".param .u32 n")
    lines += ["    setp.ge.u32 %p, %gid, n;", "@%p exit;", "    ld.%s %%r, raw[%%gid];" % u]
    for f in floats:
        lines += ["    ld.%s %%x_%s, x_%s[%%gid];" % (f, f, f),
                  "    bitcast.%s.%s %%u_%s, %%x_%s;" % (u, f, f, f),
                  "    st.%s bits_%s[%%gid], %%u_%s;" % (u, f, f),
                  "    bitcast.%s.%s %%s_%s, %%x_%s;" % (s, f, f, f),
                  "    st.%s sbits_%s[%%gid], %%s_%s;" % (s, f, f),
                  "    bitcast.%s.%s %%b_%s, %%r;" % (f, u, f),
                  "    st.%s back_%s[%%gid], %%b_%s;" % (f, f, f)]
    T = Test(name, "bitcast between %d-bit types" % bits, "\n".join(lines), [n // 64, 1, 1], [64, 1, 1])
    m = n - 6
    T.scalar("n", m)
    # Any pattern, except f32/bf16 subnormals (left to bitcast_f32_subnormal: devices may flush
    # them); signalling NaN patterns are fine here: the float results are compared as NaNs.
    raw = [int(v) for v in T.rng.integers(0, 2 ** bits, n, dtype=np.uint64)]
    for f in floats:
        if f in ("f32", "bf16"):
            raw = [0x3f80 if f == "bf16" and is_subnormal_bits(f, r) else
                   0x3f800000 if f == "f32" and is_subnormal_bits(f, r) else r for r in raw]
    T.buf("raw", raw)
    for f in floats:
        pats = random_patterns(T.rng, f, n)
        T.rng.shuffle(pats)
        vals = [float_from_bits(f, b) for b in pats]
        # JSON carries NaNs without their payload: a NaN input is the type's default quiet NaN.
        pats = [bits_of_float(f, v) if not math.isnan(v) else
                {"f16": 0x7e00, "bf16": 0x7fc0, "f32": 0x7fc00000, "f64": 0x7ff8000000000000}[f]
                for v in vals]
        T.buf("x_" + f, vals)
        T.fill("bits_" + f, 0, n)
        T.fill("sbits_" + f, 0, n)
        T.fill("back_" + f, 0.0, n)
        T.out("bits_" + f, pats[:m] + [0] * 6)
        T.out("sbits_" + f, [as_signed(b, bits) for b in pats[:m]] + [0] * 6)
        T.out("back_" + f, [float_from_bits(f, r) for r in raw[:m]] + [0.0] * 6)
    return T


@test
def bitcast_32():
    return width_test("bitcast_32", 32, ["f32"])


@test
def bitcast_64():
    return width_test("bitcast_64", 64, ["f64"])


@test
def bitcast_16():
    return width_test("bitcast_16", 16, ["f16", "bf16"])


@test
def bitcast_8():
    hasm = """// bitcast between u8 and i8: the same byte, read as signed and as unsigned
.kernel bitcast_8
.param .buf.u8 x
.param .buf.i8 s .rw
.param .buf.u8 u .rw
    ld.u8 %a, x[%gid];
    bitcast.i8.u8 %b, %a;
    st.i8 s[%gid], %b;
    add.i8 %c, %b, 1;
    bitcast.u8.i8 %d, %c;
    st.u8 u[%gid], %d;
"""
    T = Test("bitcast_8", "bitcast between u8 and i8", hasm, [1, 1, 1], [256, 1, 1])
    T.buf("x", list(range(256)))
    T.fill("s", 0, 256)
    T.fill("u", 0, 256)
    T.out("s", [as_signed(v, 8) for v in range(256)])
    T.out("u", [(v + 1) & 0xff for v in range(256)])
    return T


@test
def bitcast_f32_subnormal():
    hasm = """// bitcast of f32 subnormals: their bits as u32, and u32 patterns of subnormals as f32 (on a device that keeps f32 subnormals)
.kernel bitcast_f32_subnormal
.param .buf.f32 x
.param .buf.u32 raw
.param .buf.u32 bits .rw
.param .buf.f32 back .rw
    ld.f32 %x, x[%gid];
    bitcast.u32.f32 %b, %x;
    st.u32 bits[%gid], %b;
    ld.u32 %r, raw[%gid];
    bitcast.f32.u32 %f, %r;
    st.f32 back[%gid], %f;
"""
    n = 64
    T = Test("bitcast_f32_subnormal", "bitcast of f32 subnormals", hasm, [1, 1, 1], [n, 1, 1])
    T.requires = ["f32_subnormals"]
    pats = [1, 0x80000001, 0x7fffff, 0x807fffff] + [int(v) for v in T.rng.integers(1, 1 << 23, n - 4)]
    pats = [p | (int(T.rng.integers(0, 2)) << 31) if i >= 4 else p for i, p in enumerate(pats)]
    T.buf("x", [float_from_bits("f32", b) for b in pats])
    T.buf("raw", pats)
    T.fill("bits", 0, n)
    T.fill("back", 0.0, n)
    T.out("bits", pats)
    T.out("back", [float_from_bits("f32", b) for b in pats])
    return T


@test
def bitcast_float_fields():
    hasm = """// bit inspection: sign, biased exponent and mantissa of f32 values through bitcast, shifts and masks, and a value rebuilt with its exponent field set to 127 (scaled into [1, 2)) for finite nonzero normals
.kernel bitcast_float_fields
.param .buf.f32 x
.param .buf.u32 f32_fields .rw
.param .buf.f32 scaled .rw
    mov.u32 %i, %gid;
    ld.f32 %x, x[%i];
    bitcast.u32.f32 %b, %x;
    shr.u32 %sign, %b, 31;
    shr.u32 %exp, %b, 23;
    and.u32 %exp, %exp, 0xff;
    and.u32 %man, %b, 0x7fffff;
    mul.u32 %o, %i, 3;
    st.u32 f32_fields[%o], %sign;
    add.u32 %o, %o, 1;
    st.u32 f32_fields[%o], %exp;
    add.u32 %o, %o, 1;
    st.u32 f32_fields[%o], %man;
    and.u32 %keep, %b, 0x807fffff;
    or.u32 %keep, %keep, 0x3f800000;
    bitcast.f32.u32 %one_two, %keep;
    setp.eq.u32 %zero_exp, %exp, 0;
    setp.eq.u32 %max_exp, %exp, 255;
    or.pred %odd, %zero_exp, %max_exp;
    selp.f32 %s, %x, %one_two, %odd;
    st.f32 scaled[%i], %s;
"""
    n = 128
    T = Test("bitcast_float_fields", "float fields through bitcast", hasm, [2, 1, 1], [64, 1, 1])
    xs = [0.0, -0.0, 1.0, -2.5, float("inf"), float("-inf"), float("nan"), to_type(3.0e38, "f32"), to_type(1.5e-38, "f32")]
    xs += [to_type(v, "f32") for v in T.rng.standard_normal(n - len(xs)) * np.exp2(T.rng.integers(-60, 60, n - len(xs)))]
    T.buf("x", xs)
    T.fill("f32_fields", 0, 3 * n)
    T.fill("scaled", 0.0, n)
    f32f, scaled = [], []
    for x in xs:
        b = 0x7fc00000 if math.isnan(x) else bits_of_float("f32", x)
        f32f += [b >> 31, (b >> 23) & 0xff, b & 0x7fffff]
        e = (b >> 23) & 0xff
        scaled.append(x if e in (0, 255) else float_from_bits("f32", (b & 0x807fffff) | 0x3f800000))
    T.out("f32_fields", f32f)
    T.out("scaled", scaled)
    return T


@test
def bitcast_float_fields_f64():
    hasm = """// bit inspection of f64 values: sign, biased exponent and mantissa through bitcast.u64.f64, shifts and masks
.kernel bitcast_float_fields_f64
.param .buf.f64 y
.param .buf.u64 f64_fields .rw
    mov.u32 %i, %gid;
FIELDS""".replace("FIELDS", F64_BODY)
    n = 128
    T = Test("bitcast_float_fields_f64", "f64 fields through bitcast", hasm, [2, 1, 1], [64, 1, 1])
    ys = [0.0, -0.0, 1.0, -2.5, float("inf"), float("-inf"), float("nan"), 1e308, 5e-324]
    ys += [float(v) for v in T.rng.standard_normal(n - len(ys)) * np.exp2(T.rng.integers(-600, 600, n - len(ys)))]
    T.buf("y", ys)
    T.fill("f64_fields", 0, 3 * n)
    f64f = []
    for y in ys:
        d = 0x7ff8000000000000 if math.isnan(y) else bits_of_float("f64", y)
        f64f += [d >> 63, (d >> 52) & 0x7ff, d & 0xfffffffffffff]
    T.out("f64_fields", f64f)
    return T


def cas_add_test(name, ft, ut, bins, grid, block):
    n = grid * block
    hasm = """// a float atomic add built from atom.cas on the float's bits: every lane adds x[%gid] to acc[%gid rem BINS] (held as UT bits) in a compare-and-swap loop; the values are multiples of 1/4 small enough that every order of the additions gives the same exact sum
.kernel NAME
.param .buf.FT x
.param .buf.UT acc .rw
    mov.u32 %i, %gid;
    ld.FT %v, x[%i];
    rem.u32 %k, %i, BINS;
    ld.UT %old, acc[%k];
AGAIN:
    bitcast.FT.UT %f, %old;
    add.FT %g, %f, %v;
    bitcast.UT.FT %new, %g;
    atom.cas.UT %seen, acc[%k], %old, %new;
    setp.ne.UT %lost, %seen, %old;
    mov.UT %old, %seen;
@%lost bra AGAIN;
""".replace("NAME", name).replace("FT", ft).replace("UT", ut).replace("BINS", str(bins))
    T = Test(name, "float atomic add through atom.cas (%s)" % ft, hasm, [grid, 1, 1], [block, 1, 1])
    x = [float(v) / 4 for v in T.rng.integers(-400, 400, n)]
    T.buf("x", x)
    start = [float(v) for v in range(bins)]
    T.buf("acc", [bits_of_float(ft, v) for v in start])
    sums = list(start)
    for i, v in enumerate(x):
        sums[i % bins] += v
    T.out("acc", [bits_of_float(ft, v) for v in sums])
    return T


@test
def bitcast_atomic_add_f32_cas():
    return cas_add_test("bitcast_atomic_add_f32_cas", "f32", "u32", 5, 4, 64)


@test
def bitcast_atomic_add_f64_cas():
    return cas_add_test("bitcast_atomic_add_f64_cas", "f64", "u64", 3, 2, 64)


@test
def bitcast_literals():
    hasm = """// bitcast of literals: an integer pattern as a float (infinity, a quiet NaN with a payload, the largest finite f32, -0.0) and float literals as their bits
.kernel bitcast_literals
.param .buf.f32 f .rw
.param .buf.u32 u .rw
    bitcast.f32.u32 %a, 0x7f800000;
    st.f32 f[0], %a;
    bitcast.f32.u32 %b, 0x7fc00123;
    st.f32 f[1], %b;
    bitcast.u32.f32 %c, %b;
    st.u32 u[0], %c;
    bitcast.f32.u32 %d, 0x7f7fffff;
    st.f32 f[2], %d;
    bitcast.f32.i32 %e, -2147483648;
    st.f32 f[3], %e;
    bitcast.u32.f32 %g, -0.0;
    st.u32 u[1], %g;
    bitcast.u32.f32 %h, 1.5;
    st.u32 u[2], %h;
"""
    T = Test("bitcast_literals", "bitcast of literals", hasm, [1, 1, 1], [1, 1, 1])
    T.fill("f", 0.0, 4)
    T.fill("u", 0, 3)
    T.out("f", [float("inf"), float("nan"), float_from_bits("f32", 0x7f7fffff), -0.0])
    T.out("u", [0x7fc00123, 0x80000000, 0x3fc00000])
    return T


@test
def bitcast_literals_64():
    hasm = """// bitcast of 64-bit literals: -2.0 as its bits, and all ones (a quiet NaN with the sign set) as f64 and back
.kernel bitcast_literals_64
.param .buf.u64 w .rw
.param .buf.f64 d .rw
    bitcast.u64.f64 %k, -2.0;
    st.u64 w[0], %k;
    bitcast.f64.i64 %m, -1;
    st.f64 d[0], %m;
    bitcast.u64.f64 %m2, %m;
    st.u64 w[1], %m2;
    bitcast.f64.u64 %one, 0x3ff0000000000000;
    st.f64 d[1], %one;
"""
    T = Test("bitcast_literals_64", "bitcast of 64-bit literals", hasm, [1, 1, 1], [1, 1, 1])
    T.fill("w", 0, 2)
    T.fill("d", 0.0, 2)
    T.out("w", [bits_of_float("f64", -2.0), (1 << 64) - 1])
    T.out("d", [float("nan"), 1.0])
    return T
