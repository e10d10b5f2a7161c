//! Library templates for reductions along one axis of a contiguous `[outer, R, inner]` view.
//!
//! Two kernels: one lane per output element looping over R (inner > 1, or short rows), and one
//! block per output chunk that reduces through shared memory with a tree (long contiguous rows;
//! long rows are split into chunks whose partial results are reduced again). Tensor ops emit
//! them; [`super::recognize_reduce`] recognizes any kernel whose canonical form is one of them,
//! so backends can run it as a library reduction.

use hologram_isa::Type;

/// The value `x` as a literal of type `t`.
fn lit(t: Type, x: f64) -> String {
    if t.is_float() {
        let v = if t == Type::F32 { (x as f32) as f64 } else { x };
        hologram_isa::Imm::Float(v).to_string()
    } else if t == Type::Pred {
        if x != 0.0 { "true" } else { "false" }.to_string()
    } else {
        format!("{}", x as i128)
    }
}

/// What a reduction computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Combine {
    Sum,
    Prod,
    Max,
    Min,
    ArgMax,
    ArgMin,
}

impl Combine {
    /// True for argmax and argmin.
    pub fn is_arg(self) -> bool {
        matches!(self, Combine::ArgMax | Combine::ArgMin)
    }

    /// The identity element in accumulator type `t`.
    pub(crate) fn init(self, t: Type) -> String {
        match self {
            Combine::Sum => lit(t, 0.0),
            Combine::Prod => lit(t, 1.0),
            Combine::Max | Combine::ArgMax => {
                if t.is_float() {
                    "-inf".into()
                } else {
                    format!("{}", t.int_range().map(|r| r.0).unwrap_or(0))
                }
            }
            Combine::Min | Combine::ArgMin => {
                if t.is_float() {
                    "inf".into()
                } else {
                    format!("{}", t.int_range().map(|r| r.1).unwrap_or(0))
                }
            }
        }
    }

    /// Lines that fold value `x` (index `ix` for arg reductions) into `acc` (`aix`). Max and min
    /// propagate NaN, like NumPy and PyTorch; ties keep the first index.
    pub(crate) fn fold(
        self,
        t: Type,
        acc: &str,
        x: &str,
        aix: &str,
        ix: &str,
        tag: &str,
    ) -> String {
        match self {
            Combine::Sum => format!("    add.{t} {acc}, {acc}, {x};\n"),
            Combine::Prod => format!("    mul.{t} {acc}, {acc}, {x};\n"),
            Combine::Max | Combine::Min | Combine::ArgMax | Combine::ArgMin => {
                let cmp = if matches!(self, Combine::Max | Combine::ArgMax) {
                    "gt"
                } else {
                    "lt"
                };
                let mut s = format!("    setp.{cmp}.{t} %better{tag}, {x}, {acc};\n");
                if t.is_float() {
                    // x is NaN and acc is not: take x.
                    s += &format!("    setp.ne.{t} %xnan{tag}, {x}, {x};\n    setp.eq.{t} %anum{tag}, {acc}, {acc};\n");
                    s += &format!("    and.pred %xnan{tag}, %xnan{tag}, %anum{tag};\n    or.pred %better{tag}, %better{tag}, %xnan{tag};\n");
                }
                s += &format!("    selp.{t} {acc}, {x}, {acc}, %better{tag};\n");
                if self.is_arg() {
                    s += &format!("    selp.u32 {aix}, {ix}, {aix}, %better{tag};\n");
                }
                s
            }
        }
    }
}

/// Loads the lane kernel keeps in flight together (its unrolled loop's step).
pub const LANE_UNROLL: u32 = 4;

/// One lane per output element: `out[o*I + i] = fold over r of x[off + o*R*I + r*I + i]`.
/// `storage` is the input's element type, `acc` the accumulator type, `out` the stored result
/// type (u32 for arg reductions, widened to the output dtype by the caller).
///
/// The loop over `r` is unrolled [`LANE_UNROLL`] times: the unrolled body issues all its loads
/// before folding them in order, so loads overlap on GPUs while the order of operations (and so
/// every result bit) stays that of the plain sequential loop.
pub fn lane_kernel(c: Combine, storage: Type, acc: Type, out: Type) -> String {
    let u = LANE_UNROLL as usize;
    let load = load_line(storage, acc, "%x", "x", "%idx");
    let fold = c.fold(acc, "%acc", "%x", "%best", "%r", "");
    let mut unrolled = String::new();
    for k in 1..u {
        let prev = if k == 1 {
            "%idx".to_string()
        } else {
            format!("%idx{}", k - 1)
        };
        unrolled += &format!("    add.u32 %idx{k}, {prev}, inner;\n");
    }
    let idx_of = |k: usize| {
        if k == 0 {
            "%idx".to_string()
        } else {
            format!("%idx{k}")
        }
    };
    unrolled += &load_group(storage, acc, "x", u, idx_of);
    for k in 0..u {
        let ix = if k == 0 {
            "%r".to_string()
        } else {
            unrolled += &format!("    add.u32 %r{k}, %r, {k};\n");
            format!("%r{k}")
        };
        unrolled += &c.fold(acc, "%acc", &format!("%x{k}"), "%best", &ix, "");
    }
    let result = if c.is_arg() {
        "%best".to_string()
    } else {
        convert_out(acc, out, "%acc")
    };
    let store_ty = if c.is_arg() { Type::U32 } else { out };
    format!(
        ".kernel reduce_lane
.param .buf.{storage} x
.param .buf.{store_ty} out .rw
.param .u32 off
.param .u32 rlen
.param .u32 inner
.param .u32 n
    setp.ge.u32 %done, %gid, n;
@%done exit;
    div.u32 %o, %gid, inner;
    rem.u32 %i, %gid, inner;
    mul.u32 %rowlen, rlen, inner;
    mad.u32 %idx, %o, %rowlen, %i;
    add.u32 %idx, %idx, off;
    mov.{acc} %acc, {init};
    mov.u32 %best, 0;
    mov.u32 %r, 0;
    and.u32 %full, rlen, {mask};
UNROLLED:
    setp.ge.u32 %rest, %r, %full;
@%rest bra LOOP;
{unrolled}    add.u32 %idx, %idx{last}, inner;
    add.u32 %r, %r, {u};
    bra UNROLLED;
LOOP:
    setp.ge.u32 %end, %r, rlen;
@%end bra STORE;
{load}{fold}    add.u32 %idx, %idx, inner;
    add.u32 %r, %r, 1;
    bra LOOP;
STORE:
{result_lines}    st.{store_ty} out[%gid], {result};
",
        init = c.init(acc),
        result_lines = result_prep(c, acc, out),
        mask = !(LANE_UNROLL - 1),
        last = u - 1,
    )
}

/// Loads `count` elements of `arr` at the indexes `idx(k)` into `%x0..` (converted to `acc`),
/// every load before any conversion, so the loads are in flight together.
pub(crate) fn load_group(
    storage: Type,
    acc: Type,
    arr: &str,
    count: usize,
    idx: impl Fn(usize) -> String,
) -> String {
    let mut s = String::new();
    let raw = |k: usize| {
        if storage == acc {
            format!("%x{k}")
        } else {
            format!("%raw{k}")
        }
    };
    for k in 0..count {
        s += &format!("    ld.{storage} {}, {arr}[{}];\n", raw(k), idx(k));
    }
    if storage != acc {
        for k in 0..count {
            s += &format!("    cvt.{acc}.{storage} %x{k}, %raw{k};\n");
        }
    }
    s
}

fn load_line(storage: Type, acc: Type, dst: &str, arr: &str, idx: &str) -> String {
    if storage == acc {
        format!("    ld.{storage} {dst}, {arr}[{idx}];\n")
    } else {
        format!("    ld.{storage} %raw, {arr}[{idx}];\n    cvt.{acc}.{storage} {dst}, %raw;\n")
    }
}

fn convert_out(acc: Type, out: Type, v: &str) -> String {
    if acc == out {
        v.to_string()
    } else {
        "%res".to_string()
    }
}

fn result_prep(c: Combine, acc: Type, out: Type) -> String {
    if c.is_arg() || acc == out {
        String::new()
    } else {
        format!("    cvt.{out}.{acc} %res, %acc;\n")
    }
}

/// Lanes per block of the block kernel.
pub const BLOCK: u32 = 256;

/// Loads each lane of the block kernel keeps in flight together (its unrolled loop's step, in
/// strides of [`BLOCK`] elements).
pub const BLOCK_UNROLL: u32 = 8;

/// One block per (row, chunk) of a row-contiguous `[rows, R]` view (or of partial results with
/// their indexes for arg reductions): block `b` reduces elements `chunk*len .. min(R,
/// (chunk+1)*len)` of row `b / chunks` into `out[b]` (and `outix[b]`).
///
/// Lane `t` folds elements `t, t + BLOCK, t + 2·BLOCK, ...` of the chunk in order into one
/// accumulator; the loop is unrolled [`BLOCK_UNROLL`] times with every load of the unrolled body
/// issued before the folds, so on GPUs that many loads per lane are in flight while the order of
/// operations stays that of the plain loop. Then a shared-memory tree halves the
/// [`BLOCK`] accumulators down to one.
pub fn block_kernel(
    c: Combine,
    storage: Type,
    acc: Type,
    out: Type,
    with_index_input: bool,
) -> String {
    let load = load_line(storage, acc, "%x", "x", "%idx");
    let fold = c.fold(acc, "%acc", "%x", "%best", "%src", "");
    let arg = c.is_arg();
    let mut head = format!(".kernel reduce_block\n.param .buf.{storage} x\n");
    if with_index_input {
        head += ".param .buf.u32 xix\n";
    }
    let store_ty = if arg { acc } else { out };
    head += &format!(".param .buf.{store_ty} out .rw\n");
    if arg {
        head += ".param .buf.u32 outix .rw\n";
    }
    head += &format!(
        ".param .u32 off\n.param .u32 rlen\n.param .u32 chunks\n.param .u32 clen\n.shared .{acc} sacc[{BLOCK}]\n"
    );
    if arg {
        head += &format!(".shared .u32 six[{BLOCK}]\n");
    }
    let src_index = if with_index_input {
        "    ld.u32 %src, xix[%idx];\n"
    } else {
        "    sub.u32 %src, %idx, %rowbase;\n"
    };
    let u = BLOCK_UNROLL as usize;
    let idx_of = |k: usize| format!("%idx{k}");
    let mut unrolled = "    add.u32 %idx0, %rowbase, %pos;\n".to_string();
    for k in 1..u {
        unrolled += &format!("    add.u32 %idx{k}, %idx{}, {BLOCK};\n", k - 1);
    }
    unrolled += &load_group(storage, acc, "x", u, idx_of);
    for k in 0..u {
        if arg {
            unrolled += &if with_index_input {
                format!("    ld.u32 %src{k}, xix[%idx{k}];\n")
            } else {
                format!("    sub.u32 %src{k}, %idx{k}, %rowbase;\n")
            };
        }
    }
    for k in 0..u {
        unrolled += &c.fold(
            acc,
            "%acc",
            &format!("%x{k}"),
            "%best",
            &format!("%src{k}"),
            "",
        );
    }
    let tree_fold = if arg {
        arg_tree_fold(c, acc)
    } else {
        c.fold(acc, "%mine", "%other", "%mix", "%oix", "t")
    };
    let store = if arg {
        "    st.{acc} out[%ctaid.x], %mine;\n    st.u32 outix[%ctaid.x], %mix;\n"
            .replace("{acc}", acc.name())
    } else if acc == out {
        format!("    st.{out} out[%ctaid.x], %mine;\n")
    } else {
        format!("    cvt.{out}.{acc} %res, %mine;\n    st.{out} out[%ctaid.x], %res;\n")
    };
    let ix_lines = if arg {
        "    st.u32 six[%t], %best;\n"
    } else {
        ""
    };
    let ix_load = if arg {
        "    ld.u32 %mix, six[%t];\n    ld.u32 %oix, six[%o];\n"
    } else {
        ""
    };
    let ix_store = if arg {
        "    st.u32 six[%t], %mix;\n"
    } else {
        ""
    };
    head + &format!(
        "    mov.u32 %t, %tid.x;
    div.u32 %row, %ctaid.x, chunks;
    rem.u32 %chunk, %ctaid.x, chunks;
    mul.u32 %start, %chunk, clen;
    add.u32 %stop, %start, clen;
    min.u32 %stop, %stop, rlen;
    mad.u32 %rowbase, %row, rlen, off;
    add.u32 %pos, %start, %t;
    mov.{acc} %acc, {init};
    mov.u32 %best, 0;
UNROLLED:
    add.u32 %far, %pos, {far};
    setp.ge.u32 %rest, %far, %stop;
@%rest bra LOOP;
{unrolled}    add.u32 %pos, %pos, {step};
    bra UNROLLED;
LOOP:
    setp.ge.u32 %end, %pos, %stop;
@%end bra REDUCE;
    add.u32 %idx, %rowbase, %pos;
{load}{src_index}{fold}    add.u32 %pos, %pos, {BLOCK};
    bra LOOP;
REDUCE:
    st.{acc} sacc[%t], %acc;
{ix_lines}    barrier;
    mov.u32 %s, {half};
HALVE:
    setp.eq.u32 %fin, %s, 0;
@%fin bra WRITE;
    setp.lt.u32 %active, %t, %s;
@!%active bra NEXT;
    add.u32 %o, %t, %s;
    ld.{acc} %mine, sacc[%t];
    ld.{acc} %other, sacc[%o];
{ix_load}{tree_fold}    st.{acc} sacc[%t], %mine;
{ix_store}NEXT:
    barrier;
    shr.u32 %s, %s, 1;
    bra HALVE;
WRITE:
    setp.ne.u32 %rest, %t, 0;
@%rest exit;
    ld.{acc} %mine, sacc[0];
{final_ix}{store}",
        init = c.init(acc),
        half = BLOCK / 2,
        far = (BLOCK_UNROLL - 1) * BLOCK,
        step = BLOCK_UNROLL * BLOCK,
        final_ix = if arg {
            "    ld.u32 %mix, six[0];\n"
        } else {
            ""
        },
    )
}

/// Combines two partial arg results: the better value wins; equal values (or two NaNs) keep the
/// smaller index, so the result is the first occurrence.
fn arg_tree_fold(c: Combine, t: Type) -> String {
    let cmp = if c == Combine::ArgMax { "gt" } else { "lt" };
    let mut s = format!("    setp.{cmp}.{t} %bt, %other, %mine;\n");
    s += &format!("    setp.eq.{t} %eqv, %other, %mine;\n    setp.lt.u32 %lower, %oix, %mix;\n    and.pred %tie, %eqv, %lower;\n");
    if t.is_float() {
        s += &format!("    setp.ne.{t} %on, %other, %other;\n    setp.ne.{t} %mn, %mine, %mine;\n");
        s += "    and.pred %both, %mn, %on;\n    and.pred %both, %both, %lower;\n";
        s += "    or.pred %bt, %bt, %on;\n    not.pred %mnn, %mn;\n    and.pred %bt, %bt, %mnn;\n    or.pred %bt, %bt, %both;\n";
    }
    s += "    or.pred %bt, %bt, %tie;\n";
    s += &format!("    selp.{t} %mine, %other, %mine, %bt;\n    selp.u32 %mix, %oix, %mix, %bt;\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_assemble() {
        for c in [
            Combine::Sum,
            Combine::Prod,
            Combine::Max,
            Combine::Min,
            Combine::ArgMax,
            Combine::ArgMin,
        ] {
            for (s, a, o) in [
                (Type::F32, Type::F32, Type::F32),
                (Type::F16, Type::F32, Type::F16),
                (Type::I32, Type::I64, Type::I64),
                (Type::U8, Type::U8, Type::U8),
            ] {
                hologram_isa::assemble(&lane_kernel(c, s, a, o))
                    .unwrap_or_else(|e| panic!("{c:?} {s}: {e}\n{}", lane_kernel(c, s, a, o)));
                for idx in [false, true] {
                    if idx && !c.is_arg() {
                        continue;
                    }
                    let k = block_kernel(c, s, a, o, idx);
                    hologram_isa::assemble(&k)
                        .unwrap_or_else(|e| panic!("{c:?} {s} block: {e}\n{k}"));
                }
            }
        }
    }
}
