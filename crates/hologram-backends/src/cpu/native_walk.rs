//! Gathered loads of a native map whose index walks one dimension of a broadcast operand:
//! `index = (gid / p) % m + o` with `p`, `m` and `o` the same for every element of a launch (a
//! bias over rows, a per-row or per-channel value), or is `o` itself (a broadcast scalar: the
//! `0.0` of `where(x <= 0, 0.0, g)`, a ReLU's backward pass). Such a load is run as whole runs,
//! contiguous copies when `p` is 1 and splats of one element otherwise, with one bounds check
//! per chunk, instead of computing and checking an index per element (a broadcast scalar loaded
//! so took three quarters of that ReLU backward's time); the instructions that computed the
//! index are skipped when nothing else reads them.

use hologram_isa::semantics::Value;
use hologram_isa::{BinaryOp, Inst, Op, Operand, Special, Type};

use super::compile::{ConstSource, CpuKernel};
use super::memops::ArrayView;

/// A recognized walk: indexes into `CpuKernel::consts` of the divisor, modulus and offset (each
/// absent when the index does without it), and the element size in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WalkLoad {
    div: Option<usize>,
    rem: Option<usize>,
    offset: Option<usize>,
    /// Every element reads `offset` (a broadcast scalar): no division or remainder.
    constant: bool,
    size: usize,
}

/// The index in `k.consts` of a `u32` operand that is the same for every element (a scalar
/// parameter or a literal).
pub(crate) fn launch_constant(k: &CpuKernel, o: &Operand<u32>) -> Option<usize> {
    let source = match o {
        Operand::Param(p) => ConstSource::Param(*p),
        Operand::Imm(imm) => ConstSource::Value(Value::from_imm(*imm, Type::U32)),
        _ => return None,
    };
    k.consts
        .iter()
        .position(|&(_, ty, src)| ty == Type::U32 && src == source)
}

/// One step of a walk's index computation: instruction `def` writes register `reg`, which
/// instruction `reader` (the next step, or the load) reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Feed {
    pub def: usize,
    pub reg: u32,
    pub reader: usize,
}

/// Recognizes body instruction `i` as a walk load. `def_of[r]` is the body index of the one
/// instruction that writes register `r` (None when written more or less than once). Returns the
/// walk and the steps computing its index ([`skippable`] tells which need not run).
pub(crate) fn recognize(
    k: &CpuKernel,
    body: &[Inst<u32>],
    i: usize,
    def_of: &[Option<usize>],
) -> Option<(WalkLoad, Vec<Feed>)> {
    let Op::Ld { ty, mem, .. } = &body[i].op else {
        return None;
    };
    let constant = |offset: usize| WalkLoad {
        div: None,
        rem: None,
        offset: Some(offset),
        constant: true,
        size: ty.size_bytes(),
    };
    let mut r = match &mem.index {
        Operand::Reg(r) => *r,
        // A scalar parameter or literal index.
        index => return Some((constant(launch_constant(k, index)?), Vec::new())),
    };
    let mut feeding = Vec::new();
    // Defining instruction of a register, unguarded and u32.
    let binary = |r: u32| -> Option<(usize, BinaryOp, Operand<u32>, Operand<u32>)> {
        let j = def_of.get(r as usize).copied().flatten()?;
        if j >= i || body[j].guard.is_some() {
            return None;
        }
        match &body[j].op {
            Op::Binary {
                op,
                ty: Type::U32,
                a,
                b,
                ..
            } => Some((j, *op, a.clone(), b.clone())),
            _ => None,
        }
    };
    let is_gid = |o: &Operand<u32>| matches!(o, Operand::Special(Special::GidLinear));
    // `mov r, o`: a broadcast scalar's index.
    if let Some(j) = def_of.get(r as usize).copied().flatten() {
        if let Op::Mov {
            ty: Type::U32, src, ..
        } = &body[j].op
        {
            if j >= i || body[j].guard.is_some() {
                return None;
            }
            let feed = Feed {
                def: j,
                reg: r,
                reader: i,
            };
            return Some((constant(launch_constant(k, src)?), vec![feed]));
        }
    }
    let mut walk = WalkLoad {
        div: None,
        rem: None,
        offset: None,
        constant: false,
        size: ty.size_bytes(),
    };
    // `add r, t, o` (either order).
    if let Some((j, BinaryOp::Add, a, b)) = binary(r) {
        let (t, o) = match (&a, &b) {
            (Operand::Reg(t), o) | (o, Operand::Reg(t)) => (*t, o),
            _ => return None,
        };
        walk.offset = Some(launch_constant(k, o)?);
        feeding.push(Feed {
            def: j,
            reg: r,
            reader: i,
        });
        r = t;
    }
    // `rem t, x, m`, then x is %gid or `div x, %gid, p`; or `div t, %gid, p`.
    let reader = feeding.last().map_or(i, |f| f.def);
    let (j, op, a, b) = binary(r)?;
    feeding.push(Feed {
        def: j,
        reg: r,
        reader,
    });
    match op {
        BinaryOp::Rem => {
            walk.rem = Some(launch_constant(k, &b)?);
            if !is_gid(&a) {
                let &Operand::Reg(x) = &a else {
                    return None;
                };
                let (j2, op2, a2, b2) = binary(x)?;
                if op2 != BinaryOp::Div || !is_gid(&a2) {
                    return None;
                }
                walk.div = Some(launch_constant(k, &b2)?);
                feeding.push(Feed {
                    def: j2,
                    reg: x,
                    reader: j,
                });
            }
        }
        BinaryOp::Div if is_gid(&a) => walk.div = Some(launch_constant(k, &b)?),
        _ => return None,
    }
    Some((walk, feeding))
}

/// The index steps of recognized walks that need not run: those whose register is read only
/// by walk loads and by other skipped steps (`uses[r]`: how many operands read register `r`;
/// `loads[i]`: instruction `i` is a recognized walk load). Operands that share one walk (a batch
/// norm's per-channel values) share its steps, which are skipped once every reader is.
pub(crate) fn skippable(feeds: &[Feed], uses: &[u32], loads: &[bool]) -> Vec<bool> {
    let mut skip = vec![false; loads.len()];
    for f in feeds {
        skip[f.def] = true;
    }
    loop {
        let mut changed = false;
        for f in feeds {
            if !skip[f.def] {
                continue;
            }
            let mut readers: Vec<usize> = feeds
                .iter()
                .filter(|g| g.reg == f.reg && g.def == f.def)
                .map(|g| g.reader)
                .collect();
            readers.sort_unstable();
            readers.dedup();
            let all_known = readers.len() as u32 == uses[f.reg as usize];
            let all_skipped = readers.iter().all(|&r| loads[r] || skip[r]);
            if !(all_known && all_skipped) {
                skip[f.def] = false;
                changed = true;
            }
        }
        if !changed {
            return skip;
        }
    }
}

/// The runs of a walk in one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runs {
    /// Every `p` consecutive gids load one element (`u64::MAX` for a broadcast scalar).
    Splat(u64),
    /// Consecutive gids load consecutive elements, `m` of them before the walk wraps.
    Contiguous(u64),
}

impl WalkLoad {
    /// How many consecutive elements the walk's indexes repeat after: 1 for a broadcast scalar,
    /// `p * m` for a walk with a remainder (a bias row over the rows of a matrix repeats every
    /// row); `None` for a walk without one, or with a zero divisor (the interpreter's case).
    pub(crate) fn period(&self, consts: &[u64]) -> Option<u64> {
        if self.constant {
            return Some(1);
        }
        let m = consts[self.rem?] & 0xffff_ffff;
        let p = self.div.map_or(1, |c| consts[c] & 0xffff_ffff);
        (p > 0 && m > 0).then(|| p * m)
    }

    /// How a launch's gids load (by its divisor and modulus): see [`Runs`].
    pub(crate) fn runs_of(&self, consts: &[u64]) -> Runs {
        let value = |c: Option<usize>, default: u64| c.map_or(default, |c| consts[c] & 0xffff_ffff);
        if self.constant {
            return Runs::Splat(u64::MAX);
        }
        match value(self.div, 1) {
            1 => Runs::Contiguous(value(self.rem, u64::MAX)),
            p => Runs::Splat(p),
        }
    }

    /// The element size in bytes.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Calls `each(offset, run, src)` for the runs of gids `start..start + len`, in order:
    /// `run` gids from `start + offset` on load `run` consecutive elements from `src` when
    /// the walk has no divisor (`p` = 1), or all load the one element at `src` otherwise. False,
    /// with no call made, when the launch must go to the interpreter instead (an index out of
    /// bounds, a zero divisor, an index past `u32`, a buffer other threads may write).
    ///
    /// # Safety
    ///
    /// `view` is a live buffer of elements of the walk's size, `view.len` of them from
    /// `view.base`.
    pub(crate) unsafe fn runs(
        &self,
        consts: &[u64],
        start: usize,
        len: usize,
        view: &ArrayView,
        mut each: impl FnMut(usize, usize, *const u8),
    ) -> bool {
        let value = |c: Option<usize>, default: u64| c.map_or(default, |c| consts[c] & 0xffff_ffff);
        // A constant index is a walk whose divisor no index reaches.
        let (p, m, o) = if self.constant {
            (u64::MAX, 1, value(self.offset, 0))
        } else {
            (
                value(self.div, 1),
                value(self.rem, u64::MAX),
                value(self.offset, 0),
            )
        };
        if len == 0 {
            return true;
        }
        if p == 0 || m == 0 || view.racy || view.per_lane {
            return false;
        }
        let (first, last) = (start as u64, (start + len - 1) as u64);
        if last > u32::MAX as u64 {
            return false;
        }
        // The largest index of the chunk: every value of (g / p) % m the chunk reaches.
        let (q0, q1) = (first / p, last / p);
        let top = if q1 - q0 >= m || q0 % m > q1 % m {
            m - 1
        } else {
            q1 % m
        };
        if top + o > u32::MAX as u64 || top + o >= view.len {
            return false;
        }
        let (mut g, end) = (first, last + 1);
        while g < end {
            let cur = (g / p) % m + o;
            // SAFETY: `cur <= top + o < view.len` (checked above).
            let src = unsafe { view.base.add(cur as usize * self.size) };
            let run = if p == 1 {
                // Contiguous until the walk wraps.
                (end - g).min(m - (g % m))
            } else {
                (end - g).min(p - g % p)
            };
            each((g - first) as usize, run as usize, src);
            g += run;
        }
        true
    }

    /// Writes the loaded elements of gids `start..start + len` to `dst`; false when the launch
    /// must go to the interpreter instead (see [`WalkLoad::runs`]).
    ///
    /// # Safety
    ///
    /// `dst` holds `len` elements of the load's size; `view` is a live buffer of elements of
    /// that size, `view.len` of them from `view.base`.
    pub(crate) unsafe fn fill(
        &self,
        consts: &[u64],
        start: usize,
        len: usize,
        dst: *mut u8,
        view: &ArrayView,
    ) -> bool {
        let size = self.size;
        let contiguous = matches!(self.runs_of(consts), Runs::Contiguous(_));
        // SAFETY: the view is as `runs` needs; each run's elements are within the checked range,
        // and `dst` has room for the chunk's `len` elements.
        unsafe {
            self.runs(consts, start, len, view, |offset, run, src| {
                let out = dst.add(offset * size);
                if contiguous {
                    std::ptr::copy_nonoverlapping(src, out, run * size);
                } else {
                    splat(src, out, run, size);
                }
            })
        }
    }
}

/// Copies the element at `src` to `n` consecutive elements at `dst`.
///
/// # Safety
///
/// `src` is readable for `size` bytes; `dst` is writable for `n * size` bytes and aligned to
/// `size` (a register slot).
unsafe fn splat(src: *const u8, dst: *mut u8, n: usize, size: usize) {
    // SAFETY: per the contract; unaligned reads because buffer views need not be aligned.
    unsafe {
        match size {
            1 => std::ptr::write_bytes(dst, *src, n),
            2 => std::slice::from_raw_parts_mut(dst as *mut u16, n)
                .fill((src as *const u16).read_unaligned()),
            4 => std::slice::from_raw_parts_mut(dst as *mut u32, n)
                .fill((src as *const u32).read_unaligned()),
            _ => std::slice::from_raw_parts_mut(dst as *mut u64, n)
                .fill((src as *const u64).read_unaligned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use hologram_compiler::Canonical;
    use hologram_isa::semantics::Value;

    use super::{skippable, Feed};
    use crate::backend::{Backend, BufferArg, KernelArg, LaunchConfig, Memory};
    use crate::cpu::CpuBackend;
    use crate::error::BackendError;

    /// `y[i] = b[(i / p) % m + o]`: every form of the walk (by the parameters' values).
    const WALK: &str = ".kernel walk
.param .buf.u32 b
.param .buf.u32 y .rw
.param .u32 n
.param .u32 p
.param .u32 m
.param .u32 o
    setp.ge.u32 %done, %gid, n;
@%done exit;
    div.u32 %q, %gid, p;
    rem.u32 %r, %q, m;
    add.u32 %i, %r, o;
    ld.u32 %v, b[%i];
    st.u32 y[%gid], %v;
";

    /// Launches `text` (parameters `b`, `y`, `n`, then `scalars`) over `n` elements with
    /// `b[i] = 1000 + i` and returns `y`.
    fn launch(
        text: &str,
        scalars: &[u32],
        b_len: usize,
        n: usize,
    ) -> Result<Vec<u32>, BackendError> {
        let be = CpuBackend::new();
        let k = be.compile(&Canonical::assemble(text).expect("assembles"))?;
        let b_words: Vec<u32> = (0..b_len as u32).map(|i| 1000 + i).collect();
        let b: Memory = be.allocate(b_len * 4)?;
        be.copy_in(&b, 0, bytemuck::cast_slice(&b_words))?;
        let y: Memory = be.allocate(n * 4)?;
        let mut args = vec![
            KernelArg::Buffer(BufferArg::whole(b)),
            KernelArg::Buffer(BufferArg::whole(y.clone())),
            KernelArg::Scalar(Value::U32(n as u32)),
        ];
        args.extend(scalars.iter().map(|&v| KernelArg::Scalar(Value::U32(v))));
        be.launch(&k, &LaunchConfig::linear(n.div_ceil(64) as u32, 64), &args)?;
        let mut out = vec![0u32; n];
        be.copy_out(&y, 0, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }

    fn run(p: u32, m: u32, o: u32, b_len: usize, n: usize) -> Result<Vec<u32>, BackendError> {
        launch(WALK, &[p, m, o], b_len, n)
    }

    #[test]
    fn walks_load_what_the_index_says() {
        // Runs that cross chunks (4096 elements), wrap, splat, and start at an offset.
        for (p, m, o, b_len, n) in [
            (1, 1000, 0, 1000, 10_000),
            (1, 7, 3, 10, 9000),
            (300, 5, 2, 7, 10_000),
            (4096, 3, 0, 3, 20_000),
            (1, 1, 0, 1, 5000),
            (5, u32::MAX, 0, 2000, 10_000),
        ] {
            let got = run(p, m, o, b_len, n).expect("in bounds");
            for (g, &v) in got.iter().enumerate() {
                let want = 1000 + ((g as u32 / p) % m + o);
                assert_eq!(v, want, "p={p} m={m} o={o} element {g}");
            }
        }
    }

    #[test]
    fn walks_that_repeat_within_a_chunk_load_every_chunk_alike() {
        // Periods that divide the 4096-element chunk (a bias row, a batch norm's channels) are
        // filled once per launch; the others (period 1000, 4096 * 3) chunk by chunk. Several
        // chunks, a short last one, and more than one chunk per participant.
        for (p, m, o, b_len, n) in [
            (1, 1024, 0, 1024, 3 * 4096 + 100),
            (1, 1024, 5, 1030, 70_000),
            (4, 8, 1, 9, 20_000),
            (256, 16, 0, 16, 4096 * 40),
            (1, 4096, 0, 4096, 9000),
            (1, 1000, 0, 1000, 10_000),
            (4096, 3, 0, 3, 20_000),
        ] {
            let got = run(p, m, o, b_len, n).expect("in bounds");
            for (g, &v) in got.iter().enumerate() {
                let want = 1000 + ((g as u32 / p) % m + o);
                assert_eq!(v, want, "p={p} m={m} o={o} element {g}");
            }
        }
        // Out of bounds is still reported when the walk is filled once.
        let err = run(1, 1024, 1, 1024, 3 * 4096).expect_err("out of bounds");
        assert!(err.to_string().contains("out-of-bounds"), "{err}");
    }

    /// `y[i] = b[o]`, the index a parameter itself or moved into a register first (what the
    /// element-wise kernels load a broadcast scalar with).
    fn run_scalar(moved: bool, o: u32, b_len: usize, n: usize) -> Result<Vec<u32>, BackendError> {
        let index = if moved {
            "    mov.u32 %i, o;\n    ld.u32 %v, b[%i];\n"
        } else {
            "    ld.u32 %v, b[o];\n"
        };
        let text = format!(
            ".kernel splat\n.param .buf.u32 b\n.param .buf.u32 y .rw\n.param .u32 n\n.param .u32 o\n    setp.ge.u32 %done, %gid, n;\n@%done exit;\n{index}    st.u32 y[%gid], %v;\n"
        );
        launch(&text, &[o], b_len, n)
    }

    #[test]
    fn a_broadcast_scalar_is_splat_and_checked() {
        for moved in [false, true] {
            // Across chunks (4096 elements), the last element of b, and b's only element.
            for (o, b_len, n) in [(3, 10, 10_000), (9, 10, 5000), (0, 1, 70_000)] {
                let got = run_scalar(moved, o, b_len, n).expect("in bounds");
                assert!(got.iter().all(|&v| v == 1000 + o), "moved={moved} o={o}");
            }
            let err = run_scalar(moved, 10, 10, 5000).expect_err("out of bounds");
            assert!(err.to_string().contains("out-of-bounds"), "{err}");
        }
    }

    #[test]
    fn a_walk_past_its_buffer_is_reported_by_the_interpreter() {
        // m + o reaches one past the end of b.
        let err = run(1, 8, 3, 10, 5000).expect_err("out of bounds");
        assert!(err.to_string().contains("out-of-bounds"), "{err}");
        // A zero divisor (x / 0 = x in the ISA) goes to the interpreter too, which is right.
        let got = run(0, 3, 0, 3, 100).expect("in bounds");
        assert!(got
            .iter()
            .enumerate()
            .all(|(g, &v)| v == 1000 + g as u32 % 3));
    }

    #[test]
    fn shared_index_steps_are_skipped_once_every_reader_is() {
        // div q (0) -> rem r (1) -> add a (2) -> ld (4); rem r -> add b (3) -> ld (5).
        let (q, r, a, b) = (0u32, 1u32, 2u32, 3u32);
        let feeds = [
            Feed {
                def: 2,
                reg: a,
                reader: 4,
            },
            Feed {
                def: 1,
                reg: r,
                reader: 2,
            },
            Feed {
                def: 0,
                reg: q,
                reader: 1,
            },
            Feed {
                def: 3,
                reg: b,
                reader: 5,
            },
            Feed {
                def: 1,
                reg: r,
                reader: 3,
            },
            Feed {
                def: 0,
                reg: q,
                reader: 1,
            },
        ];
        let loads = [false, false, false, false, true, true];
        let skip = skippable(&feeds, &[1, 2, 1, 1], &loads);
        assert_eq!(skip, [true, true, true, true, false, false]);
        // Something else reads r: the rem and the div it needs run; the adds need not.
        let skip = skippable(&feeds, &[1, 3, 1, 1], &loads);
        assert_eq!(skip, [false, false, true, true, false, false]);
        // The first load was not recognized: its add runs, so the shared steps run too.
        let skip = skippable(
            &feeds,
            &[1, 2, 1, 1],
            &[false, false, false, false, false, true],
        );
        assert_eq!(skip, [false, false, false, true, false, false]);
    }
}
