//! Barriers that only some lanes of a block can reach.
//!
//! A value is *varying* when it comes from `%tid.*`, `%gid*` or an atomic, or from a varying
//! value, or is written under varying control. A branch (or `loop`, or guarded `ret`) on a
//! varying condition opens a divergent region: the instructions reachable from its successors
//! before its immediate post-dominator. A barrier inside such a region, a barrier guarded by a
//! varying predicate, or a call from such a region to a procedure containing a barrier, is
//! rejected. Values loaded from memory are not assumed to vary, so only provable divergence is
//! reported.
//!
//! Lanes that end are not waited for at a barrier, so the analysis runs on the graph of the lanes
//! that barriers wait for ([`lanes_graph`]): a guarded `exit` (or a guarded `ret` in the kernel's
//! own body) only falls through, and code on which lanes end before and away from every barrier
//! is left out. A branch whose one side only exits is then not divergent at all.
//!
//! The regions are computed without walking each one: the region of a branch is the union, over
//! its successors, of the post-dominator-tree path from the successor up to (not including) the
//! branch's post-dominator, together with the regions of the branches on those paths. Marking
//! tree paths with a union-find that skips marked nodes makes the whole analysis near-linear,
//! however deeply regions nest.

use super::calls::CallFacts;
use super::error::{Location, ValidationError, ValidationErrorKind as K};
use crate::flow::{post_dominators, BitSet, Graph, Procedures};
use crate::inst::Op;
use crate::kernel::Kernel;
use crate::operand::Operand;

const NONE: u32 = u32::MAX;

struct State<'a> {
    k: &'a Kernel,
    intra: &'a Graph,
    procs: &'a Procedures,
    n: usize,
    ipdom: Vec<Option<u32>>,
    tree_depth: Vec<u32>,
    /// Union-find over the post-dominator tree: `up[x] == x` until x is marked from a path.
    up: Vec<u32>,
    varying: BitSet,
    divergent: Vec<bool>,
    /// Which branch made each divergent instruction divergent (for the message).
    cause: Vec<u32>,
    expanded: Vec<bool>,
    callee_marked: Vec<bool>,
    /// Instructions that read each register (guard, sources, loop counter).
    reader_offsets: Vec<u32>,
    readers: Vec<u32>,
    work: Vec<u32>,
}

impl State<'_> {
    fn find(&mut self, mut x: u32) -> u32 {
        while self.up[x as usize] != x {
            let parent = self.up[x as usize];
            self.up[x as usize] = self.up[parent as usize];
            x = parent;
        }
        x
    }

    fn mark(&mut self, x: u32, cause: u32) {
        if (x as usize) < self.n && !self.divergent[x as usize] {
            self.divergent[x as usize] = true;
            self.cause[x as usize] = cause;
            self.work.push(x);
        }
    }

    /// Marks the post-dominator-tree path from `s` up to, not including, `stop`.
    fn mark_path(&mut self, s: u32, stop: Option<u32>, cause: u32) {
        let stop_depth = stop.map(|p| self.tree_depth[p as usize]);
        let mut x = self.find(s);
        while (x as usize) < self.n {
            if stop_depth.is_some_and(|d| self.tree_depth[x as usize] <= d) {
                break;
            }
            let Some(parent) = self.ipdom[x as usize] else {
                break;
            };
            self.mark(x, cause);
            self.up[x as usize] = parent;
            x = self.find(parent);
        }
    }

    /// Marks the region of `pc`: what its successors reach before its post-dominator.
    fn expand(&mut self, pc: usize, cause: u32) {
        if self.expanded[pc] {
            return;
        }
        self.expanded[pc] = true;
        let stop = self.ipdom[pc];
        let intra = self.intra;
        for &s in intra.succ(pc) {
            if s as usize >= self.n {
                continue;
            }
            if self.ipdom[s as usize].is_some() {
                self.mark_path(s, stop, cause);
            } else {
                // Code that never reaches the exit: everything it reaches is in the region, and
                // marking `s` makes it expand in turn.
                self.mark(s, cause);
            }
        }
    }

    fn is_varying(&self, op: &Operand<u32>) -> bool {
        match op {
            Operand::Reg(r) => self.varying.contains(*r as usize),
            Operand::Special(s) => s.varies_within_block(),
            _ => false,
        }
    }

    fn guard_varying(&self, pc: usize) -> bool {
        self.k.insts[pc]
            .guard
            .as_ref()
            .is_some_and(|g| self.varying.contains(g.pred as usize))
    }

    fn process(&mut self, pc: usize) {
        let k = self.k;
        let inst = &k.insts[pc];
        let guard_varying = self.guard_varying(pc);
        if let Some(&dst) = inst.op.dst() {
            let v = guard_varying
                || self.divergent[pc]
                || matches!(inst.op, Op::Atom { .. })
                || inst.op.sources().iter().any(|(s, _)| self.is_varying(s))
                || matches!(inst.op, Op::Loop { .. }) && self.varying.contains(dst as usize);
            if v && self.varying.insert(dst as usize) {
                let (a, b) = (
                    self.reader_offsets[dst as usize] as usize,
                    self.reader_offsets[dst as usize + 1] as usize,
                );
                for i in a..b {
                    self.work.push(self.readers[i]);
                }
            }
        }
        let branch_varying = match &inst.op {
            Op::Bra { .. } | Op::Ret => guard_varying,
            Op::Loop { counter, .. } => guard_varying || self.varying.contains(*counter as usize),
            _ => false,
        };
        if branch_varying {
            self.expand(pc, pc as u32);
        } else if self.divergent[pc] {
            // Inside a region, a branch's own region is part of it.
            self.expand(pc, self.cause[pc]);
        }
        // A call made by only some lanes runs the whole callee divergently.
        if let Op::Call { target } = inst.op {
            if self.divergent[pc] || guard_varying {
                if let Some(q) = self.procs.at((target as usize).min(self.n)) {
                    if !self.callee_marked[q] {
                        self.callee_marked[q] = true;
                        let cause = if self.cause[pc] != NONE {
                            self.cause[pc]
                        } else {
                            pc as u32
                        };
                        let procs = self.procs;
                        for &m in procs.body(q) {
                            self.mark(m, cause);
                        }
                    }
                }
            }
        }
    }
}

/// Depth of every node in the post-dominator tree (the exit is 0; nodes that never reach the
/// exit are not in the tree).
fn tree_depths(ipdom: &[Option<u32>], exit: usize) -> Vec<u32> {
    let total = ipdom.len();
    let mut child_count = vec![0u32; total + 1];
    for d in ipdom.iter().flatten() {
        child_count[*d as usize + 1] += 1;
    }
    for i in 0..total {
        child_count[i + 1] += child_count[i];
    }
    let mut fill = child_count.clone();
    let mut children = vec![0u32; child_count[total] as usize];
    for (x, d) in ipdom.iter().enumerate() {
        if let Some(d) = d {
            children[fill[*d as usize] as usize] = x as u32;
            fill[*d as usize] += 1;
        }
    }
    let mut depth = vec![0u32; total];
    let mut stack = vec![exit as u32];
    while let Some(x) = stack.pop() {
        for &c in &children[child_count[x as usize] as usize..child_count[x as usize + 1] as usize]
        {
            depth[c as usize] = depth[x as usize] + 1;
            stack.push(c);
        }
    }
    depth
}

/// Nodes reachable in `g` from `starts` (themselves included), without recursion.
fn reachable_from_all(g: &Graph, starts: &[u32]) -> Vec<bool> {
    let mut seen = vec![false; g.len()];
    let mut stack = Vec::with_capacity(starts.len());
    for &s in starts {
        if !seen[s as usize] {
            seen[s as usize] = true;
            stack.push(s);
        }
    }
    while let Some(x) = stack.pop() {
        for &s in g.succ(x as usize) {
            if !seen[s as usize] {
                seen[s as usize] = true;
                stack.push(s);
            }
        }
    }
    seen
}

/// The graph of the lanes that barriers wait for (linear in the size of `intra`). Lanes that end
/// (a guarded `exit`, or a guarded `ret` in the kernel's own body rather than a subroutine's) are
/// gone, so that edge to the exit is dropped. Code that neither reaches a barrier (or a call of a
/// subroutine with one) nor follows one is where lanes end away from every barrier: edges into
/// it are dropped, and a node left without successors goes to the exit, so such paths do not
/// count where the lanes of a branch meet again. (Lanes that branch past a barrier and end later
/// still make it divergent: they are live while the others wait.)
fn lanes_graph(k: &Kernel, intra: &Graph, procs: &Procedures, with_barrier: &[bool]) -> Graph {
    let n = k.insts.len();
    let mut in_subroutine = vec![false; n + 1];
    for p in 1..procs.len() {
        for &pc in procs.body(p) {
            in_subroutine[pc as usize] = true;
        }
    }
    let mut in_kernel_body = vec![false; n + 1];
    if !procs.is_empty() {
        for &pc in procs.body(0) {
            in_kernel_body[pc as usize] = true;
        }
    }
    let mut waits = Vec::new();
    let mut ended = Graph::with_capacity(n + 1, intra.edge_count());
    for (pc, inst) in k.insts.iter().enumerate() {
        let waits_here = match inst.op {
            Op::Barrier => true,
            Op::Call { target } => procs
                .at((target as usize).min(n))
                .is_some_and(|q| with_barrier[q]),
            _ => false,
        };
        if waits_here {
            waits.push(pc as u32);
        }
        let ends_lane = match inst.op {
            Op::Exit => true,
            Op::Ret => in_kernel_body[pc] && !in_subroutine[pc],
            _ => false,
        };
        if ends_lane && inst.guard.is_some() {
            ended.push_node(intra.succ(pc).iter().copied().filter(|&s| s as usize != n));
        } else {
            ended.push_node(intra.succ(pc).iter().copied());
        }
    }
    ended.push_node([]);
    let after = reachable_from_all(&ended, &waits);
    let before = reachable_from_all(&ended.reversed(), &waits);
    let gone: Vec<bool> = (0..=n).map(|v| v != n && !after[v] && !before[v]).collect();
    let mut lanes = Graph::with_capacity(n + 1, ended.edge_count());
    for v in 0..=n {
        let succ = ended.succ(v);
        if gone[v] {
            lanes.push_node(succ.iter().copied());
        } else if !succ.is_empty() && succ.iter().all(|&s| gone[s as usize]) {
            lanes.push_node([n as u32]);
        } else {
            lanes.push_node(succ.iter().copied().filter(|&s| !gone[s as usize]));
        }
    }
    lanes
}

/// Rejects barriers that only some lanes of a block can reach.
pub(crate) fn check(
    k: &Kernel,
    intra: &Graph,
    procs: &Procedures,
    calls: &CallFacts,
    loc: &impl Fn(usize) -> Location,
) -> Result<(), ValidationError> {
    if !k.insts.iter().any(|i| matches!(i.op, Op::Barrier)) {
        return Ok(());
    }
    let n = k.insts.len();
    // For each procedure: does it (or anything it calls) contain a barrier?
    let mut with_barrier = vec![false; procs.len()];
    for &p in &calls.callees_first {
        let p = p as usize;
        with_barrier[p] = procs
            .body(p)
            .iter()
            .any(|&pc| matches!(k.insts[pc as usize].op, Op::Barrier))
            || procs
                .calls(p)
                .iter()
                .any(|&(_, q)| with_barrier[q as usize]);
    }
    let lanes = lanes_graph(k, intra, procs, &with_barrier);
    let intra = &lanes;
    let ipdom = post_dominators(intra, n);
    let tree_depth = tree_depths(&ipdom, n);
    // Readers of each register, by counting then filling.
    let nregs = k.regs.len();
    let reads_of = |pc: usize| -> Vec<u32> {
        let inst = &k.insts[pc];
        let mut r: Vec<u32> = inst
            .op
            .sources()
            .iter()
            .filter_map(|(s, _)| s.as_reg().copied())
            .collect();
        if let Some(g) = &inst.guard {
            r.push(g.pred);
        }
        if let Op::Loop { counter, .. } = inst.op {
            r.push(counter);
        }
        r
    };
    let mut reader_offsets = vec![0u32; nregs + 1];
    for pc in 0..n {
        for r in reads_of(pc) {
            reader_offsets[r as usize + 1] += 1;
        }
    }
    for i in 0..nregs {
        reader_offsets[i + 1] += reader_offsets[i];
    }
    let mut fill = reader_offsets.clone();
    let mut readers = vec![0u32; reader_offsets[nregs] as usize];
    for pc in 0..n {
        for r in reads_of(pc) {
            readers[fill[r as usize] as usize] = pc as u32;
            fill[r as usize] += 1;
        }
    }
    let mut st = State {
        k,
        intra,
        procs,
        n,
        ipdom,
        tree_depth,
        up: (0..=n as u32).collect(),
        varying: BitSet::new(nregs),
        divergent: vec![false; n],
        cause: vec![NONE; n],
        expanded: vec![false; n],
        callee_marked: vec![false; procs.len()],
        reader_offsets,
        readers,
        work: (0..n as u32).rev().collect(),
    };
    while let Some(pc) = st.work.pop() {
        st.process(pc as usize);
    }

    let branch_stmt = |b: u32| match (b != NONE).then(|| loc(b as usize)) {
        Some(Location::Stmt(s)) => Some(s),
        _ => None,
    };
    for (pc, inst) in k.insts.iter().enumerate() {
        let guard_varying = st.guard_varying(pc);
        let reason = match &inst.op {
            Op::Barrier if guard_varying => {
                Some(("the barrier's guard depends on the lane".to_string(), None))
            }
            Op::Barrier if st.divergent[pc] => Some((
                "it sits under a branch whose condition depends on the lane (%tid, %gid or an atomic)".to_string(),
                branch_stmt(st.cause[pc]),
            )),
            Op::Call { target }
                if (st.divergent[pc] || guard_varying)
                    && procs
                        .at((*target as usize).min(n))
                        .is_some_and(|q| with_barrier[q]) =>
            {
                Some((
                    "the called subroutine contains a barrier and only some lanes call it".to_string(),
                    branch_stmt(st.cause[pc]),
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
