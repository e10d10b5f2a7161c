"""Multi-dimensional launches, written from the ISA README alone: `%gid` is the global linear id,
`%gid.x + %gid.y * W + %gid.z * W * H` with W = nctaid.x * ntid.x and H = nctaid.y * ntid.y (x
fastest over the whole launch), so a launch that covers a W x H x D volume exactly indexes it in
row-major order with `%gid` (issue 17, item 5: every backend used to count block by block, so with
`--grid 2,2 --block 4,4` the lane at global (4, 0) got 16 instead of 4)."""

import math

from generate import Test, fop, rand_ints, rand_uniform, test, wrap


def coords(grid, block):
    """Every lane's (gx, gy, gz, tid, ctaid) in no particular order."""
    for cz in range(grid[2]):
        for cy in range(grid[1]):
            for cx in range(grid[0]):
                for tz in range(block[2]):
                    for ty in range(block[1]):
                        for tx in range(block[0]):
                            yield ((cx * block[0] + tx, cy * block[1] + ty, cz * block[2] + tz),
                                   (tx, ty, tz), (cx, cy, cz))


def linear(g, grid, block):
    w, h = grid[0] * block[0], grid[1] * block[1]
    return g[0] + g[1] * w + g[2] * w * h


@test
def launch_gid_2d_row_major():
    hasm = """// grid 2x2 of 4x4 blocks over an 8x8 image: %gid is the row-major pixel index gid.y * 8 + gid.x (the lane at global (4, 0) has %gid 4), so out[%gid] = gid.y * 1000 + gid.x fills the image in order
.kernel launch_gid_2d_row_major
.param .buf.u32 out .rw
.param .buf.u32 check .rw
    mov.u32 %i, %gid;
    mul.u32 %v, %gid.y, 1000;
    add.u32 %v, %v, %gid.x;
    st.u32 out[%i], %v;
    mul.u32 %w, %nctaid.x, %ntid.x;
    mad.u32 %rm, %gid.y, %w, %gid.x;
    setp.eq.u32 %same, %rm, %i;
    selp.u32 %ok, 1, 0, %same;
    st.u32 check[%i], %ok;
"""
    grid, block = [2, 2, 1], [4, 4, 1]
    T = Test("launch_gid_2d_row_major", "%gid is row-major over a 2D launch", hasm, grid, block)
    n = 64
    T.fill("out", 0, n)
    T.fill("check", 7, n)
    T.out("out", [(k // 8) * 1000 + k % 8 for k in range(n)])
    T.out("check", [1] * n)
    return T


@test
def launch_gid_3d_volume():
    hasm = """// a 3D launch (grid 2x3x2, blocks 4x2x3) covering an 8x6x6 volume exactly: %gid is the row-major index (z * 6 + y) * 8 + x, so vol[%gid] = x[%gid] * 2 + z * 10000 + y * 100 + x
.kernel launch_gid_3d_volume
.param .buf.i32 x
.param .buf.i32 vol .rw
    mov.u32 %i, %gid;
    ld.i32 %v, x[%i];
    add.i32 %v, %v, %v;
    cvt.i32.u32 %gz, %gid.z;
    cvt.i32.u32 %gy, %gid.y;
    cvt.i32.u32 %gx, %gid.x;
    mad.i32 %v, %gz, 10000, %v;
    mad.i32 %v, %gy, 100, %v;
    add.i32 %v, %v, %gx;
    st.i32 vol[%i], %v;
"""
    grid, block = [2, 3, 2], [4, 2, 3]
    T = Test("launch_gid_3d_volume", "%gid is row-major over a 3D launch", hasm, grid, block)
    W, H, D = 8, 6, 6
    n = W * H * D
    x = rand_ints(T.rng, "i32", n, -1000, 1000)
    T.buf("x", x)
    T.fill("vol", 0, n)
    out = [0] * n
    for k in range(n):
        gx, gy, gz = k % W, (k // W) % H, k // (W * H)
        out[k] = wrap(x[k] * 2 + gz * 10000 + gy * 100 + gx, "i32")
    T.out("vol", out)
    return T


@test
def launch_map_2d_guarded():
    hasm = """// an element-wise map (guard, loads and a store at %gid) launched as a 2D grid (3x2 blocks of 16x4 lanes = 384 lanes) over n = 300 elements: y = x * a + 1 for every i < n, the rest untouched
.kernel launch_map_2d_guarded
.param .f32 a
.param .buf.f32 x
.param .buf.f32 y .rw
.param .u32 n
    setp.ge.u32 %p, %gid, n;
@%p exit;
    ld.f32 %v, x[%gid];
    mul.f32 %v, %v, a;
    add.f32 %v, %v, 1.0;
    st.f32 y[%gid], %v;
"""
    grid, block = [3, 2, 1], [16, 4, 1]
    T = Test("launch_map_2d_guarded", "element-wise map with a 2D launch", hasm, grid, block)
    total, n = 384, 300
    a = T.scalar("a", 1.5)
    T.scalar("n", n)
    x = rand_uniform(T.rng, "f32", total, -100, 100)
    T.buf("x", x)
    T.fill("y", -5.0, total)
    ys = fop("f32", lambda v, s: v * s + 1.0, x[:n], [a] * n)
    T.out("y", ys + [-5.0] * (total - n))
    return T


@test
def launch_2d_neighbour_difference():
    hasm = """// forward differences over a 2D launch (2x3 blocks of 8x8 lanes, 384 lanes): d[%gid] = x[%gid + 1] - x[%gid] for %gid + 1 < n; lanes read their own and the next element, which belongs to another lane (and block) wherever gid.x is a block edge
.kernel launch_2d_neighbour_difference
.param .buf.i32 x
.param .buf.i32 d .rw
.param .u32 n
    mov.u32 %i, %gid;
    add.u32 %j, %i, 1;
    setp.ge.u32 %p, %j, n;
@%p exit;
    ld.i32 %a, x[%i];
    ld.i32 %b, x[%j];
    sub.i32 %c, %b, %a;
    st.i32 d[%i], %c;
"""
    grid, block = [2, 3, 1], [8, 8, 1]
    T = Test("launch_2d_neighbour_difference", "neighbour reads with a 2D launch", hasm, grid, block)
    n = 384
    x = rand_ints(T.rng, "i32", n, -(1 << 20), 1 << 20)
    T.buf("x", x)
    T.scalar("n", n)
    T.fill("d", 0, n)
    T.out("d", [wrap(x[i + 1] - x[i], "i32") for i in range(n - 1)] + [0])
    return T


@test
def launch_2d_tile_transpose():
    hasm = """// a tiled transpose with 8x8 blocks and a padded .shared tile (grid 3x2 over a 24-wide, 16-high matrix): lanes load a row of the tile, wait at the barrier, and store a column, so every store moves a value another lane loaded
.kernel launch_2d_tile_transpose
.param .buf.f32 m
.param .buf.f32 mt .rw
.shared .f32 tile[72]
    mul.u32 %w, %nctaid.x, 8;
    mul.u32 %h, %nctaid.y, 8;
    mad.u32 %src, %gid.y, %w, %gid.x;
    ld.f32 %v, m[%src];
    mad.u32 %t, %tid.y, 9, %tid.x;
    st.f32 tile[%t], %v;
    barrier;
    mad.u32 %t2, %tid.x, 9, %tid.y;
    ld.f32 %u, tile[%t2];
    mad.u32 %row, %ctaid.x, 8, %tid.y;
    mad.u32 %col, %ctaid.y, 8, %tid.x;
    mad.u32 %dst, %row, %h, %col;
    st.f32 mt[%dst], %u;
"""
    grid, block = [3, 2, 1], [8, 8, 1]
    T = Test("launch_2d_tile_transpose", "tiled transpose through .shared with 2D blocks", hasm, grid, block)
    W, H = 24, 16
    mat = rand_uniform(T.rng, "f32", W * H, -10, 10)
    T.buf("m", mat)
    T.fill("mt", 0.0, W * H)
    T.out("mt", [mat[r * W + c] for c in range(W) for r in range(H)])
    return T


@test
def launch_2d_block_reduce():
    hasm = """// a tree sum per block with 2D blocks (8x4 lanes; grid 3x2): the lane index in the block is tid.y * ntid.x + tid.x, the block index ctaid.y * nctaid.x + ctaid.x; each block sums the elements at its lanes' %gid
.kernel launch_2d_block_reduce
.param .buf.u32 x
.param .buf.u32 sums .rw
.shared .u32 part[32]
    mad.u32 %l, %tid.y, %ntid.x, %tid.x;
    ld.u32 %v, x[%gid];
    st.u32 part[%l], %v;
    barrier;
    mov.u32 %s, 16;
STEP:
    setp.lt.u32 %low, %l, %s;
@!%low bra SKIP;
    add.u32 %o, %l, %s;
    ld.u32 %a, part[%l];
    ld.u32 %b, part[%o];
    add.u32 %a, %a, %b;
    st.u32 part[%l], %a;
SKIP:
    barrier;
    shr.u32 %s, %s, 1;
    setp.ne.u32 %more, %s, 0;
@%more bra STEP;
    setp.ne.u32 %notlead, %l, 0;
@%notlead exit;
    mad.u32 %blk, %ctaid.y, %nctaid.x, %ctaid.x;
    ld.u32 %total, part[0];
    st.u32 sums[%blk], %total;
"""
    grid, block = [3, 2, 1], [8, 4, 1]
    T = Test("launch_2d_block_reduce", "per-block tree sum with 2D blocks", hasm, grid, block)
    n = 6 * 32
    x = rand_ints(T.rng, "u32", n, 0, 1 << 24)
    T.buf("x", x)
    T.fill("sums", 0, 6)
    sums = [0] * 6
    for g, _, c in coords(grid, block):
        sums[c[1] * grid[0] + c[0]] += x[linear(g, grid, block)]
    T.out("sums", [wrap(s, "u32") for s in sums])
    return T


@test
def launch_2d_grid_stride():
    hasm = """// a grid-stride loop in a 2D launch (2x2 blocks of 8x2 lanes, 64 lanes) over n = 1000 elements: each lane starts at %gid and steps by the launch's lane count nctaid.x * ntid.x * nctaid.y * ntid.y
.kernel launch_2d_grid_stride
.param .buf.u32 x
.param .buf.u32 y .rw
.param .u32 n
    mul.u32 %w, %nctaid.x, %ntid.x;
    mul.u32 %h, %nctaid.y, %ntid.y;
    mul.u32 %stride, %w, %h;
    mov.u32 %i, %gid;
NEXT:
    setp.ge.u32 %done, %i, n;
@%done exit;
    ld.u32 %v, x[%i];
    mad.u32 %v, %v, 3, %gid;
    st.u32 y[%i], %v;
    add.u32 %i, %i, %stride;
    bra NEXT;
"""
    grid, block = [2, 2, 1], [8, 2, 1]
    T = Test("launch_2d_grid_stride", "grid-stride loop with a 2D launch", hasm, grid, block)
    n, total = 1000, 64
    x = rand_ints(T.rng, "u32", n, 0, 1 << 20)
    T.buf("x", x)
    T.scalar("n", n)
    T.fill("y", 0, n)
    T.out("y", [wrap(x[i] * 3 + i % total, "u32") for i in range(n)])
    return T


@test
def launch_3d_atomic_counts():
    hasm = """// atomics in a 3D launch (grid 2x2x3, blocks 2x3x2; a 4x6x6 volume): every lane adds 1 to the count of its z plane, of its y row and of its x column, and adds %gid to a checksum
.kernel launch_3d_atomic_counts
.param .buf.u32 counts .rw
.param .buf.u32 checksum .rw
    atom.add.u32 %o, counts[%gid.z], 1;
    add.u32 %ry, %gid.y, 6;
    atom.add.u32 %o, counts[%ry], 1;
    add.u32 %rx, %gid.x, 12;
    atom.add.u32 %o, counts[%rx], 1;
    atom.add.u32 %c, checksum[0], %gid;
"""
    grid, block = [2, 2, 3], [2, 3, 2]
    T = Test("launch_3d_atomic_counts", "atomic counters indexed by %gid.x|y|z in a 3D launch", hasm, grid, block)
    W, H, D = 4, 6, 6
    T.fill("counts", 0, 16)
    T.fill("checksum", 0, 1)
    counts = [0] * 16
    for g, _, _ in coords(grid, block):
        counts[g[2]] += 1
        counts[6 + g[1]] += 1
        counts[12 + g[0]] += 1
    T.out("counts", counts)
    total = W * H * D
    T.out("checksum", [total * (total - 1) // 2])
    return T


@test
def launch_2d_exited_lanes_skip_barrier():
    hasm = """// lanes that exit are not waited for at a barrier: in each 8x4 block the lanes of row tid.y = 3 exit first; the others store to .shared, meet at the barrier and read the value of the lane mirrored across the block's first three rows
.kernel launch_2d_exited_lanes_skip_barrier
.param .buf.u32 out .rw
.shared .u32 slot[32]
    setp.eq.u32 %last, %tid.y, 3;
@%last exit;
    mad.u32 %l, %tid.y, 8, %tid.x;
    mul.u32 %v, %gid, 10;
    st.u32 slot[%l], %v;
    barrier;
    sub.u32 %mx, 7, %tid.x;
    sub.u32 %my, 2, %tid.y;
    mad.u32 %m, %my, 8, %mx;
    ld.u32 %u, slot[%m];
    st.u32 out[%gid], %u;
"""
    grid, block = [2, 2, 1], [8, 4, 1]
    T = Test("launch_2d_exited_lanes_skip_barrier", "exited lanes are not waited for at a barrier", hasm, grid, block)
    n = 128
    T.fill("out", 5, n)
    out = [5] * n
    for g, t, c in coords(grid, block):
        if t[1] == 3:
            continue
        mx, my = 7 - t[0], 2 - t[1]
        mirror = (c[0] * 8 + mx, c[1] * 4 + my, 0)
        out[linear(g, grid, block)] = linear(mirror, grid, block) * 10
    T.out("out", out)
    return T
