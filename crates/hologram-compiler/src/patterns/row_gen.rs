//! The machinery of the fused row kernels over the last, contiguous axis of a `[rows, cols]`
//! view (see [`super::softmax_templates`] and [`super::norm_templates`]): a block of
//! [`ROW_BLOCK`] lanes handles `ROW_BLOCK / G` rows, `G` lanes per row; passes over a row (in
//! registers when the row fits, else loading again), and group reductions through shared memory
//! in two levels of fixed order (two barriers).

use hologram_isa::{CmpOp, Dim, Imm, ProgramBuilder, Special, Type};

use super::reduce_templates::Combine;

/// Lanes per block of the row kernels.
pub const ROW_BLOCK: u32 = 256;

/// Elements per lane that the unrolled loop of a row pass loads together.
pub const ROW_UNROLL: u32 = 8;

/// Lanes per row for rows of `cols` elements: the fewest (a power of two, at least 32, at most
/// [`ROW_BLOCK`]) that keep the row in registers at [`MAX_RESIDENT`] elements per lane. Fewer
/// lanes per row put more rows in a block, so each of the block's barriers serves more rows: on
/// an H100, softmax over rows of 1024 ran at 64 lanes x 16 elements in 23.6 / 64.0 / 209 us at
/// 2^22 / 2^24 / 2^26 elements against 25.4 / 67.9 / 230 us at 128 x 8.
pub fn group_lanes(cols: usize) -> u32 {
    let want = cols.div_ceil(MAX_RESIDENT as usize).max(1);
    want.next_power_of_two().clamp(32, ROW_BLOCK as usize) as u32
}

/// The compute type of a storage type.
pub fn row_acc(storage: Type) -> Type {
    if storage == Type::F64 {
        Type::F64
    } else {
        Type::F32
    }
}

/// Program generation state: the builder and a counter for labels.
pub(crate) struct Gen {
    pub b: ProgramBuilder,
    g: u32,
    storage: Type,
    acc: Type,
    labels: u32,
    /// Elements per lane kept in registers (0: every pass loads its elements).
    resident: u32,
    /// The resident elements are loaded.
    loaded: bool,
    /// Sets of shared reduction arrays declared (`sred`/`spart` and numbered ones: one per
    /// value a group reduction combines at once). `spart` holds [`PARTIALS`] slots per group
    /// of at least 32 lanes.
    shared_sets: usize,
}

/// The body of a pass for element `k`.
pub(crate) type PassBody<'a> = &'a dyn Fn(&mut ProgramBuilder, usize);

impl Gen {
    /// Declares the block-shared reduction array and emits the lane's position: `%t` (lane in
    /// block), `%grp` (row group), `%l` (lane in the row's group), `%row`, `%live` (the row
    /// exists), `%len` (columns it has, 0 when not live), `%rowbase` (its first element) and
    /// `%gbase` (the group's first slot). `rows` and `cols` must be declared parameters.
    pub fn new(mut b: ProgramBuilder, storage: Type, g: u32, resident: u32) -> Gen {
        let acc = row_acc(storage);
        let log_g = g.trailing_zeros();
        b.mov(Type::U32, "%t", Special::Tid(Dim::X));
        b.shr(Type::U32, "%grp", "%t", log_g);
        b.and(Type::U32, "%l", "%t", g - 1);
        b.mad(
            Type::U32,
            "%row",
            Special::Ctaid(Dim::X),
            ROW_BLOCK / g,
            "%grp",
        );
        b.setp(CmpOp::Lt, Type::U32, "%live", "%row", "rows");
        b.selp(Type::U32, "%len", "cols", 0u32, "%live");
        b.mul(Type::U32, "%rowbase", "%row", "cols");
        b.shl(Type::U32, "%gbase", "%grp", log_g);
        Gen {
            b,
            g,
            storage,
            acc,
            labels: 0,
            resident,
            loaded: false,
            shared_sets: 0,
        }
    }

    pub fn label(&mut self, what: &str) -> String {
        self.labels += 1;
        format!("{what}{}", self.labels)
    }

    /// Emits the loads of `count` elements (indexes `%e<k>`, inputs `(array, offset param)`
    /// into `%v<i>_<k>`, converted to the compute type), then `body(k)` for each.
    fn loads(&mut self, inputs: &[(&str, &str)], count: usize, body: PassBody<'_>) {
        let (g, st, acc) = (self.g, self.storage, self.acc);
        let b = &mut self.b;
        for k in 0..count {
            if k == 0 {
                b.add(Type::U32, "%e0", "%rowbase", "%pos");
            } else {
                b.add(
                    Type::U32,
                    &format!("%e{k}"),
                    format!("%e{}", k - 1).as_str(),
                    g,
                );
            }
        }
        for (i, (_, off)) in inputs.iter().enumerate() {
            for k in 0..count {
                b.add(
                    Type::U32,
                    &format!("%a{i}_{k}"),
                    format!("%e{k}").as_str(),
                    *off,
                );
            }
        }
        for (i, (arr, _)) in inputs.iter().enumerate() {
            for k in 0..count {
                let dst = if st == acc {
                    format!("%v{i}_{k}")
                } else {
                    format!("%w{i}_{k}")
                };
                b.ld(st, &dst, arr, format!("%a{i}_{k}").as_str());
            }
        }
        if st != acc {
            for i in 0..inputs.len() {
                for k in 0..count {
                    b.cvt(
                        acc,
                        st,
                        &format!("%v{i}_{k}"),
                        format!("%w{i}_{k}").as_str(),
                    );
                }
            }
        }
        for k in 0..count {
            body(b, k);
        }
    }

    /// A strided pass over the row: for every element, the inputs are loaded and `body(k)`
    /// runs, where `%e<k>` is the element's index in the dense output. The unrolled part loads
    /// all its elements first, then runs the bodies in element order.
    pub fn pass(&mut self, inputs: &[(&str, &str)], body: PassBody<'_>) {
        if self.resident > 0 {
            return self.resident_pass(inputs, body);
        }
        let g = self.g;
        let (unrolled, tail, done) = (self.label("U"), self.label("T"), self.label("D"));
        self.b.mov(Type::U32, "%pos", "%l");
        self.b.label(&unrolled);
        self.b.add(Type::U32, "%far", "%pos", (ROW_UNROLL - 1) * g);
        self.b.setp(CmpOp::Ge, Type::U32, "%rest", "%far", "%len");
        self.b.guard("%rest", false).bra(&tail);
        self.loads(inputs, ROW_UNROLL as usize, body);
        self.b.add(Type::U32, "%pos", "%pos", ROW_UNROLL * g);
        self.b.bra(&unrolled);
        self.b.label(&tail);
        self.b.setp(CmpOp::Ge, Type::U32, "%end", "%pos", "%len");
        self.b.guard("%end", false).bra(&done);
        self.loads(inputs, 1, body);
        self.b.add(Type::U32, "%pos", "%pos", g);
        self.b.bra(&tail);
        self.b.label(&done);
    }

    /// A pass over a row whose elements live in registers: the first pass loads lane `l`'s
    /// elements `l + k·G` (`k < resident`) into `%v<i>_<k>`; elements past the row's end read
    /// as -inf for the forward ops (the max and the sum of exponentials ignore them) and as 0
    /// for the backward ops (the sums ignore them), and are not stored. Every pass then runs
    /// `body(k)` for every `k` in order.
    fn resident_pass(&mut self, inputs: &[(&str, &str)], body: PassBody<'_>) {
        let (g, st, acc) = (self.g, self.storage, self.acc);
        let e = self.resident as usize;
        let b = &mut self.b;
        if !self.loaded {
            self.loaded = true;
            for k in 0..e {
                let col = format!("%col{k}");
                b.add(Type::U32, &col, "%l", k as u32 * g);
                b.setp(
                    CmpOp::Lt,
                    Type::U32,
                    &format!("%in{k}"),
                    col.as_str(),
                    "%len",
                );
                b.add(Type::U32, &format!("%e{k}"), "%rowbase", col.as_str());
            }
            for (i, (_, off)) in inputs.iter().enumerate() {
                for k in 0..e {
                    b.add(
                        Type::U32,
                        &format!("%a{i}_{k}"),
                        format!("%e{k}").as_str(),
                        *off,
                    );
                }
            }
            for (i, (arr, _)) in inputs.iter().enumerate() {
                for k in 0..e {
                    b.guard(&format!("%in{k}"), false).ld(
                        st,
                        &format!("%w{i}_{k}"),
                        arr,
                        format!("%a{i}_{k}").as_str(),
                    );
                }
            }
            let pad = Imm::Float(if inputs.len() == 1 {
                f64::NEG_INFINITY
            } else {
                0.0
            });
            for i in 0..inputs.len() {
                for k in 0..e {
                    let (w, v, cond) = (
                        format!("%w{i}_{k}"),
                        format!("%v{i}_{k}"),
                        format!("%in{k}"),
                    );
                    if st != acc {
                        let wc = format!("{w}c");
                        b.cvt(acc, st, &wc, w.as_str());
                        b.selp(acc, &v, wc.as_str(), pad, cond.as_str());
                    } else {
                        b.selp(acc, &v, w.as_str(), pad, cond.as_str());
                    }
                }
            }
        }
        for k in 0..e {
            body(b, k);
        }
    }

    /// Combines every lane's `%<reg>` over its row's group (`c` is Sum or Max) and leaves the
    /// group's result in `%<reg>` of every lane of the group.
    ///
    /// Two barriers, whatever the group's size: every lane writes its value to `sred`; the
    /// group's first [`PARTIALS`] lanes each fold the slots `l, l + PARTIALS, ...` in order (a
    /// warp reads consecutive slots: no bank conflicts) into `spart`; then every lane folds its
    /// group's partials in order. The fold order is fixed, so results do not depend on timing.
    /// No barrier is needed after the last reads: the next reduction writes `sred` (read before
    /// the second barrier) and only writes `spart` after its own first barrier.
    pub fn group_reduce(&mut self, c: Combine, reg: &str) {
        self.group_reduce_all(c, &[reg]);
    }

    /// [`Gen::group_reduce`] of several registers through the same two barriers (each with
    /// shared arrays of its own), each folded in the order one reduction folds it: a layer
    /// norm's backward pass reduces its two row sums at the cost of one.
    pub fn group_reduce_all(&mut self, c: Combine, regs: &[&str]) {
        let (acc, g) = (self.acc, self.g);
        let parts = PARTIALS.min(g);
        let fan = g / parts;
        // Shared arrays of value `i`: `sred`/`spart` for the first, `sred<i>`/`spart<i>` after.
        let arrays = |i: usize| {
            if i == 0 {
                ("sred".to_string(), "spart".to_string())
            } else {
                (format!("sred{i}"), format!("spart{i}"))
            }
        };
        while self.shared_sets < regs.len() {
            let (red, part) = arrays(self.shared_sets);
            self.b.shared(&red, acc, ROW_BLOCK);
            self.b.shared(&part, acc, ROW_BLOCK / 32 * PARTIALS);
            self.shared_sets += 1;
        }
        for (i, reg) in regs.iter().enumerate() {
            self.b.st(acc, &arrays(i).0, "%t", *reg);
        }
        self.b.barrier();
        let skip = self.label("S");
        let b = &mut self.b;
        b.setp(CmpOp::Lt, Type::U32, "%act", "%l", parts);
        b.guard("%act", true).bra(&skip);
        b.mad(Type::U32, "%pslot", "%grp", parts, "%l");
        for i in 0..regs.len() {
            let (red, part) = arrays(i);
            b.ld(acc, "%mine", &red, "%t");
            for w in 1..fan {
                b.add(Type::U32, "%o", "%t", w * parts);
                b.ld(acc, &format!("%other{w}"), &red, "%o");
            }
            for w in 1..fan {
                c.fold(b, acc, "%mine", &format!("%other{w}"), ("", ""), "t");
            }
            b.st(acc, &part, "%pslot", "%mine");
        }
        b.label(&skip);
        b.barrier();
        b.mul(Type::U32, "%pbase", "%grp", parts);
        for (i, reg) in regs.iter().enumerate() {
            let part = arrays(i).1;
            b.ld(acc, reg, &part, "%pbase");
            for w in 1..parts {
                b.add(Type::U32, "%o", "%pbase", w);
                b.ld(acc, &format!("%other{w}"), &part, "%o");
            }
            for w in 1..parts {
                c.fold(b, acc, reg, &format!("%other{w}"), ("", ""), "t");
            }
        }
    }
}

/// Partial results per row group in the row kernels' group reduction: its first level folds `G / PARTIALS`
/// slots per lane, its second `PARTIALS`.
pub const PARTIALS: u32 = 8;

/// Stores `%r<k>` (compute type) as element `%e<k>` of the output `y` (only where `%in<k>`
/// when `guarded`).
pub(crate) fn store(b: &mut ProgramBuilder, storage: Type, acc: Type, k: usize, guarded: bool) {
    let (r, e) = (format!("%r{k}"), format!("%e{k}"));
    let value = if storage == acc {
        r
    } else {
        let q = format!("%q{k}");
        b.cvt(storage, acc, &q, r.as_str());
        q
    };
    if guarded {
        b.guard(&format!("%in{k}"), false);
    }
    b.st(storage, "y", e.as_str(), value.as_str());
}

/// The most elements per lane a row kernel keeps in registers.
pub const MAX_RESIDENT: u32 = 16;

/// How a row kernel covers rows of `cols` elements: `g` lanes per row ([`group_lanes`]), and
/// `resident` elements per lane held in registers between passes (so the row is read once) when
/// that is at most [`MAX_RESIDENT`], else 0 (every pass reads the row again).
pub fn row_plan(cols: usize) -> (u32, u32) {
    let g = group_lanes(cols);
    let per = cols.div_ceil(g as usize).max(1);
    (
        g,
        if per <= MAX_RESIDENT as usize {
            per as u32
        } else {
            0
        },
    )
}
