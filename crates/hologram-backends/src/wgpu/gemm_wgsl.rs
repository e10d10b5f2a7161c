//! The WGSL of the wgpu backend's f32 GEMM: register-blocked, tiled through workgroup memory
//! with double buffering, with `vec4` global loads and stores where the operands are 16-byte
//! aligned. Pure text generation (always built, validated with naga in tests); the launch is in
//! `gemm.rs`.
//!
//! A workgroup computes a `bm × bn` tile of one C matrix; each of its `(bm/tm)·(bn/tn)` lanes
//! holds a `tm × tn` block of accumulators in registers. The shared dimension advances `bk` at
//! a time: while the lanes multiply the tile in one half of workgroup memory, they load the
//! next tile from global memory into registers and store it into the other half, so one
//! barrier per step suffices. A lane's rows and columns are interleaved in groups of four
//! (`group · 4·lanes + lane · 4`), so its reads of workgroup memory and its writes of C are
//! contiguous across neighbouring lanes.
//!
//! Every loop over the tile (loads, the `bk` products, the epilogue) is unrolled here, in Rust:
//! accumulators are plain variables the driver keeps in registers, and Mesa's lavapipe, which
//! stops each shader invocation after 65535 loop iterations in all, counts only the loop over
//! `k` and the loop over the batch. The shader notices when lavapipe cut either loop short and
//! raises the error word (the launch turns it into an error value, never a wrong result).

use std::fmt::Write;

/// A tile configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tile {
    /// Rows of C per workgroup.
    pub bm: u32,
    /// Columns of C per workgroup.
    pub bn: u32,
    /// Step of the shared dimension (a multiple of 4).
    pub bk: u32,
    /// Rows per lane (a multiple of 4).
    pub tm: u32,
    /// Columns per lane (a multiple of 4).
    pub tn: u32,
}

/// 128×128 tiles, 8×8 per lane, 256 lanes: 64 accumulators per lane and 16 KiB of workgroup
/// memory (double-buffered 8-deep slices of A and B), the classic shape that keeps a large GPU's
/// FMA units fed from registers (each workgroup-memory load feeds 8 FMAs per lane).
pub const LARGE: Tile = Tile {
    bm: 128,
    bn: 128,
    bk: 8,
    tm: 8,
    tn: 8,
};

/// 64×64 tiles, 4×4 per lane, 256 lanes, 16-deep slices (16 KiB): four times as many
/// workgroups as [`LARGE`] for matrices too small to fill a GPU with 128×128 tiles.
pub const SMALL: Tile = Tile {
    bm: 64,
    bn: 64,
    bk: 16,
    tm: 4,
    tn: 4,
};

impl Tile {
    /// Lanes along x (columns of C).
    pub fn lanes_x(&self) -> u32 {
        self.bn / self.tn
    }

    /// Lanes along y (rows of C).
    pub fn lanes_y(&self) -> u32 {
        self.bm / self.tm
    }

    /// Lanes per workgroup.
    pub fn lanes(&self) -> u32 {
        self.lanes_x() * self.lanes_y()
    }

    /// Bytes of workgroup memory: two `bk`-deep slices of A and of B.
    pub fn shared_bytes(&self) -> u32 {
        2 * self.bk * (self.bm + self.bn) * 4
    }
}

/// One compiled form of the kernel: the tile, the transposes (compile-time constants, so the
/// loads have no per-element selects) and which operands are read or written as `vec4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Variant {
    /// Tile configuration.
    pub tile: Tile,
    /// A is stored k×m.
    pub trans_a: bool,
    /// B is stored n×k.
    pub trans_b: bool,
    /// A's offset, leading dimension and batch stride are multiples of 4 elements.
    pub vec_a: bool,
    /// As `vec_a`, for B.
    pub vec_b: bool,
    /// As `vec_a`, for C.
    pub vec_c: bool,
    /// A and B are bound read-only (neither shares a buffer with C): drivers may then read
    /// them through their read-only caches.
    pub read_only_ab: bool,
}

/// Binding of the error word (`err[0]` is set when the driver cut a loop short).
pub const ERR_BINDING: u32 = 0;
/// Binding of the uniform parameters ([`Params`]).
pub const PARAMS_BINDING: u32 = 1;
/// Bindings of A, B and C.
pub const A_BINDING: u32 = 2;
/// Binding of B.
pub const B_BINDING: u32 = 3;
/// Binding of C.
pub const C_BINDING: u32 = 4;

/// The uniform parameters, in the order of the WGSL struct (16 words).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Params {
    /// Element offset of A in its buffer.
    pub off_a: u32,
    /// Element offset of B in its buffer.
    pub off_b: u32,
    /// Element offset of C in its buffer.
    pub off_c: u32,
    /// Rows of C.
    pub m: u32,
    /// Columns of C.
    pub n: u32,
    /// The shared dimension.
    pub k: u32,
    /// Row stride of A as stored.
    pub lda: u32,
    /// Row stride of B as stored.
    pub ldb: u32,
    /// Row stride of C.
    pub ldc: u32,
    /// Elements between consecutive A matrices.
    pub stride_a: u32,
    /// Elements between consecutive B matrices.
    pub stride_b: u32,
    /// Elements between consecutive C matrices.
    pub stride_c: u32,
    /// Number of matrices.
    pub batch: u32,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of the old C (C is not read when 0).
    pub beta: f32,
}

impl Params {
    /// The 16 words of the uniform buffer.
    pub fn words(&self) -> [u32; 16] {
        [
            self.off_a,
            self.off_b,
            self.off_c,
            self.m,
            self.n,
            self.k,
            self.lda,
            self.ldb,
            self.ldc,
            self.stride_a,
            self.stride_b,
            self.stride_c,
            self.batch,
            self.alpha.to_bits(),
            self.beta.to_bits(),
            0,
        ]
    }
}

/// A loader of four consecutive stored elements of one operand, zero outside the matrix.
fn loader(name: &str, vec: bool) -> String {
    let body = if vec {
        format!(
            "    if srow < srows && scol < scols {{
        let x = {name}[(base + srow * ld + scol) / 4u];
        v = select(vec4<f32>(0.0), x, vec4<u32>(scol) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(scols));
    }}\n"
        )
    } else {
        let mut s = "    if srow < srows {\n        let i = base + srow * ld + scol;\n".to_string();
        for j in 0..4 {
            let _ = writeln!(
                s,
                "        if scol + {j}u < scols {{ v[{j}] = {name}[i + {j}u]; }}"
            );
        }
        s + "    }\n"
    };
    format!(
        "fn load_{name}(base: u32, srow: u32, scol: u32, srows: u32, scols: u32, ld: u32) -> vec4<f32> {{
    var v = vec4<f32>(0.0);
{body}    return v;
}}\n"
    )
}

/// The store of four consecutive elements of a C row: `alpha · acc + beta · C` (C unread when
/// beta is 0), only the elements inside the matrix.
fn storer(vec: bool) -> String {
    let mut s = String::from(
        "fn store_c(base: u32, row: u32, col: u32, acc: vec4<f32>) {
    if row < p.m && col < p.n {
        let i = base + row * p.ldc + col;
        let r = acc * p.alpha;\n",
    );
    if vec {
        s.push_str(
            "        if col + 3u < p.n {
            if p.beta != 0.0 {
                c[i / 4u] = fma(vec4<f32>(p.beta), c[i / 4u], r);
            } else {
                c[i / 4u] = r;
            }
        } else {\n",
        );
        for j in 0..4 {
            let _ = writeln!(
                s,
                "            if col + {j}u < p.n {{
                if p.beta != 0.0 {{ c[i / 4u][{j}] = fma(p.beta, c[i / 4u][{j}], r[{j}]); }} else {{ c[i / 4u][{j}] = r[{j}]; }}
            }}"
            );
        }
        s.push_str("        }\n");
    } else {
        for j in 0..4 {
            let _ = writeln!(
                s,
                "        if col + {j}u < p.n {{
            if p.beta != 0.0 {{ c[i + {j}u] = fma(p.beta, c[i + {j}u], r[{j}]); }} else {{ c[i + {j}u] = r[{j}]; }}
        }}"
            );
        }
    }
    s.push_str("    }\n}\n");
    s
}

/// The WGSL of a variant.
pub fn wgsl(v: &Variant) -> String {
    let t = v.tile;
    let (lx, ly, lanes) = (t.lanes_x(), t.lanes_y(), t.lanes());
    let (bm4, bn4, bk4) = (t.bm / 4, t.bn / 4, t.bk / 4);
    // vec4 loads per lane for each operand's tile.
    let loads_a = t.bm * t.bk / 4 / lanes;
    let loads_b = t.bn * t.bk / 4 / lanes;
    let elem = |vec: bool| if vec { "vec4<f32>" } else { "f32" };
    let mut s = String::new();
    let _ = write!(
        s,
        "// hologram wgpu GEMM f32: tile {bm}x{bn}x{bk}, {tm}x{tn} per lane, ta={ta} tb={tb} vec a/b/c={va}/{vb}/{vc} a/b {ab_access}
struct Params {{
    off_a: u32, off_b: u32, off_c: u32, m: u32,
    n: u32, k: u32, lda: u32, ldb: u32,
    ldc: u32, sa: u32, sb: u32, sc: u32,
    batch: u32, alpha: f32, beta: f32, pad: u32,
}}
@group(0) @binding({ERR_BINDING}) var<storage, read_write> err: array<u32>;
@group(0) @binding({PARAMS_BINDING}) var<uniform> p: Params;
@group(0) @binding({A_BINDING}) var<storage, {ab_access}> a: array<{ea}>;
@group(0) @binding({B_BINDING}) var<storage, {ab_access}> b: array<{eb}>;
@group(0) @binding({C_BINDING}) var<storage, read_write> c: array<{ec}>;
// [slice][k][rows / 4] and [slice][k][cols / 4]: two bk-deep slices each.
var<workgroup> tile_a: array<vec4<f32>, {sa}>;
var<workgroup> tile_b: array<vec4<f32>, {sb}>;
",
        bm = t.bm,
        bn = t.bn,
        bk = t.bk,
        tm = t.tm,
        tn = t.tn,
        ta = v.trans_a,
        tb = v.trans_b,
        va = v.vec_a,
        vb = v.vec_b,
        vc = v.vec_c,
        ea = elem(v.vec_a),
        eb = elem(v.vec_b),
        ec = elem(v.vec_c),
        sa = 2 * t.bk * bm4,
        sb = 2 * t.bk * bn4,
        ab_access = if v.read_only_ab { "read" } else { "read_write" },
    );
    s.push_str(&loader("a", v.vec_a));
    s.push_str(&loader("b", v.vec_b));
    s.push_str(&storer(v.vec_c));

    // Global loads of the slice at k0 into registers ra*/rb*.
    let mut load = String::new();
    for l in 0..loads_a {
        let _ = writeln!(load, "        {{ let i = tid + {}u;", l * lanes);
        if v.trans_a {
            // Stored k×m, contiguous along m.
            let _ = writeln!(
                load,
                "          ra{l} = load_a(abase, k0 + i / {bm4}u, row0 + (i % {bm4}u) * 4u, p.k, p.m, p.lda); }}"
            );
        } else {
            let _ = writeln!(
                load,
                "          ra{l} = load_a(abase, row0 + i / {bk4}u, k0 + (i % {bk4}u) * 4u, p.m, p.k, p.lda); }}"
            );
        }
    }
    for l in 0..loads_b {
        let _ = writeln!(load, "        {{ let i = tid + {}u;", l * lanes);
        if v.trans_b {
            // Stored n×k, contiguous along k.
            let _ = writeln!(
                load,
                "          rb{l} = load_b(bbase, col0 + i / {bk4}u, k0 + (i % {bk4}u) * 4u, p.n, p.k, p.ldb); }}"
            );
        } else {
            let _ = writeln!(
                load,
                "          rb{l} = load_b(bbase, k0 + i / {bn4}u, col0 + (i % {bn4}u) * 4u, p.k, p.n, p.ldb); }}"
            );
        }
    }
    // Stores of the registers into the slice starting at k-row `slice`.
    let mut store = String::new();
    for l in 0..loads_a {
        let _ = writeln!(store, "        {{ let i = tid + {}u;", l * lanes);
        if v.trans_a {
            let _ = writeln!(
                store,
                "          tile_a[(slice + i / {bm4}u) * {bm4}u + i % {bm4}u] = ra{l}; }}"
            );
        } else {
            let _ = writeln!(
                store,
                "          let r = i / {bk4}u; let q = (i % {bk4}u) * 4u;"
            );
            for j in 0..4 {
                let _ = writeln!(
                    store,
                    "          tile_a[(slice + q + {j}u) * {bm4}u + r / 4u][r % 4u] = ra{l}[{j}];"
                );
            }
            store.push_str("        }\n");
        }
    }
    for l in 0..loads_b {
        let _ = writeln!(store, "        {{ let i = tid + {}u;", l * lanes);
        if v.trans_b {
            let _ = writeln!(
                store,
                "          let r = i / {bk4}u; let q = (i % {bk4}u) * 4u;"
            );
            for j in 0..4 {
                let _ = writeln!(
                    store,
                    "          tile_b[(slice + q + {j}u) * {bn4}u + r / 4u][r % 4u] = rb{l}[{j}];"
                );
            }
            store.push_str("        }\n");
        } else {
            let _ = writeln!(
                store,
                "          tile_b[(slice + i / {bn4}u) * {bn4}u + i % {bn4}u] = rb{l}; }}"
            );
        }
    }
    // The products of one slice: for each k, tm/4 vec4 of A and tn/4 vec4 of B from workgroup
    // memory, tm·tn/4 vec4 FMAs.
    let (ga, gb) = (t.tm / 4, t.tn / 4);
    let mut products = String::new();
    for kk in 0..t.bk {
        products.push_str("        {\n");
        for g in 0..ga {
            let _ = writeln!(
                products,
                "          let a{g} = tile_a[(cur + {kk}u) * {bm4}u + {}u + ty];",
                g * ly
            );
        }
        for w in 0..gb {
            let _ = writeln!(
                products,
                "          let b{w} = tile_b[(cur + {kk}u) * {bn4}u + {}u + tx];",
                w * lx
            );
        }
        for g in 0..ga {
            for r in 0..4 {
                for w in 0..gb {
                    let acc = (g * 4 + r) * gb + w;
                    let _ = writeln!(
                        products,
                        "          acc{acc} = fma(vec4<f32>(a{g}[{r}]), b{w}, acc{acc});"
                    );
                }
            }
        }
        products.push_str("        }\n");
    }
    let mut decls = String::new();
    for i in 0..t.tm * gb {
        let _ = writeln!(decls, "    var acc{i} = vec4<f32>(0.0);");
    }
    for l in 0..loads_a {
        let _ = writeln!(decls, "    var ra{l} = vec4<f32>(0.0);");
    }
    for l in 0..loads_b {
        let _ = writeln!(decls, "    var rb{l} = vec4<f32>(0.0);");
    }
    let mut epilogue = String::new();
    for g in 0..ga {
        for r in 0..4 {
            for w in 0..gb {
                let _ = writeln!(
                    epilogue,
                    "    store_c(cbase, row0 + {}u + ty * 4u, col0 + {}u + tx * 4u, acc{});",
                    g * 4 * ly + r,
                    w * 4 * lx,
                    (g * 4 + r) * gb + w
                );
            }
        }
    }
    let _ = write!(
        s,
        "@compute @workgroup_size({lx}, {ly}, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) tid: u32) {{
  let tx = tid % {lx}u;
  let ty = tid / {lx}u;
  let row0 = wid.y * {bm}u;
  let col0 = wid.x * {bn}u;
  let steps = (p.k + {bk_1}u) / {bk}u;
  var cut = false;
  // Batches beyond the dispatch's z extent are walked by the same workgroups.
  var z = wid.z;
  loop {{
    if z >= p.batch {{ break; }}
    let abase = p.off_a + z * p.sa;
    let bbase = p.off_b + z * p.sb;
    let cbase = p.off_c + z * p.sc;
{decls}    if steps > 0u {{
        let k0 = 0u;
{load}        let slice = 0u;
{store}    }}
    workgroupBarrier();
    var step = 0u;
    loop {{
      if step >= steps {{ break; }}
      let cur = (step % 2u) * {bk}u;
      let more = step + 1u < steps;
      if more {{
        let k0 = (step + 1u) * {bk}u;
{load}      }}
{products}      if more {{
        let slice = {bk}u - cur;
{store}      }}
      // One barrier per step: the next step reads the slice just stored, and its stores go
      // to the slice every lane has finished reading.
      workgroupBarrier();
      step += 1u;
    }}
    // Only a driver that cuts loops short (lavapipe) leaves the loop early.
    if step < steps {{ cut = true; }}
{epilogue}    z += nwg.z;
  }}
  if z < p.batch {{ cut = true; }}
  if cut {{ err[0] = 1u; }}
}}
",
        bm = t.bm,
        bn = t.bn,
        bk = t.bk,
        bk_1 = t.bk - 1,
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validate(wgsl: &str) -> Result<(), String> {
        let module = naga::front::wgsl::parse_str(wgsl).map_err(|e| e.emit_to_string(wgsl))?;
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::default(),
        )
        .validate(&module)
        .map(|_| ())
        .map_err(|e| e.emit_to_string(wgsl))
    }

    #[test]
    fn every_variant_validates() {
        for tile in [LARGE, SMALL] {
            assert_eq!(tile.lanes(), 256);
            assert!(tile.shared_bytes() <= 16384, "{tile:?}");
            for bits in 0..64u32 {
                let v = Variant {
                    tile,
                    trans_a: bits & 1 != 0,
                    trans_b: bits & 2 != 0,
                    vec_a: bits & 4 != 0,
                    vec_b: bits & 8 != 0,
                    vec_c: bits & 16 != 0,
                    read_only_ab: bits & 32 != 0,
                };
                let text = wgsl(&v);
                validate(&text).unwrap_or_else(|e| panic!("{v:?}: {e}\n{text}"));
            }
        }
    }
}
