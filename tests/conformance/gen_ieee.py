"""IEEE 754 corners of float min/max and mad/fma in every float type (issue 17, item 4: an
independent kernel suite found wgpu ordering +0 below -0 in min/max, rounding mad.f16 once,
folding a literal x*0 to 0 in mad, and overflowing fma.f64(x, 2, -x) for x >= 2^1023).

Rules (crates/hologram-isa/README.md): float min/max are IEEE 754-2019 minimumNumber /
maximumNumber (a NaN operand yields the other, -0 is below +0); mad is a mul then an add, each
rounded to the instruction's type (f16/bf16: computed in f32, rounded back); fma rounds once
(f16/bf16: one f32 fma rounded back). Expected values are computed here with exact rationals
(round_exact, fma_exact) and NumPy's correctly rounded f32/f64 operations (fop).

f64 cases are in kernels of their own: adapters without f64 (Metal; HOLOGRAM_WGPU_CORE_ONLY=1)
report those kernels unsupported and still run the others."""

import math
from fractions import Fraction

from generate import (FMT, INF, NAN, Test, f32_subnormal, fma_exact, fop, launch_1d,
                      round_exact, same, split_subnormal_lanes, test, to_type)

TYPES = ["f16", "bf16", "f32", "f64"]


def largest(t):
    p, _, emax = FMT[t]
    return float((2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax)


def smallest_normal(t):
    return 2.0 ** FMT[t][1]


def smallest_subnormal(t):
    p, emin, _ = FMT[t]
    return 2.0 ** (emin - p + 1)


def min_num(a, b):
    """IEEE 754-2019 minimumNumber: a NaN operand yields the other; -0 is below +0."""
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    if a != b:
        return a if a < b else b
    return a if math.copysign(1, a) < 0 else b


def max_num(a, b):
    """IEEE 754-2019 maximumNumber: a NaN operand yields the other; +0 is above -0."""
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    if a != b:
        return a if a > b else b
    return a if math.copysign(1, a) > 0 else b


def mad_model(t, a, b, c):
    """mad: the product rounded to t (f16/bf16: the f32 product rounded back), then the sum."""
    prod = fop(t, lambda x, y: x * y, [a], [b])[0]
    return fop(t, lambda x, y: x + y, [prod], [c])[0]


def fma_model(t, a, b, c):
    """fma: rounded once (f16/bf16: one f32 fma rounded back to t)."""
    if t in ("f32", "f64"):
        return fma_exact(a, b, c, t)
    return to_type(fma_exact(a, b, c, "f32"), t)


def lit(v):
    """A float literal as .hasm writes it."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return "-0.0" if v == 0 and math.copysign(1, v) < 0 else repr(float(v))


def maybe_split(T, n, extra=lambda i: False):
    """Moves lanes with f32/bf16 subnormals into NAME_subnormal (see split_subnormal_lanes)."""
    t = T.ty("a")
    if t not in ("f32", "bf16"):
        return T
    return split_subnormal_lanes(T, n, extra)


def emit(lines, out, instr):
    lines.append("    " + instr)
    lines.append("    st.%s %s[%%o], %%r;" % (out[1], out[0]))
    lines.append("    add.u32 %o, %o, 1;")


# --------------------------------------------------------------------------------------------
# min / max
# --------------------------------------------------------------------------------------------

MINMAX_LIT = [  # (op, first operand, second operand); "a" is the lane's register
    ("min", "a", 0.0), ("min", 0.0, "a"), ("min", "a", -0.0), ("min", -0.0, "a"),
    ("max", "a", 0.0), ("max", 0.0, "a"), ("max", "a", -0.0), ("max", -0.0, "a"),
    ("min", "a", NAN), ("min", NAN, "a"), ("max", "a", NAN), ("max", NAN, "a"),
    ("min", "a", INF), ("max", "a", -INF), ("min", "a", -INF), ("max", "a", INF),
    ("min", "a", "a"), ("max", "a", "a"),
    # both operands literal (the code generator forms such literals at run time)
    ("min", -0.0, 0.0), ("min", 0.0, -0.0), ("max", -0.0, 0.0), ("max", 0.0, -0.0),
    ("min", NAN, -0.0), ("max", 0.0, NAN), ("min", -0.0, -0.0), ("max", -0.0, -0.0),
]


def minmax_test(t):
    name = "ieee_minmax_" + t
    k = len(MINMAX_LIT)
    lines = ["// float min/max on %s are IEEE 754-2019 minimumNumber/maximumNumber: -0 is below +0 "
             "(min(-0,+0) = min(+0,-0) = -0, max = +0), a NaN operand yields the other; every pair of "
             "+-0, +-inf, NaN and finite values in both orders, registers and literal operands" % t,
             ".kernel " + name,
             ".param .buf.%s a" % t, ".param .buf.%s b" % t,
             ".param .buf.%s rr .rw" % t, ".param .buf.%s rl .rw" % t, ".param .u32 n",
             "    mov.u32 %i, %gid;", "    setp.ge.u32 %p, %i, n;", "@%p exit;",
             "    ld.%s %%a, a[%%i];" % t, "    ld.%s %%b, b[%%i];" % t,
             "    mul.u32 %o, %i, 2;"]
    emit(lines, ("rr", t), "min.%s %%r, %%a, %%b;" % t)
    emit(lines, ("rr", t), "max.%s %%r, %%a, %%b;" % t)
    lines.append("    mul.u32 %%o, %%i, %d;" % k)
    for op, x, y in MINMAX_LIT:
        xs = "%a" if x == "a" else lit(x)
        ys = "%a" if y == "a" else lit(y)
        emit(lines, ("rl", t), "%s.%s %%r, %s, %s;" % (op, t, xs, ys))
    big = largest(t)
    values = [0.0, -0.0, NAN, INF, -INF, 1.5, -1.5, big, -big, smallest_normal(t), -0.25]
    pairs = [(x, y) for x in values for y in values]
    n = len(pairs)
    T = Test(name, "min/max on %s: signed zeros, NaN and infinities, registers and literals" % t,
             "\n".join(lines), *launch_1d(n, 64))
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    T.buf("a", a)
    T.buf("b", b)
    T.scalar("n", n)
    T.fill("rr", 0.0, 2 * n)
    T.fill("rl", 0.0, k * n)
    T.out("rr", [v for x, y in pairs for v in (min_num(x, y), max_num(x, y))])
    fn = {"min": min_num, "max": max_num}
    T.out("rl", [fn[op](x if x != "a" else va, y if y != "a" else va)
                 for va in a for op, x, y in MINMAX_LIT])
    return T


for _t in TYPES:
    test(lambda t=_t: minmax_test(t))


# --------------------------------------------------------------------------------------------
# mad vs fma, with literal operands
# --------------------------------------------------------------------------------------------

MADFMA_FORMS = [  # operands of mad and fma: "a", "b", "c" are the lane's registers
    ("a", "b", "c"), ("a", 0.0, 1.0), (0.0, "a", "c"), ("a", -0.0, "c"), ("a", "b", 0.0),
    ("a", 2.0, "c"), ("a", -1.0, "a"), ("a", 1.0, "c"),
]


def madfma_cases(t, rng):
    """(a, b, c) lanes: specials, double rounding, overflow then cancellation, random."""
    p, emin, emax = FMT[t]
    big = largest(t)
    u = 2.0 ** (1 - p)  # one ulp of 1
    top = 2.0 ** emax
    cases = [
        (3.0, 1 + u, -3.0),                 # product 3 + 3u rounds (tie, to even) to 3 + 4u
        (-3.0, 1 + u, 3.0), (3.0, 1 - u / 2, -3.0), (1 + u, 1 + u, -1.0), (1 + u, 1 - u, -1.0),
        (big, 2.0, -big), (-big, 2.0, big),  # 2*big overflows; exactly, 2*big - big = big
        (top, 2.0, -top), (1.5 * top, 2.0, -1.5 * top),
        (big, big, -INF), (-big, big, INF), (big, big, INF), (big, 1.5, 1.0), (big, -1.5, -1.0),
        (big, 1.5, -big), (big, 0.75, -big), (INF, 0.0, 1.0), (0.0, INF, 1.0), (-INF, -0.0, -1.0),
        (NAN, 0.0, 1.0), (0.0, NAN, 1.0), (1.0, 1.0, NAN), (INF, 2.0, -INF), (INF, 2.0, INF),
        (-INF, 2.0, 5.0), (0.0, 5.0, -0.0), (-0.0, 5.0, -0.0), (-1.0, 0.0, 0.0), (-1.0, 0.0, -0.0),
        (1.0, -0.0, -0.0), (-0.0, -0.0, -0.0), (2.0, 3.0, -6.0), (-2.0, 3.0, 6.0), (1.5, 1.5, 0.75),
        (smallest_normal(t), 0.5, 0.0), (smallest_normal(t), -0.5, smallest_normal(t)),
        (INF, smallest_subnormal(t), -smallest_subnormal(t)),  # literal-0 forms with a = inf
        (-smallest_subnormal(t), 0.5, 0.0),  # the product rounds to -0 (tie to even)
    ]
    if t in ("f32", "f64"):
        cases += [(2.0 ** (emax - 1), 2.0 ** (1 - emax), -1.0), (2.0 ** (emin + 1), 3.0, -2.0 ** emin)]
    cases = [tuple(to_type(v, t) for v in c) for c in cases]
    # random cases; c cancels the product in half of them (mad and fma differ there)
    lo, hi = (-12, 12) if t == "f16" else (-40, 40)
    while len(cases) < 96:
        a, b = (to_type(rng.uniform(1, 2) * 2.0 ** int(rng.integers(lo // 2, hi // 2)) * rng.choice([-1, 1]), t)
                for _ in range(2))
        if len(cases) % 2:
            c = -fop(t, lambda x, y: x * y, [a], [b])[0]
        else:
            c = to_type(rng.uniform(-4, 4), t)
        if t in ("f16", "bf16") and len(cases) % 4 == 1:
            # keep only cases where rounding the product first changes the result
            if same(mad_model(t, a, b, c), fma_model(t, a, b, c)):
                continue
        cases.append((a, b, c))
    return cases


def madfma_test(t):
    name = "ieee_mad_fma_" + t
    k = 2 * len(MADFMA_FORMS)
    how = ("a mul then an add, each rounded to %s" % t) if t in ("f16", "bf16") else "rounded twice"
    fma_how = "one f32 fma rounded to %s" % t if t in ("f16", "bf16") else "rounded once"
    lines = ["// mad.%s is %s; fma.%s is %s: double rounding vs single rounding, inf/NaN times a "
             "literal 0, products that overflow and are then cancelled by c, signed zeros; "
             "operands in registers and as literals 0, -0, 1, -1, 2" % (t, how, t, fma_how),
             ".kernel " + name,
             ".param .buf.%s a" % t, ".param .buf.%s b" % t, ".param .buf.%s c" % t,
             ".param .buf.%s r .rw" % t, ".param .u32 n",
             "    mov.u32 %i, %gid;", "    setp.ge.u32 %p, %i, n;", "@%p exit;",
             "    ld.%s %%a, a[%%i];" % t, "    ld.%s %%b, b[%%i];" % t, "    ld.%s %%c, c[%%i];" % t,
             "    mul.u32 %%o, %%i, %d;" % k]
    for form in MADFMA_FORMS:
        ops = ", ".join("%" + x if isinstance(x, str) else lit(x) for x in form)
        for op in ("mad", "fma"):
            emit(lines, ("r", t), "%s.%s %%r, %s;" % (op, t, ops))
    T = Test(name, "mad vs fma on %s with special and literal operands" % t, "\n".join(lines), [1, 1, 1], [1, 1, 1])
    cases = madfma_cases(t, T.rng)
    n = len(cases)
    T.grid, T.block = launch_1d(n, 32)
    T.buf("a", [x[0] for x in cases])
    T.buf("b", [x[1] for x in cases])
    T.buf("c", [x[2] for x in cases])
    T.scalar("n", n)
    T.fill("r", 0.0, k * n)
    out = []
    products = []
    for a, b, c in cases:
        regs = {"a": a, "b": b, "c": c}
        for form in MADFMA_FORMS:
            x, y, z = (regs[v] if isinstance(v, str) else to_type(v, t) for v in form)
            out += [mad_model(t, x, y, z), fma_model(t, x, y, z)]
            if t in ("f32", "bf16"):
                products.append(fop("f32", lambda q, s: q * s, [x], [y])[0])
    T.out("r", out)
    m = len(MADFMA_FORMS)
    # mad's f32 product is an intermediate result too (flushed on devices that flush subnormals)
    return maybe_split(T, n, lambda i: any(f32_subnormal(v) for v in products[m * i:m * i + m]))


for _t in TYPES:
    test(lambda t=_t: madfma_test(t))


# --------------------------------------------------------------------------------------------
# fma and mad near the exponent limits (f32, f64)
# --------------------------------------------------------------------------------------------

def fval(rng, t, e, sign=None):
    """A random value of t with magnitude in [2^e, 2^(e+1)) (rounded to t: may be subnormal)."""
    s = sign if sign is not None else rng.choice([-1.0, 1.0])
    m = rng.uniform(1, 2)
    p, emin, emax = FMT[t]
    e = max(min(e, emax), emin - p + 1)
    v = to_type(Fraction(s) * Fraction(m) * Fraction(2) ** e, t)
    return v if not math.isinf(v) else math.copysign(largest(t), v)


def limit_cases(t, rng, per_kind):
    p, emin, emax = FMT[t]
    ri = lambda lo, hi: int(rng.integers(lo, hi, endpoint=True))
    cases = []

    def add(a, b, c):
        if any(v == 0 for v in (a, b)):
            return
        cases.append((a, b, c))

    for _ in range(per_kind):
        # products beyond the largest finite value, cancelled (or not) by c
        a = fval(rng, t, emax - ri(0, 2))
        b = fval(rng, t, ri(0, 3))
        c = fval(rng, t, emax - ri(0, 2), -math.copysign(1, a * b))
        add(a, b, c)
        # a huge, b tiny: the product is near 1
        ea = emax - ri(0, 30)
        a = fval(rng, t, ea)
        b = fval(rng, t, -ea + ri(-3, 3))
        add(a, b, fval(rng, t, ri(-60, 3)))
        # products in or near the subnormal range, c small
        ep = ri(emin - p - 3, emin + 8)
        ea = ri(max(emin - p + 1, ep - emax), min(emax, ep - (emin - p + 1)))
        a = fval(rng, t, ea)
        b = fval(rng, t, ep - ea)
        c = fval(rng, t, ri(emin - p + 1, emin + 6))
        add(a, b, c)
        # ... and c cancelling most of the product
        prod = fop(t, lambda x, y: x * y, [a], [b])[0]
        if prod != 0:
            add(a, b, -prod if rng.uniform() < 0.5 else -to_type(prod * (1 + rng.uniform(-2, 2) * 2.0 ** -10), t))
        # c far below a large product (only its sign and being nonzero matter) and the reverse
        ea = ri(emax // 2, emax - 2)
        a = fval(rng, t, ea)
        b = fval(rng, t, ri(0, emax - ea - 1))
        add(a, b, fval(rng, t, ri(emin - p + 1, emin + 20)))
        add(fval(rng, t, ri(emin, emin + 20)), fval(rng, t, ri(-20, 0)), fval(rng, t, ri(-10, 10)))
        # exponents anywhere
        add(fval(rng, t, ri(emin - p + 1, emax)), fval(rng, t, ri(emin - p + 1, emax)),
            fval(rng, t, ri(emin - p + 1, emax)))
        # a subnormal operand
        a = fval(rng, t, ri(emin - p + 1, emin - 1))
        b = fval(rng, t, ri(p, emax))
        add(a, b, fval(rng, t, ri(-30, 30)))
    # products exactly halfway between two values of t: (1 + 2^-k)(1 + 2^-(p-k)) has a last
    # bit 2^-p; c only nudges the tie (sticky) or moves it; at the top and bottom of the range
    for _ in range(per_kind):
        k = ri(1, p - 1)
        ea = ri(emin, emax)
        eb = ri(max(emin, emin - p - ea), min(emax, emax - 1 - ea))
        s = int(rng.choice([-1, 1]))
        a = to_type(Fraction(s) * (1 + Fraction(1, 2 ** k)) * Fraction(2) ** ea, t)
        b = to_type((1 + Fraction(1, 2 ** (p - k))) * Fraction(2) ** eb, t)
        ep = ea + eb
        for c in (fval(rng, t, ep - p - ri(2, 60)), fval(rng, t, ep + ri(-2, 2)), 0.0):
            add(a, b, c)
    # exact cancellation to +0 with huge and tiny products
    for _ in range(per_kind // 2):
        ea = ri(emin, emax - 8)
        eb = ri(max(emin, emin - ea + 4), min(emax - 8, emax - 8 - ea))
        a = to_type(Fraction(int(rng.choice([-3, 3, 5, -7]))) * Fraction(2) ** ea, t)
        b = to_type(Fraction(int(rng.choice([3, -5, 7]))) * Fraction(2) ** eb, t)
        exact = Fraction(a) * Fraction(b)
        if round_exact(exact, t) == float(exact):
            add(a, b, -float(exact))
    return cases


def limits_test(t, per_kind, block):
    name = "ieee_fma_limits_" + t
    lines = ["// fma.%s (rounded once) and mad.%s (rounded twice) near the exponent limits: products "
             "that overflow, products near 1 from a huge and a tiny operand, subnormal products and "
             "results, c far below or far above the product, ties broken by c, exact cancellation "
             "to +0" % (t, t),
             ".kernel " + name,
             ".param .buf.%s a" % t, ".param .buf.%s b" % t, ".param .buf.%s c" % t,
             ".param .buf.%s r .rw" % t, ".param .u32 n",
             "    mov.u32 %i, %gid;", "    setp.ge.u32 %p, %i, n;", "@%p exit;",
             "    ld.%s %%a, a[%%i];" % t, "    ld.%s %%b, b[%%i];" % t, "    ld.%s %%c, c[%%i];" % t,
             "    mul.u32 %o, %i, 2;"]
    emit(lines, ("r", t), "fma.%s %%r, %%a, %%b, %%c;" % t)
    emit(lines, ("r", t), "mad.%s %%r, %%a, %%b, %%c;" % t)
    T = Test(name, "fma and mad on %s near the exponent limits" % t, "\n".join(lines), [1, 1, 1], [1, 1, 1])
    cases = limit_cases(t, T.rng, per_kind)
    n = len(cases)
    T.grid, T.block = launch_1d(n, block)
    T.buf("a", [x[0] for x in cases])
    T.buf("b", [x[1] for x in cases])
    T.buf("c", [x[2] for x in cases])
    T.scalar("n", n)
    T.fill("r", 0.0, 2 * n)
    T.out("r", [v for a, b, c in cases for v in (fma_model(t, a, b, c), mad_model(t, a, b, c))])
    products = [fop(t, lambda x, y: x * y, [a], [b])[0] for a, b, _ in cases]
    return maybe_split(T, n, lambda i: f32_subnormal(products[i]))


test(lambda: limits_test("f32", 48, 64))
test(lambda: limits_test("f64", 48, 64))
