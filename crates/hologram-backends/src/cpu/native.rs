//! Recognized element-wise maps run as native loops: the map's instructions are applied to
//! chunks of elements with no masks, no scheduler and, when no output overlaps an input, no
//! copies at all (loads read the input buffers in place; the last op writes the output in place).

use hologram_compiler::patterns::MapPattern;
use hologram_isa::{BinaryOp, Op, Special, Type};
use smallvec::SmallVec;

use super::compile::{CpuKernel, Slot, XOp, MAX_CONST_SLOTS};
use super::fanout::{self, Claims};
use super::memops::ArrayView;
use super::native_divide::InvariantDivisor;
use super::native_scalar::{self, ScalarOp};
use super::native_walk::{self, WalkLoad};

/// Elements per chunk: registers of a chunk stay in L1/L2.
const CHUNK: usize = 4096;
/// Most pairs of accesses a launch compares to choose a path (see `in_place_is_safe`).
const PAIR_BUDGET: usize = 1 << 16;
/// Launches smaller than this run on the calling thread.
pub(crate) const PARALLEL_MIN: usize = 1 << 16;

/// What the CPU backend kept from recognizing a map.
pub(crate) struct NativeMap {
    pattern: MapPattern,
    /// Per body instruction: a load whose register can alias the input buffer.
    zero_copy_load: Vec<bool>,
    /// Per body instruction: a store whose register can live in the output buffer.
    direct_store: Vec<bool>,
    /// The `%gid` slot, when some instruction that runs reads it (an index computation, a
    /// gather's index): only then does each chunk write the element indexes there. Loads and
    /// stores at `%gid` address the chunk's range directly and never read the slot.
    gid_slot: Option<Slot>,
    /// Constants (indexes into `CpuKernel::consts`) with a slot of their own that a running
    /// instruction reads: each task splats only these (the guard's bound, for one, is not).
    splatted: Vec<usize>,
    /// Per register: the body index of its (last) definition.
    def_at: Vec<usize>,
    /// Per register: the body index of its last read.
    last_use: Vec<usize>,
    /// Stores and loads in the body.
    stores: usize,
    loads: usize,
    /// Buffers accessed at `%gid` (loaded there, or stored): they must hold every element.
    /// Buffers only gathered from may be smaller (a broadcast operand): each gathered index is
    /// checked.
    dense_params: Vec<u32>,
    /// Buffers loaded at a computed index somewhere in the body (read anywhere in their range).
    gathered: Vec<u32>,
    /// Per body instruction: a `div.u32`/`rem.u32` by a launch constant (the index of that
    /// constant in `CpuKernel::consts`, and whether it is `rem`), run without hardware divides.
    invariant_divisions: Vec<Option<(usize, bool)>>,
    /// Per body instruction: a gathered load that walks one dimension of a broadcast operand
    /// (see `native_walk`), run as contiguous runs and splats.
    walks: Vec<Option<WalkLoad>>,
    /// Per body instruction: it only computes the index of a walk load, which needs none.
    skip: Vec<bool>,
    /// Per body instruction: a walk load into a register nothing else writes. When the walk
    /// repeats within a chunk's width (a broadcast scalar, period 1: torch lowering's 0-d
    /// scalars; a bias row of 1024 over 4096-element chunks), every chunk loads what the first
    /// did, so each participant fills the register once per launch, not once per chunk.
    keeps: Vec<bool>,
    /// Per body instruction: a binary operation on a walk's register that takes the walk's
    /// values as they are, run by run, in launches whose runs are long (`native_scalar`).
    scalar_ops: Vec<Option<ScalarOp>>,
}

impl NativeMap {
    pub(crate) fn plan(k: &CpuKernel, pattern: MapPattern) -> NativeMap {
        let body = &k.kernel.insts[pattern.body_start..];
        let mut defs = vec![0u32; k.num_slots];
        let mut uses = vec![0u32; k.num_slots];
        // Registers some computing instruction (not a load) writes.
        let mut computed = vec![false; k.num_slots];
        for inst in body {
            if let Some(&d) = inst.op.dst() {
                defs[d as usize] += 1;
                computed[d as usize] |= !matches!(inst.op, Op::Ld { .. });
            }
            for (s, _) in inst.op.sources() {
                if let Some(&r) = s.as_reg() {
                    uses[r as usize] += 1;
                }
            }
        }
        // A register that lives in an output buffer is overwritten by any other store to that
        // buffer: only a buffer stored exactly once may hold a register.
        let mut stores_to = vec![0u32; k.kernel.params.len()];
        for inst in body {
            if let Op::St { mem, .. } = &inst.op {
                if let Some(c) = stores_to.get_mut(mem.array as usize) {
                    *c += 1;
                }
            }
        }
        let mut claimed = vec![false; k.num_slots];
        let mut zero_copy_load = vec![false; body.len()];
        let mut direct_store = vec![false; body.len()];
        for (i, inst) in body.iter().enumerate() {
            match &inst.op {
                Op::Ld { dst, mem, .. }
                    if defs[*dst as usize] == 1
                        && !claimed[*dst as usize]
                        && matches!(
                            mem.index,
                            hologram_isa::Operand::Special(Special::GidLinear)
                        ) =>
                {
                    zero_copy_load[i] = true;
                    claimed[*dst as usize] = true;
                }
                Op::St { src, mem, .. }
                    if stores_to.get(mem.array as usize).copied() == Some(1) =>
                {
                    if let Some(&r) = src.as_reg() {
                        // The register must be written once, by a computing instruction.
                        if defs[r as usize] == 1 && !claimed[r as usize] && computed[r as usize] {
                            direct_store[i] = true;
                            claimed[r as usize] = true;
                        }
                    }
                }
                _ => {}
            }
        }
        let gid_slot = k
            .specials
            .iter()
            .find(|(s, _)| *s == Special::GidLinear)
            .map(|&(_, slot)| slot);
        let mut def_at = vec![0; k.num_slots];
        let mut last_use = vec![0; k.num_slots];
        for (i, inst) in body.iter().enumerate() {
            for (s, _) in inst.op.sources() {
                if let Some(&r) = s.as_reg() {
                    last_use[r as usize] = i;
                }
            }
            if let Some(&d) = inst.op.dst() {
                def_at[d as usize] = i;
            }
        }
        let mut dense_params = pattern.outputs.clone();
        let mut dense = vec![false; k.kernel.params.len()];
        for &p in &dense_params {
            dense[p as usize] = true;
        }
        for inst in body {
            if let Op::Ld { mem, .. } = &inst.op {
                if matches!(
                    mem.index,
                    hologram_isa::Operand::Special(Special::GidLinear)
                ) && !std::mem::replace(&mut dense[mem.array as usize], true)
                {
                    dense_params.push(mem.array);
                }
            }
        }
        let mut gathered: Vec<u32> = Vec::new();
        for inst in body {
            if let Op::Ld { mem, .. } = &inst.op {
                let at_gid = matches!(
                    mem.index,
                    hologram_isa::Operand::Special(Special::GidLinear)
                );
                if !at_gid && !gathered.contains(&mem.array) {
                    gathered.push(mem.array);
                }
            }
        }
        let stores = body
            .iter()
            .filter(|i| matches!(i.op, Op::St { .. }))
            .count();
        let loads = body
            .iter()
            .filter(|i| matches!(i.op, Op::Ld { .. }))
            .count();
        let invariant_divisions = body
            .iter()
            .map(|inst| invariant_division(k, &inst.op))
            .collect();
        let def_of: Vec<Option<usize>> = (0..k.num_slots)
            .map(|r| (defs[r] == 1).then_some(def_at[r]))
            .collect();
        let mut walks = vec![None; body.len()];
        let mut feeds = Vec::new();
        for (i, slot) in walks.iter_mut().enumerate() {
            if let Some((walk, feeding)) = native_walk::recognize(k, body, i, &def_of) {
                *slot = Some(walk);
                feeds.extend(feeding);
            }
        }
        let is_walk: Vec<bool> = walks.iter().map(Option::is_some).collect();
        // A walk load whose slot nothing else writes keeps what it loaded from chunk to chunk.
        let keeps: Vec<bool> = body
            .iter()
            .zip(&walks)
            .map(|(inst, walk)| {
                walk.is_some() && inst.op.dst().is_some_and(|&d| defs[d as usize] == 1)
            })
            .collect();
        let skip = native_walk::skippable(&feeds, &uses, &is_walk);
        let scalar_ops = native_scalar::plan(body, &walks, &defs, &uses, &def_at);
        let gid_slot = gid_slot.filter(|&g| reads_slot(k, pattern.body_start, &skip, &walks, g));
        let splatted = (0..k.consts.len().min(MAX_CONST_SLOTS))
            .filter(|&i| reads_slot(k, pattern.body_start, &skip, &walks, k.consts[i].0))
            .collect();
        NativeMap {
            scalar_ops,
            walks,
            skip,
            keeps,
            pattern,
            invariant_divisions,
            stores,
            loads,
            zero_copy_load,
            direct_store,
            gid_slot,
            splatted,
            def_at,
            last_use,
            dense_params,
            gathered,
        }
    }

    /// The number of elements, when the launch can take the native path: every buffer accessed
    /// at `%gid` must hold them (otherwise the interpreter reports the out-of-bounds access).
    pub(crate) fn count(
        &self,
        globals: &[ArrayView],
        scalars: &[Option<u64>],
        lanes: u64,
    ) -> Option<usize> {
        let mut n = lanes;
        if let Some(p) = self.pattern.bound {
            n = n.min(scalars.get(p as usize).copied().flatten()? & 0xffff_ffff);
        }
        for &p in &self.dense_params {
            if globals.get(p as usize)?.len < n {
                return None;
            }
        }
        Some(n as usize)
    }

    /// True when loads may read inputs in place and results may be written straight into the
    /// outputs: outputs do not overlap each other, and wherever an output overlaps an input, every
    /// read of the loaded value happens no later than the instruction that writes the output.
    fn in_place_is_safe(
        &self,
        k: &CpuKernel,
        globals: &[ArrayView],
        sizes: &[usize],
        n: usize,
    ) -> bool {
        let range = |p: u32| {
            let start = globals[p as usize].base as usize;
            (start, start + n * sizes[p as usize])
        };
        let overlaps = |a: (usize, usize), b: (usize, usize)| a.0 < b.1 && b.0 < a.1;
        let outs = &self.pattern.outputs;
        let body = &k.kernel.insts[self.pattern.body_start..];
        // The checks below cost the product of stores and loads; past a few thousand pairs the
        // copying path (always correct) is taken instead of proving the in-place one safe.
        if outs.len() * outs.len() + self.stores * self.loads > PAIR_BUDGET {
            return false;
        }
        for (i, &p) in outs.iter().enumerate() {
            if outs[i + 1..].iter().any(|&q| overlaps(range(p), range(q))) {
                return false;
            }
        }
        for (si, st) in body.iter().enumerate() {
            let Op::St { mem, src, .. } = &st.op else {
                continue;
            };
            let out = range(mem.array);
            // When the output is written: at the defining instruction (direct) or at the store.
            let written_at = match (self.direct_store[si], src.as_reg()) {
                (true, Some(&r)) => self.def_at[r as usize],
                _ => si,
            };
            for (li, ld) in body.iter().enumerate() {
                let Op::Ld { dst, mem: lm, .. } = &ld.op else {
                    continue;
                };
                if !overlaps(out, range(lm.array)) {
                    continue;
                }
                // A zero-copy load reads the memory whenever its register is read: every read
                // must come before the output is written. A copying load between an early
                // (direct) write and the store itself would see the new value too soon.
                let too_late = if self.zero_copy_load[li] {
                    self.last_use[*dst as usize] > written_at
                } else {
                    written_at < li && li < si
                };
                if too_late {
                    return false;
                }
            }
        }
        true
    }

    /// True when this launch may run natively: a gather (indexes computed per element) only
    /// runs natively when no output overlaps an input, so that if an index turns out to be out of
    /// bounds the interpreter can run the launch again from the start and report it.
    pub(crate) fn can_run(&self, globals: &[ArrayView], sizes: &[usize], n: usize) -> bool {
        if !self.pattern.gather {
            return true;
        }
        let (ins, outs) = (self.pattern.inputs.len(), self.pattern.outputs.len());
        if outs * (ins + outs) > PAIR_BUDGET {
            // Too many buffers to compare cheaply: the interpreter runs it.
            return false;
        }
        // Outputs are written at 0..n; an input may be read anywhere in its buffer, and only
        // there (every read is bounds-checked against the buffer's length). Counting `n`
        // elements of a shorter input (a broadcast column) would reach into whatever the
        // allocator placed after it, and send the launch to the interpreter by chance.
        let range = |p: u32, elems: usize| {
            let start = globals[p as usize].base as usize;
            (start, start + elems * sizes[p as usize])
        };
        let whole = |p: u32| range(p, globals[p as usize].len as usize);
        let overlaps = |a: (usize, usize), b: (usize, usize)| a.0 < b.1 && b.0 < a.1;
        self.pattern.outputs.iter().all(|&o| {
            self.pattern
                .inputs
                .iter()
                .all(|&i| !overlaps(range(o, n), whole(i)))
                && self
                    .pattern
                    .outputs
                    .iter()
                    .all(|&q| q == o || !overlaps(range(o, n), range(q, n)))
        })
    }

    /// True when chunks of elements may run on different threads: a byte one chunk writes is
    /// touched by no other chunk. Chunk `c` reads and writes elements of its own range of every
    /// buffer accessed at `%gid`, and reads gathered buffers anywhere; so an output may overlap
    /// another buffer only where both are accessed at `%gid`, with the same element size at the
    /// same address (an in-place map), and no gathered buffer at all.
    fn chunks_are_disjoint(&self, globals: &[ArrayView], sizes: &[usize], n: usize) -> bool {
        use super::bind::{bytes_of, overlaps, whole};
        let dense = |p: u32| bytes_of(&globals[p as usize], sizes[p as usize], n);
        let outs = &self.pattern.outputs;
        if outs.len() * (self.dense_params.len() + self.gathered.len()) > PAIR_BUDGET {
            return false;
        }
        outs.iter().all(|&o| {
            let written = dense(o);
            let same = |p: u32| {
                globals[p as usize].base == globals[o as usize].base
                    && sizes[p as usize] == sizes[o as usize]
            };
            self.dense_params
                .iter()
                .all(|&p| p == o || !overlaps(written, dense(p)) || same(p))
                && self
                    .gathered
                    .iter()
                    .all(|&p| !overlaps(written, whole(globals, sizes, p as usize)))
        })
    }

    /// Runs the map over `n` elements; false when a gathered index was out of bounds (the
    /// interpreter then runs the launch again: see [`NativeMap::can_run`]). `parallel` says
    /// whether the work may spread over rayon's pool (see `device_lock.rs`).
    pub(crate) fn run(
        &self,
        k: &CpuKernel,
        globals: &[ArrayView],
        const_bits: &[u64],
        sizes: &[usize],
        n: usize,
        parallel: bool,
    ) -> bool {
        let failed = std::sync::atomic::AtomicBool::new(false);
        let fast = self.in_place_is_safe(k, globals, sizes, n);
        // Per body instruction, this launch's divisor; empty (no allocation) for the many maps
        // without one.
        let divisions: Vec<Option<InvariantDivisor>> =
            if self.invariant_divisions.iter().any(Option::is_some) {
                self.invariant_divisions
                    .iter()
                    .map(|d| d.map(|(c, rem)| InvariantDivisor::new(const_bits[c] as u32, rem)))
                    .collect()
            } else {
                Vec::new()
            };
        // Small launches get a register file as wide as the launch, not a full chunk; kernels
        // with many registers get narrower chunks, so that the file stays with the thread
        // (`KEEP_SCRATCH_WORDS`) instead of being allocated and zeroed again by every launch.
        let fit = (KEEP_SCRATCH_WORDS / k.num_slots.max(1)).max(64) & !63;
        let width = CHUNK.min(fit).min(n.max(1));
        let chunks = n.div_ceil(width);
        // Walk loads that repeat with a period dividing the width load the same elements into
        // every chunk (each chunk starts at a multiple of the period; past 2^32 elements only a
        // scalar's does, `%gid` being 32 bits); no allocation for the maps without walks.
        let once: SmallVec<[bool; 16]> = if self.keeps.iter().any(|&k| k) {
            self.walks
                .iter()
                .zip(&self.keeps)
                .map(|(walk, &keeps)| {
                    keeps
                        && walk
                            .as_ref()
                            .and_then(|w| w.period(const_bits))
                            .is_some_and(|period| {
                                width as u64 % period == 0 && (period == 1 || n as u64 <= 1 << 32)
                            })
                })
                .collect()
        } else {
            SmallVec::new()
        };
        // Scalar operations taking their walk's values as they are, and the walk loads they
        // replace; empty for most maps.
        let scalar = native_scalar::active(&self.scalar_ops, &self.walks, const_bits);
        let replaced = |i: usize| scalar.get(i).copied().unwrap_or(false);
        let filled_once = |i: usize| once.get(i).copied().unwrap_or(false) && !replaced(i);
        let make_state = |s: &mut Scratch| {
            // Not cleared: a map reads no register before writing it (`recognize_map` takes no
            // kernel with zero-initialized registers), so what an earlier launch left is never
            // read, and zeroing the file cost as much as a small map's own work.
            if s.file.len() < k.num_slots * width {
                s.file.resize(k.num_slots * width, 0);
            }
            for &i in &self.splatted {
                let (slot, ty, _) = k.consts[i];
                let region = &mut s.file[slot as usize * width..(slot as usize + 1) * width];
                fill_splat(region, const_bits[i], ty.size_bytes());
            }
            if s.idx.len() < width {
                s.idx.resize(width, 0);
            }
            let body = &k.insts[self.pattern.body_start..];
            for (i, x) in body.iter().enumerate() {
                if let (true, Some(walk), XOp::Load { d, array, .. }) =
                    (filled_once(i), &self.walks[i], &x.op)
                {
                    // SAFETY: the file holds `num_slots * width` words (resized above).
                    let region = unsafe { s.file.as_mut_ptr().add(*d as usize * width) };
                    // SAFETY: the slot owns `width` u64 words, room for `width` elements of the
                    // load's type; the view is a live buffer no chunk writes (`can_run`).
                    let ok = unsafe {
                        walk.fill(
                            const_bits,
                            0,
                            width,
                            region as *mut u8,
                            &globals[*array as usize],
                        )
                    };
                    if !ok {
                        failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
        };
        let run_chunk = |s: &mut Scratch, c: usize| {
            if failed.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            let start = c * width;
            let len = width.min(n - start);
            let base = s.file.as_mut_ptr();
            let idx = &mut s.idx;
            let ptrs = &mut s.ptrs;
            ptrs.clear();
            // SAFETY: every slot owns width u64 words of the file.
            ptrs.extend((0..k.num_slots).map(|s| unsafe { base.add(s * width) as *mut u8 }));
            if let Some(g) = self.gid_slot {
                let p = ptrs[g as usize] as *mut u32;
                for l in 0..len {
                    // SAFETY: the gid slot holds width u32 values.
                    unsafe { *p.add(l) = (start + l) as u32 };
                }
            }
            let body = &k.insts[self.pattern.body_start..];
            if fast {
                for (i, x) in body.iter().enumerate() {
                    match &x.op {
                        XOp::Load { d, array, size, .. } if self.zero_copy_load[i] => {
                            // SAFETY: `count` checked the buffer holds n elements.
                            ptrs[*d as usize] =
                                unsafe { globals[*array as usize].base.add(start * size) };
                        }
                        XOp::Store {
                            array, src, size, ..
                        } if self.direct_store[i] => {
                            // SAFETY: as above, for the output buffer.
                            ptrs[*src as usize] =
                                unsafe { globals[*array as usize].base.add(start * size) };
                        }
                        _ => {}
                    }
                }
            }
            for (i, x) in body.iter().enumerate() {
                for &(slot, ci) in &x.fills {
                    let (_, ty, _) = k.consts[ci as usize];
                    // SAFETY: staging slots are never zero-copy or direct, so the pointer is
                    // still the slot's own `width` words of the file.
                    let region = unsafe {
                        std::slice::from_raw_parts_mut(ptrs[slot as usize] as *mut u64, width)
                    };
                    fill_splat(region, const_bits[ci as usize], ty.size_bytes());
                }
                if replaced(i) {
                    if let Some(op) = &self.scalar_ops[i] {
                        // SAFETY: every slot pointer addresses the chunk's elements; the walk's
                        // buffer is a live input no chunk writes (`can_run`).
                        let ok = unsafe {
                            op.run(
                                &x.op,
                                body,
                                &self.walks,
                                globals,
                                const_bits,
                                ptrs,
                                start,
                                len,
                            )
                        };
                        if !ok {
                            failed.store(true, std::sync::atomic::Ordering::Relaxed);
                            return;
                        }
                    }
                    continue;
                }
                if self.skip[i] || filled_once(i) {
                    continue;
                }
                if let (Some(walk), XOp::Load { d, array, .. }) = (&self.walks[i], &x.op) {
                    // SAFETY: the destination slot holds `width >= len` elements of the load's
                    // type; the view is a live buffer of elements of that size, which no chunk
                    // writes (`can_run`: gathered inputs overlap no output).
                    let ok = unsafe {
                        walk.fill(
                            const_bits,
                            start,
                            len,
                            ptrs[*d as usize],
                            &globals[*array as usize],
                        )
                    };
                    if !ok {
                        failed.store(true, std::sync::atomic::Ordering::Relaxed);
                        return;
                    }
                    continue;
                }
                if let (Some(Some(div)), XOp::Compute { d, a, .. }) = (divisions.get(i), &x.op) {
                    // SAFETY: both slots hold `len` u32 values (the instruction is `.u32`).
                    unsafe { div.apply_raw(len, ptrs[*d as usize], ptrs[*a as usize]) };
                    continue;
                }
                match &x.op {
                    // SAFETY: slot pointers address `len` valid elements of the right type.
                    XOp::Compute { f, d, a, b, c } => unsafe {
                        f(
                            len,
                            ptrs[*d as usize],
                            ptrs[*a as usize],
                            ptrs[*b as usize],
                            ptrs[*c as usize],
                            None,
                        )
                    },
                    XOp::Load {
                        f,
                        widen,
                        d,
                        array,
                        index,
                        contiguous: false,
                        ..
                    } => {
                        // A gather: widen the computed indexes, check and load them.
                        // SAFETY: the index slot holds `len` integers of the widened type; the
                        // load checks every index against the buffer's length.
                        unsafe { widen(len, ptrs[*index as usize], idx) };
                        // SAFETY: the destination slot holds `width >= len` elements of the
                        // load's type; the view is a live buffer of elements of that size, which
                        // no chunk writes (`can_run`: gathered inputs overlap no output).
                        if unsafe {
                            f(
                                len,
                                ptrs[*d as usize],
                                &idx[..len],
                                &globals[*array as usize],
                                None,
                            )
                        }
                        .is_err()
                        {
                            failed.store(true, std::sync::atomic::Ordering::Relaxed);
                            return;
                        }
                    }
                    // In fast mode, zero-copy loads and direct stores need no copy.
                    XOp::Load { d, array, size, .. } if !(fast && self.zero_copy_load[i]) => {
                        // SAFETY: the buffer holds n elements; the slot holds width.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                globals[*array as usize].base.add(start * size),
                                ptrs[*d as usize],
                                len * size,
                            )
                        };
                    }
                    XOp::Store {
                        array, src, size, ..
                    } if !(fast && self.direct_store[i]) => {
                        // SAFETY: as for loads; `copy` allows overlap in safe mode.
                        unsafe {
                            std::ptr::copy(
                                ptrs[*src as usize],
                                globals[*array as usize].base.add(start * size),
                                len * size,
                            )
                        };
                    }
                    _ => {}
                }
            }
        };
        // Chunks are taken one at a time by the calling thread and, past PARALLEL_MIN elements,
        // by rayon's workers as they wake (below it, waking them costs more than the work).
        // Each participant sets up its registers once.
        let helpers =
            if n < PARALLEL_MIN || !parallel || !self.chunks_are_disjoint(globals, sizes, n) {
                0
            } else {
                rayon::current_num_threads().saturating_sub(1)
            };
        let participant = |claims: &mut Claims<'_>| {
            let mut s = Scratch::take();
            make_state(&mut s);
            while let Some(c) = claims.next_unit() {
                run_chunk(&mut s, c);
            }
            s.put_back();
        };
        let ptr_safe = PtrSafe(&participant);
        fanout::share(chunks, helpers, &|claims| ptr_safe.call(claims));
        !failed.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// True when an instruction of the map's body that runs natively reads `slot`: a computation's
/// operand, a gather's index or a stored value. Contiguous loads and stores (at `%gid` or a copy
/// of it) and walk loads address the chunk's elements from its start, and skipped instructions
/// do not run.
fn reads_slot(
    k: &CpuKernel,
    body_start: usize,
    skip: &[bool],
    walks: &[Option<WalkLoad>],
    slot: Slot,
) -> bool {
    k.insts[body_start..]
        .iter()
        .enumerate()
        .any(|(i, x)| match &x.op {
            _ if skip[i] || walks[i].is_some() => false,
            XOp::Compute { a, b, c, .. } => [a, b, c].contains(&&slot),
            XOp::Load {
                index,
                contiguous: false,
                ..
            } => *index == slot,
            XOp::Store { src, .. } => *src == slot,
            _ => false,
        })
}

/// `(constant index, is rem)` when `op` is a `div.u32` or `rem.u32` whose divisor is a scalar
/// parameter or a literal (the same for every element of a launch).
fn invariant_division(k: &CpuKernel, op: &Op<u32>) -> Option<(usize, bool)> {
    let Op::Binary {
        op: bop @ (BinaryOp::Div | BinaryOp::Rem),
        ty: Type::U32,
        b,
        ..
    } = op
    else {
        return None;
    };
    let c = native_walk::launch_constant(k, b)?;
    Some((c, *bop == BinaryOp::Rem))
}

/// A task's register file, gather indexes and slot pointers, kept per thread between launches:
/// a small launch would otherwise spend much of its time in the allocator (a register file of
/// a kilobyte or more is a "large" request, which makes glibc consolidate its free lists).
#[derive(Default)]
struct Scratch {
    file: Vec<u64>,
    idx: Vec<i64>,
    ptrs: Vec<*mut u8>,
}

/// Register files up to this many words (512 KiB) stay with the thread after a launch: full
/// chunks for kernels of up to 16 registers, narrower ones past that.
const KEEP_SCRATCH_WORDS: usize = 1 << 16;

thread_local! {
    static SCRATCH: std::cell::Cell<Option<Box<Scratch>>> = const { std::cell::Cell::new(None) };
}

impl Scratch {
    /// This thread's scratch (a fresh one if another task on the thread holds it).
    fn take() -> Box<Scratch> {
        SCRATCH.with(|c| c.take()).unwrap_or_default()
    }

    fn put_back(mut self: Box<Self>) {
        if self.file.capacity() > KEEP_SCRATCH_WORDS {
            return;
        }
        // No pointer into a launch's buffers outlives it.
        self.ptrs.clear();
        SCRATCH.with(|c| c.set(Some(self)));
    }
}

/// Fills the first `region.len()` elements of `size` bytes with the low bytes of `bits`
/// (a constant's value splatted across its register slot).
fn fill_splat(region: &mut [u64], bits: u64, size: usize) {
    let width = region.len();
    match size {
        8 => region.fill(bits),
        4 => bytemuck::cast_slice_mut::<u64, u32>(region)[..width].fill(bits as u32),
        2 => bytemuck::cast_slice_mut::<u64, u16>(region)[..width].fill(bits as u16),
        _ => bytemuck::cast_slice_mut::<u64, u8>(region)[..width].fill(bits as u8),
    }
}

/// Lets the participant closure (which captures raw buffer pointers) cross to rayon workers.
struct PtrSafe<'a, F>(&'a F);

impl<F: Fn(&mut Claims<'_>)> PtrSafe<'_, F> {
    fn call(&self, claims: &mut Claims<'_>) {
        (self.0)(claims)
    }
}
// SAFETY: the closure only dereferences its buffer pointers for its own chunk's elements, and
// runs on several threads only when `chunks_are_disjoint` found that no byte a chunk writes is
// touched by another chunk; the buffers outlive the launch, and the device lock keeps every
// other copy and launch away.
unsafe impl<F> Sync for PtrSafe<'_, F> {}
// SAFETY: as for `Sync`.
unsafe impl<F> Send for PtrSafe<'_, F> {}
