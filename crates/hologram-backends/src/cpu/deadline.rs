//! The launch timeout on the interpreter: each batch of blocks has a deadline, looked at every
//! [`TICKS_PER_CHECK`] backward jumps. Every endless loop takes backward jumps, so no kernel runs
//! past the timeout unnoticed; straight-line code cannot run long.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::exec::LaunchCtx;
use crate::error::{BackendError, Result};

/// Backward jumps between two looks at the clock and at [`LaunchCtx::failed`]: rare enough to
/// cost nothing, frequent enough to notice a timeout within microseconds.
const TICKS_PER_CHECK: u32 = 256;

/// The clock of the batch a worker runs.
#[derive(Debug, Default)]
pub(crate) struct Deadline {
    /// When the batch times out (`None`: no limit).
    at: Option<Instant>,
    /// Backward jumps since the batch started.
    ticks: u32,
}

impl Deadline {
    /// The clock of a batch starting now, under `timeout`.
    pub(crate) fn start(timeout: Option<Duration>) -> Deadline {
        Deadline {
            at: timeout.map(|t| Instant::now() + t),
            ticks: 0,
        }
    }

    /// Counts a backward jump; every [`TICKS_PER_CHECK`] of them, stops the batch if it ran past
    /// the launch timeout or another batch of the launch failed.
    #[inline]
    pub(crate) fn tick(&mut self, ctx: &LaunchCtx<'_>) -> Result<()> {
        self.ticks = self.ticks.wrapping_add(1);
        if self.ticks % TICKS_PER_CHECK != 0 {
            return Ok(());
        }
        self.check(ctx)
    }

    #[cold]
    fn check(&self, ctx: &LaunchCtx<'_>) -> Result<()> {
        if ctx.failed.load(Ordering::Relaxed) {
            // The launch already failed with another batch's error, which is the one reported.
            return Err(BackendError::Device(
                "stopped after another block failed".into(),
            ));
        }
        match (self.at, ctx.timeout) {
            (Some(at), Some(timeout)) if Instant::now() >= at => {
                Err(crate::launch::timeout_error(&ctx.k.kernel, timeout, false))
            }
            _ => Ok(()),
        }
    }
}
