"""Division by `u32` parameters (issue 14): the CUDA backend divides by a launch-uniform divisor
through a multiplier and shift computed on the host, exact for dividends below 2^31 and falling
back to the ordinary division from 2^31 up and for divisors it does not cover (0, 1, above
2^31). These programs put dividends on both sides of 2^31 and divisors at the edges, in
element-wise maps (so CUDA runs them in the four-lane form), and a broadcast operand read at
`(gid / p) % m` as the element-wise generator emits it."""

from generate import Test, test

DIVISORS = [0, 1, 2, 3, 7, 12544, 0x7fffffff, 0x80000000, 0x80000001, 0xffffffff]


@test
def div_by_param_boundary():
    k = len(DIVISORS)
    params = "".join(f".param .u32 d{j}\n" for j in range(k))
    outs = "".join(f".param .buf.u32 q{j} .rw\n.param .buf.u32 r{j} .rw\n" for j in range(k))
    body = "".join(
        f"    div.u32 %q{j}, %a, d{j};\n    st.u32 q{j}[%gid], %q{j};\n"
        f"    rem.u32 %r{j}, %a, d{j};\n    st.u32 r{j}[%gid], %r{j};\n"
        for j in range(k))
    hasm = f"""// a / d and a rem d for divisors d passed as parameters, dividends around 2^31 and at the ends.
.kernel div_by_param_boundary
.param .buf.u32 a
{params}{outs}.param .u32 n
    setp.ge.u32 %p, %gid, n;
@%p exit;
    ld.u32 %a, a[%gid];
{body}"""
    a = []
    for base in [0, 1 << 31, 1 << 32]:
        a += [(base + d) % (1 << 32) for d in range(-300, 301)]
    for d in DIVISORS:
        for q in [1, 2, 3, 1000, ((1 << 31) - 1) // max(d, 1), ((1 << 32) - 1) // max(d, 1)]:
            for e in [-1, 0, 1]:
                v = q * d + e
                if 0 <= v < 1 << 32:
                    a.append(v)
    n = len(a)
    T = Test("div_by_param_boundary",
             "u32 division and remainder by parameters at the edges of the host multiplier's range",
             hasm, [(n + 255) // 256, 1, 1], [256, 1, 1])
    T.buf("a", a)
    T.scalar("n", n)
    for j, d in enumerate(DIVISORS):
        T.scalar(f"d{j}", d)
        T.fill(f"q{j}", 0, n)
        T.fill(f"r{j}", 0, n)
        T.out(f"q{j}", [v // d if d else v for v in a])
        T.out(f"r{j}", [v % d if d else 0 for v in a])
    return T


@test
def broadcast_operands_gathered():
    hasm = """// out = x + b[(i / p) % m] - c[i / q] * s[i % w]: a per-channel operand, a per-row one and a
// per-column one, as the element-wise generator addresses broadcast operands.
.kernel broadcast_operands_gathered
.param .buf.f32 x
.param .buf.f32 b
.param .buf.f32 c
.param .buf.f32 s
.param .u32 p
.param .u32 m
.param .u32 q
.param .u32 w
.param .buf.f32 out .rw
.param .u32 n
    setp.ge.u32 %done, %gid, n;
@%done exit;
    ld.f32 %x, x[%gid];
    div.u32 %t1, %gid, p;
    rem.u32 %t2, %t1, m;
    ld.f32 %b, b[%t2];
    div.u32 %t3, %gid, q;
    ld.f32 %c, c[%t3];
    rem.u32 %t4, %gid, w;
    ld.f32 %s, s[%t4];
    add.f32 %y, %x, %b;
    mul.f32 %z, %c, %s;
    sub.f32 %y, %y, %z;
    st.f32 out[%gid], %y;
"""
    rows, chans, inner = 13, 5, 49
    n = rows * chans * inner
    T = Test("broadcast_operands_gathered",
             "per-channel, per-row and per-column operands read at (i / p) % m, i / q and i % w",
             hasm, [(n + 255) // 256, 1, 1], [256, 1, 1])
    x = [float((i * 7) % 101) - 50.0 for i in range(n)]
    b = [float(j) * 0.5 for j in range(chans)]
    c = [float(r) - 6.0 for r in range(rows)]
    s = [float(k % 9) * 0.25 for k in range(inner)]
    T.buf("x", x)
    T.buf("b", b)
    T.buf("c", c)
    T.buf("s", s)
    T.scalar("p", inner)
    T.scalar("m", chans)
    T.scalar("q", chans * inner)
    T.scalar("w", inner)
    T.scalar("n", n)
    T.fill("out", 0.0, n)
    T.out("out", [x[i] + b[(i // inner) % chans] - c[i // (chans * inner)] * s[i % inner]
                  for i in range(n)])
    return T
