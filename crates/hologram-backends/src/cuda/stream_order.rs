//! Ordering one CUDA stream after another without blocking the host: an event recorded on the
//! producer and waited on by the consumer. The event is made once and reused, since every call
//! of a compiled PyTorch graph orders streams twice (torch's before ours, ours before torch's)
//! and creating and destroying an event each time costs more than the wait itself.

use std::sync::{Arc, Mutex};

use cudarc::driver::result as drv;
use cudarc::driver::sys;
use cudarc::driver::CudaContext;

use super::device::{device_error, Device};
use crate::error::Result;

/// The reusable event (made on first use).
pub(crate) struct StreamOrder {
    ctx: Arc<CudaContext>,
    /// Held across the record and the wait: a wait captures the event's latest record, so two
    /// threads must not interleave theirs.
    event: Mutex<Option<sys::CUevent>>,
}

// SAFETY: the event handle is only used through the driver API, which is thread-safe, under the
// mutex; the context is made current before each use.
unsafe impl Send for StreamOrder {}
// SAFETY: as for `Send`.
unsafe impl Sync for StreamOrder {}

impl StreamOrder {
    pub fn new(dev: &Device) -> StreamOrder {
        StreamOrder {
            ctx: dev.ctx.clone(),
            event: Mutex::new(None),
        }
    }

    /// Makes work queued later on `consumer` wait for the work queued so far on `producer`.
    pub fn order(
        &self,
        dev: &Device,
        producer: sys::CUstream,
        consumer: sys::CUstream,
    ) -> Result<()> {
        dev.bind()?;
        let mut slot = self.event.lock().unwrap_or_else(|p| p.into_inner());
        let event = match *slot {
            Some(e) => e,
            None => {
                let e = drv::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
                    .map_err(device_error("cuEventCreate"))?;
                *slot = Some(e);
                e
            }
        };
        // SAFETY: the event is live (destroyed only on drop) and the streams are live (the
        // other library's by the DLPack contract). cuStreamWaitEvent waits for the record made
        // just before it, so recording the event again later does not change this wait.
        unsafe {
            drv::event::record(event, producer).and_then(|()| {
                drv::stream::wait_event(
                    consumer,
                    event,
                    sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
            })
        }
        .map_err(device_error(
            "ordering one CUDA stream after another (DLPack exchange)",
        ))
    }
}

impl Drop for StreamOrder {
    fn drop(&mut self) {
        let event = self
            .event
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(e) = event {
            if self.ctx.bind_to_thread().is_ok() {
                // SAFETY: destroyed once; the driver releases it after pending waits finish.
                let _ = unsafe { drv::event::destroy(e) };
            }
        }
    }
}
