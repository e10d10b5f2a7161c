//! Captured graphs bound to the caller's memory.
//!
//! A captured graph (a CUDA graph) reads and writes the addresses it was captured with, so a
//! plain captured replay copies each input into the plan's buffer and each output out of it:
//! host calls of their own (on an H100 host, 10-25 us each), around the one graph launch. A
//! training loop hands a plan the same memory step after step, though: the batch stays where it
//! is, and torch's and Hologram's caching allocators give the same blocks back for the
//! activations, gradients and outputs. So a plan keeps a few more graphs, each captured with
//! every input and output it can use in place (the rule of plans without a graph,
//! `edges::find(.., false)`) at the addresses one replay gave, and keyed by those addresses. A
//! replay whose addresses match one of them launches it and copies nothing; addresses seen for
//! the first time take the plain path, and a replay with the addresses of one of the last few
//! that found no graph captures them (a loop whose allocator hands its blocks back in turns, so
//! that two or three sets of addresses alternate, gets a graph for each; a caller whose
//! addresses never repeat pays nothing but the key).
//!
//! Safe by construction: a bound graph touches the caller's memory only at addresses the current
//! replay's own tensors occupy (the key is compared on every replay), with their shapes and
//! dtypes (the plan's signature), so whatever lives there now is what the graph reads.

use hologram_backends::Replay;

/// Bound graphs kept per plan (the most recently made stay).
pub(crate) const MAX_BOUND: usize = 4;

/// A key slot for an input or output the replay does not move (copied or aliased).
pub(crate) const NOT_MOVED: u64 = u64::MAX;

/// The bound graphs of one plan.
#[derive(Default)]
pub(crate) struct BoundGraphs {
    /// Key (one address per bound input and output, [`NOT_MOVED`] where the replay copies)
    /// and graph, oldest first.
    graphs: Vec<(Vec<u64>, Box<dyn Replay>)>,
    /// The keys of the last replays that found no graph (at most [`MAX_BOUND`], newest last).
    misses: Vec<Vec<u64>>,
    /// Graphs captured so far (evicted ones included).
    pub made: usize,
    /// Replays that ran a bound graph.
    pub replays: u64,
    /// A capture failed (the driver refused it): this plan makes no more.
    given_up: bool,
}

/// What a replay does with its key.
pub(crate) enum Lookup {
    /// Launch the graph at this index ([`BoundGraphs::get`]).
    Hit(usize),
    /// Seen in one of the last misses: capture a graph for it.
    Capture,
    /// Take the plain path.
    Miss,
}

impl BoundGraphs {
    /// Looks `key` up; remembers a miss, so that the same key again soon asks for a capture.
    pub fn lookup(&mut self, key: &[u64]) -> Lookup {
        if self.given_up {
            return Lookup::Miss;
        }
        if let Some(i) = self.graphs.iter().position(|(k, _)| k.as_slice() == key) {
            self.replays += 1;
            return Lookup::Hit(i);
        }
        if let Some(i) = self.misses.iter().position(|k| k.as_slice() == key) {
            self.misses.remove(i);
            return Lookup::Capture;
        }
        if self.misses.len() == MAX_BOUND {
            self.misses.remove(0);
        }
        self.misses.push(key.to_vec());
        Lookup::Miss
    }

    /// A capture failed: every later replay takes the plain path (a capture that fails once,
    /// say because another thread used the stream, would cost each time it was tried).
    pub fn give_up(&mut self) {
        self.given_up = true;
        self.misses.clear();
    }

    /// The graph a hit named.
    pub fn get(&self, index: usize) -> &dyn Replay {
        self.graphs[index].1.as_ref()
    }

    /// Keeps a graph captured for `key` (dropping the oldest past [`MAX_BOUND`]) and returns it.
    pub fn insert(&mut self, key: Vec<u64>, graph: Box<dyn Replay>) -> &dyn Replay {
        if self.graphs.len() == MAX_BOUND {
            self.graphs.remove(0);
        }
        self.made += 1;
        self.replays += 1;
        self.graphs.push((key, graph));
        self.graphs.last().expect("just pushed").1.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    struct Counted(Arc<AtomicUsize>);
    impl Replay for Counted {
        fn replay(&self) -> hologram_backends::Result<()> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    #[test]
    fn a_key_is_captured_when_it_comes_back_soon_and_hit_after() {
        let mut b = BoundGraphs::default();
        assert!(matches!(b.lookup(&[1, 2]), Lookup::Miss));
        for k in 3..3 + MAX_BOUND as u64 {
            assert!(matches!(b.lookup(&[k, 2]), Lookup::Miss));
        }
        assert!(matches!(b.lookup(&[1, 2]), Lookup::Miss), "forgotten");
        assert!(matches!(
            b.lookup(&[3 + MAX_BOUND as u64 - 1, 2]),
            Lookup::Capture
        ));
        assert!(matches!(b.lookup(&[1, 2]), Lookup::Capture));
        let runs = Arc::new(AtomicUsize::new(0));
        b.insert(vec![1, 2], Box::new(Counted(runs.clone())))
            .replay()
            .unwrap();
        match b.lookup(&[1, 2]) {
            Lookup::Hit(i) => b.get(i).replay().unwrap(),
            _ => panic!("expected the bound graph"),
        }
        assert_eq!(runs.load(Ordering::Relaxed), 2);
        assert_eq!((b.made, b.replays), (1, 2));
    }

    #[test]
    fn after_a_failed_capture_every_key_misses() {
        let mut b = BoundGraphs::default();
        assert!(matches!(b.lookup(&[1]), Lookup::Miss));
        assert!(matches!(b.lookup(&[1]), Lookup::Capture));
        b.give_up();
        for _ in 0..3 {
            assert!(matches!(b.lookup(&[1]), Lookup::Miss));
        }
        assert_eq!(b.made, 0);
    }

    #[test]
    fn alternating_keys_each_get_a_graph() {
        let mut b = BoundGraphs::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let mut hits = 0;
        for round in 0..8u64 {
            let key = [round % 2];
            match b.lookup(&key) {
                Lookup::Hit(_) => hits += 1,
                Lookup::Capture => {
                    b.insert(key.to_vec(), Box::new(Counted(runs.clone())));
                }
                Lookup::Miss => assert!(round < 2, "round {round}"),
            }
        }
        assert_eq!((b.made, hits), (2, 4));
    }

    #[test]
    fn at_most_max_bound_graphs_stay_the_newest() {
        let mut b = BoundGraphs::default();
        let runs = Arc::new(AtomicUsize::new(0));
        for k in 0..MAX_BOUND as u64 + 2 {
            b.insert(vec![k], Box::new(Counted(runs.clone())));
        }
        assert_eq!(b.graphs.len(), MAX_BOUND);
        assert!(matches!(b.lookup(&[0]), Lookup::Miss), "the oldest went");
        assert!(matches!(b.lookup(&[MAX_BOUND as u64 + 1]), Lookup::Hit(_)));
        assert_eq!(b.made, MAX_BOUND + 2);
    }
}
