//! Waiting for a short submission without sleeping.
//!
//! A blocking `device.poll(Wait)` sleeps in the driver until the GPU signals its fence (Vulkan:
//! `vkWaitSemaphores`/`vkWaitForFences`), and the thread wakes up tens of microseconds after
//! the GPU finished (on an H100 through NVIDIA's Vulkan driver, a one-lane kernel's launch to
//! completion measured 80 us, 59 us of it in that wait; CUDA's spinning
//! `cuStreamSynchronize` takes 12 us). So a wait first checks the fence with non-blocking
//! `device.poll(Poll)` calls (one fence-value query each, which also runs the finished
//! submissions' callbacks, mappings included) for up to [`spin_limit`], and blocks only for
//! work still running past it: short work is seen finished within a poll's time, long work
//! costs at most the spin's CPU time.

use std::time::{Duration, Instant};

use super::device::Gpu;
use crate::error::{BackendError, Result};

/// Default spin before a blocking wait.
const DEFAULT_SPIN: Duration = Duration::from_micros(200);

/// How long a wait spins before it blocks: `HOLOGRAM_WGPU_SPIN_US` microseconds (0: block at
/// once), 200 by default.
pub(crate) fn spin_limit() -> Duration {
    static LIMIT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("HOLOGRAM_WGPU_SPIN_US")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_micros)
            .unwrap_or(DEFAULT_SPIN)
    })
}

/// Polls the device without blocking until no submission is in flight or `limit` has passed;
/// true when the queue drained (every submission so far has finished and its callbacks ran).
pub(crate) fn until_idle(gpu: &Gpu, limit: Duration) -> Result<bool> {
    until(gpu, limit, |status| status.is_queue_empty())
}

/// Polls the device without blocking until `done` (given each poll's status) says so or
/// `limit` has passed; true when `done` did.
pub(crate) fn until(
    gpu: &Gpu,
    limit: Duration,
    mut done: impl FnMut(&::wgpu::PollStatus) -> bool,
) -> Result<bool> {
    if limit.is_zero() {
        return Ok(false);
    }
    let started = Instant::now();
    loop {
        match gpu.device.poll(::wgpu::PollType::Poll) {
            Ok(status) if done(&status) => return Ok(true),
            Ok(_) => {}
            Err(e) => {
                return Err(BackendError::Device(format!(
                    "waiting for the GPU failed: {e}"
                )))
            }
        }
        if started.elapsed() >= limit {
            return Ok(false);
        }
        std::hint::spin_loop();
    }
}
