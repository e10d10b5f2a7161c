//! The call graph: recursion is rejected and the call depth is measured and bounded, without
//! recursion in the validator itself (a chain of 50,000 subroutines is a loop, not 50,000 stack
//! frames).

use super::error::{Location, ValidationError, ValidationErrorKind as K};
use crate::flow::Procedures;
use crate::kernel::Kernel;

/// The deepest nesting of `call` a kernel may have.
///
/// Backends keep a per-lane return stack of the kernel's call depth (CUDA and WGSL in
/// registers or local memory, the CPU interpreter per lane group), so the depth is bounded like
/// a GPU's call stack; 64 nested subroutines is far more than kernels need.
pub const MAX_CALL_DEPTH: u32 = 64;

/// What the call graph tells.
pub(crate) struct CallFacts {
    /// Deepest call nesting from the kernel entry.
    pub max_depth: u32,
    /// Procedures with every callee before its callers.
    pub callees_first: Vec<u32>,
}

/// Names a procedure for messages: its first label, or where it starts.
fn proc_name(k: &Kernel, procs: &Procedures, p: usize) -> String {
    if p == 0 {
        return "the kernel entry".to_string();
    }
    let pc = procs.entry(p);
    k.labels
        .iter()
        .find(|(_, at)| *at == pc)
        .map(|(n, _)| n.clone())
        .unwrap_or_else(|| format!("instruction {pc}"))
}

/// `a -> b -> c`, keeping the first and last few names of a long chain.
fn chain_text(k: &Kernel, procs: &Procedures, chain: &[u32]) -> String {
    const KEEP: usize = 4;
    let name = |p: &u32| proc_name(k, procs, *p as usize);
    if chain.len() <= 2 * KEEP + 1 {
        return chain.iter().map(name).collect::<Vec<_>>().join(" -> ");
    }
    let head: Vec<String> = chain[..KEEP].iter().map(name).collect();
    let tail: Vec<String> = chain[chain.len() - KEEP..].iter().map(name).collect();
    format!(
        "{} -> ... ({} more) ... -> {}",
        head.join(" -> "),
        chain.len() - 2 * KEEP,
        tail.join(" -> ")
    )
}

/// Rejects recursion (at a call that closes a cycle) and call chains deeper than
/// [`MAX_CALL_DEPTH`] (at the call that goes one too deep).
pub(crate) fn check(
    k: &Kernel,
    procs: &Procedures,
    loc: &impl Fn(usize) -> Location,
) -> Result<CallFacts, ValidationError> {
    let np = procs.len();
    // 0 = not seen, 1 = on the current path, 2 = done.
    let mut colour = vec![0u8; np];
    let mut depth = vec![0u32; np];
    let mut callees_first = Vec::with_capacity(np);
    // (procedure, index of the next call to follow)
    let mut stack: Vec<(u32, u32)> = Vec::new();
    for root in 0..np {
        if colour[root] != 0 {
            continue;
        }
        colour[root] = 1;
        stack.push((root as u32, 0));
        while let Some(top) = stack.last_mut() {
            let (p, i) = *top;
            let calls = procs.calls(p as usize);
            if let Some(&(call_pc, q)) = calls.get(i as usize) {
                top.1 += 1;
                match colour[q as usize] {
                    1 => {
                        let start = stack.iter().position(|&(x, _)| x == q).unwrap_or(0);
                        let mut cycle: Vec<u32> = stack[start..].iter().map(|&(x, _)| x).collect();
                        cycle.push(q);
                        return Err(ValidationError::new(
                            loc(call_pc as usize),
                            K::Recursion(chain_text(k, procs, &cycle)),
                        ));
                    }
                    0 => {
                        colour[q as usize] = 1;
                        stack.push((q, 0));
                    }
                    _ => {}
                }
            } else {
                depth[p as usize] = calls
                    .iter()
                    .map(|&(_, q)| depth[q as usize] + 1)
                    .max()
                    .unwrap_or(0);
                colour[p as usize] = 2;
                callees_first.push(p);
                stack.pop();
            }
        }
    }
    let max_depth = depth.first().copied().unwrap_or(0);
    if max_depth > MAX_CALL_DEPTH {
        // Follow a deepest chain from the entry to the call one level past the limit.
        let mut chain = vec![0u32];
        let mut p = 0usize;
        let mut at = 0u32;
        while chain.len() <= MAX_CALL_DEPTH as usize + 1 {
            let Some(&(call_pc, q)) = procs
                .calls(p)
                .iter()
                .find(|&&(_, q)| depth[q as usize] + 1 == depth[p])
            else {
                break;
            };
            chain.push(q);
            at = call_pc;
            p = q as usize;
        }
        return Err(ValidationError::new(
            loc(at as usize),
            K::CallDepth {
                depth: max_depth,
                limit: MAX_CALL_DEPTH,
                chain: chain_text(k, procs, &chain),
            },
        ));
    }
    Ok(CallFacts {
        max_depth,
        callees_first,
    })
}
