//! CUDA graphs: the work a closure queues on the backend's stream, captured once and launched
//! again with one `cuGraphLaunch`.

use std::sync::Arc;

use cudarc::driver::result as drv;
use cudarc::driver::sys;
use cudarc::driver::CudaContext;

use super::device::{device_error, Device};
use crate::backend::Replay;
use crate::error::Result;

/// An instantiated CUDA graph and the stream it replays on.
pub(crate) struct CudaReplay {
    ctx: Arc<CudaContext>,
    stream: sys::CUstream,
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

// SAFETY: the handles are only used through the driver API, which is thread-safe; the context
// is made current on the calling thread before each use.
unsafe impl Send for CudaReplay {}
// SAFETY: as for `Send`.
unsafe impl Sync for CudaReplay {}

/// Captures what `work` queues on `dev`'s stream. Returns `None` (after ending the capture, so
/// the stream is usable again) when the work cannot be captured; the caller then replays it step
/// by step.
pub(crate) fn capture(
    dev: &Device,
    work: &mut dyn FnMut() -> Result<()>,
) -> Result<Option<CudaReplay>> {
    dev.bind()?;
    // Relaxed: the work may load modules or query attributes while capturing; nothing it does
    // synchronizes the stream.
    // SAFETY: the stream belongs to this device and lives as long as it.
    unsafe {
        drv::stream::begin_capture(
            dev.stream,
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        )
    }
    .map_err(device_error("cuStreamBeginCapture"))?;
    let queued = work();
    // SAFETY: ends the capture begun above on the same stream, whatever `work` did.
    let graph = unsafe { drv::stream::end_capture(dev.stream) };
    let graph = match (queued, graph) {
        (Ok(()), Ok(g)) if !g.is_null() => g,
        (queued, graph) => {
            if let Ok(g) = graph {
                if !g.is_null() {
                    // SAFETY: a graph the capture just made and nothing else uses.
                    let _ = unsafe { drv::graph::destroy(g) };
                }
            }
            let why = match queued {
                Err(e) => e.to_string(),
                Ok(()) => "the driver ended the capture without a graph".into(),
            };
            tracing::warn!(reason = %why, "could not capture a CUDA graph; the plan replays step by step");
            return Ok(None);
        }
    };
    // SAFETY: `graph` is the valid graph captured above.
    let exec = match unsafe { drv::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) } {
        Ok(e) => e,
        Err(e) => {
            // SAFETY: as above.
            let _ = unsafe { drv::graph::destroy(graph) };
            tracing::warn!(error = %e, "could not instantiate a CUDA graph; the plan replays step by step");
            return Ok(None);
        }
    };
    Ok(Some(CudaReplay {
        ctx: dev.ctx.clone(),
        stream: dev.stream,
        graph,
        exec,
    }))
}

impl Replay for CudaReplay {
    fn replay(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(device_error("making the CUDA context current"))?;
        // SAFETY: an instantiated graph of this context, launched on the stream it was captured
        // from; the buffers it uses are kept alive by the plan that owns this replay.
        unsafe { drv::graph::launch(self.exec, self.stream) }.map_err(device_error("cuGraphLaunch"))
    }
}

impl Drop for CudaReplay {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: destroyed once; launches already queued keep what they need.
            unsafe {
                let _ = drv::graph::exec_destroy(self.exec);
                let _ = drv::graph::destroy(self.graph);
            }
        }
    }
}
