//! Waiting for a submission without sleeping in the driver.
//!
//! A blocking `device.poll(Wait)` sleeps in the driver until the GPU signals its fence (Vulkan:
//! `vkWaitSemaphores`/`vkWaitForFences`), and the thread wakes up tens of microseconds after
//! the GPU finished (on an H100 through NVIDIA's Vulkan driver, a one-lane kernel's launch to
//! completion measured 80 us, 59 us of it in that wait; CUDA's spinning
//! `cuStreamSynchronize` takes 12 us). So a wait first checks the fence with non-blocking
//! `device.poll(Poll)` calls (one fence-value query each, which also runs the finished
//! submissions' callbacks, mappings included) for up to [`spin_limit`], and blocks only for
//! work still running past it. As the CUDA backend's waits do (and CUDA's own, by default), the
//! first [`HOT_SPIN`] polls back to back, later ones yield the core between polls, and the
//! limit is 20 ms: with the earlier 200 us limit, every kernel longer than that paid the
//! blocking wait's late wake-up (add 2^26 on the H100: 333 -> 300 us, the same binary with
//! `HOLOGRAM_WGPU_SPIN_US=20000`).

use std::time::{Duration, Instant};

use super::device::Gpu;
use crate::error::{BackendError, Result};

/// Default spin before a blocking wait.
const DEFAULT_SPIN: Duration = Duration::from_millis(20);

/// Polls back to back for this long; then each poll yields the core first.
const HOT_SPIN: Duration = Duration::from_micros(200);

/// How long a wait on `gpu` spins before it blocks: `HOLOGRAM_WGPU_SPIN_US` microseconds (0:
/// block at once); by default 20 ms on a GPU, and [`HOT_SPIN`] on a software adapter
/// (lavapipe runs the shaders on the host's cores, which a waiting thread would take from it).
pub(crate) fn spin_limit(gpu: &Gpu) -> Duration {
    static LIMIT: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    let set = *LIMIT.get_or_init(|| {
        std::env::var("HOLOGRAM_WGPU_SPIN_US")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_micros)
    });
    set.unwrap_or(if gpu.info.device_type == ::wgpu::DeviceType::Cpu {
        HOT_SPIN
    } else {
        DEFAULT_SPIN
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
        let waited = started.elapsed();
        if waited >= limit {
            return Ok(false);
        }
        if waited < HOT_SPIN {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}
