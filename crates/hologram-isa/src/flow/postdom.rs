//! Immediate post-dominators, by Lengauer–Tarjan on the reversed graph (near-linear time, no
//! recursion: a chain of a million instructions is a chain of a million tree nodes).

use super::Graph;

const NONE: u32 = u32::MAX;

/// The immediate post-dominator of every node of `cfg` with respect to `exit` (`None` for the
/// exit itself and for nodes from which the exit cannot be reached).
pub fn post_dominators(cfg: &Graph, exit: usize) -> Vec<Option<u32>> {
    // Dominators of the reversed graph from the exit: there, a node's successors are its
    // predecessors in `cfg`, and its predecessors are its successors in `cfg`.
    let reversed = cfg.reversed();
    dominators(&reversed, cfg, exit)
}

/// Immediate dominators in `g` from `root`; `preds` is `g` reversed.
fn dominators(g: &Graph, preds: &Graph, root: usize) -> Vec<Option<u32>> {
    let n = g.len();
    // Depth-first numbering (1-based; 0 = not reached), DFS-tree parents and vertices by number.
    let mut num = vec![0u32; n];
    let mut parent = vec![NONE; n];
    let mut vertex: Vec<u32> = vec![NONE]; // vertex[0] unused
    if root >= n {
        return vec![None; n];
    }
    let mut stack: Vec<(u32, u32)> = vec![(root as u32, 0)];
    num[root] = 1;
    vertex.push(root as u32);
    while let Some(top) = stack.last_mut() {
        let (x, i) = *top;
        let succ = g.succ(x as usize);
        if (i as usize) < succ.len() {
            top.1 += 1;
            let s = succ[i as usize];
            if num[s as usize] == 0 {
                vertex.push(s);
                num[s as usize] = (vertex.len() - 1) as u32;
                parent[s as usize] = x;
                stack.push((s, 0));
            }
        } else {
            stack.pop();
        }
    }
    let count = vertex.len() - 1;
    // semi[v]: DFS number of v's semidominator; label/ancestor: the link-eval forest.
    let mut semi: Vec<u32> = num.clone();
    let mut label: Vec<u32> = (0..n as u32).collect();
    let mut ancestor = vec![NONE; n];
    let mut idom = vec![NONE; n];
    let mut bucket_head = vec![NONE; n];
    let mut bucket_next = vec![NONE; n];
    let mut path: Vec<u32> = Vec::new();

    // eval(v): the vertex of least semidominator on the forest path to v's root, compressing.
    let eval = |v: u32,
                ancestor: &mut Vec<u32>,
                label: &mut Vec<u32>,
                semi: &Vec<u32>,
                path: &mut Vec<u32>|
     -> u32 {
        if ancestor[v as usize] == NONE {
            return v;
        }
        path.clear();
        let mut x = v;
        while ancestor[ancestor[x as usize] as usize] != NONE {
            path.push(x);
            x = ancestor[x as usize];
        }
        while let Some(x) = path.pop() {
            let a = ancestor[x as usize];
            if semi[label[a as usize] as usize] < semi[label[x as usize] as usize] {
                label[x as usize] = label[a as usize];
            }
            ancestor[x as usize] = ancestor[a as usize];
        }
        label[v as usize]
    };

    for i in (2..=count).rev() {
        let w = vertex[i];
        for &v in preds.succ(w as usize) {
            if num[v as usize] == 0 {
                continue;
            }
            let u = eval(v, &mut ancestor, &mut label, &semi, &mut path);
            if semi[u as usize] < semi[w as usize] {
                semi[w as usize] = semi[u as usize];
            }
        }
        let s = vertex[semi[w as usize] as usize];
        bucket_next[w as usize] = bucket_head[s as usize];
        bucket_head[s as usize] = w;
        let p = parent[w as usize];
        ancestor[w as usize] = p;
        let mut v = bucket_head[p as usize];
        bucket_head[p as usize] = NONE;
        while v != NONE {
            let next = bucket_next[v as usize];
            let u = eval(v, &mut ancestor, &mut label, &semi, &mut path);
            idom[v as usize] = if semi[u as usize] < semi[v as usize] {
                u
            } else {
                p
            };
            v = next;
        }
    }
    for &w in vertex.iter().take(count + 1).skip(2) {
        if idom[w as usize] != vertex[semi[w as usize] as usize] {
            idom[w as usize] = idom[idom[w as usize] as usize];
        }
    }
    idom.iter()
        .enumerate()
        .map(|(v, &d)| (v != root && d != NONE).then_some(d))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdom(succ: Vec<Vec<u32>>) -> Vec<Option<u32>> {
        let g = Graph::from_lists(succ);
        let exit = g.len() - 1;
        post_dominators(&g, exit)
    }

    #[test]
    fn diamond() {
        // 0 -> 1, 2; 1 -> 3; 2 -> 3; 3 -> 4 (exit)
        let pd = pdom(vec![vec![1, 2], vec![3], vec![3], vec![4], vec![]]);
        assert_eq!(pd, vec![Some(3), Some(3), Some(3), Some(4), None]);
    }

    #[test]
    fn infinite_loop_has_no_post_dominator() {
        let pd = pdom(vec![vec![1], vec![1], vec![]]);
        assert_eq!(pd, vec![None, None, None]);
    }

    #[test]
    fn loops_and_early_exits() {
        // 0 -> 1; 1 -> 2, 4; 2 -> 3, 5; 3 -> 1; 4 -> 5; 5 (exit)
        let pd = pdom(vec![
            vec![1],
            vec![2, 4],
            vec![3, 5],
            vec![1],
            vec![5],
            vec![],
        ]);
        assert_eq!(pd, vec![Some(1), Some(5), Some(5), Some(1), Some(5), None]);
    }

    /// Post-dominators by their definition (every path to the exit passes), on small graphs.
    fn brute(succ: &[Vec<u32>]) -> Vec<Option<u32>> {
        let n = succ.len();
        let exit = n - 1;
        // reaches[x][y]: y reachable from x avoiding `avoid`.
        let reaches_exit_avoiding = |x: usize, avoid: usize| -> bool {
            let mut seen = vec![false; n];
            let mut st = vec![x];
            while let Some(a) = st.pop() {
                if a == avoid || seen[a] {
                    continue;
                }
                if a == exit {
                    return true;
                }
                seen[a] = true;
                st.extend(succ[a].iter().map(|&s| s as usize));
            }
            false
        };
        (0..n)
            .map(|x| {
                if x == exit || !reaches_exit_avoiding(x, usize::MAX) {
                    return None;
                }
                let pdoms: Vec<usize> = (0..n)
                    .filter(|&d| d != x && !reaches_exit_avoiding(x, d))
                    .collect();
                // The immediate one is post-dominated by all the others.
                let imm = pdoms.iter().copied().find(|&d| {
                    pdoms
                        .iter()
                        .all(|&e| e == d || !reaches_exit_avoiding(d, e))
                });
                imm.map(|d| d as u32)
            })
            .collect()
    }

    #[test]
    fn matches_the_definition_on_random_graphs() {
        let mut seed = 0x2545F4914F6CDD1Du64;
        let mut rand = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..300 {
            let n = 2 + rand(9) as usize;
            let succ: Vec<Vec<u32>> = (0..n)
                .map(|x| {
                    if x == n - 1 {
                        return vec![];
                    }
                    (0..1 + rand(3)).map(|_| rand(n as u64) as u32).collect()
                })
                .collect();
            assert_eq!(pdom(succ.clone()), brute(&succ), "{succ:?}");
        }
    }
}
