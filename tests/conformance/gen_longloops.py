"""Lanes that loop many times (issue 17, item 3): Mesa's lavapipe stops every shader's loops
after 65535 iterations in all, so these either pass or, on such a driver, are reported as
unsupported by the launch; never a wrong result."""

from generate import Test, test


@test
def longloop_70000():
    hasm = """// one loop of n = 70000 passes per lane (more than lavapipe's 65535), counting and summing
.kernel longloop_70000
.param .buf.u32 y .rw
.param .buf.u32 s .rw
.param .u32 n
    mov.u32 %c, n;
    mov.u32 %k, 0;
    mov.u32 %acc, 0;
BODY:
    add.u32 %k, %k, 1;
    add.u32 %acc, %acc, %gid;
    loop %c, BODY;
    st.u32 y[%gid], %k;
    st.u32 s[%gid], %acc;
"""
    n = 70000
    T = Test("longloop_70000", "70000 passes of one loop in every lane", hasm, [2, 1, 1], [32, 1, 1])
    T.fill("y", 0, 64)
    T.fill("s", 0, 64)
    T.scalar("n", n)
    T.out("y", [n] * 64)
    T.out("s", [(g * n) % 2 ** 32 for g in range(64)])
    return T


@test
def longloop_nested_300():
    hasm = """// two nested loops of 300 passes each: 90000 passes of the inner body per lane
.kernel longloop_nested_300
.param .buf.u32 y .rw
.param .u32 n
    mov.u32 %i, n;
    mov.u32 %k, 0;
OUTER:
    mov.u32 %j, n;
INNER:
    add.u32 %k, %k, 1;
    loop %j, INNER;
    add.u32 %k, %k, %gid;
    loop %i, OUTER;
    st.u32 y[%gid], %k;
"""
    n = 300
    T = Test("longloop_nested_300", "300 x 300 passes of nested loops in every lane", hasm, [1, 1, 1], [64, 1, 1])
    T.fill("y", 0, 64)
    T.scalar("n", n)
    T.out("y", [n * n + n * g for g in range(64)])
    return T
