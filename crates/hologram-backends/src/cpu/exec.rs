//! Runs the blocks of a launch: all lanes of a block execute each instruction together, with
//! active masks for divergence, so barriers and shared memory behave as on a GPU.
//!
//! Divergence: lanes that take different paths form groups, each with its own program counter,
//! mask and return stack. The group with the lowest program counter runs first, and groups that
//! arrive at the same instruction (with the same return stack) merge again, which reconverges
//! structured code at its join point. A group at a barrier waits until every live lane of the
//! block is at that barrier.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use hologram_isa::Special;
use smallvec::SmallVec;

use super::compile::{ConstSource, CpuKernel, Slot, XOp};
use super::deadline::Deadline;
use super::memops::{copy_lanes, ArrayView};
use crate::error::{BackendError, Result};

/// What every block of one launch shares.
pub(crate) struct LaunchCtx<'a> {
    pub k: &'a CpuKernel,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Lanes per block.
    pub block_lanes: usize,
    /// Blocks run together as one wide batch (1 when the kernel uses barriers or shared
    /// memory, whose scope is a single block).
    pub batch_blocks: usize,
    /// Lanes per batch: `block_lanes * batch_blocks`.
    pub lanes: usize,
    /// `%gid` is `block index * block_lanes + lane in block` for this launch's shape (see
    /// [`gid_is_block_major`]): consecutive lanes of a batch have consecutive `%gid`s.
    pub gid_block_major: bool,
    /// One view per parameter (scalar parameters get an empty view).
    pub globals: Vec<ArrayView>,
    /// Bits of each constant slot, in `k.consts` order.
    pub const_bits: Vec<u64>,
    /// How long one batch may run (the launch timeout), `None` for no limit.
    pub timeout: Option<Duration>,
    /// Set once any batch of the launch failed: the others stop at their next check.
    pub failed: &'a AtomicBool,
}

// SAFETY: the raw pointers in the views point at buffers kept alive for the whole launch by the
// caller; blocks only touch them through bounds-checked loads, stores and atomics, which are
// relaxed atomics of the element size when batches run on several threads (`racy` views), and
// batches share a thread when buffers overlap in a way atomics cannot cover (`bind.rs`).
unsafe impl Sync for LaunchCtx<'_> {}

struct Group {
    pc: u32,
    mask: Vec<u8>,
    active: usize,
    stack: Vec<u32>,
    waiting: bool,
}

/// A worker's state, reused for every block it runs.
pub(crate) struct BlockState {
    lanes: usize,
    file: Vec<u64>,
    shared: Vec<u64>,
    scratch: Vec<u64>,
    /// Views of every array: parameters, then shared, then scratch.
    views: Vec<ArrayView>,
    idx: Vec<i64>,
    mask: Vec<u8>,
    taken: Vec<u8>,
    groups: Vec<Group>,
    spare_masks: Vec<Vec<u8>>,
    block: u64,
    /// The running batch's clock.
    deadline: Deadline,
}

/// True when, for a launch of this shape, `%gid` (x fastest over the whole launch) equals
/// `block index * lanes per block + lane in block`, the order in which the interpreter lays lanes
/// out: always for 1-D blocks, and whenever the axes below the block's first multi-lane axis span
/// a single block.
pub(crate) fn gid_is_block_major(grid: [u32; 3], block: [u32; 3]) -> bool {
    let [gx, gy, _] = grid;
    let [_, by, bz] = block;
    (bz == 1 && (by == 1 || gx == 1)) || (gx == 1 && gy == 1)
}

fn fill_slot(file: &mut [u64], lanes: usize, slot: Slot, size: usize, bits: u64) {
    let region = &mut file[slot as usize * lanes..(slot as usize + 1) * lanes];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(region);
    match size {
        1 => bytes[..lanes].fill(bits as u8),
        2 => bytemuck::cast_slice_mut::<u8, u16>(&mut bytes[..lanes * 2]).fill(bits as u16),
        4 => bytemuck::cast_slice_mut::<u8, u32>(&mut bytes[..lanes * 4]).fill(bits as u32),
        _ => region.fill(bits),
    }
}

fn write_u32_slot(file: &mut [u64], lanes: usize, slot: Slot, f: impl Fn(usize) -> u32) {
    let region = &mut file[slot as usize * lanes..(slot as usize + 1) * lanes];
    let vals: &mut [u32] = &mut bytemuck::cast_slice_mut::<u64, u32>(region)[..lanes];
    for (l, v) in vals.iter_mut().enumerate() {
        *v = f(l);
    }
}

impl BlockState {
    pub(crate) fn new(ctx: &LaunchCtx<'_>) -> Self {
        let k = ctx.k;
        let lanes = ctx.lanes;
        let kernel = &k.kernel;
        let shared_words: usize = kernel.shared.iter().map(|a| a.bytes().div_ceil(8)).sum();
        let scratch_words: usize = kernel
            .scratch
            .iter()
            .map(|a| (a.bytes() * lanes).div_ceil(8))
            .sum();
        let mut st = BlockState {
            lanes,
            file: vec![0u64; k.num_slots * lanes],
            shared: vec![0u64; shared_words],
            scratch: vec![0u64; scratch_words],
            views: Vec::new(),
            idx: vec![0; lanes],
            mask: vec![0; lanes],
            taken: vec![0; lanes],
            groups: Vec::new(),
            spare_masks: Vec::new(),
            block: 0,
            deadline: Deadline::default(),
        };
        st.views = ctx.globals.clone();
        let mut off = 0usize;
        for a in &kernel.shared {
            // SAFETY: `off` stays within `shared` (sized from the same declarations).
            let base = unsafe { (st.shared.as_mut_ptr() as *mut u8).add(off * 8) };
            st.views.push(ArrayView {
                base,
                len: a.len as u64,
                per_lane: false,
                lanes,
                // A block's `.shared` memory belongs to the worker running it.
                racy: false,
            });
            off += a.bytes().div_ceil(8);
        }
        let mut off = 0usize;
        for a in &kernel.scratch {
            // SAFETY: as above, within `scratch`.
            let base = unsafe { (st.scratch.as_mut_ptr() as *mut u8).add(off * 8) };
            st.views.push(ArrayView {
                base,
                len: a.len as u64,
                per_lane: true,
                lanes,
                racy: false,
            });
            off += (a.bytes() * lanes).div_ceil(8);
        }
        // Constants and the launch-invariant special registers are written once per worker.
        for (i, &(slot, ty, _)) in k.consts.iter().enumerate() {
            fill_slot(
                &mut st.file,
                lanes,
                slot,
                ty.size_bytes(),
                ctx.const_bits[i],
            );
        }
        let [bx, by, bz] = ctx.block.map(|v| v as usize);
        for &(s, slot) in &k.specials {
            let (bx32, by32, bz32) = (bx as u32, by as u32, bz as u32);
            let w = ctx.block_lanes;
            match s {
                Special::Tid(d) => write_u32_slot(&mut st.file, lanes, slot, |lane| {
                    let l = lane % w;
                    [
                        (l % bx) as u32,
                        ((l / bx) % by) as u32,
                        (l / (bx * by)) as u32,
                    ][d.index()]
                }),
                Special::Ntid(d) => fill_slot(
                    &mut st.file,
                    lanes,
                    slot,
                    4,
                    [bx32, by32, bz32][d.index()] as u64,
                ),
                Special::Nctaid(d) => {
                    fill_slot(&mut st.file, lanes, slot, 4, ctx.grid[d.index()] as u64)
                }
                _ => {}
            }
        }
        st
    }

    /// Sets the per-block special registers for a batch starting at block `first`.
    fn begin_batch(&mut self, ctx: &LaunchCtx<'_>, first: u64) {
        let k = ctx.k;
        let lanes = self.lanes;
        let w = ctx.block_lanes;
        let [gx, gy, _] = ctx.grid.map(|v| v as u64);
        let ctaid_of = |lane: usize| {
            let block = first + (lane / w) as u64;
            [
                (block % gx) as u32,
                ((block / gx) % gy) as u32,
                (block / (gx * gy)) as u32,
            ]
        };
        let [bx, by, _] = ctx.block.map(|v| v as usize);
        for &(s, slot) in &k.specials {
            match s {
                Special::Ctaid(d) if ctx.batch_blocks == 1 => fill_slot(
                    &mut self.file,
                    lanes,
                    slot,
                    4,
                    ctaid_of(0)[d.index()] as u64,
                ),
                Special::Ctaid(d) => write_u32_slot(&mut self.file, lanes, slot, |lane| {
                    ctaid_of(lane)[d.index()]
                }),
                Special::Gid(d) => write_u32_slot(&mut self.file, lanes, slot, |lane| {
                    let l = lane % w;
                    let tid = [l % bx, (l / bx) % by, l / (bx * by)][d.index()] as u32;
                    ctaid_of(lane)[d.index()]
                        .wrapping_mul(ctx.block[d.index()])
                        .wrapping_add(tid)
                }),
                Special::GidLinear if ctx.gid_block_major => {
                    let base = (first as u32).wrapping_mul(w as u32);
                    write_u32_slot(&mut self.file, lanes, slot, |l| base.wrapping_add(l as u32))
                }
                Special::GidLinear => write_u32_slot(&mut self.file, lanes, slot, |lane| {
                    let l = lane % w;
                    let tid = [l % bx, (l / bx) % by, l / (bx * by)];
                    let ctaid = ctaid_of(lane);
                    let gid = [0, 1, 2].map(|d| {
                        ctaid[d]
                            .wrapping_mul(ctx.block[d])
                            .wrapping_add(tid[d] as u32)
                    });
                    hologram_isa::linear_gid(gid, ctx.grid, ctx.block)
                }),
                _ => {}
            }
        }
        for &r in &k.zero_init {
            fill_slot(&mut self.file, lanes, r, 8, 0);
        }
        self.shared.fill(0);
        self.scratch.fill(0);
    }

    fn new_mask(&mut self) -> Vec<u8> {
        self.spare_masks
            .pop()
            .unwrap_or_else(|| vec![0; self.lanes])
    }

    /// Runs `count` blocks starting at block `first` to completion (`count` is at most
    /// `ctx.batch_blocks`; lanes of missing blocks stay inactive).
    pub(crate) fn run_batch(
        &mut self,
        ctx: &LaunchCtx<'_>,
        first: u64,
        count: usize,
    ) -> Result<()> {
        let block = first;
        self.block = block;
        self.deadline = Deadline::start(ctx.timeout);
        self.begin_batch(ctx, block);
        while let Some(g) = self.groups.pop() {
            self.spare_masks.push(g.mask);
        }
        let live = (count * ctx.block_lanes).min(self.lanes);
        let mut mask = self.new_mask();
        mask[..live].fill(1);
        mask[live..].fill(0);
        self.groups.push(Group {
            pc: 0,
            mask,
            active: live,
            stack: Vec::new(),
            waiting: false,
        });
        while let Some(gi) = self.schedule(ctx, block)? {
            self.run_group(ctx, gi)?;
        }
        Ok(())
    }

    /// Merges groups that meet, and picks the next group to run.
    fn schedule(&mut self, ctx: &LaunchCtx<'_>, block: u64) -> Result<Option<usize>> {
        self.merge_groups();
        if self.groups.is_empty() {
            return Ok(None);
        }
        let runnable = self
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| !g.waiting)
            .min_by_key(|(_, g)| g.pc);
        if let Some((i, _)) = runnable {
            return Ok(Some(i));
        }
        // Every live lane waits at a barrier: release them if it is the same barrier.
        let pc = self.groups[0].pc;
        if self.groups.iter().any(|g| g.pc != pc) {
            let mut pcs: Vec<u32> = self.groups.iter().map(|g| g.pc).collect();
            pcs.sort_unstable();
            pcs.dedup();
            return Err(BackendError::BarrierDivergence {
                kernel: ctx.k.kernel.name.clone(),
                block,
                pcs,
            });
        }
        for g in &mut self.groups {
            g.waiting = false;
            g.pc += 1;
        }
        self.merge_groups();
        Ok(Some(0))
    }

    fn merge_groups(&mut self) {
        let mut i = 0;
        while i < self.groups.len() {
            let mut j = i + 1;
            while j < self.groups.len() {
                let same = {
                    let (a, b) = (&self.groups[i], &self.groups[j]);
                    a.pc == b.pc && a.waiting == b.waiting && a.stack == b.stack
                };
                if same {
                    let g = self.groups.swap_remove(j);
                    let target = &mut self.groups[i];
                    for (m, o) in target.mask.iter_mut().zip(&g.mask) {
                        *m |= o;
                    }
                    target.active += g.active;
                    self.spare_masks.push(g.mask);
                } else {
                    j += 1;
                }
            }
            i += 1;
        }
    }

    /// Splits lanes marked in `self.taken` (`count` of them) off group `gi` into a new group at
    /// `pc` with `stack`.
    fn split(&mut self, gi: usize, count: usize, pc: u32, stack: Vec<u32>) {
        let mut mask = self.new_mask();
        mask.copy_from_slice(&self.taken);
        let g = &mut self.groups[gi];
        for (m, t) in g.mask.iter_mut().zip(&self.taken) {
            *m &= !t;
        }
        g.active -= count;
        self.groups.push(Group {
            pc,
            mask,
            active: count,
            stack,
            waiting: false,
        });
    }

    fn out_of_bounds(&self, ctx: &LaunchCtx<'_>, array: u32, lane: usize) -> BackendError {
        let kernel = &ctx.k.kernel;
        BackendError::OutOfBounds {
            kernel: kernel.name.clone(),
            array: kernel.array_info(array).0.to_string(),
            index: self.idx[lane] as i128,
            len: self.views[array as usize].len,
        }
    }

    /// Runs group `gi` until it branches, waits, ends, or reaches another group's position.
    fn run_group(&mut self, ctx: &LaunchCtx<'_>, gi: usize) -> Result<()> {
        let lanes = self.lanes;
        let insts = &ctx.k.insts;
        let n = insts.len() as u32;
        let cur = self.groups[gi].pc;
        let limit = self
            .groups
            .iter()
            .map(|g| g.pc)
            .filter(|&pc| pc > cur)
            .min()
            .unwrap_or(u32::MAX);
        loop {
            let pc = self.groups[gi].pc;
            if pc >= limit {
                return Ok(());
            }
            if pc >= n {
                let g = self.groups.swap_remove(gi);
                self.spare_masks.push(g.mask);
                return Ok(());
            }
            let inst = &insts[pc as usize];
            // The lanes this instruction applies to.
            let (use_buf, count) = match inst.guard {
                Some((p, negate)) => {
                    // A predicate slot holds one byte per lane.
                    let slot = &self.file[p as usize * lanes..(p as usize + 1) * lanes];
                    let pred = &bytemuck::cast_slice::<u64, u8>(slot)[..lanes];
                    let g = &self.groups[gi];
                    let flip = negate as u8;
                    let mut count = 0;
                    // Zipped slices: no index checks, so the loop vectorizes.
                    for ((m, &live), &bit) in self.mask.iter_mut().zip(&g.mask).zip(pred) {
                        let on = live & (bit ^ flip);
                        *m = on;
                        count += on as usize;
                    }
                    (true, count)
                }
                None => (false, self.groups[gi].active),
            };
            if count == 0 {
                self.groups[gi].pc += 1;
                continue;
            }
            let group_active = self.groups[gi].active;
            let mask: Option<&[u8]> = if count == lanes {
                None
            } else if use_buf {
                Some(&self.mask)
            } else {
                Some(&self.groups[gi].mask)
            };
            for &(slot, i) in &inst.fills {
                let size = ctx.k.consts[i as usize].1.size_bytes();
                fill_slot(
                    &mut self.file,
                    lanes,
                    slot,
                    size,
                    ctx.const_bits[i as usize],
                );
            }
            let file = self.file.as_mut_ptr();
            // SAFETY: every slot an instruction names is below `num_slots` (compile lowered it
            // from registers `trust::check` verified, or made it), and the file holds
            // `num_slots * lanes` words: slot `s` is the `lanes` words at `s * lanes`.
            let sp = |s: Slot| unsafe { file.add(s as usize * lanes) as *mut u8 };
            match &inst.op {
                XOp::Compute { f, d, a, b, c } => {
                    // SAFETY: each slot holds `lanes` elements of the type the function expects.
                    unsafe { f(lanes, sp(*d), sp(*a), sp(*b), sp(*c), mask) };
                }
                XOp::Load {
                    f,
                    widen,
                    d,
                    array,
                    index,
                    contiguous,
                    size,
                } => {
                    let view = self.views[*array as usize];
                    if *contiguous && ctx.gid_block_major && mask.is_none() && !view.per_lane {
                        // SAFETY: the index slot holds u32 lanes.
                        let first = unsafe { *(sp(*index) as *const u32) } as u64;
                        if first + lanes as u64 <= view.len {
                            // SAFETY: elements first..first + lanes are inside the array
                            // (checked just above), of `size` bytes (compile checked the
                            // instruction's type against the array's); the slot holds `lanes`.
                            unsafe {
                                copy_lanes(
                                    view.base.add(first as usize * size),
                                    sp(*d),
                                    lanes,
                                    *size,
                                    view.racy,
                                    false,
                                )
                            };
                            self.groups[gi].pc += 1;
                            continue;
                        }
                    }
                    // SAFETY: the index slot holds `lanes` integers of the widened type; views
                    // point at live arrays of `len` elements.
                    unsafe { widen(lanes, sp(*index), &mut self.idx) };
                    // SAFETY: the destination slot holds `lanes` elements of the load's type;
                    // `view` is a live array of elements of that size (compile checked it), and
                    // racy exactly when other threads run blocks of this launch.
                    if let Err(l) = unsafe { f(lanes, sp(*d), &self.idx, &view, mask) } {
                        return Err(self.out_of_bounds(ctx, *array, l));
                    }
                }
                XOp::Store {
                    f,
                    widen,
                    array,
                    index,
                    src,
                    contiguous,
                    size,
                } => {
                    let view = self.views[*array as usize];
                    if *contiguous && ctx.gid_block_major && mask.is_none() && !view.per_lane {
                        // SAFETY: the index slot holds u32 lanes.
                        let first = unsafe { *(sp(*index) as *const u32) } as u64;
                        if first + lanes as u64 <= view.len {
                            // SAFETY: as for loads.
                            unsafe {
                                copy_lanes(
                                    view.base.add(first as usize * size),
                                    sp(*src),
                                    lanes,
                                    *size,
                                    view.racy,
                                    true,
                                )
                            };
                            self.groups[gi].pc += 1;
                            continue;
                        }
                    }
                    // SAFETY: as for loads.
                    unsafe { widen(lanes, sp(*index), &mut self.idx) };
                    // SAFETY: as for loads, with the source slot read.
                    if let Err(l) = unsafe { f(lanes, sp(*src), &self.idx, &view, mask) } {
                        return Err(self.out_of_bounds(ctx, *array, l));
                    }
                }
                XOp::Atom {
                    f,
                    widen,
                    d,
                    array,
                    index,
                    a,
                    b,
                } => {
                    // SAFETY: as for loads.
                    unsafe { widen(lanes, sp(*index), &mut self.idx) };
                    let view = self.views[*array as usize];
                    if let Err(l) =
                        // SAFETY: as for loads; operand slots `a` and `b` hold `lanes` elements.
                        unsafe { f(lanes, sp(*d), &self.idx, &view, sp(*a), sp(*b), mask) }
                    {
                        return Err(self.out_of_bounds(ctx, *array, l));
                    }
                }
                XOp::Fence => std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst),
                XOp::Bra { target } => {
                    if *target <= pc {
                        self.deadline.tick(ctx)?;
                    }
                    if count == group_active {
                        self.groups[gi].pc = *target;
                        continue;
                    }
                    self.taken.copy_from_slice(&self.mask);
                    let stack = self.groups[gi].stack.clone();
                    self.split(gi, count, *target, stack);
                    self.groups[gi].pc += 1;
                    return Ok(());
                }
                XOp::Loop { f, counter, target } => {
                    let mask = if use_buf { Some(&self.mask[..]) } else { mask };
                    // SAFETY: the counter slot holds `lanes` integers of the counter's type.
                    let taken = unsafe { f(lanes, sp(*counter), mask, &mut self.taken) };
                    if taken != 0 && *target <= pc {
                        self.deadline.tick(ctx)?;
                    }
                    if taken == 0 {
                        self.groups[gi].pc += 1;
                    } else if taken == group_active {
                        self.groups[gi].pc = *target;
                    } else {
                        let stack = self.groups[gi].stack.clone();
                        self.split(gi, taken, *target, stack);
                        self.groups[gi].pc += 1;
                        return Ok(());
                    }
                    continue;
                }
                XOp::Call { target } => {
                    if *target <= pc {
                        self.deadline.tick(ctx)?;
                    }
                    let mut stack = self.groups[gi].stack.clone();
                    stack.push(pc + 1);
                    if count == group_active {
                        let g = &mut self.groups[gi];
                        g.stack = stack;
                        g.pc = *target;
                        continue;
                    }
                    self.taken.copy_from_slice(&self.mask);
                    self.split(gi, count, *target, stack);
                    self.groups[gi].pc += 1;
                    return Ok(());
                }
                XOp::Ret | XOp::Exit => {
                    let returning =
                        matches!(inst.op, XOp::Ret) && !self.groups[gi].stack.is_empty();
                    if count == group_active {
                        if returning {
                            let g = &mut self.groups[gi];
                            g.pc = g.stack.pop().unwrap_or(n);
                            return Ok(());
                        }
                        let g = self.groups.swap_remove(gi);
                        self.spare_masks.push(g.mask);
                        return Ok(());
                    }
                    // Only the guarded lanes leave.
                    self.taken.copy_from_slice(&self.mask);
                    if returning {
                        let mut stack = self.groups[gi].stack.clone();
                        let back = stack.pop().unwrap_or(n);
                        self.split(gi, count, back, stack);
                        self.groups[gi].pc += 1;
                        return Ok(());
                    }
                    let g = &mut self.groups[gi];
                    for (m, t) in g.mask.iter_mut().zip(&self.taken) {
                        *m &= !t;
                    }
                    g.active -= count;
                }
                XOp::Barrier => {
                    if count != group_active {
                        return Err(BackendError::BarrierDivergence {
                            kernel: ctx.k.kernel.name.clone(),
                            block: self.block,
                            pcs: vec![pc],
                        });
                    }
                    self.groups[gi].waiting = true;
                    return Ok(());
                }
            }
            self.groups[gi].pc += 1;
        }
    }
}

/// Resolves the bits of every constant slot for one launch.
pub(crate) fn const_bits(k: &CpuKernel, scalar_args: &[Option<u64>]) -> SmallVec<[u64; 16]> {
    k.consts
        .iter()
        .map(|&(_, _, src)| match src {
            ConstSource::Value(v) => v.to_bits(),
            ConstSource::Param(p) => scalar_args.get(p as usize).copied().flatten().unwrap_or(0),
        })
        .collect()
}
