//! Library templates for fused row kernels over the last, contiguous axis of a `[rows, cols]`
//! view: softmax, log-softmax and their backward ops, each one program that writes its result
//! once. Rows of up to [`MAX_RESIDENT`] elements per lane are read once and kept in registers;
//! longer rows are read once per pass (the later passes mostly hit the cache).
//!
//! A block of [`ROW_BLOCK`] lanes handles `ROW_BLOCK / G` rows, `G` lanes per row (a power of
//! two from 32 to [`ROW_BLOCK`], see [`group_lanes`]). Lane `l` of a row's group visits elements
//! `l, l + G, l + 2G, ...` in order, in a loop unrolled [`ROW_UNROLL`] times whose loads are all
//! issued before they are used; the group combines its lanes' partial results through shared
//! memory with a fixed four-way tree, so results do not depend on timing. f16 and bf16 compute in
//! f32, f64 in f64.

use hologram_isa::Type;

use super::reduce_templates::Combine;

/// Lanes per block of the row kernels.
pub const ROW_BLOCK: u32 = 256;

/// Elements per lane that the unrolled loop of a row pass loads together.
pub const ROW_UNROLL: u32 = 8;

/// What a row kernel computes, per row `x` (forward) or per rows of the output `y` and its
/// gradient `g` (backward).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowOp {
    /// `exp(x - max x) / Σ exp(x - max x)`.
    Softmax,
    /// `x - max x - log Σ exp(x - max x)`.
    LogSoftmax,
    /// `y · (g - Σ g·y)`.
    SoftmaxBackward,
    /// `g - exp(y) · Σ g`.
    LogSoftmaxBackward,
}

impl RowOp {
    /// True for the backward ops (two inputs, `y` then `g`).
    pub fn is_backward(self) -> bool {
        matches!(self, RowOp::SoftmaxBackward | RowOp::LogSoftmaxBackward)
    }
}

/// Lanes per row for rows of `cols` elements: enough that every lane has about
/// [`ROW_UNROLL`] elements, at least 32 and at most [`ROW_BLOCK`].
pub fn group_lanes(cols: usize) -> u32 {
    let per = (cols / ROW_UNROLL as usize).max(1);
    let pow = 1usize << (usize::BITS - 1 - per.leading_zeros());
    pow.clamp(32, ROW_BLOCK as usize) as u32
}

/// The compute type of a storage type.
pub fn row_acc(storage: Type) -> Type {
    if storage == Type::F64 {
        Type::F64
    } else {
        Type::F32
    }
}

/// Text generation state: the kernel so far and a counter for labels.
struct Gen {
    text: String,
    g: u32,
    storage: Type,
    acc: Type,
    labels: u32,
    /// Elements per lane kept in registers (0: every pass loads its elements).
    resident: u32,
    /// The resident elements are loaded.
    loaded: bool,
}

impl Gen {
    fn label(&mut self, what: &str) -> String {
        self.labels += 1;
        format!("{what}{}", self.labels)
    }

    /// A strided pass over the row: for every element, the inputs `(array, offset param)` are
    /// loaded into `%v<i>_<k>` (converted to the compute type) and `body(k)` runs, where `%e<k>`
    /// is the element's index in the dense output. The unrolled part loads all its elements
    /// first, then runs the bodies in element order.
    fn pass(&mut self, inputs: &[(&str, &str)], body: &dyn Fn(usize) -> String) {
        if self.resident > 0 {
            return self.resident_pass(inputs, body);
        }
        let (g, u) = (self.g, ROW_UNROLL as usize);
        let (unrolled, tail, done) = (self.label("U"), self.label("T"), self.label("D"));
        let (st, acc) = (self.storage, self.acc);
        let loads = |count: usize| {
            let mut s = String::new();
            for k in 0..count {
                if k == 0 {
                    s += "    add.u32 %e0, %rowbase, %pos;\n";
                } else {
                    s += &format!("    add.u32 %e{k}, %e{}, {g};\n", k - 1);
                }
            }
            for (i, (_, off)) in inputs.iter().enumerate() {
                for k in 0..count {
                    s += &format!("    add.u32 %a{i}_{k}, %e{k}, {off};\n");
                }
            }
            for (i, (arr, _)) in inputs.iter().enumerate() {
                for k in 0..count {
                    let dst = if st == acc {
                        format!("%v{i}_{k}")
                    } else {
                        format!("%w{i}_{k}")
                    };
                    s += &format!("    ld.{st} {dst}, {arr}[%a{i}_{k}];\n");
                }
            }
            if st != acc {
                for i in 0..inputs.len() {
                    for k in 0..count {
                        s += &format!("    cvt.{acc}.{st} %v{i}_{k}, %w{i}_{k};\n");
                    }
                }
            }
            for k in 0..count {
                s += &body(k);
            }
            s
        };
        self.text += &format!(
            "    mov.u32 %pos, %l;
{unrolled}:
    add.u32 %far, %pos, {far};
    setp.ge.u32 %rest, %far, %len;
@%rest bra {tail};
{body_u}    add.u32 %pos, %pos, {step};
    bra {unrolled};
{tail}:
    setp.ge.u32 %end, %pos, %len;
@%end bra {done};
{body_1}    add.u32 %pos, %pos, {g};
    bra {tail};
{done}:
",
            far = (ROW_UNROLL - 1) * g,
            step = ROW_UNROLL * g,
            body_u = loads(u),
            body_1 = loads(1),
        );
    }

    /// A pass over a row whose elements live in registers: the first pass loads lane `l`'s
    /// elements `l + k·G` (`k < resident`) into `%v<i>_<k>`; elements past the row's end read
    /// as -inf for the forward ops (the max and the sum of exponentials ignore them) and as 0
    /// for the backward ops (the sums ignore them), and are not stored. Every pass then runs
    /// `body(k)` for every `k` in order.
    fn resident_pass(&mut self, inputs: &[(&str, &str)], body: &dyn Fn(usize) -> String) {
        let (g, st, acc) = (self.g, self.storage, self.acc);
        let e = self.resident as usize;
        if !self.loaded {
            self.loaded = true;
            let mut s = String::new();
            for k in 0..e {
                s += &format!(
                    "    add.u32 %col{k}, %l, {};\n    setp.lt.u32 %in{k}, %col{k}, %len;\n    add.u32 %e{k}, %rowbase, %col{k};\n",
                    k as u32 * g
                );
            }
            for (i, (_, off)) in inputs.iter().enumerate() {
                for k in 0..e {
                    s += &format!("    add.u32 %a{i}_{k}, %e{k}, {off};\n");
                }
            }
            for (i, (arr, _)) in inputs.iter().enumerate() {
                for k in 0..e {
                    s += &format!("@%in{k} ld.{st} %w{i}_{k}, {arr}[%a{i}_{k}];\n");
                }
            }
            let pad = if inputs.len() == 1 { "-inf" } else { "0.0" };
            for i in 0..inputs.len() {
                for k in 0..e {
                    if st != acc {
                        s += &format!("    cvt.{acc}.{st} %w{i}_{k}c, %w{i}_{k};\n");
                        s += &format!("    selp.{acc} %v{i}_{k}, %w{i}_{k}c, {pad}, %in{k};\n");
                    } else {
                        s += &format!("    selp.{acc} %v{i}_{k}, %w{i}_{k}, {pad}, %in{k};\n");
                    }
                }
            }
            self.text += &s;
        }
        for k in 0..e {
            self.text += &body(k);
        }
    }

    /// Combines every lane's `%<reg>` over its row's group (`c` is Sum or Max) and leaves the
    /// group's result in `%<reg>` of every lane of the group.
    fn group_reduce(&mut self, c: Combine, reg: &str) {
        let acc = self.acc;
        self.text += &format!("    st.{acc} sred[%t], {reg};\n    barrier;\n");
        let mut width = self.g;
        while width > 1 {
            // Lanes below `s` fold the `ways - 1` slots `s`, `2s`, ... above their own.
            let ways = if width % 4 == 0 { 4 } else { 2 };
            let s = width / ways;
            let skip = self.label("S");
            self.text += &format!(
                "    setp.lt.u32 %act, %l, {s};\n@!%act bra {skip};\n    ld.{acc} %mine, sred[%t];\n"
            );
            for w in 1..ways {
                self.text += &format!(
                    "    add.u32 %o, %t, {};\n    ld.{acc} %other{w}, sred[%o];\n",
                    w * s
                );
            }
            for w in 1..ways {
                self.text += &c.fold(acc, "%mine", &format!("%other{w}"), "", "", "t");
            }
            self.text += &format!("    st.{acc} sred[%t], %mine;\n{skip}:\n    barrier;\n");
            width = s;
        }
        // Everyone reads the result before the slots are used again.
        self.text += &format!("    ld.{acc} {reg}, sred[%gbase];\n    barrier;\n");
    }
}

/// Stores `%r<k>` (compute type) as element `%e<k>` of the output `y` (only where `%in<k>`
/// when `guarded`).
fn store(storage: Type, acc: Type, k: usize, guarded: bool) -> String {
    let guard = if guarded {
        format!("@%in{k} ")
    } else {
        "    ".to_string()
    };
    if storage == acc {
        format!("{guard}st.{storage} y[%e{k}], %r{k};\n")
    } else {
        format!("    cvt.{storage}.{acc} %q{k}, %r{k};\n{guard}st.{storage} y[%e{k}], %q{k};\n")
    }
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

/// The fused row kernel for `op` over rows of `storage` elements with `g` lanes per row and
/// `resident` elements per lane in registers (see [`row_plan`]; with `resident > 0` rows must
/// have at most `resident · g` elements).
///
/// Forward parameters: `(x, y, off, rows, cols)`: `y[r*cols + c]` from `x[off + r*cols + c]`.
/// Backward parameters: `(yin, g, y, yoff, goff, rows, cols)`, `y` being the gradient of the
/// input. Launch `ceil(rows / (ROW_BLOCK / g))` blocks of [`ROW_BLOCK`] lanes.
pub fn row_kernel(op: RowOp, storage: Type, g: u32, resident: u32) -> String {
    let acc = row_acc(storage);
    let log_g = g.trailing_zeros();
    let mut head = format!(".kernel rows_{}\n", format!("{op:?}").to_lowercase());
    if op.is_backward() {
        head += &format!(
            ".param .buf.{storage} yin\n.param .buf.{storage} g\n.param .buf.{storage} y .rw\n.param .u32 yoff\n.param .u32 goff\n"
        );
    } else {
        head += &format!(".param .buf.{storage} x\n.param .buf.{storage} y .rw\n.param .u32 off\n");
    }
    head += &format!(
        ".param .u32 rows
.param .u32 cols
.shared .{acc} sred[{ROW_BLOCK}]
    mov.u32 %t, %tid.x;
    shr.u32 %grp, %t, {log_g};
    and.u32 %l, %t, {mask};
    mad.u32 %row, %ctaid.x, {rpb}, %grp;
    setp.lt.u32 %live, %row, rows;
    selp.u32 %len, cols, 0, %live;
    mul.u32 %rowbase, %row, cols;
    shl.u32 %gbase, %grp, {log_g};
",
        mask = g - 1,
        rpb = ROW_BLOCK / g,
    );
    let mut gen = Gen {
        text: head,
        g,
        storage,
        acc,
        labels: 0,
        resident,
        loaded: false,
    };
    let zero = "0.0";
    match op {
        RowOp::Softmax | RowOp::LogSoftmax => {
            let x = [("x", "off")];
            gen.text += &format!("    mov.{acc} %m, -inf;\n");
            gen.pass(&x, &|k| {
                Combine::Max.fold(acc, "%m", &format!("%v0_{k}"), "", "", "")
            });
            gen.group_reduce(Combine::Max, "%m");
            gen.text += &format!("    mov.{acc} %s, {zero};\n");
            gen.pass(&x, &|k| {
                format!(
                    "    sub.{acc} %d{k}, %v0_{k}, %m;\n    exp.{acc} %x{k}, %d{k};\n    add.{acc} %s, %s, %x{k};\n"
                )
            });
            gen.group_reduce(Combine::Sum, "%s");
            if op == RowOp::LogSoftmax {
                gen.text += &format!("    log.{acc} %lse, %s;\n");
            }
            let store = |k: usize| store(storage, acc, k, resident > 0);
            gen.pass(&x, &|k| {
                let value = if op == RowOp::Softmax {
                    format!(
                        "    sub.{acc} %d{k}, %v0_{k}, %m;\n    exp.{acc} %x{k}, %d{k};\n    div.{acc} %r{k}, %x{k}, %s;\n"
                    )
                } else {
                    format!("    sub.{acc} %d{k}, %v0_{k}, %m;\n    sub.{acc} %r{k}, %d{k}, %lse;\n")
                };
                value + &store(k)
            });
        }
        RowOp::SoftmaxBackward | RowOp::LogSoftmaxBackward => {
            let yg = [("yin", "yoff"), ("g", "goff")];
            gen.text += &format!("    mov.{acc} %s, {zero};\n");
            let soft = op == RowOp::SoftmaxBackward;
            gen.pass(&yg, &|k| {
                if soft {
                    format!(
                        "    mul.{acc} %p{k}, %v1_{k}, %v0_{k};\n    add.{acc} %s, %s, %p{k};\n"
                    )
                } else {
                    format!("    add.{acc} %s, %s, %v1_{k};\n")
                }
            });
            gen.group_reduce(Combine::Sum, "%s");
            let store = |k: usize| store(storage, acc, k, resident > 0);
            gen.pass(&yg, &|k| {
                let value = if soft {
                    format!("    sub.{acc} %d{k}, %v1_{k}, %s;\n    mul.{acc} %r{k}, %v0_{k}, %d{k};\n")
                } else {
                    format!(
                        "    exp.{acc} %x{k}, %v0_{k};\n    mul.{acc} %p{k}, %x{k}, %s;\n    sub.{acc} %r{k}, %v1_{k}, %p{k};\n"
                    )
                };
                value + &store(k)
            });
        }
    }
    gen.text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_kernels_assemble() {
        for op in [
            RowOp::Softmax,
            RowOp::LogSoftmax,
            RowOp::SoftmaxBackward,
            RowOp::LogSoftmaxBackward,
        ] {
            for st in [Type::F32, Type::F64, Type::F16, Type::BF16] {
                for g in [32, 64, 128, 256] {
                    for resident in [0, 1, 3, 16] {
                        let k = row_kernel(op, st, g, resident);
                        hologram_isa::assemble(&k)
                            .unwrap_or_else(|e| panic!("{op:?} {st} {g}: {e}\n{k}"));
                    }
                }
            }
        }
    }

    #[test]
    fn groups_give_lanes_about_eight_elements() {
        assert_eq!(group_lanes(1), 32);
        assert_eq!(group_lanes(1024), 128);
        assert_eq!(group_lanes(1500), 128);
        assert_eq!(group_lanes(4096), 256);
        assert_eq!(group_lanes(1 << 20), 256);
        assert_eq!(row_plan(1024), (128, 8));
        assert_eq!(row_plan(1500), (128, 12));
        assert_eq!(row_plan(4096), (256, 16));
        assert_eq!(row_plan(4097), (256, 0));
        assert_eq!(row_plan(5), (32, 1));
    }
}
