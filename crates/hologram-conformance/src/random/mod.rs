//! Random valid kernels for differential testing: every backend runs the same program on the
//! same inputs, and every buffer must come out the same.
//!
//! A program mixes integer and float arithmetic, conversions, bitcasts, selects,
//! guarded instructions, loads (at `%gid` and gathered), stores, forward branches, counted and
//! data-dependent loops, early exits, subroutine calls, scratch arrays, `.shared` exchanges
//! around a barrier and atomics, launched on a random 1-, 2- or 3-D shape; about a third are
//! element-wise maps, which the CPU runs as native loops and CUDA in its vectorized form. Only
//! operations whose result the ISA fixes bit for bit feed other instructions; transcendentals
//! (whose accuracy differs between backends) are stored straight to an `approx` buffer and
//! compared within a tolerance. Atomics whose result depends on the order of lanes only update
//! memory (their old values are never read), and every lane stores to its own elements.
//!
//! A case is a conformance-format pair (`.hasm` text and a `.json` spec without expectations), so
//! a program that exposes a difference can be kept in `tests/differential/` and is checked again
//! by every later run (see [`crate::cross`]).

mod compare;
mod program;
mod spec;

use std::sync::Arc;

use hologram_compiler::Canonical;

pub use compare::{compare, compare_each, compare_timed, Difference};

use crate::Case;

/// A small deterministic random number generator (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03 | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// True with the given percent probability.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// A generated program with its launch and inputs.
#[derive(Debug, Clone)]
pub struct RandomCase {
    /// The seed it came from.
    pub seed: u64,
    /// `.hasm` text.
    pub text: String,
    /// The conformance-format spec: grid, block and every argument (no expectations), and
    /// `approx_tolerance`: the relative tolerance of `approx` element `i` is entry `i % len`.
    pub spec: serde_json::Value,
}

impl RandomCase {
    /// The program for `seed`.
    pub fn generate(seed: u64) -> RandomCase {
        let mut rng = Rng::new(seed);
        let shape = spec::Shape::random(&mut rng);
        let p = program::generate(&mut rng, seed, &shape);
        let spec = spec::spec(&mut rng, &shape, &p);
        RandomCase {
            seed,
            text: p.text,
            spec,
        }
    }

    /// The kernel's name (`rnd_SEED`).
    pub fn name(&self) -> String {
        format!("rnd_{}", self.seed)
    }

    /// The case as the harness runs it: assembled and canonicalized.
    pub fn case(&self) -> Result<Case, String> {
        let kernel = hologram_isa::assemble(&self.text)
            .map_err(|e| format!("seed {}: generated an invalid program: {e}", self.seed))?;
        let canonical = Canonical::new(&kernel).map_err(|e| e.to_string())?;
        Ok(Case {
            name: self.name(),
            kernel: Arc::new(kernel),
            canonical,
            spec: self.spec.clone(),
        })
    }
}
