//! Host time of a replay's phases, for finding what a host-bound replay spends (switched on by
//! `HOLOGRAM_PLAN_HOST_PROFILE=1` when the plan is made; off, a replay reads no clock).

use std::time::Instant;

/// The phases of [`super::Plan::run_with`] timed, in order.
pub const HOST_PHASES: [&str; 6] = ["inputs", "fresh", "head", "graph", "tail", "outputs"];

/// Calls and seconds per phase.
pub(crate) type HostTimes = [(u64, f64); HOST_PHASES.len()];

/// Times consecutive phases of one replay into `times` (nothing when `None`).
pub(crate) struct HostClock {
    last: Option<Instant>,
}

impl HostClock {
    pub fn start(on: bool) -> HostClock {
        HostClock {
            last: on.then(Instant::now),
        }
    }

    /// Ends phase `phase` (an index into [`HOST_PHASES`]) and starts the next.
    pub fn lap(&mut self, times: &mut Option<HostTimes>, phase: usize) {
        if let (Some(last), Some(t)) = (self.last, times.as_mut()) {
            let now = Instant::now();
            t[phase].0 += 1;
            t[phase].1 += (now - last).as_secs_f64();
            self.last = Some(now);
        }
    }
}
