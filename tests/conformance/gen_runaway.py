"""Launches that must end with an error instead of hanging (issue 17, item 2): an endless loop
stops at the launch timeout (`LaunchTimeout`; the spec sets a short one, 0.2 ms), and lanes of
one block that wait at different barriers, chosen through a `.scratch` value the validator
cannot follow, give `BarrierDivergence` on every backend. Blocks that agree among themselves
but not with other blocks are fine."""

from generate import Test, test

# Short enough that the wgpu budget (2^26 blocks per second of timeout, about 13,400 here) runs
# out before lavapipe's loop limiter (65535 iterations) cuts the loop.
TIMEOUT_S = 0.0002


@test
def runaway_endless_loop():
    hasm = """// counts until it meets stop[0] = 0, which takes 2^32 steps: endless for a test; the launch stops at its timeout
.kernel runaway_endless_loop
.param .buf.u32 stop
.param .buf.u32 y .rw
    ld.u32 %s, stop[0];
    mov.u32 %x, 0;
SPIN:
    add.u32 %x, %x, 1;
    setp.eq.u32 %p, %x, %s;
@%p bra DONE;
    bra SPIN;
DONE:
    st.u32 y[%gid], %x;
"""
    T = Test("runaway_endless_loop", "an endless loop ends with LaunchTimeout, y untouched",
             hasm, [2, 1, 1], [32, 1, 1])
    T.buf("stop", [0])
    T.fill("y", 7, 64)
    T.timeout_s = TIMEOUT_S
    T.fails("LaunchTimeout", unchanged=["y"])
    return T


@test
def runaway_barrier_divergence():
    hasm = """// odd lanes wait at one barrier, even lanes at another (the choice goes through .scratch, so the validator cannot see it)
.kernel runaway_barrier_divergence
.param .buf.u32 y .rw
.scratch .u32 pick[1]
    and.u32 %odd, %tid.x, 1;
    st.u32 pick[0], %odd;
    ld.u32 %q, pick[0];
    setp.eq.u32 %p, %q, 0;
@%p bra EVEN;
    barrier;
    st.u32 y[%gid], 1;
    exit;
EVEN:
    barrier;
    st.u32 y[%gid], 2;
"""
    T = Test("runaway_barrier_divergence", "lanes of a block at different barriers: BarrierDivergence",
             hasm, [2, 1, 1], [64, 1, 1])
    T.fill("y", 0, 128)
    T.fails("BarrierDivergence", unchanged=["y"])
    return T


@test
def runaway_barrier_divergence_in_loop():
    hasm = """// every lane passes the same barrier 3 times, then lane 5 of block 1 alone goes to another barrier
.kernel runaway_barrier_divergence_in_loop
.param .buf.u32 y .rw
.scratch .u32 pick[1]
.shared .u32 t[64]
    mov.u32 %c, 3;
    mov.u32 %acc, 0;
AGAIN:
    st.u32 t[%tid.x], %c;
    barrier;
    add.u32 %acc, %acc, 1;
    loop %c, AGAIN;
    setp.eq.u32 %a, %tid.x, 5;
    setp.eq.u32 %b, %ctaid.x, 1;
    and.pred %a, %a, %b;
    selp.u32 %w, 1, 0, %a;
    st.u32 pick[0], %w;
    ld.u32 %q, pick[0];
    setp.ne.u32 %p, %q, 0;
@%p bra ODD;
    barrier;
    st.u32 y[%gid], %acc;
    exit;
ODD:
    barrier;
    st.u32 y[%gid], 99;
"""
    T = Test("runaway_barrier_divergence_in_loop",
             "one lane of one block leaves for another barrier after three agreed ones: BarrierDivergence",
             hasm, [2, 1, 1], [64, 1, 1])
    T.fill("y", 0, 128)
    T.fails("BarrierDivergence")
    return T


@test
def runaway_barrier_agreed_per_block():
    hasm = """// block 0 waits at one barrier and block 1 at another (chosen through .scratch): each block agrees, so this is fine
.kernel runaway_barrier_agreed_per_block
.param .buf.u32 y .rw
.scratch .u32 pick[1]
.shared .u32 t[64]
    st.u32 pick[0], %ctaid.x;
    ld.u32 %q, pick[0];
    setp.eq.u32 %p, %q, 0;
    xor.u32 %r, %tid.x, 1;
@%p bra FIRST;
    st.u32 t[%tid.x], 20;
    barrier;
    ld.u32 %v, t[%r];
    add.u32 %v, %v, %tid.x;
    st.u32 y[%gid], %v;
    exit;
FIRST:
    st.u32 t[%tid.x], 10;
    barrier;
    ld.u32 %v, t[%r];
    add.u32 %v, %v, %tid.x;
    st.u32 y[%gid], %v;
"""
    T = Test("runaway_barrier_agreed_per_block", "blocks at different barriers, each block agreeing: no error",
             hasm, [2, 1, 1], [64, 1, 1])
    T.fill("y", 0, 128)
    T.out("y", [(10 if b == 0 else 20) + t for b in range(2) for t in range(64)])
    return T


@test
def runaway_barrier_after_exits():
    hasm = """// lanes whose .scratch pick is odd exit; the others meet at a barrier, which does not wait for exited lanes
.kernel runaway_barrier_after_exits
.param .buf.u32 y .rw
.scratch .u32 pick[1]
.shared .u32 t[64]
    and.u32 %odd, %tid.x, 1;
    st.u32 pick[0], %odd;
    ld.u32 %q, pick[0];
    setp.ne.u32 %p, %q, 0;
@%p exit;
    st.u32 t[%tid.x], %tid.x;
    barrier;
    add.u32 %r, %tid.x, 2;
    and.u32 %r, %r, 63;
    ld.u32 %v, t[%r];
    st.u32 y[%gid], %v;
"""
    T = Test("runaway_barrier_after_exits", "a barrier after half the lanes exited: no error",
             hasm, [2, 1, 1], [64, 1, 1])
    T.fill("y", 1000, 128)
    T.out("y", [((t + 2) & 63) if t % 2 == 0 else 1000 for b in range(2) for t in range(64)])
    return T
