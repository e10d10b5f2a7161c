//! One CPU device operation at a time in the process.
//!
//! CPU "device memory" is host memory that Rust code reads and writes directly, so two host
//! threads working on the same buffer at once (a launch on one, a `copy_out` on the other) would
//! be a data race in Rust's sense, not just an unspecified result as on a GPU. Every copy,
//! launch and GEMM of the CPU backend therefore holds this lock while it touches memory. Inside
//! one launch, blocks that run in parallel use relaxed atomics where they may meet (`memops.rs`)
//! or run on one thread (`bind.rs`); the lock covers everything between launches and copies. Memory can be
//! shared between `CpuBackend` values (and imported twice), so the lock is per process.
//!
//! Launches use rayon's pool. A thread that holds the lock and waits for its parallel work must
//! never pick up, while it waits, another job that asks for the lock again. Rayon threads do run
//! other jobs while they wait, so a caller that is itself a rayon worker does all of its work on
//! its own thread ([`DeviceGuard::parallel`] is false), and waits for the lock by running other
//! pending jobs (the lock holder's among them) instead of blocking its pool.

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

static DEVICE: Mutex<()> = Mutex::new(());

/// Held while a copy, launch or GEMM touches CPU memory.
pub(crate) struct DeviceGuard {
    _guard: MutexGuard<'static, ()>,
    /// Whether the operation may spread over rayon's pool: false when the caller is a rayon
    /// worker (see the module documentation).
    pub parallel: bool,
}

/// Waits for the device and takes it.
pub(crate) fn lock() -> DeviceGuard {
    if rayon::current_thread_index().is_none() {
        // The lock guards no data (`()`): a panic while holding it leaves nothing broken.
        let guard = DEVICE.lock().unwrap_or_else(PoisonError::into_inner);
        return DeviceGuard {
            _guard: guard,
            parallel: true,
        };
    }
    loop {
        match DEVICE.try_lock() {
            Ok(guard) => {
                return DeviceGuard {
                    _guard: guard,
                    parallel: false,
                }
            }
            Err(TryLockError::Poisoned(e)) => {
                return DeviceGuard {
                    _guard: e.into_inner(),
                    parallel: false,
                }
            }
            Err(TryLockError::WouldBlock) => {
                // Run a pending job of the pool (perhaps the lock holder's) rather than block
                // a worker the holder may be waiting for.
                if rayon::yield_now() != Some(rayon::Yield::Executed) {
                    std::thread::yield_now();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rayon_workers_run_their_operations_on_their_own_thread() {
        assert!(lock().parallel);
        let inside = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("a two-thread pool")
            .install(|| lock().parallel);
        assert!(!inside);
    }

    #[test]
    fn workers_waiting_for_the_lock_do_not_starve_its_holder() {
        use rayon::prelude::*;
        // Every worker of a small pool asks for the lock while the holder (this thread) needs
        // the pool for its own parallel work: the waiters must run that work.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("a two-thread pool");
        let held = lock();
        let (tx, rx) = std::sync::mpsc::channel();
        pool.spawn(move || {
            let inner: Vec<u32> = (0..2u32)
                .into_par_iter()
                .map(|i| {
                    let _g = lock();
                    i
                })
                .collect();
            let _ = tx.send(inner);
        });
        let work: u64 = pool.install(|| (0..1000u64).into_par_iter().sum());
        drop(held);
        assert_eq!(work, 499_500);
        assert_eq!(rx.recv().expect("the waiters finish"), vec![0, 1]);
    }
}
