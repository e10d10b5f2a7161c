//! Where the host's time goes in launches and waits: cumulative, process-wide counters (all
//! wgpu devices together), read by `hologram bench` to split the tiny kernel's latency into
//! recording, submission, the wait for the GPU and the read of the error words.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Totals since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueProfile {
    /// Launches queued.
    pub launches: u64,
    /// Host time in `launch` (argument words, bind group, recording into the batch).
    pub launch: Duration,
    /// Batches submitted.
    pub submits: u64,
    /// Host time writing a batch's argument words, finishing its encoder and submitting it.
    pub submit: Duration,
    /// The part of `submit` finishing the encoder inside the error scopes (wgpu's recording
    /// checks).
    pub finish: Duration,
    /// The part of `submit` in `queue.submit` (wgpu's submission and the driver's).
    pub queue_submit: Duration,
    /// Waits (`synchronize`, reads, the launch past the last error slot).
    pub waits: u64,
    /// Time blocked waiting for submitted work (`device.poll`).
    pub gpu_wait: Duration,
    /// Time mapping and decoding the error words after the GPU finished.
    pub error_read: Duration,
}

impl QueueProfile {
    /// The counts and times accumulated between `earlier` and `self`.
    pub fn since(&self, earlier: &QueueProfile) -> QueueProfile {
        QueueProfile {
            launches: self.launches - earlier.launches,
            launch: self.launch.saturating_sub(earlier.launch),
            submits: self.submits - earlier.submits,
            submit: self.submit.saturating_sub(earlier.submit),
            finish: self.finish.saturating_sub(earlier.finish),
            queue_submit: self.queue_submit.saturating_sub(earlier.queue_submit),
            waits: self.waits - earlier.waits,
            gpu_wait: self.gpu_wait.saturating_sub(earlier.gpu_wait),
            error_read: self.error_read.saturating_sub(earlier.error_read),
        }
    }
}

/// One counter: events and nanoseconds.
pub(crate) struct Counter {
    count: AtomicU64,
    nanos: AtomicU64,
}

impl Counter {
    const fn new() -> Counter {
        Counter {
            count: AtomicU64::new(0),
            nanos: AtomicU64::new(0),
        }
    }

    /// Counts one event that started at `start`.
    pub fn add(&self, start: Instant) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.nanos
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn read(&self) -> (u64, Duration) {
        (
            self.count.load(Ordering::Relaxed),
            Duration::from_nanos(self.nanos.load(Ordering::Relaxed)),
        )
    }
}

pub(crate) static LAUNCH: Counter = Counter::new();
pub(crate) static SUBMIT: Counter = Counter::new();
pub(crate) static FINISH: Counter = Counter::new();
pub(crate) static QUEUE_SUBMIT: Counter = Counter::new();
pub(crate) static GPU_WAIT: Counter = Counter::new();
pub(crate) static ERROR_READ: Counter = Counter::new();

/// The totals so far.
pub fn queue_profile() -> QueueProfile {
    let (launches, launch) = LAUNCH.read();
    let (submits, submit) = SUBMIT.read();
    let (waits, gpu_wait) = GPU_WAIT.read();
    let (_, error_read) = ERROR_READ.read();
    let (_, finish) = FINISH.read();
    let (_, queue_submit) = QUEUE_SUBMIT.read();
    QueueProfile {
        launches,
        launch,
        submits,
        submit,
        finish,
        queue_submit,
        waits,
        gpu_wait,
        error_read,
    }
}
