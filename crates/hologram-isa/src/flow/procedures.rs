//! Procedures (the kernel entry and every `call` target) and the interprocedural graph.

use super::Graph;
use crate::inst::{Inst, Op};

const NONE: u32 = u32::MAX;

/// How many times over, on average, subroutine bodies may cover the kernel's instructions.
///
/// A procedure's body is every instruction it reaches before returning, so subroutines that fall
/// into each other or share a tail count shared instructions once per subroutine. Bounding the
/// sum (at `SHARED_CODE_FACTOR` times the instruction count, plus [`SHARED_CODE_SLACK`]) keeps
/// every whole-kernel analysis linear; kernels whose subroutines each have their own code are
/// far below it.
pub const SHARED_CODE_FACTOR: usize = 8;

/// Body instructions allowed on top of [`SHARED_CODE_FACTOR`] times the instruction count, so
/// that small kernels may share code freely.
pub const SHARED_CODE_SLACK: usize = 4096;

/// The subroutines share more code than [`SHARED_CODE_FACTOR`] allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedCodeError {
    /// Entry instruction of the procedure whose body went over the limit.
    pub entry: u32,
    /// The limit on the sum of all bodies, in instructions.
    pub limit: usize,
}

/// The kernel entry (procedure 0, at instruction 0) and every `call` target, with the instructions
/// each reaches before returning (calls fall through).
#[derive(Debug, Clone)]
pub struct Procedures {
    entries: Vec<u32>,
    /// Procedure whose entry is at each instruction (and at the end), or NONE.
    proc_at: Vec<u32>,
    body_offsets: Vec<u32>,
    body: Vec<u32>,
    /// Per procedure: the `call`s inside its body, as (call instruction, callee procedure).
    call_offsets: Vec<u32>,
    calls: Vec<(u32, u32)>,
}

impl Procedures {
    /// The limit on the sum of body sizes for a kernel of `n` instructions.
    pub fn limit_for(n: usize) -> usize {
        SHARED_CODE_FACTOR
            .saturating_mul(n)
            .saturating_add(SHARED_CODE_SLACK)
    }

    /// Finds the procedures of `insts` (whose [`super::intra`] graph is `intra`); fails when the
    /// bodies together exceed `limit` instructions (see [`Procedures::limit_for`]).
    pub fn new(
        insts: &[Inst<u32>],
        intra: &Graph,
        limit: usize,
    ) -> Result<Procedures, SharedCodeError> {
        let n = insts.len();
        let mut proc_at = vec![NONE; n + 1];
        let mut entries = vec![0u32];
        proc_at[0] = 0;
        for inst in insts {
            if let Op::Call { target } = inst.op {
                let t = (target as usize).min(n);
                if proc_at[t] == NONE {
                    proc_at[t] = entries.len() as u32;
                    entries.push(t as u32);
                }
            }
        }
        // Each body by a depth-first walk; `stamp` marks what the current walk has seen.
        let mut stamp = vec![NONE; n + 1];
        let mut body_offsets = Vec::with_capacity(entries.len() + 1);
        body_offsets.push(0u32);
        let mut body: Vec<u32> = Vec::with_capacity(n);
        let mut stack: Vec<u32> = Vec::new();
        for (p, &e) in entries.iter().enumerate() {
            let start = body.len();
            if (e as usize) < n {
                stamp[e as usize] = p as u32;
                stack.push(e);
                while let Some(x) = stack.pop() {
                    body.push(x);
                    if body.len() > limit {
                        return Err(SharedCodeError { entry: e, limit });
                    }
                    for &s in intra.succ(x as usize) {
                        if (s as usize) < n && stamp[s as usize] != p as u32 {
                            stamp[s as usize] = p as u32;
                            stack.push(s);
                        }
                    }
                }
            }
            body[start..].sort_unstable();
            body_offsets.push(body.len() as u32);
        }
        let mut call_offsets = Vec::with_capacity(entries.len() + 1);
        call_offsets.push(0u32);
        let mut calls = Vec::new();
        for p in 0..entries.len() {
            for &pc in &body[body_offsets[p] as usize..body_offsets[p + 1] as usize] {
                if let Op::Call { target } = insts[pc as usize].op {
                    calls.push((pc, proc_at[(target as usize).min(n)]));
                }
            }
            call_offsets.push(calls.len() as u32);
        }
        Ok(Procedures {
            entries,
            proc_at,
            body_offsets,
            body,
            call_offsets,
            calls,
        })
    }

    /// Number of procedures (the kernel entry included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are none (never: the kernel entry is one).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entry instruction of procedure `p` (procedure 0 is the kernel's start).
    pub fn entry(&self, p: usize) -> u32 {
        self.entries[p]
    }

    /// The procedure whose entry is instruction `pc`, if any.
    pub fn at(&self, pc: usize) -> Option<usize> {
        match self.proc_at.get(pc) {
            Some(&p) if p != NONE => Some(p as usize),
            _ => None,
        }
    }

    /// The instructions procedure `p` reaches before returning, in increasing order.
    pub fn body(&self, p: usize) -> &[u32] {
        &self.body[self.body_offsets[p] as usize..self.body_offsets[p + 1] as usize]
    }

    /// The `call`s inside procedure `p`'s body: (call instruction, callee procedure).
    pub fn calls(&self, p: usize) -> &[(u32, u32)] {
        &self.calls[self.call_offsets[p] as usize..self.call_offsets[p + 1] as usize]
    }

    /// Sum of all body sizes.
    pub fn total_body_size(&self) -> usize {
        self.body.len()
    }
}

/// The graph where `call` enters its callee and `ret` returns to every call site of every
/// procedure whose body holds it: nodes `0..n` are instructions, `n` is the exit, and node
/// `n + 1 + p` is procedure `p`'s return point (its `ret`s lead there; it leads to the
/// instruction after each call of `p`, and to the exit for the kernel entry). The return points
/// are plain joins: they do nothing.
pub fn interprocedural(insts: &[Inst<u32>], intra: &Graph, procs: &Procedures) -> Graph {
    let n = insts.len();
    let np = procs.len();
    // Procedures holding each `ret` (by counting, then filling).
    let mut ret_count = vec![0u32; n + 1];
    for p in 0..np {
        for &pc in procs.body(p) {
            if matches!(insts[pc as usize].op, Op::Ret) {
                ret_count[pc as usize + 1] += 1;
            }
        }
    }
    for i in 0..n {
        ret_count[i + 1] += ret_count[i];
    }
    let mut fill = ret_count.clone();
    let mut ret_procs = vec![0u32; ret_count[n] as usize];
    for p in 0..np {
        for &pc in procs.body(p) {
            if matches!(insts[pc as usize].op, Op::Ret) {
                let slot = &mut fill[pc as usize];
                ret_procs[*slot as usize] = (n + 1 + p) as u32;
                *slot += 1;
            }
        }
    }
    // Return sites of each procedure: after every call of it, anywhere.
    let mut site_count = vec![0u32; np + 1];
    for inst in insts {
        if let Op::Call { target } = inst.op {
            if let Some(p) = procs.at((target as usize).min(n)) {
                site_count[p + 1] += 1;
            }
        }
    }
    for p in 0..np {
        site_count[p + 1] += site_count[p];
    }
    let mut fill_sites = site_count.clone();
    let mut sites = vec![0u32; site_count[np] as usize];
    for (pc, inst) in insts.iter().enumerate() {
        if let Op::Call { target } = inst.op {
            if let Some(p) = procs.at((target as usize).min(n)) {
                sites[fill_sites[p] as usize] = pc as u32 + 1;
                fill_sites[p] += 1;
            }
        }
    }
    let mut g = Graph::with_capacity(
        n + 1 + np,
        intra.edge_count() + ret_procs.len() + sites.len(),
    );
    for (pc, inst) in insts.iter().enumerate() {
        let next = pc as u32 + 1;
        let guarded = inst.guard.is_some();
        match inst.op {
            Op::Call { target } => {
                let t = target.min(n as u32);
                if guarded {
                    g.push_node([t, next]);
                } else {
                    g.push_node([t]);
                }
            }
            Op::Ret => {
                let holders = &ret_procs[ret_count[pc] as usize..ret_count[pc + 1] as usize];
                g.push_node(holders.iter().copied().chain(guarded.then_some(next)));
            }
            _ => g.push_node(intra.succ(pc).iter().copied()),
        }
    }
    g.push_node([]);
    for p in 0..np {
        let own = &sites[site_count[p] as usize..site_count[p + 1] as usize];
        g.push_node(own.iter().copied().chain((p == 0).then_some(n as u32)));
    }
    g
}
