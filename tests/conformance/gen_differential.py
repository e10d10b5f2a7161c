"""Shapes of code on which the differential test (crates/hologram-conformance/tests/differential.rs)
found backends disagreeing, written down as plain conformance tests so that every backend checks
them against independent expectations: a literal zero divisor (naga rejected the WGSL), sign
tests of 64-bit integers against literals (lavapipe got them wrong), and float sums whose
operands cancel across instructions (Mesa folded `a + (b - a)` to `b`, wrong for infinities)."""

import math

import numpy as np

from generate import Test, fop, idiv, irem, test, wrap


@test
def diff_int_literal_zero_divisor():
    hasm = """// integer division and remainder by a literal 0 and -1: x / 0 = x, x rem 0 = 0, MIN / -1 = MIN, x rem -1 = 0 (the WGSL shader was rejected for its constant zero divisor)
.kernel diff_int_literal_zero_divisor
.param .buf.u32 xu
.param .buf.i32 xi
.param .buf.i64 xl
.param .buf.u32 ou .rw
.param .buf.i32 oi .rw
.param .buf.i64 ol .rw
    mov.u32 %i, %gid;
    ld.u32 %u, xu[%i];
    ld.i32 %s, xi[%i];
    ld.i64 %l, xl[%i];
    mul.u32 %o, %i, 2;
    add.u32 %o1, %o, 1;
    div.u32 %a, %u, 0;
    st.u32 ou[%o], %a;
    rem.u32 %b, %u, 0;
    st.u32 ou[%o1], %b;
    div.i32 %c, %s, 0;
    st.i32 oi[%o], %c;
    div.i32 %d, %s, -1;
    rem.i32 %e, %s, 0;
    add.i32 %d, %d, %e;
    st.i32 oi[%o1], %d;
    div.i64 %f, %l, 0;
    st.i64 ol[%o], %f;
    rem.i64 %g, %l, -1;
    rem.i64 %h, %l, 0;
    add.i64 %g, %g, %h;
    st.i64 ol[%o1], %g;
"""
    n = 64
    T = Test("diff_int_literal_zero_divisor", "division by literal 0 and -1", hasm, [1, 1, 1], [n, 1, 1])
    xu = [int(v) for v in T.rng.integers(0, 2 ** 32, n, dtype=np.uint64)]
    xi = [-2 ** 31, 2 ** 31 - 1, -1, 0] + [int(v) for v in T.rng.integers(-2 ** 31, 2 ** 31, n - 4)]
    xl = [-2 ** 63, 2 ** 63 - 1, -1, 0] + [int(v) for v in T.rng.integers(-2 ** 62, 2 ** 62, n - 4)]
    T.buf("xu", xu)
    T.buf("xi", xi)
    T.buf("xl", xl)
    T.fill("ou", 0, 2 * n)
    T.fill("oi", 0, 2 * n)
    T.fill("ol", 0, 2 * n)
    ou, oi, ol = [], [], []
    for u, s, l in zip(xu, xi, xl):
        ou += [idiv(u, 0, "u32"), irem(u, 0, "u32")]
        oi += [idiv(s, 0, "i32"), wrap(idiv(s, -1, "i32") + irem(s, 0, "i32"), "i32")]
        ol += [idiv(l, 0, "i64"), wrap(irem(l, -1, "i64") + irem(l, 0, "i64"), "i64")]
    T.out("ou", ou)
    T.out("oi", oi)
    T.out("ol", ol)
    return T


@test
def diff_i64_sign_tests():
    hasm = """// sign tests of 64-bit integers against literals (x > -1, x >= 0, x < 0, x <= -1, and u64 x > 0), on values loaded and on values widened from i32 (lavapipe gave x > -1 for x = -14)
.kernel diff_i64_sign_tests
.param .buf.i64 x
.param .buf.i32 y
.param .buf.u32 out .rw
    mov.u32 %i, %gid;
    ld.i64 %a, x[%i];
    ld.i32 %s, y[%i];
    cvt.i64.i32 %b, %s;
    mov.u32 %m, 0;
    setp.gt.i64 %p, %a, -1;
    selp.u32 %t, 1, 0, %p;
    or.u32 %m, %m, %t;
    setp.ge.i64 %p, %a, 0;
    selp.u32 %t, 2, 0, %p;
    or.u32 %m, %m, %t;
    setp.lt.i64 %p, %a, 0;
    selp.u32 %t, 4, 0, %p;
    or.u32 %m, %m, %t;
    setp.le.i64 %p, %a, -1;
    selp.u32 %t, 8, 0, %p;
    or.u32 %m, %m, %t;
    setp.gt.i64 %p, %b, -1;
    selp.u32 %t, 16, 0, %p;
    or.u32 %m, %m, %t;
    setp.lt.i64 %p, %b, 0;
    selp.u32 %t, 32, 0, %p;
    or.u32 %m, %m, %t;
    bitcast.u64.i64 %c, %a;
    setp.gt.u64 %p, %c, 0;
    selp.u32 %t, 64, 0, %p;
    or.u32 %m, %m, %t;
    st.u32 out[%i], %m;
"""
    n = 64
    T = Test("diff_i64_sign_tests", "64-bit sign tests against literals", hasm, [1, 1, 1], [n, 1, 1])
    x = [-14, -1, 0, 1, -2 ** 63, 2 ** 63 - 1, -2 ** 32, 2 ** 32] + [int(v) for v in T.rng.integers(-2 ** 40, 2 ** 40, n - 8)]
    y = [-14, -1, 0, 1, -2 ** 31, 2 ** 31 - 1, 5, -5] + [int(v) for v in T.rng.integers(-2 ** 31, 2 ** 31, n - 8)]
    T.buf("x", x)
    T.buf("y", y)
    T.fill("out", 0, n)
    out = []
    for a, b in zip(x, y):
        m = (a > -1) * 1 | (a >= 0) * 2 | (a < 0) * 4 | (a <= -1) * 8 | (b > -1) * 16 | (b < 0) * 32 | ((a % 2 ** 64) > 0) * 64
        out.append(m)
    T.out("out", out)
    return T


def cancel_test(name, t):
    hasm = """// float sums whose operands cancel across instructions, with infinities and NaN among the values: a + (b - a), (a + b) - b, a - (a - b) and (a * b) + (c - a * b), each rounded as written (Mesa folded a + (b - a) to b)
.kernel NAME
.param .buf.T a
.param .buf.T b
.param .buf.T out .rw
    mov.u32 %i, %gid;
    ld.T %x, a[%i];
    ld.T %y, b[%i];
    mul.u32 %o, %i, 4;
    sub.T %d, %y, %x;
    add.T %r, %x, %d;
    st.T out[%o], %r;
    add.u32 %o, %o, 1;
    add.T %s, %x, %y;
    sub.T %r2, %s, %y;
    st.T out[%o], %r2;
    add.u32 %o, %o, 1;
    sub.T %e, %x, %y;
    sub.T %r3, %x, %e;
    st.T out[%o], %r3;
    add.u32 %o, %o, 1;
    mul.T %p, %x, %y;
    sub.T %q, %x, %p;
    add.T %r4, %p, %q;
    st.T out[%o], %r4;
""".replace("NAME", name).replace(".T", "." + t)
    n = 64
    T = Test(name, "cancelling sums with infinities (%s)" % t, hasm, [1, 1, 1], [n, 1, 1])
    special = [math.inf, -math.inf, math.nan, 0.0, -0.0, 1.0, -2.5, 3.0]
    xs, ys = [], []
    for u in special:
        for v in special:
            xs.append(u)
            ys.append(v)
    T.buf("a", xs)
    T.buf("b", ys)
    T.fill("out", 0.0, 4 * n)
    d = fop(t, lambda y, x: y - x, ys, xs)
    r = fop(t, lambda x, d: x + d, xs, d)
    s = fop(t, lambda x, y: x + y, xs, ys)
    r2 = fop(t, lambda s, y: s - y, s, ys)
    e = fop(t, lambda x, y: x - y, xs, ys)
    r3 = fop(t, lambda x, e: x - e, xs, e)
    p = fop(t, lambda x, y: x * y, xs, ys)
    q = fop(t, lambda x, p: x - p, xs, p)
    r4 = fop(t, lambda p, q: p + q, p, q)
    out = []
    for i in range(n):
        out += [r[i], r2[i], r3[i], r4[i]]
    T.out("out", out)
    return T


@test
def diff_float_cancel_f32():
    return cancel_test("diff_float_cancel_f32", "f32")


@test
def diff_float_cancel_f64():
    return cancel_test("diff_float_cancel_f64", "f64")


@test
def diff_select_signed_zero():
    hasm = """// selp between float literals that include a signed zero (-0.0 or 1.0, 0.0 or -1.0, -0.0 or 0.0) on a predicate that varies by lane, for f32, f64 and f16 (Mesa turned select(1.0, -0.0, p) into a conversion that gives +0.0)
.kernel diff_select_signed_zero
.param .buf.i32 x
.param .buf.f32 o32 .rw
.param .buf.f64 o64 .rw
.param .buf.f16 o16 .rw
    mov.u32 %i, %gid;
    ld.i32 %v, x[%i];
    setp.lt.i32 %p, %v, 0;
    mul.u32 %o, %i, 3;
    add.u32 %o1, %o, 1;
    add.u32 %o2, %o, 2;
    selp.f32 %a, -0.0, 1.0, %p;
    st.f32 o32[%o], %a;
    selp.f32 %b, 0.0, -1.0, %p;
    st.f32 o32[%o1], %b;
    selp.f32 %c, -0.0, 0.0, %p;
    st.f32 o32[%o2], %c;
    selp.f64 %d, -0.0, 1.0, %p;
    st.f64 o64[%o], %d;
    selp.f64 %e, 1.0, -0.0, %p;
    st.f64 o64[%o1], %e;
    selp.f64 %f, 0.0, -0.0, %p;
    st.f64 o64[%o2], %f;
    selp.f16 %g, -0.0, 1.0, %p;
    st.f16 o16[%o], %g;
    selp.f16 %h, 1.0, -0.0, %p;
    st.f16 o16[%o1], %h;
    selp.f16 %k, -1.0, 0.0, %p;
    st.f16 o16[%o2], %k;
"""
    n = 64
    T = Test("diff_select_signed_zero", "select between float literals with a signed zero", hasm, [1, 1, 1], [n, 1, 1])
    x = [int(v) for v in T.rng.integers(-100, 100, n)]
    T.buf("x", x)
    T.fill("o32", 7.0, 3 * n)
    T.fill("o64", 7.0, 3 * n)
    T.fill("o16", 7.0, 3 * n)
    o32, o64, o16 = [], [], []
    for v in x:
        p = v < 0
        o32 += [-0.0 if p else 1.0, 0.0 if p else -1.0, -0.0 if p else 0.0]
        o64 += [-0.0 if p else 1.0, 1.0 if p else -0.0, 0.0 if p else -0.0]
        o16 += [-0.0 if p else 1.0, 1.0 if p else -0.0, -1.0 if p else 0.0]
    T.out("o32", o32)
    T.out("o64", o64)
    T.out("o16", o16)
    return T
