//! The validator's whole-kernel analyses as they were before they were made linear: obviously
//! correct (a walk per region, a bit set per procedure), quadratic on big kernels, kept to check
//! the linear ones against on random programs.
#![allow(dead_code, clippy::all)]

use std::collections::BTreeSet;

use crate::inst::Op;
use crate::kernel::{Kernel, KernelFacts};
use crate::operand::Operand;
use crate::validate::error::{Location, ValidationError, ValidationErrorKind as K};

// The bit set of the linear analyses (plain enough to share with the reference).
use crate::flow::BitSet;

/// A control-flow graph over instruction indices; node `n` (= number of instructions) is the
/// exit.
pub(crate) struct Cfg {
    pub succ: Vec<Vec<usize>>,
}

impl Cfg {
    pub fn exit(&self) -> usize {
        self.succ.len() - 1
    }

    /// Nodes reachable from `starts` without entering `stop` (the starts themselves included).
    pub fn reach(&self, starts: &[usize], stop: Option<usize>) -> BitSet {
        let mut seen = BitSet::new(self.succ.len());
        let mut stack: Vec<usize> = starts
            .iter()
            .copied()
            .filter(|&s| Some(s) != stop)
            .collect();
        for &s in &stack {
            seen.insert(s);
        }
        while let Some(n) = stack.pop() {
            for &m in &self.succ[n] {
                if Some(m) != stop && seen.insert(m) {
                    stack.push(m);
                }
            }
        }
        seen
    }
}

/// The graph of one procedure at a time: `call` falls through to the next instruction, `ret`
/// and `exit` go to the exit node.
pub(crate) fn intra(k: &Kernel) -> Cfg {
    let n = k.insts.len();
    let mut succ = Vec::with_capacity(n + 1);
    for (pc, inst) in k.insts.iter().enumerate() {
        let next = pc + 1;
        let guarded = inst.guard.is_some();
        let s = match &inst.op {
            Op::Bra { target } if guarded => vec![*target as usize, next],
            Op::Bra { target } => vec![*target as usize],
            Op::Loop { target, .. } => vec![*target as usize, next],
            Op::Ret | Op::Exit if guarded => vec![n, next],
            Op::Ret | Op::Exit => vec![n],
            _ => vec![next],
        };
        succ.push(s);
    }
    succ.push(Vec::new());
    Cfg { succ }
}

/// Immediate post-dominator of every node (None for the exit and for nodes that never reach it),
/// by the Cooper–Harvey–Kennedy iteration on the reversed graph.
pub(crate) fn post_dominators(cfg: &Cfg) -> Vec<Option<usize>> {
    let total = cfg.succ.len();
    let exit = cfg.exit();
    let mut preds_rev: Vec<Vec<usize>> = vec![Vec::new(); total]; // successors in reversed graph
    for (n, ss) in cfg.succ.iter().enumerate() {
        for &s in ss {
            preds_rev[s].push(n);
        }
    }
    // Postorder of the reversed graph from the exit.
    let mut order = Vec::with_capacity(total);
    let mut visited = vec![false; total];
    let mut stack = vec![(exit, 0usize)];
    visited[exit] = true;
    while let Some((n, i)) = stack.pop() {
        if i < preds_rev[n].len() {
            stack.push((n, i + 1));
            let m = preds_rev[n][i];
            if !visited[m] {
                visited[m] = true;
                stack.push((m, 0));
            }
        } else {
            order.push(n);
        }
    }
    let mut rank = vec![usize::MAX; total];
    for (i, &n) in order.iter().enumerate() {
        rank[n] = i;
    }
    let mut idom: Vec<Option<usize>> = vec![None; total];
    idom[exit] = Some(exit);
    let intersect = |idom: &Vec<Option<usize>>, mut a: usize, mut b: usize| -> usize {
        while a != b {
            while rank[a] < rank[b] {
                a = idom[a].unwrap_or(exit);
            }
            while rank[b] < rank[a] {
                b = idom[b].unwrap_or(exit);
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &n in order.iter().rev() {
            if n == exit {
                continue;
            }
            // In the reversed graph, predecessors of n are n's successors in the CFG.
            let mut new: Option<usize> = None;
            for &s in &cfg.succ[n] {
                if idom[s].is_some() {
                    new = Some(match new {
                        None => s,
                        Some(cur) => intersect(&idom, s, cur),
                    });
                }
            }
            if new.is_some() && idom[n] != new {
                idom[n] = new;
                changed = true;
            }
        }
    }
    idom[exit] = None;
    idom
}

pub(super) fn analyze(k: &Kernel, stmt_of_pc: &[usize]) -> Result<KernelFacts, ValidationError> {
    let loc = |pc: usize| Location::Stmt(stmt_of_pc.get(pc).copied().unwrap_or(0));
    let intra = intra(k);
    let procs = Procedures::new(k, &intra);
    let max_call_depth = procs.check_recursion_and_depth(k, &loc)?;
    check_divergent_barriers(k, &intra, &procs, &loc)?;
    let zero_init = maybe_uninitialized(k, &intra, &procs);

    let mut specials = BTreeSet::new();
    for inst in &k.insts {
        for (src, _) in inst.op.sources() {
            if let Operand::Special(s) = src {
                specials.insert(*s);
            }
        }
    }
    Ok(KernelFacts {
        zero_init,
        uses_barrier: k.insts.iter().any(|i| matches!(i.op, Op::Barrier)),
        uses_atomics: k.insts.iter().any(|i| matches!(i.op, Op::Atom { .. })),
        max_call_depth,
        specials: specials.into_iter().collect(),
        shared_bytes: k.shared.iter().map(|a| a.bytes()).sum(),
        scratch_bytes: k.scratch.iter().map(|a| a.bytes()).sum(),
    })
}

/// Procedures: the main entry (instruction 0) and every `call` target, with the instructions each
/// can reach before returning.
struct Procedures {
    /// Entry instruction of each procedure; index 0 is the kernel's start.
    entries: Vec<usize>,
    /// Instructions each procedure reaches (calls fall through).
    body: Vec<BitSet>,
}

impl Procedures {
    fn new(k: &Kernel, intra: &Cfg) -> Self {
        let mut entries = vec![0usize];
        for inst in &k.insts {
            if let Op::Call { target } = inst.op {
                if !entries.contains(&(target as usize)) {
                    entries.push(target as usize);
                }
            }
        }
        let exit = intra.exit();
        let body = entries
            .iter()
            .map(|&e| {
                let mut r = intra.reach(&[e], Some(exit));
                if e == exit {
                    r = BitSet::new(intra.succ.len());
                }
                r
            })
            .collect();
        Procedures { entries, body }
    }

    fn index_of(&self, entry: usize) -> usize {
        self.entries.iter().position(|&e| e == entry).unwrap_or(0)
    }

    /// Procedures called from inside procedure `p`, with the calling instruction.
    fn callees(&self, k: &Kernel, p: usize) -> Vec<(usize, usize)> {
        self.body[p]
            .iter()
            .filter_map(|pc| match k.insts.get(pc).map(|i| &i.op) {
                Some(Op::Call { target }) => Some((pc, self.index_of(*target as usize))),
                _ => None,
            })
            .collect()
    }

    fn label_of(k: &Kernel, pc: usize) -> String {
        k.labels
            .iter()
            .find(|(_, at)| *at as usize == pc)
            .map(|(n, _)| n.clone())
            .unwrap_or_else(|| format!("instruction {pc}"))
    }

    /// Rejects recursion; returns the deepest call nesting.
    fn check_recursion_and_depth(
        &self,
        k: &Kernel,
        loc: &impl Fn(usize) -> Location,
    ) -> Result<u32, ValidationError> {
        let n = self.entries.len();
        let callees: Vec<Vec<(usize, usize)>> = (0..n).map(|p| self.callees(k, p)).collect();
        // Depth-first search with colours; a grey callee is a cycle.
        let mut colour = vec![0u8; n];
        let mut depth = vec![0u32; n];
        fn visit(
            p: usize,
            callees: &[Vec<(usize, usize)>],
            colour: &mut [u8],
            depth: &mut [u32],
            path: &mut Vec<usize>,
        ) -> Result<(), (usize, Vec<usize>)> {
            colour[p] = 1;
            path.push(p);
            let mut d = 0;
            for &(call_pc, q) in &callees[p] {
                if colour[q] == 1 {
                    let start = path.iter().position(|&x| x == q).unwrap_or(0);
                    let mut cycle = path[start..].to_vec();
                    cycle.push(q);
                    return Err((call_pc, cycle));
                }
                if colour[q] == 0 {
                    visit(q, callees, colour, depth, path)?;
                }
                d = d.max(depth[q] + 1);
            }
            depth[p] = d;
            colour[p] = 2;
            path.pop();
            Ok(())
        }
        for p in 0..n {
            if colour[p] == 0 {
                let mut path = Vec::new();
                if let Err((call_pc, cycle)) =
                    visit(p, &callees, &mut colour, &mut depth, &mut path)
                {
                    let names: Vec<String> = cycle
                        .iter()
                        .map(|&q| {
                            if q == 0 {
                                "the kernel entry".to_string()
                            } else {
                                Self::label_of(k, self.entries[q])
                            }
                        })
                        .collect();
                    return Err(ValidationError::new(
                        loc(call_pc),
                        K::Recursion(names.join(" -> ")),
                    ));
                }
            }
        }
        Ok(depth[0])
    }

    /// For each procedure: does it (or anything it calls) contain a barrier?
    fn contains_barrier(&self, k: &Kernel) -> Vec<bool> {
        let n = self.entries.len();
        let mut has: Vec<bool> = (0..n)
            .map(|p| {
                self.body[p]
                    .iter()
                    .any(|pc| matches!(k.insts.get(pc).map(|i| &i.op), Some(Op::Barrier)))
            })
            .collect();
        let callees: Vec<Vec<usize>> = (0..n)
            .map(|p| self.callees(k, p).into_iter().map(|c| c.1).collect())
            .collect();
        let mut changed = true;
        while changed {
            changed = false;
            for p in 0..n {
                if !has[p] && callees[p].iter().any(|&q| has[q]) {
                    has[p] = true;
                    changed = true;
                }
            }
        }
        has
    }
}

/// Rejects barriers that only some lanes of a block can reach.
///
/// A value is *varying* when it comes from `%tid.*`, `%gid*` or an atomic, or from a varying value,
/// or is written under varying control. A branch (or `loop`, or guarded `ret`) on a varying
/// condition opens a divergent region that lasts until its immediate post-dominator. A barrier
/// inside such a region, a barrier guarded by a varying predicate, or a call from such a region
/// to a procedure containing a barrier, is rejected. Values loaded from memory are not assumed
/// to vary, so only provable divergence is reported.
fn check_divergent_barriers(
    k: &Kernel,
    intra: &Cfg,
    procs: &Procedures,
    loc: &impl Fn(usize) -> Location,
) -> Result<(), ValidationError> {
    if !k.insts.iter().any(|i| matches!(i.op, Op::Barrier)) {
        return Ok(());
    }
    let n = k.insts.len();
    let with_barrier = procs.contains_barrier(k);
    let lanes = lanes_graph(k, intra, procs, &with_barrier);
    let intra = &lanes;
    let ipdom = post_dominators(intra);
    let mut varying = BitSet::new(k.regs.len());
    let mut divergent = BitSet::new(n + 1);
    // Which branch made each divergent instruction divergent (for the message).
    let mut cause: Vec<Option<usize>> = vec![None; n + 1];
    let is_varying = |op: &Operand<u32>, varying: &BitSet| match op {
        Operand::Reg(r) => varying.contains(*r as usize),
        Operand::Special(s) => s.varies_within_block(),
        _ => false,
    };
    loop {
        let mut changed = false;
        for (pc, inst) in k.insts.iter().enumerate() {
            let guard_varying = inst
                .guard
                .as_ref()
                .is_some_and(|g| varying.contains(g.pred as usize));
            if let Some(&dst) = inst.op.dst() {
                let v = guard_varying
                    || divergent.contains(pc)
                    || matches!(inst.op, Op::Atom { .. })
                    || inst
                        .op
                        .sources()
                        .iter()
                        .any(|(s, _)| is_varying(s, &varying))
                    || matches!(inst.op, Op::Loop { .. }) && varying.contains(dst as usize);
                if v && varying.insert(dst as usize) {
                    changed = true;
                }
            }
            let branch_varying = match &inst.op {
                Op::Bra { .. } | Op::Ret => guard_varying,
                Op::Loop { counter, .. } => guard_varying || varying.contains(*counter as usize),
                _ => false,
            };
            if branch_varying {
                let region = intra.reach(&intra.succ[pc].clone(), ipdom[pc]);
                for m in region.iter().filter(|&m| m < n) {
                    if divergent.insert(m) {
                        cause[m] = Some(pc);
                        changed = true;
                    }
                }
            }
            // A call made by only some lanes runs the whole callee divergently.
            if let Op::Call { target } = inst.op {
                if divergent.contains(pc) || guard_varying {
                    let callee = procs.index_of(target as usize);
                    for m in procs.body[callee].iter().filter(|&m| m < n) {
                        if divergent.insert(m) {
                            cause[m] = cause[pc].or(Some(pc));
                            changed = true;
                        }
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for (pc, inst) in k.insts.iter().enumerate() {
        let guard_varying = inst
            .guard
            .as_ref()
            .is_some_and(|g| varying.contains(g.pred as usize));
        let branch_stmt = |b: Option<usize>| match b.map(loc) {
            Some(Location::Stmt(s)) => Some(s),
            _ => None,
        };
        let reason = match &inst.op {
            Op::Barrier if guard_varying => {
                Some(("the barrier's guard depends on the lane".to_string(), None))
            }
            Op::Barrier if divergent.contains(pc) => Some((
                "it sits under a branch whose condition depends on the lane (%tid, %gid or an atomic)".to_string(),
                branch_stmt(cause[pc]),
            )),
            Op::Call { target }
                if (divergent.contains(pc) || guard_varying)
                    && with_barrier[procs.index_of(*target as usize)] =>
            {
                Some((
                    "the called subroutine contains a barrier and only some lanes call it".to_string(),
                    branch_stmt(cause[pc]),
                ))
            }
            _ => None,
        };
        if let Some((reason, branch_stmt)) = reason {
            return Err(ValidationError::new(
                loc(pc),
                K::DivergentBarrier {
                    reason,
                    branch_stmt,
                },
            ));
        }
    }
    Ok(())
}

/// The graph of the lanes that barriers wait for: lanes that end (a guarded `exit`, or a guarded
/// `ret` in the kernel's own body) are gone, so that edge to the exit is dropped; and paths on
/// which lanes end before and away from every barrier do not count, so edges into such code are
/// dropped too (a node left without successors goes to the exit).
fn lanes_graph(k: &Kernel, intra: &Cfg, procs: &Procedures, with_barrier: &[bool]) -> Cfg {
    let n = k.insts.len();
    let mut lanes = Cfg {
        succ: intra.succ.clone(),
    };
    let mut waits = Vec::new();
    for (pc, inst) in k.insts.iter().enumerate() {
        let waits_here = match inst.op {
            Op::Barrier => true,
            Op::Call { target } => with_barrier[procs.index_of(target as usize)],
            _ => false,
        };
        if waits_here {
            waits.push(pc);
        }
        let ends_lane = match inst.op {
            Op::Exit => true,
            Op::Ret => {
                procs.body[0].contains(pc) && procs.body[1..].iter().all(|b| !b.contains(pc))
            }
            _ => false,
        };
        if ends_lane && inst.guard.is_some() {
            lanes.succ[pc].retain(|&s| s != n);
        }
    }
    let after = lanes.reach(&waits, None);
    let gone: Vec<bool> = (0..=n)
        .map(|v| {
            v != n
                && !after.contains(v)
                && waits.iter().all(|&w| !lanes.reach(&[v], None).contains(w))
        })
        .collect();
    for v in (0..=n).filter(|&v| !gone[v]) {
        let had = !lanes.succ[v].is_empty();
        lanes.succ[v].retain(|&s| !gone[s]);
        if had && lanes.succ[v].is_empty() {
            lanes.succ[v].push(n);
        }
    }
    lanes
}

/// Registers that some path may read before any write (must-be-assigned analysis over the graph
/// where `call` enters its callee and `ret` returns to every caller of the procedures that reach
/// it).
fn maybe_uninitialized(k: &Kernel, intra: &Cfg, procs: &Procedures) -> Vec<u32> {
    let n = k.insts.len();
    let nregs = k.regs.len();
    if nregs == 0 || n == 0 {
        return Vec::new();
    }
    // Build the interprocedural successor lists.
    let mut return_sites: Vec<Vec<usize>> = vec![Vec::new(); procs.entries.len()];
    for (pc, inst) in k.insts.iter().enumerate() {
        if let Op::Call { target } = inst.op {
            return_sites[procs.index_of(target as usize)].push(pc + 1);
        }
    }
    let mut succ: Vec<Vec<usize>> = Vec::with_capacity(n + 1);
    for (pc, inst) in k.insts.iter().enumerate() {
        let s = match &inst.op {
            Op::Call { target } => {
                let mut v = vec![*target as usize];
                if inst.guard.is_some() {
                    v.push(pc + 1);
                }
                v
            }
            Op::Ret => {
                let mut v = Vec::new();
                for (p, sites) in return_sites.iter().enumerate() {
                    if procs.body[p].contains(pc) {
                        if p == 0 {
                            v.push(n);
                        }
                        v.extend(sites.iter().copied());
                    }
                }
                if inst.guard.is_some() {
                    v.push(pc + 1);
                }
                v
            }
            _ => intra.succ[pc].clone(),
        };
        succ.push(s);
    }
    succ.push(Vec::new());
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
    for (a, ss) in succ.iter().enumerate() {
        for &b in ss {
            if b <= n {
                preds[b].push(a);
            }
        }
    }
    // OUT[pc] = IN[pc] plus what pc surely writes. IN[0] = {} ; IN[x] = intersection of preds' OUT.
    let mut out: Vec<BitSet> = vec![BitSet::full(nregs); n];
    let mut in_sets: Vec<BitSet> = vec![BitSet::full(nregs); n];
    let mut work: Vec<usize> = (0..n).rev().collect();
    let mut queued = vec![true; n];
    while let Some(pc) = work.pop() {
        queued[pc] = false;
        let mut inn = if pc == 0 {
            BitSet::new(nregs)
        } else {
            BitSet::full(nregs)
        };
        for &p in &preds[pc] {
            if p < n {
                inn.intersect_with(&out[p]);
            }
        }
        let mut o = inn.clone();
        let inst = &k.insts[pc];
        if inst.guard.is_none() {
            if let Some(&d) = inst.op.dst() {
                o.insert(d as usize);
            }
        }
        in_sets[pc] = inn;
        if o != out[pc] {
            out[pc] = o;
            for &s in &succ[pc] {
                if s < n && !queued[s] {
                    queued[s] = true;
                    work.push(s);
                }
            }
        }
    }
    let mut zero = BitSet::new(nregs);
    for (pc, inst) in k.insts.iter().enumerate() {
        let mut reads: Vec<u32> = inst
            .op
            .sources()
            .iter()
            .filter_map(|(s, _)| s.as_reg().copied())
            .collect();
        if let Some(g) = &inst.guard {
            reads.push(g.pred);
        }
        if let Op::Loop { counter, .. } = inst.op {
            reads.push(counter);
        }
        // A guarded write keeps the old value in lanes that skip it: that old value is read.
        if inst.guard.is_some() {
            if let Some(&d) = inst.op.dst() {
                reads.push(d);
            }
        }
        for r in reads {
            if !in_sets[pc].contains(r as usize) {
                zero.insert(r as usize);
            }
        }
    }
    zero.iter().map(|r| r as u32).collect()
}
