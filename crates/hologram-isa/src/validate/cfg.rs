//! Control-flow graphs of a kernel and their post-dominators.

use crate::inst::Op;
use crate::kernel::Kernel;

/// A fixed-size set of small integers.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    pub fn new(n: usize) -> Self {
        BitSet {
            words: vec![0; n.div_ceil(64)],
        }
    }

    pub fn full(n: usize) -> Self {
        let mut s = BitSet {
            words: vec![u64::MAX; n.div_ceil(64)],
        };
        if n % 64 != 0 {
            if let Some(last) = s.words.last_mut() {
                *last = (1u64 << (n % 64)) - 1;
            }
        }
        s
    }

    pub fn insert(&mut self, i: usize) -> bool {
        let (w, b) = (i / 64, 1u64 << (i % 64));
        let was = self.words[w] & b != 0;
        self.words[w] |= b;
        !was
    }

    pub fn contains(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }

    pub fn intersect_with(&mut self, other: &BitSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= b;
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &bits)| {
            (0..64)
                .filter(move |b| bits & (1u64 << b) != 0)
                .map(move |b| w * 64 + b)
        })
    }
}

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

/// Nodes from which no node of `targets` can be reached (reverse reachability; linear).
pub(crate) fn cannot_reach(cfg: &Cfg, targets: &BitSet) -> BitSet {
    let total = cfg.succ.len();
    let mut pred: Vec<Vec<usize>> = vec![Vec::new(); total];
    for (n, ss) in cfg.succ.iter().enumerate() {
        for &s in ss {
            pred[s].push(n);
        }
    }
    let mut reaches = BitSet::new(total);
    let mut stack: Vec<usize> = targets.iter().filter(|&t| t < total).collect();
    for &t in &stack {
        reaches.insert(t);
    }
    while let Some(n) = stack.pop() {
        for &p in &pred[n] {
            if reaches.insert(p) {
                stack.push(p);
            }
        }
    }
    let mut out = BitSet::new(total);
    for n in (0..total).filter(|&n| !reaches.contains(n)) {
        out.insert(n);
    }
    out
}

/// Immediate post-dominator of every node (None for the exit and for nodes that never reach it),
/// by the Cooper–Harvey–Kennedy iteration on the reversed graph, where paths through `ignored`
/// nodes do not count: a node's post-dominator is where its paths that avoid `ignored` meet (the
/// exit, for a node outside `ignored` whose every path enters it). The barrier check ignores the
/// paths on which lanes exit before and away from every barrier.
pub(crate) fn post_dominators_ignoring(cfg: &Cfg, ignored: &BitSet) -> Vec<Option<usize>> {
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
                if idom[s].is_some() && !ignored.contains(s) {
                    new = Some(match new {
                        None => s,
                        Some(cur) => intersect(&idom, s, cur),
                    });
                }
            }
            if new.is_none() && !ignored.contains(n) && !cfg.succ[n].is_empty() {
                // Every path from here enters an ignored node.
                new = Some(exit);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(succ: Vec<Vec<usize>>) -> Cfg {
        Cfg { succ }
    }

    #[test]
    fn diamond() {
        // 0 -> 1, 2; 1 -> 3; 2 -> 3; 3 -> 4 (exit)
        let g = cfg(vec![vec![1, 2], vec![3], vec![3], vec![4], vec![]]);
        let pd = post_dominators_ignoring(&g, &BitSet::new(g.succ.len()));
        assert_eq!(pd, vec![Some(3), Some(3), Some(3), Some(4), None]);
    }

    #[test]
    fn infinite_loop_has_no_post_dominator() {
        // 0 -> 1; 1 -> 1
        let g = cfg(vec![vec![1], vec![1], vec![]]);
        let pd = post_dominators_ignoring(&g, &BitSet::new(g.succ.len()));
        assert_eq!(pd, vec![None, None, None]);
    }

    #[test]
    fn bitset_full_and_iter() {
        let s = BitSet::full(70);
        assert_eq!(s.iter().count(), 70);
        assert!(!s.contains(70));
    }
}
