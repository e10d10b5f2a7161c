//! Bit-set data-flow problems over basic blocks.
//!
//! Sets are kept per basic block (a maximal chain of nodes where each has one successor and the
//! next has one predecessor), not per node, so memory is `blocks × bits / 64` words; blocks are
//! processed from a worklist in reverse postorder (postorder for backward problems), which
//! settles in a few passes over the blocks for the loop nests real kernels have.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::bitset::{intersect_words, union_words};
use super::Graph;

/// The basic blocks of a graph.
#[derive(Debug, Clone)]
pub struct Blocks {
    /// Nodes, block after block, each block in execution order.
    nodes: Vec<u32>,
    /// Block `b` is `nodes[start[b]..start[b + 1]]`.
    start: Vec<u32>,
    /// Block of each node.
    block_of: Vec<u32>,
}

impl Blocks {
    /// Splits `g` (with `preds` = `g` reversed) into basic blocks; `entry` starts one.
    pub fn new(g: &Graph, preds: &Graph, entry: usize) -> Blocks {
        let n = g.len();
        let leader = |x: usize| -> bool {
            let p = preds.succ(x);
            x == entry || p.len() != 1 || p[0] as usize == x || g.succ(p[0] as usize).len() != 1
        };
        let mut blocks = Blocks {
            nodes: Vec::with_capacity(n),
            start: vec![0],
            block_of: vec![u32::MAX; n],
        };
        let chain = |blocks: &mut Blocks, first: usize| {
            let b = blocks.start.len() as u32 - 1;
            let mut x = first;
            loop {
                blocks.block_of[x] = b;
                blocks.nodes.push(x as u32);
                let s = g.succ(x);
                if s.len() != 1 {
                    break;
                }
                let next = s[0] as usize;
                if blocks.block_of[next] != u32::MAX || leader(next) {
                    break;
                }
                x = next;
            }
            blocks.start.push(blocks.nodes.len() as u32);
        };
        for x in 0..n {
            if leader(x) {
                chain(&mut blocks, x);
            }
        }
        // Cycles of single-edge nodes that nothing enters from outside start anywhere.
        for x in 0..n {
            if blocks.block_of[x] == u32::MAX {
                chain(&mut blocks, x);
            }
        }
        blocks
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.start.len() - 1
    }

    /// True when there are no blocks.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The nodes of block `b`, in execution order.
    pub fn nodes(&self, b: usize) -> &[u32] {
        &self.nodes[self.start[b] as usize..self.start[b + 1] as usize]
    }

    /// The block holding `node`.
    pub fn block_of(&self, node: usize) -> usize {
        self.block_of[node] as usize
    }

    fn last(&self, b: usize) -> usize {
        self.nodes[self.start[b + 1] as usize - 1] as usize
    }
}

/// The solution of a problem: one set per block, at the block's start.
#[derive(Debug, Clone)]
pub struct Solution {
    /// The blocks the sets belong to.
    pub blocks: Blocks,
    words: usize,
    sets: Vec<u64>,
    reached: Vec<bool>,
}

impl Solution {
    /// The set at the start of block `b` (for a backward problem: what holds before its first
    /// node, i.e. after the transfer of the whole block).
    pub fn at_block(&self, b: usize) -> &[u64] {
        &self.sets[b * self.words..(b + 1) * self.words]
    }

    /// True when the solver reached block `b` (forward problems: from the entry).
    pub fn reached(&self, b: usize) -> bool {
        self.reached[b]
    }
}

/// A forward problem where a fact holds at a node when it holds on every path from `entry` (e.g.
/// "register surely written"): facts start empty at `entry`, `transfer(node, set)` applies a
/// node, and joins intersect. Blocks not reachable from `entry` are not solved (all facts hold).
pub fn forward_must(
    g: &Graph,
    entry: usize,
    bits: usize,
    transfer: &impl Fn(usize, &mut [u64]),
) -> Solution {
    let preds = g.reversed();
    let blocks = Blocks::new(g, &preds, entry);
    let words = bits.div_ceil(64);
    let nb = blocks.len();
    let full = super::BitSet::full(bits);
    let mut sets: Vec<u64> = Vec::with_capacity(nb * words);
    for _ in 0..nb {
        sets.extend_from_slice(full.words());
    }
    let mut reached = vec![false; nb];
    let rank = block_ranks(g, &blocks, entry);
    let mut work = BinaryHeap::new();
    let mut queued = vec![false; nb];
    if entry < g.len() {
        let b = blocks.block_of(entry);
        sets[b * words..(b + 1) * words].fill(0);
        reached[b] = true;
        queued[b] = true;
        work.push(Reverse((rank[b], b as u32)));
    }
    let mut cur = vec![0u64; words];
    while let Some(Reverse((_, b))) = work.pop() {
        let b = b as usize;
        queued[b] = false;
        cur.copy_from_slice(&sets[b * words..(b + 1) * words]);
        for &x in blocks.nodes(b) {
            transfer(x as usize, &mut cur);
        }
        for &s in g.succ(blocks.last(b)) {
            let sb = blocks.block_of(s as usize);
            if s as usize == entry {
                continue; // nothing is surely written at the entry
            }
            let changed = intersect_words(&mut sets[sb * words..(sb + 1) * words], &cur);
            if (changed || !reached[sb]) && !queued[sb] {
                reached[sb] = true;
                queued[sb] = true;
                work.push(Reverse((rank[sb], sb as u32)));
            }
        }
    }
    Solution {
        blocks,
        words,
        sets,
        reached,
    }
}

impl Solution {
    /// Visits every node of every reached block of a forward problem with the set that holds
    /// just before it.
    pub fn walk_forward(
        &self,
        transfer: &impl Fn(usize, &mut [u64]),
        mut visit: impl FnMut(usize, &[u64]),
    ) {
        let mut cur = vec![0u64; self.words];
        for b in 0..self.blocks.len() {
            if !self.reached[b] {
                continue;
            }
            cur.copy_from_slice(self.at_block(b));
            for &x in self.blocks.nodes(b) {
                visit(x as usize, &cur);
                transfer(x as usize, &mut cur);
            }
        }
    }

    /// Visits every node of a backward problem with the set that holds just after it.
    pub fn walk_backward(
        &self,
        g: &Graph,
        transfer: &impl Fn(usize, &mut [u64]),
        mut visit: impl FnMut(usize, &[u64]),
    ) {
        let mut cur = vec![0u64; self.words];
        for b in 0..self.blocks.len() {
            self.out_of(g, b, &mut cur);
            for &x in self.blocks.nodes(b).iter().rev() {
                visit(x as usize, &cur);
                transfer(x as usize, &mut cur);
            }
        }
    }

    /// The union of the sets at the starts of the successors of block `b`.
    fn out_of(&self, g: &Graph, b: usize, out: &mut [u64]) {
        out.fill(0);
        for &s in g.succ(self.blocks.last(b)) {
            let sb = self.blocks.block_of(s as usize);
            union_words(out, self.at_block(sb));
        }
    }
}

/// A backward problem where a fact holds at a node when it holds on some path to the end (e.g.
/// "register live"): facts start empty, `transfer(node, set)` turns the set after a node into
/// the set before it, and joins unite. Every block is solved, reachable or not.
pub fn backward_may(
    g: &Graph,
    entry: usize,
    bits: usize,
    transfer: &impl Fn(usize, &mut [u64]),
) -> Solution {
    let preds = g.reversed();
    let blocks = Blocks::new(g, &preds, entry);
    let words = bits.div_ceil(64);
    let nb = blocks.len();
    let mut sol = Solution {
        blocks,
        words,
        sets: vec![0u64; nb * words],
        reached: vec![true; nb],
    };
    let rank = block_ranks(g, &sol.blocks, entry);
    // Postorder: successors first.
    let mut work: BinaryHeap<(u32, u32)> = (0..nb as u32).map(|b| (rank[b as usize], b)).collect();
    let mut queued = vec![true; nb];
    let mut cur = vec![0u64; words];
    while let Some((_, b)) = work.pop() {
        let b = b as usize;
        queued[b] = false;
        sol.out_of(g, b, &mut cur);
        for &x in sol.blocks.nodes(b).iter().rev() {
            transfer(x as usize, &mut cur);
        }
        let changed = union_words(&mut sol.sets[b * words..(b + 1) * words], &cur);
        if changed {
            let first = sol.blocks.nodes(b)[0] as usize;
            for &p in preds.succ(first) {
                let pb = sol.blocks.block_of(p as usize);
                if !queued[pb] {
                    queued[pb] = true;
                    work.push((rank[pb], pb as u32));
                }
            }
        }
    }
    sol
}

/// Each block's position in reverse postorder from `entry`; blocks not reached come after.
fn block_ranks(g: &Graph, blocks: &Blocks, entry: usize) -> Vec<u32> {
    let nb = blocks.len();
    let mut rank = vec![u32::MAX; nb];
    let mut next = 0u32;
    if entry < g.len() {
        for x in g.reverse_postorder(entry) {
            let b = blocks.block_of(x as usize);
            if rank[b] == u32::MAX {
                rank[b] = next;
                next += 1;
            }
        }
    }
    for r in rank.iter_mut() {
        if *r == u32::MAX {
            *r = next;
            next += 1;
        }
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_split_at_joins_and_forks() {
        // 0 -> 1 -> 2 -> {3, 4}; 3 -> 5; 4 -> 5; 5 -> 1 (loop); plus a lone cycle 6 <-> 7.
        let g = Graph::from_lists([
            vec![1],
            vec![2],
            vec![3, 4],
            vec![5],
            vec![5],
            vec![1],
            vec![7],
            vec![6],
        ]);
        let b = Blocks::new(&g, &g.reversed(), 0);
        assert_eq!(b.nodes(b.block_of(0)), &[0]);
        assert_eq!(b.nodes(b.block_of(1)), &[1, 2]);
        assert_eq!(b.nodes(b.block_of(5)), &[5]);
        assert_eq!(b.block_of(6), b.block_of(7));
    }

    #[test]
    fn must_and_may_agree_with_hand_results() {
        // 0 writes bit 0; 1 and 2 branch; 2 writes bit 1; 3 joins.
        let g = Graph::from_lists([vec![1, 2], vec![3], vec![3], vec![]]);
        let writes = |x: usize, s: &mut [u64]| match x {
            0 => s[0] |= 1,
            2 => s[0] |= 2,
            _ => {}
        };
        let sol = forward_must(&g, 0, 2, &writes);
        let mut seen = vec![0u64; 4];
        sol.walk_forward(&writes, |x, s| seen[x] = s[0]);
        assert_eq!(seen, vec![0, 1, 1, 1]);
        // Node 3 reads bit 1, node 2 writes it: live after 0 and 1, not after 2.
        let live = |x: usize, s: &mut [u64]| match x {
            3 => s[0] |= 2,
            2 => s[0] &= !2,
            _ => {}
        };
        let sol = backward_may(&g, 0, 2, &live);
        let mut after = vec![0u64; 4];
        sol.walk_backward(&g, &live, |x, s| after[x] = s[0]);
        assert_eq!(after, vec![2, 2, 2, 0]);
    }
}
