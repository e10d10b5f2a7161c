"""Stores that overwrite: a lane stores to the same element twice, and values it stored first
are still used afterwards (the CPU's native element-wise path once kept a register in the
output buffer, so the second store changed it: issue 17, item 1)."""

from generate import Test, test


@test
def store_overwrite_keeps_registers():
    hasm = """// y[i] is written twice; %b (written first) must keep its value for z.
.kernel store_overwrite_keeps_registers
.param .buf.f32 x
.param .buf.f32 y .rw
.param .buf.f32 z .rw
.param .u32 n
    setp.ge.u32 %p, %gid, n;
@%p exit;
    ld.f32 %a, x[%gid];
    mul.f32 %b, %a, 2.0;
    st.f32 y[%gid], %b;
    st.f32 y[%gid], %a;
    add.f32 %e, %b, 1.0;
    st.f32 z[%gid], %e;
"""
    n = 4096 + 8
    T = Test("store_overwrite_keeps_registers", "two stores to one element; the first value is used later",
             hasm, [(n + 255) // 256, 1, 1], [256, 1, 1])
    x = [float(i % 1000) - 500.0 for i in range(n)]
    T.buf("x", x)
    T.fill("y", 0.0, n)
    T.fill("z", 0.0, n)
    T.scalar("n", n)
    T.out("y", x)
    T.out("z", [2.0 * v + 1.0 for v in x])
    return T


@test
def store_then_load_in_place():
    hasm = """// y is read, written, read again and written again by each lane; every read sees the last store.
.kernel store_then_load_in_place
.param .buf.f32 y .rw
.param .buf.f32 z .rw
.param .u32 n
    setp.ge.u32 %p, %gid, n;
@%p exit;
    ld.f32 %a, y[%gid];
    add.f32 %b, %a, 1.0;
    st.f32 y[%gid], %b;
    ld.f32 %c, y[%gid];
    mul.f32 %d, %c, 3.0;
    st.f32 y[%gid], %d;
    sub.f32 %e, %d, %a;
    add.f32 %e, %e, %c;
    st.f32 z[%gid], %e;
"""
    n = 5000
    T = Test("store_then_load_in_place", "load, store, load again and store again in place",
             hasm, [(n + 127) // 128, 1, 1], [128, 1, 1])
    y = [float(i % 64) * 0.5 for i in range(n)]
    T.buf("y", y)
    T.fill("z", 0.0, n)
    T.scalar("n", n)
    T.out("y", [(v + 1.0) * 3.0 for v in y])
    T.out("z", [(v + 1.0) * 3.0 - v + (v + 1.0) for v in y])
    return T


@test
def store_direct_then_copy_load():
    hasm = """// %b could be computed straight into y; the load of y in between must still see the old value.
.kernel store_direct_then_copy_load
.param .buf.f32 x
.param .buf.f32 y .rw
.param .buf.f32 z .rw
.param .u32 n
    setp.ge.u32 %p, %gid, n;
@%p exit;
    ld.f32 %a, x[%gid];
    mul.f32 %b, %a, 4.0;
    ld.f32 %old, y[%gid];
    ld.f32 %old2, y[%gid];
    add.f32 %s, %old, %old2;
    st.f32 y[%gid], %b;
    st.f32 z[%gid], %s;
"""
    n = 3000
    T = Test("store_direct_then_copy_load", "a load between a result's definition and its store sees the old value",
             hasm, [(n + 63) // 64, 1, 1], [64, 1, 1])
    x = [float(i % 77) for i in range(n)]
    y = [float(i % 13) for i in range(n)]
    T.buf("x", x)
    T.buf("y", y)
    T.fill("z", 0.0, n)
    T.scalar("n", n)
    T.out("y", [4.0 * v for v in x])
    T.out("z", [2.0 * v for v in y])
    return T
