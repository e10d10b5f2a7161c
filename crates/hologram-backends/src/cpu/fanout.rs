//! Work shared between the calling thread and rayon's workers, the caller working too.
//!
//! Handing a whole launch to rayon from a thread outside its pool (`into_par_iter` from the
//! Python thread) parks the caller until a worker wakes, runs the jobs and wakes it again: two
//! thread switches per launch, which cost more than a mid-size map itself on a small or busy
//! machine (an add of 2^16 floats took 17 µs instead of 6). Here the caller starts taking units
//! of work at once, and workers that wake in time take some of them; a worker that comes late
//! finds nothing left and leaves without touching the work. In a process that has adopted its
//! OpenMP runtime's threads (`openmp.rs`), the helpers are that runtime's team instead.

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The units of work one participant takes, one at a time.
pub(crate) struct Claims<'a> {
    next: &'a AtomicUsize,
    units: usize,
    /// A unit claimed before the participant started (a helper's first).
    first: Option<usize>,
}

impl Claims<'_> {
    /// The next unit nobody has taken, or None when all are taken.
    pub(crate) fn next_unit(&mut self) -> Option<usize> {
        if let Some(u) = self.first.take() {
            return Some(u);
        }
        let u = self.next.fetch_add(1, Ordering::SeqCst);
        (u < self.units).then_some(u)
    }
}

/// A participant: takes units from its claims until none are left.
pub(crate) type Participant<'f> = dyn Fn(&mut Claims<'_>) + Sync + 'f;

/// The units of one call as every participant sees them, and the first panic of a participant
/// that runs away from the calling thread.
pub(crate) struct Units {
    next: AtomicUsize,
    units: usize,
    /// Raised again on the calling thread ([`Units::raise`]).
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl Units {
    pub(crate) fn new(units: usize) -> Units {
        Units {
            next: AtomicUsize::new(0),
            units,
            panic: Mutex::new(None),
        }
    }

    /// Runs `participant` (its first unit `first`, if it claimed one already) away from the
    /// calling thread: a panic stops the others from claiming more and is kept for
    /// [`Units::raise`].
    pub(crate) fn run_caught(&self, participant: &Participant<'_>, first: Option<usize>) {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            participant(&mut Claims {
                next: &self.next,
                units: self.units,
                first,
            });
        }));
        if let Err(payload) = run {
            self.next.fetch_max(self.units, Ordering::SeqCst);
            if let Ok(mut slot) = self.panic.lock() {
                slot.get_or_insert(payload);
            }
        }
    }

    /// Raises a kept panic on the calling thread.
    pub(crate) fn raise(&self) {
        let payload = self.panic.lock().ok().and_then(|mut slot| slot.take());
        if let Some(payload) = payload {
            std::panic::resume_unwind(payload);
        }
    }
}

struct Shared {
    units: Units,
    /// Helpers that claimed a unit and may still be running the participant.
    active: AtomicUsize,
}

/// The participant with its lifetime erased, for rayon's `'static` jobs. Sound because
/// [`share`] does not return (or unwind) while a helper may still call it: see `WaitForHelpers`.
#[derive(Clone, Copy)]
struct ErasedParticipant(*const Participant<'static>);

// SAFETY: the participant is `Sync` (calling it from several threads is allowed), and it is
// only dereferenced while `share`'s frame keeps it alive.
unsafe impl Send for ErasedParticipant {}

/// Waits, on every way out of [`share`] (unwinding included), until no helper runs the
/// participant.
struct WaitForHelpers<'a>(&'a Shared);

impl Drop for WaitForHelpers<'_> {
    fn drop(&mut self) {
        // No unit is left to claim once the caller's participant returns (or the counter is
        // closed below on unwinding), so a helper still running is finishing its last unit.
        let units = &self.0.units;
        units.next.fetch_max(units.units, Ordering::SeqCst);
        let mut spins = 0u32;
        while self.0.active.load(Ordering::SeqCst) != 0 {
            if spins < 64 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Runs `units` units of work: `participant` runs on the calling thread and on up to `helpers`
/// rayon workers, each taking units until none are left. Returns once every unit has run. A
/// panic in a helper is raised again here.
pub(crate) fn share(units: usize, helpers: usize, participant: &Participant<'_>) {
    let helpers = helpers.min(units.saturating_sub(1));
    if helpers > 0 {
        if let Some(parallel) = super::openmp::adopted() {
            // The process's OpenMP team instead of rayon's pool (see `openmp.rs`).
            return super::openmp::share(parallel, units, helpers + 1, participant);
        }
    }
    if helpers == 0 {
        let next = AtomicUsize::new(0);
        participant(&mut Claims {
            next: &next,
            units,
            first: None,
        });
        return;
    }
    let shared = Arc::new(Shared {
        units: Units::new(units),
        active: AtomicUsize::new(0),
    });
    // SAFETY: only the lifetime changes; `WaitForHelpers` keeps this frame (and so the
    // participant) alive until no helper can call it any more.
    let erased = ErasedParticipant(unsafe {
        std::mem::transmute::<*const Participant<'_>, *const Participant<'static>>(participant)
    });
    let wait = WaitForHelpers(&shared);
    for _ in 0..helpers {
        let shared = shared.clone();
        rayon::spawn(move || {
            let erased = erased;
            // Counted active before claiming: once the caller has seen every unit claimed and
            // no helper active, a helper that comes later claims nothing and never calls the
            // participant (both counters are sequentially consistent).
            shared.active.fetch_add(1, Ordering::SeqCst);
            let first = shared.units.next.fetch_add(1, Ordering::SeqCst);
            if first < shared.units.units {
                // SAFETY: this helper is counted active and holds a claimed unit, so the
                // caller is still waiting in `share` and the participant is alive.
                let participant = unsafe { &*erased.0 };
                shared.units.run_caught(participant, Some(first));
            }
            shared.active.fetch_sub(1, Ordering::SeqCst);
        });
    }
    participant(&mut Claims {
        next: &shared.units.next,
        units,
        first: None,
    });
    drop(wait);
    shared.units.raise();
}

/// The items `0..n`, to run in runs of consecutive items on the calling thread and rayon's
/// workers: the counterpart of rayon's `(0..n).into_par_iter()`, with the caller working.
pub(crate) fn shared_range(items: std::ops::RangeTo<usize>) -> Items {
    Items {
        n: items.end,
        min_len: 1,
    }
}

/// See [`shared_range`].
pub(crate) struct Items {
    n: usize,
    min_len: usize,
}

impl Items {
    /// Runs of at least `min_len` items (all of them in one run when `min_len >= n`, which
    /// then runs on the calling thread alone).
    pub(crate) fn with_min_len(self, min_len: usize) -> Items {
        Items {
            min_len: min_len.max(1),
            ..self
        }
    }

    /// Runs `f(i)` for every item.
    pub(crate) fn for_each(self, f: impl Fn(usize) + Sync) {
        self.for_each_init(|| (), |_, i| f(i));
    }

    /// Runs `f(state, i)` for every item; `init` makes each participant's state once.
    pub(crate) fn for_each_init<T>(
        self,
        init: impl Fn() -> T + Sync,
        f: impl Fn(&mut T, usize) + Sync,
    ) {
        let Items { n, min_len } = self;
        let runs = n.div_ceil(min_len);
        share(
            runs,
            rayon::current_num_threads().saturating_sub(1),
            &|claims| {
                let mut state = None;
                while let Some(run) = claims.next_unit() {
                    let state = state.get_or_insert_with(&init);
                    for i in run * min_len..((run + 1) * min_len).min(n) {
                        f(state, i);
                    }
                }
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_runs_once_whoever_takes_it() {
        for helpers in [0, 1, 3] {
            for units in [0, 1, 2, 7, 1000] {
                let runs: Vec<AtomicUsize> = (0..units).map(|_| AtomicUsize::new(0)).collect();
                share(units, helpers, &|claims| {
                    while let Some(u) = claims.next_unit() {
                        runs[u].fetch_add(1, Ordering::Relaxed);
                    }
                });
                assert!(
                    runs.iter().all(|r| r.load(Ordering::Relaxed) == 1),
                    "{units} units, {helpers} helpers"
                );
            }
        }
    }

    #[test]
    fn runs_of_items_cover_the_range_once() {
        for (n, min_len) in [(0, 4), (1, 4), (10, 3), (10, 10), (1000, 1)] {
            let runs: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            let init = || 0usize;
            let count = |seen: &mut usize, i: usize| {
                *seen += 1;
                runs[i].fetch_add(1, Ordering::Relaxed);
            };
            shared_range(..n)
                .with_min_len(min_len)
                .for_each_init(init, count);
            assert!(
                runs.iter().all(|r| r.load(Ordering::Relaxed) == 1),
                "{n} items in runs of {min_len}"
            );
        }
    }

    #[test]
    fn a_panic_in_any_participant_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            share(64, 2, &|claims| {
                while let Some(u) = claims.next_unit() {
                    assert_ne!(u, 40, "unit 40 fails");
                }
            })
        });
        assert!(caught.is_err());
    }
}
