//! Control flow of a kernel body, shared by the validator and the compiler.
//!
//! Everything here runs in time and memory linear in the number of instructions (times a small
//! constant), without recursion, so that hostile programs (call chains 50,000 deep, 10^5 labels,
//! 10^6 instructions) are analyzed or rejected quickly and never overflow the stack:
//! - [`Graph`]: successor lists in one flat array; [`intra`] is the graph of one procedure at a
//!   time (`call` falls through, `ret` and `exit` go to the exit node).
//! - [`Procedures`]: the kernel entry and every `call` target with the instructions each reaches
//!   before returning. Subroutines may share code, but the total is bounded
//!   ([`SHARED_CODE_FACTOR`]), so the sum of all bodies stays linear.
//! - [`interprocedural`]: the graph where `call` enters its callee and `ret` returns to every
//!   call site of the procedures that reach it (through one return node per procedure, so a
//!   subroutine with many `ret`s and many callers costs their sum, not their product).
//! - [`post_dominators`]: Lengauer–Tarjan on the reversed graph.
//! - [`dataflow`]: bit-set problems solved over basic blocks with a reverse-postorder worklist.

mod bitset;
pub mod dataflow;
mod postdom;
mod procedures;

pub use bitset::BitSet;
pub use postdom::post_dominators;
pub use procedures::{
    interprocedural, Procedures, SharedCodeError, SHARED_CODE_FACTOR, SHARED_CODE_SLACK,
};

use crate::inst::{Inst, Op};

/// A directed graph over nodes `0..len()`, with successor lists stored in one array.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    offsets: Vec<u32>,
    targets: Vec<u32>,
}

impl Graph {
    /// Builds a graph from one successor list per node.
    pub fn from_lists<I: IntoIterator<Item = u32>>(lists: impl IntoIterator<Item = I>) -> Graph {
        let mut g = Graph {
            offsets: vec![0],
            targets: Vec::new(),
        };
        for list in lists {
            g.targets.extend(list);
            g.offsets.push(g.targets.len() as u32);
        }
        g
    }

    /// An empty graph to fill node by node with [`Graph::push_node`].
    pub fn with_capacity(nodes: usize, edges: usize) -> Graph {
        let mut offsets = Vec::with_capacity(nodes + 1);
        offsets.push(0);
        Graph {
            offsets,
            targets: Vec::with_capacity(edges),
        }
    }

    /// Appends a node with the given successors.
    pub fn push_node(&mut self, succ: impl IntoIterator<Item = u32>) {
        self.targets.extend(succ);
        self.offsets.push(self.targets.len() as u32);
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of edges.
    pub fn edge_count(&self) -> usize {
        self.targets.len()
    }

    /// Successors of `node`.
    pub fn succ(&self, node: usize) -> &[u32] {
        &self.targets[self.offsets[node] as usize..self.offsets[node + 1] as usize]
    }

    /// The graph with every edge reversed.
    pub fn reversed(&self) -> Graph {
        let n = self.len();
        let mut count = vec![0u32; n + 1];
        for &t in &self.targets {
            count[t as usize + 1] += 1;
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let offsets = count.clone();
        let mut fill = count;
        let mut targets = vec![0u32; self.targets.len()];
        for from in 0..n {
            for &to in self.succ(from) {
                let slot = &mut fill[to as usize];
                targets[*slot as usize] = from as u32;
                *slot += 1;
            }
        }
        Graph { offsets, targets }
    }

    /// Nodes reachable from `start` (itself included), without recursion.
    pub fn reachable_from(&self, start: usize) -> Vec<bool> {
        let mut seen = vec![false; self.len()];
        let mut stack = vec![start];
        if start < seen.len() {
            seen[start] = true;
        }
        while let Some(x) = stack.pop() {
            for &s in self.succ(x) {
                if !seen[s as usize] {
                    seen[s as usize] = true;
                    stack.push(s as usize);
                }
            }
        }
        seen
    }

    /// Nodes reachable from `start`, in reverse postorder (a node before its successors, except
    /// along back edges), without recursion.
    pub fn reverse_postorder(&self, start: usize) -> Vec<u32> {
        let n = self.len();
        let mut seen = vec![false; n];
        let mut post = Vec::with_capacity(n);
        if start >= n {
            return post;
        }
        // (node, index of the next successor to look at)
        let mut stack = vec![(start, 0usize)];
        seen[start] = true;
        while let Some(top) = stack.last_mut() {
            let (x, i) = *top;
            let succ = self.succ(x);
            if i < succ.len() {
                top.1 += 1;
                let s = succ[i] as usize;
                if !seen[s] {
                    seen[s] = true;
                    stack.push((s, 0));
                }
            } else {
                post.push(x as u32);
                stack.pop();
            }
        }
        post.reverse();
        post
    }
}

/// The graph of one procedure at a time over instructions `0..n` and the exit node `n`: `call`
/// falls through to the next instruction, `ret` and `exit` go to the exit node, a guarded jump
/// also falls through. Jump targets must be at most `n` (a label at the very end is the exit).
pub fn intra(insts: &[Inst<u32>]) -> Graph {
    let n = insts.len() as u32;
    let mut g = Graph::with_capacity(insts.len() + 1, insts.len() + insts.len() / 4 + 1);
    for (pc, inst) in insts.iter().enumerate() {
        let next = pc as u32 + 1;
        let guarded = inst.guard.is_some();
        match &inst.op {
            Op::Bra { target } if guarded => g.push_node([(*target).min(n), next]),
            Op::Bra { target } => g.push_node([(*target).min(n)]),
            Op::Loop { target, .. } => g.push_node([(*target).min(n), next]),
            Op::Ret | Op::Exit if guarded => g.push_node([n, next]),
            Op::Ret | Op::Exit => g.push_node([n]),
            _ => g.push_node([next]),
        }
    }
    g.push_node([]);
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reversed_and_orders() {
        let g = Graph::from_lists([vec![1, 2], vec![3], vec![3], vec![]]);
        let r = g.reversed();
        assert_eq!(r.succ(3), &[1, 2]);
        assert_eq!(r.succ(0), &[] as &[u32]);
        let rpo = g.reverse_postorder(0);
        assert_eq!(rpo[0], 0);
        assert_eq!(*rpo.last().unwrap(), 3);
        assert_eq!(g.reachable_from(1), vec![false, true, false, true]);
    }

    #[test]
    fn deep_graphs_do_not_recurse() {
        let n = 1_000_000u32;
        let g = Graph::from_lists((0..n).map(|i| if i + 1 < n { vec![i + 1] } else { vec![] }));
        assert_eq!(g.reverse_postorder(0).len(), n as usize);
    }
}
