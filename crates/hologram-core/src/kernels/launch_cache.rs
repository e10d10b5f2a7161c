//! Compiled element-wise kernels by what determines them (the expression and how each operand
//! is addressed), so a repeated launch skips building, canonicalizing and digesting its kernel.
//!
//! Building an element-wise kernel's program, checking it against the process-wide memo (which
//! hashes and compares the whole program) and looking up its digest cost several microseconds,
//! far more than running a kernel on a few elements. A launch key is a few machine words.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use hologram_backends::CompiledKernel;

use super::elementwise::{self, Access, Spec};
use crate::tensor::expr::Node;

/// A multiply-rotate hash of machine words (keys are short and built by us, not by an
/// adversary, so SipHash's protection is not needed and its cost shows on tiny launches).
#[derive(Default, Clone, Copy)]
pub(crate) struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // A key (`[u64]`) arrives as one byte slice: whole words are read as words (a
        // `copy_from_slice` per word was a `memcpy` call per word), a tail is padded.
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            if let Ok(w) = <[u8; 8]>::try_from(word) {
                self.write_u64(u64::from_le_bytes(w));
            }
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let mut w = [0u8; 8];
            w[..tail.len()].copy_from_slice(tail);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    fn write_u64(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, w: usize) {
        self.write_u64(w as u64);
    }
}

/// The compiled kernels of one executor by launch key, and how often a key was found.
#[derive(Default)]
pub(crate) struct LaunchCache {
    kernels: Mutex<HashMap<Vec<u64>, CompiledKernel, BuildHasherDefault<WordHasher>>>,
    hits: AtomicU64,
}

impl LaunchCache {
    /// The kernel of `key`, if one was stored.
    pub fn get(&self, key: &[u64]) -> Option<CompiledKernel> {
        let found = self
            .kernels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned();
        if found.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    pub fn insert(&self, key: &[u64], kernel: CompiledKernel) {
        self.kernels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_vec(), kernel);
    }

    /// Launches served from the cache.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }
}

/// A launch key, held inline for expressions of up to a dozen nodes.
pub(crate) type Key = smallvec::SmallVec<[u64; 32]>;

fn access_code(a: Access) -> u64 {
    match a {
        Access::Dense => 0,
        Access::Contiguous => 1,
        Access::Scalar => 2,
        Access::Strided => 3,
        Access::Broadcast { div, rem } => 4 + div as u64 + 2 * rem as u64,
        Access::BroadcastAs(j) => 16 + j as u64,
    }
}

/// The launch key of an element-wise kernel: every field of `spec` (which determines the
/// kernel text), encoded so that different specs give different keys. Each node is a tag word
/// (kind, dtype, function) followed by its operands; a scalar carries its type and bits.
pub(crate) fn key(spec: &Spec<'_>) -> Key {
    // Word by word: `extend` of a two-word array went through the generic iterator path.
    fn push(k: &mut Key, words: &[u64]) {
        for &w in words {
            k.push(w);
        }
    }
    let mut k = Key::new();
    k.push(spec.root as u64 | (spec.rank as u64) << 32);
    k.push(spec.out.0 as u64 | access_code(spec.out.1) << 8 | (spec.inputs.len() as u64) << 16);
    for &(dt, access) in &spec.inputs {
        k.push(dt as u64 | access_code(access) << 8);
    }
    // Extra outputs: a tag word that no input word equals (bit 63), then root and dtype.
    for &(root, dt) in &spec.extra {
        k.push(1 << 63 | (root as u64) << 8 | dt as u64);
    }
    for (node, dt) in &spec.graph.nodes {
        let tag = |kind: u64, f: u64| kind | (*dt as u64) << 8 | f << 16;
        let pair = |a: u32, b: u32| a as u64 | (b as u64) << 32;
        match node {
            Node::Input(i) => push(&mut k, &[tag(0, 0), *i as u64]),
            // A scalar passed as a parameter leaves the kernel the same for every value.
            Node::Scalar(v) => match elementwise::scalar_param_type(*v, *dt) {
                Some(_) => push(&mut k, &[tag(1, v.ty() as u64), u64::MAX]),
                None => push(&mut k, &[tag(1, v.ty() as u64), v.to_bits()]),
            },
            Node::Unary(f, a) => push(&mut k, &[tag(2, *f as u64), *a as u64]),
            Node::Binary(f, a, b) => push(&mut k, &[tag(3, *f as u64), pair(*a, *b)]),
            Node::Compare(c, a, b) => push(&mut k, &[tag(4, *c as u64), pair(*a, *b)]),
            Node::Where(c, a, b) => push(&mut k, &[tag(5, 0), pair(*c, *a), *b as u64]),
            Node::Cast(a) => push(&mut k, &[tag(6, 0), *a as u64]),
            Node::Index => k.push(tag(7, 0)),
            Node::Random { seed, normal } => push(&mut k, &[tag(8, *normal as u64), *seed]),
            Node::RandomSalted { salt, normal } => {
                push(&mut k, &[tag(9, *normal as u64), *salt as u64])
            }
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use hologram_isa::semantics::Value;

    use super::*;
    use crate::dtype::DType;
    use crate::tensor::expr::{BinaryFn, Graph};

    fn add_graph(scalar: Value) -> Graph {
        let mut g = Graph::default();
        let x = g.push(Node::Input(0), DType::F32);
        let s = g.push(Node::Scalar(scalar), DType::F32);
        g.push(Node::Binary(BinaryFn::Add, x, s), DType::F32);
        g
    }

    fn spec(g: &Graph, input: Access, out: Access) -> Key {
        key(&Spec {
            graph: g,
            root: 2,
            inputs: smallvec::smallvec![(DType::F32, input)],
            rank: 1,
            out: (DType::F32, out),
            extra: smallvec::SmallVec::new(),
        })
    }

    #[test]
    fn keys_tell_apart_what_changes_the_kernel() {
        let one = add_graph(Value::F32(1.0));
        let base = spec(&one, Access::Dense, Access::Dense);
        assert_eq!(
            base,
            spec(&add_graph(Value::F32(1.0)), Access::Dense, Access::Dense)
        );
        // A float scalar is a kernel parameter: another value, the same kernel.
        assert_eq!(
            base,
            spec(&add_graph(Value::F32(2.0)), Access::Dense, Access::Dense)
        );
        // Narrow integers stay literals: another value, another kernel.
        let narrow = |v: u8| {
            let mut g = add_graph(Value::U8(v));
            for node in &mut g.nodes {
                node.1 = DType::U8;
            }
            spec(&g, Access::Dense, Access::Dense)
        };
        assert_ne!(narrow(1), narrow(2));
        assert_ne!(
            base,
            spec(&add_graph(Value::F64(1.0)), Access::Dense, Access::Dense)
        );
        assert_ne!(base, spec(&one, Access::Strided, Access::Dense));
        assert_ne!(base, spec(&one, Access::Dense, Access::Contiguous));
        let mut mul = one.clone();
        mul.nodes[2].0 = Node::Binary(BinaryFn::Mul, 0, 1);
        assert_ne!(base, spec(&mul, Access::Dense, Access::Dense));
    }
}
