"""The max-pooling kernels the tensor library generates (hologram_compiler's
`patterns::pool_templates`, printed as text): one lane per output scanning its window with
PyTorch's rules (a NaN wins, a later NaN over an earlier one, the first maximum wins ties, the
index starts at the window's first in-bounds element), and the backward gather. Padding,
dilation and a ceil-mode window that hangs over the input's end."""

import math

from generate import Test, test

FORWARD = """// The library's max-pooling kernel (values and i64 indices), as generated.
.kernel pool_max_indices_f32
.param .buf.f32 x
.param .buf.f32 y .rw
.param .buf.i64 idx .rw
.param .u32 total
.param .u32 xoff
.param .u32 h
.param .u32 w
.param .u32 kh
.param .u32 kw
.param .u32 sh
.param .u32 sw
.param .u32 ph
.param .u32 pw
.param .u32 dh
.param .u32 dw
.param .u32 ho
.param .u32 wo
    setp.ge.u32 %done, %gid, total;
    @%done exit;
    rem.u32 %ox, %gid, wo;
    div.u32 %t, %gid, wo;
    rem.u32 %oy, %t, ho;
    div.u32 %plane, %t, ho;
    mul.u32 %base, %plane, h;
    mul.u32 %base, %base, w;
    add.u32 %base, %base, xoff;
    mul.u32 %y0u, %oy, sh;
    mul.u32 %x0u, %ox, sw;
    cvt.i32.u32 %y0, %y0u;
    cvt.i32.u32 %x0, %x0u;
    cvt.i32.u32 %phs, ph;
    cvt.i32.u32 %pws, pw;
    sub.i32 %y0, %y0, %phs;
    sub.i32 %x0, %x0, %pws;
    cvt.i32.u32 %ws, w;
    mov.f32 %best, -inf;
    mov.i32 %at, -1;
    mov.u32 %ky, 0;
KY:
    setp.ge.u32 %endy, %ky, kh;
    @%endy bra STORE;
    mul.u32 %kd, %ky, dh;
    cvt.i32.u32 %kds, %kd;
    add.i32 %iy, %y0, %kds;
    cvt.i32.u32 %len, h;
    setp.ge.i32 %ok, %iy, 0;
    setp.lt.i32 %p, %iy, %len;
    and.pred %ok, %ok, %p;
    @!%ok bra NEXTY;
    mov.u32 %kx, 0;
KX:
    setp.ge.u32 %endx, %kx, kw;
    @%endx bra NEXTY;
    mul.u32 %kd, %kx, dw;
    cvt.i32.u32 %kds, %kd;
    add.i32 %ix, %x0, %kds;
    cvt.i32.u32 %len, w;
    setp.ge.i32 %ok, %ix, 0;
    setp.lt.i32 %p, %ix, %len;
    and.pred %ok, %ok, %p;
    @!%ok bra NEXTX;
    mad.i32 %pos, %iy, %ws, %ix;
    cvt.u32.i32 %posu, %pos;
    add.u32 %src, %base, %posu;
    ld.f32 %v, x[%src];
    setp.gt.f32 %take, %v, %best;
    setp.ne.f32 %p, %v, %v;
    or.pred %take, %take, %p;
    setp.lt.i32 %p, %at, 0;
    or.pred %take, %take, %p;
    selp.f32 %best, %v, %best, %take;
    selp.i32 %at, %pos, %at, %take;
NEXTX:
    add.u32 %kx, %kx, 1;
    bra KX;
NEXTY:
    add.u32 %ky, %ky, 1;
    bra KY;
STORE:
    st.f32 y[%gid], %best;
    cvt.i64.i32 %at64, %at;
    st.i64 idx[%gid], %at64;"""

BACKWARD = """// The library's max-pooling backward kernel (a gather over candidate outputs), as generated.
.kernel pool_max_backward_f32
.param .buf.f32 g
.param .buf.i64 idx
.param .buf.f32 dx .rw
.param .u32 total
.param .u32 xoff
.param .u32 ioff
.param .u32 h
.param .u32 w
.param .u32 kh
.param .u32 kw
.param .u32 sh
.param .u32 sw
.param .u32 ph
.param .u32 pw
.param .u32 dh
.param .u32 dw
.param .u32 ho
.param .u32 wo
    setp.ge.u32 %done, %gid, total;
    @%done exit;
    rem.u32 %ix, %gid, w;
    div.u32 %t, %gid, w;
    rem.u32 %iy, %t, h;
    div.u32 %plane, %t, h;
    mad.u32 %posu, %iy, w, %ix;
    cvt.i64.u32 %pos, %posu;
    mul.u32 %obase, %plane, ho;
    mul.u32 %obase, %obase, wo;
    add.u32 %cp, %iy, ph;
    sub.u32 %span, kh, 1;
    mad.u32 %span, %span, dh, 1;
    setp.lt.u32 %near, %cp, %span;
    sub.u32 %far, %cp, %span;
    div.u32 %far, %far, sh;
    add.u32 %far, %far, 1;
    selp.u32 %oy0, 0, %far, %near;
    div.u32 %oy1, %cp, sh;
    add.u32 %oy1, %oy1, 1;
    min.u32 %oy1, %oy1, ho;
    add.u32 %cp, %ix, pw;
    sub.u32 %span, kw, 1;
    mad.u32 %span, %span, dw, 1;
    setp.lt.u32 %near, %cp, %span;
    sub.u32 %far, %cp, %span;
    div.u32 %far, %far, sw;
    add.u32 %far, %far, 1;
    selp.u32 %ox0, 0, %far, %near;
    div.u32 %ox1, %cp, sw;
    add.u32 %ox1, %ox1, 1;
    min.u32 %ox1, %ox1, wo;
    mov.f32 %acc, 0.0;
    mov.u32 %oy, %oy0;
OY:
    setp.ge.u32 %endy, %oy, %oy1;
    @%endy bra STORE;
    mov.u32 %ox, %ox0;
OX:
    setp.ge.u32 %endx, %ox, %ox1;
    @%endx bra NEXTY;
    mad.u32 %o, %oy, wo, %ox;
    add.u32 %o, %o, %obase;
    add.u32 %io, %o, ioff;
    ld.i64 %at, idx[%io];
    setp.ne.i64 %miss, %at, %pos;
    @%miss bra NEXTX;
    add.u32 %go, %o, xoff;
    ld.f32 %v, g[%go];
    add.f32 %acc, %acc, %v;
NEXTX:
    add.u32 %ox, %ox, 1;
    bra OX;
NEXTY:
    add.u32 %oy, %oy, 1;
    bra OY;
STORE:
    st.f32 dx[%gid], %acc;"""

# planes, h, w, kernel, stride, padding, dilation, output size (ceil mode: 5 columns, the last
# window starting in the right padding's reach).
PLANES, H, W = 3, 9, 8
KH, KW, SH, SW, PH, PW, DH, DW = 3, 2, 2, 2, 1, 1, 1, 2
HO, WO = 5, 5


def inputs(T):
    x = [float(v) for v in T.rng.integers(-3, 4, PLANES * H * W)]
    for i in T.rng.choice(len(x), 6, replace=False):
        x[int(i)] = math.nan
    for i in T.rng.choice(len(x), 6, replace=False):
        x[int(i)] = -math.inf
    return x


def reference(x):
    ys, idx = [], []
    for p in range(PLANES):
        for oy in range(HO):
            for ox in range(WO):
                best, at = -math.inf, -1
                for ky in range(KH):
                    iy = oy * SH + ky * DH - PH
                    for kx in range(KW):
                        ix = ox * SW + kx * DW - PW
                        if 0 <= iy < H and 0 <= ix < W:
                            v = x[p * H * W + iy * W + ix]
                            if at < 0 or v > best or math.isnan(v):
                                best, at = v, iy * W + ix
                ys.append(best)
                idx.append(at)
    return ys, idx


def geometry(T, total, offsets):
    T.scalar("total", total)
    for name, v in offsets:
        T.scalar(name, v)
    for name, v in [("h", H), ("w", W), ("kh", KH), ("kw", KW), ("sh", SH), ("sw", SW),
                    ("ph", PH), ("pw", PW), ("dh", DH), ("dw", DW), ("ho", HO), ("wo", WO)]:
        T.scalar(name, v)


@test
def pool_max_indices_f32():
    n = PLANES * HO * WO
    T = Test("pool_max_indices_f32", "max pooling: values and indices, NaN, -inf and ties",
             FORWARD, [(n + 31) // 32, 1, 1], [32, 1, 1])
    x = inputs(T)
    # The input starts 5 elements into its buffer (xoff).
    T.buf("x", [7.0] * 5 + x)
    T.fill("y", 0.0, n)
    T.fill("idx", 0, n)
    geometry(T, n, [("xoff", 5)])
    y, idx = reference(x)
    T.out("y", y)
    T.out("idx", idx)
    return T


@test
def pool_max_backward_f32():
    n = PLANES * H * W
    T = Test("pool_max_backward_f32", "max-pooling backward: each input sums the gradients whose index names it",
             BACKWARD, [(n + 63) // 64, 1, 1], [64, 1, 1])
    _, idx = reference(inputs(T))
    g = [float(v) for v in T.rng.integers(-8, 9, len(idx))]
    T.buf("g", [0.0] * 3 + g)
    T.buf("idx", [0] * 2 + idx)
    T.fill("dx", 0.0, n)
    geometry(T, n, [("xoff", 3), ("ioff", 2)])
    dx = [0.0] * n
    for p in range(PLANES):
        for o in range(HO * WO):
            dx[p * H * W + idx[p * HO * WO + o]] += g[p * HO * WO + o]
    T.out("dx", dx)
    return T
