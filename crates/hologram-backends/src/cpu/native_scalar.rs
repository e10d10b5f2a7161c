//! Binary operations of a native map whose operand is a broadcast one: the walk load that feeds
//! only that operation (`native_walk`) is not run; the operation instead takes the walk's
//! runs from the operand's buffer as they are, which saves writing them into a register and
//! reading them back. A run of elements that share one value (a row of `x - m[rows, 1]`, a
//! channel of `x * g[c, 1, 1]`, a broadcast scalar) goes to a scalar-operand lane function
//! (`lanes_scalar`); a contiguous run (a row of the bias in `x + b[1024]`) to the operation's
//! own lane function, reading the buffer in place.

use hologram_isa::{Inst, Op};
use smallvec::SmallVec;

use super::compile::{XInst, XOp};
use super::lanes_scalar::{scalar_binary_fn, ScalarLaneFn};
use super::memops::ArrayView;
use super::native_walk::{Runs, WalkLoad};

/// Runs shorter than this are loaded into the register as before: below it, one call per run
/// costs more than the copy it saves.
const MIN_RUN: u64 = 16;

/// A binary operation one of whose operands is a walk load's register, read by nothing else.
pub(crate) struct ScalarOp {
    /// The operation with its walk operand one value (None for operations without one).
    scalar: Option<ScalarLaneFn>,
    /// The body index of the walk load.
    walk: usize,
    /// The walk is the first operand (`m - x`).
    walk_first: bool,
}

/// Per body instruction, the binary operation it is when one of its operands qualifies.
/// `defs` and `uses` count each register's writes and reads in the body; `def_at` gives the
/// body index of its definition.
pub(crate) fn plan(
    body: &[Inst<u32>],
    walks: &[Option<WalkLoad>],
    defs: &[u32],
    uses: &[u32],
    def_at: &[usize],
) -> Vec<Option<ScalarOp>> {
    body.iter()
        .enumerate()
        .map(|(i, inst)| {
            let Op::Binary { op, ty, a, b, .. } = &inst.op else {
                return None;
            };
            // Predicates are loaded as 0 or 1, whatever the byte in the buffer.
            if *ty == hologram_isa::Type::Pred {
                return None;
            }
            let scalar = scalar_binary_fn(*op, *ty);
            // The walk's register: written once, by a walk load of the operation's element
            // size before it, and read only here.
            let fed = |o: &hologram_isa::Operand<u32>| -> Option<usize> {
                let r = *o.as_reg()? as usize;
                let j = def_at[r];
                let walk = walks.get(j)?.as_ref()?;
                (defs[r] == 1 && uses[r] == 1 && j < i && walk.size() == ty.size_bytes())
                    .then_some(j)
            };
            if let Some(walk) = fed(b) {
                return Some(ScalarOp {
                    scalar,
                    walk,
                    walk_first: false,
                });
            }
            fed(a).map(|walk| ScalarOp {
                scalar,
                walk,
                walk_first: true,
            })
        })
        .collect()
}

/// Per body instruction, whether it runs differently in this launch: an operation whose walk's
/// runs are long enough (and, for runs of one value, that has a scalar-operand function), and
/// the walk load it replaces. Empty (no allocation) for the maps without such operations.
pub(crate) fn active(
    ops: &[Option<ScalarOp>],
    walks: &[Option<WalkLoad>],
    consts: &[u64],
) -> SmallVec<[bool; 16]> {
    let mut active = SmallVec::new();
    for (i, op) in ops.iter().enumerate() {
        let Some(op) = op else { continue };
        let long = walks[op.walk]
            .as_ref()
            .is_some_and(|w| match w.runs_of(consts) {
                Runs::Splat(p) => p >= MIN_RUN && op.scalar.is_some(),
                Runs::Contiguous(m) => m >= MIN_RUN,
            });
        if long {
            if active.is_empty() {
                active.resize(ops.len(), false);
            }
            active[i] = true;
            active[op.walk] = true;
        }
    }
    active
}

impl ScalarOp {
    /// Runs the operation over gids `start..start + len` of a chunk; false when the walk's
    /// indexes leave its buffer (the launch then goes to the interpreter).
    ///
    /// # Safety
    ///
    /// `ptrs` holds each slot's pointer, valid for the chunk's `len` elements; `x` is this
    /// operation's instruction in `body`, the map's body; the walk's buffer is live and no
    /// chunk writes it (`NativeMap::can_run`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn run(
        &self,
        x: &XOp,
        body: &[XInst],
        walks: &[Option<WalkLoad>],
        globals: &[ArrayView],
        consts: &[u64],
        ptrs: &[*mut u8],
        start: usize,
        len: usize,
    ) -> bool {
        let (XOp::Compute { f, d, a, b, c }, XOp::Load { array, d: w, .. }, Some(walk)) =
            (x, &body[self.walk].op, walks[self.walk].as_ref())
        else {
            return false;
        };
        let other = if self.walk_first { b } else { a };
        let (dst, src) = (ptrs[*d as usize], ptrs[*other as usize] as *const u8);
        // The walk's own register, for contiguous runs the buffer holds unaligned.
        let staging = ptrs[*w as usize];
        let size = walk.size();
        let contiguous = matches!(walk.runs_of(consts), Runs::Contiguous(_));
        // SAFETY: each run's elements lie within the chunk's `len`, which every slot holds;
        // `value` is the run's first element in the walk's buffer, which holds the run
        // (checked by `runs`).
        unsafe {
            walk.runs(
                consts,
                start,
                len,
                &globals[*array as usize],
                |offset, run, value| {
                    let (dst, src) = (dst.add(offset * size), src.add(offset * size));
                    if !contiguous {
                        if let Some(scalar) = self.scalar {
                            scalar(run, dst, src, value, self.walk_first);
                        }
                        return;
                    }
                    let value = if value as usize % size == 0 {
                        value
                    } else {
                        let staged = staging.add(offset * size);
                        std::ptr::copy_nonoverlapping(value, staged, run * size);
                        staged as *const u8
                    };
                    let (a, b) = if self.walk_first {
                        (value, src)
                    } else {
                        (src, value)
                    };
                    f(run, dst, a, b, ptrs[*c as usize], None);
                },
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use hologram_compiler::Canonical;
    use hologram_isa::semantics::{Num, Value};

    use crate::backend::{Backend, BufferArg, KernelArg, LaunchConfig, Memory};
    use crate::cpu::CpuBackend;
    use crate::error::BackendError;

    /// `y[i] = x[i] OP b[(i / p) % m + o]` (or with the operands swapped), where `%r` is `x`'s
    /// register itself when `in_place` (the operation then writes its operand's slot).
    fn kernel(op: &str, ty: &str, swapped: bool, in_place: bool) -> String {
        let (a, b) = if swapped { ("%v", "%x") } else { ("%x", "%v") };
        let d = if in_place { "%x" } else { "%r" };
        format!(
            ".kernel bcast
.param .buf.{ty} x
.param .buf.{ty} b
.param .buf.{ty} y .rw
.param .u32 n
.param .u32 p
.param .u32 m
.param .u32 o
    setp.ge.u32 %done, %gid, n;
@%done exit;
    ld.{ty} %x, x[%gid];
    div.u32 %q, %gid, p;
    rem.u32 %w, %q, m;
    add.u32 %i, %w, o;
    ld.{ty} %v, b[%i];
    {op}.{ty} {d}, {a}, {b};
    st.{ty} y[%gid], {d};
"
        )
    }

    /// Launches `text` over `x` with `b` and the walk's `p`, `m`, `o`; returns `y`.
    fn launch<T: bytemuck::Pod + Default>(
        text: &str,
        x: &[T],
        b: &[T],
        (p, m, o): (u32, u32, u32),
    ) -> Result<Vec<T>, BackendError> {
        let be = CpuBackend::new();
        let k = be.compile(&Canonical::assemble(text).expect("assembles"))?;
        let n = x.len();
        let buffer = |v: &[T]| -> Result<Memory, BackendError> {
            let mem = be.allocate(std::mem::size_of_val(v))?;
            be.copy_in(&mem, 0, bytemuck::cast_slice(v))?;
            Ok(mem)
        };
        let (xm, bm) = (buffer(x)?, buffer(b)?);
        let y: Memory = be.allocate(std::mem::size_of_val(x))?;
        let mut args = vec![
            KernelArg::Buffer(BufferArg::whole(xm)),
            KernelArg::Buffer(BufferArg::whole(bm)),
            KernelArg::Buffer(BufferArg::whole(y.clone())),
        ];
        args.extend([n as u32, p, m, o].map(|v| KernelArg::Scalar(Value::U32(v))));
        be.launch(&k, &LaunchConfig::linear(n.div_ceil(64) as u32, 64), &args)?;
        let mut out = vec![T::default(); n];
        be.copy_out(&y, 0, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }

    /// Every operation with a scalar path, both operand orders, in place or not, over runs of
    /// one value and contiguous runs, each shorter than the path takes, crossing the
    /// 4096-element chunks, or one for the whole launch; each element's bits as the ISA's operation gives them
    /// (NaN and signed zeros included, for min and max).
    #[test]
    fn broadcast_operands_give_each_element_the_operations_bits() {
        type Op = fn(f32, f32) -> f32;
        let ops: [(&str, Op); 6] = [
            ("add", <f32 as Num>::add),
            ("sub", <f32 as Num>::sub),
            ("mul", <f32 as Num>::mul),
            ("div", <f32 as Num>::div),
            ("min", <f32 as Num>::min),
            ("max", <f32 as Num>::max),
        ];
        let n = 3 * 4096 + 77;
        let specials = [f32::NAN, -0.0, 0.0, f32::INFINITY, 1.5];
        let x: Vec<f32> = (0..n)
            .map(|i| {
                specials
                    .get(i % 97)
                    .copied()
                    .unwrap_or(i as f32 * 0.37 - 900.0)
            })
            .collect();
        let b: Vec<f32> = (0..40)
            .map(|i| specials.get(i % 7).copied().unwrap_or(i as f32 - 20.5))
            .collect();
        for (name, f) in ops {
            for swapped in [false, true] {
                for in_place in [false, true] {
                    let text = kernel(name, "f32", swapped, in_place);
                    for (p, m, o) in [
                        (1, 40, 0),
                        (8, 40, 0),
                        (16, 7, 3),
                        (1024, 40, 0),
                        (1000, 9, 2),
                        (5000, 3, 1),
                    ] {
                        let got = launch(&text, &x, &b, (p, m, o)).expect("in bounds");
                        for (g, (&v, &xv)) in got.iter().zip(&x).enumerate() {
                            let s = b[((g as u32 / p) % m + o) as usize];
                            let want = if swapped { f(s, xv) } else { f(xv, s) };
                            assert_eq!(
                                v.to_bits(),
                                want.to_bits(),
                                "{name} swapped={swapped} in_place={in_place} p={p} m={m} o={o} element {g}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn integer_and_half_operands_take_the_scalar_path_alike() {
        let n = 9000;
        let x: Vec<i32> = (0..n).map(|i| i * 7 - 20_000).collect();
        let b: Vec<i32> = vec![3, -5, 0, 11];
        let got =
            launch(&kernel("sub", "i32", true, false), &x, &b, (2048, 4, 0)).expect("in bounds");
        for (g, (&v, &xv)) in got.iter().zip(&x).enumerate() {
            assert_eq!(v, b[(g / 2048) % 4].wrapping_sub(xv), "element {g}");
        }
        let x: Vec<half::f16> = (0..n)
            .map(|i| half::f16::from_f32(i as f32 * 0.01))
            .collect();
        let b: Vec<half::f16> = [0.5f32, -2.0, 3.25].map(half::f16::from_f32).to_vec();
        let got =
            launch(&kernel("mul", "f16", false, false), &x, &b, (100, 3, 0)).expect("in bounds");
        for (g, (&v, &xv)) in got.iter().zip(&x).enumerate() {
            let want = <half::f16 as Num>::mul(xv, b[(g / 100) % 3]);
            assert_eq!(v.to_bits(), want.to_bits(), "element {g}");
        }
    }

    #[test]
    fn a_broadcast_operand_past_its_buffer_is_reported() {
        let x = vec![1.0f32; 5000];
        let b = vec![2.0f32; 4];
        // Rows of 1024 reach b[4] from element 4096 on.
        let err = launch(
            &kernel("sub", "f32", false, false),
            &x,
            &b,
            (1024, u32::MAX, 0),
        )
        .expect_err("out of bounds");
        assert!(err.to_string().contains("out-of-bounds"), "{err}");
        // A contiguous walk of 41 elements over a buffer of 40.
        let b = vec![2.0f32; 40];
        let err = launch(&kernel("add", "f32", true, false), &x, &b, (1, 41, 0))
            .expect_err("out of bounds");
        assert!(err.to_string().contains("out-of-bounds"), "{err}");
    }
}
