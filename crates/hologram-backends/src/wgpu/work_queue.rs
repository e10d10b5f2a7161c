//! Work queued on the device without waiting for it.
//!
//! Launches and device-to-device copies are recorded into command buffers and submitted in
//! batches; the host waits only when it needs data (`copy_out`) or at a synchronization. Each
//! launch since the last wait writes its error words into its own slot of one error buffer; a
//! wait copies the used slots out in the same submission as the last batch, maps them once and
//! reports the first launch (in launch order) that failed, naming its kernel, as the CUDA backend
//! reports its error record. A launch's error goes to the thread that made the launch (threads
//! that share a backend each see their own launches' errors, as when launches waited).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::Duration;

use hologram_isa::Kernel;

use super::codegen;
use super::device::Gpu;
use super::pipeline_cache::Pipeline;
use crate::error::{BackendError, Result};

/// Command buffers recorded before they are submitted: enough to spare the driver a submission
/// per launch, few enough that the GPU starts early.
const SUBMIT_AT: usize = 8;

/// Launches between two waits (error slots); the launch past the last slot waits first.
const ERROR_SLOTS: u64 = 1024;

/// Bytes of one launch's error words.
const ERROR_BYTES: u64 = 4 * codegen::ERR_WORDS as u64;

/// A launch whose error words are not read yet.
pub(crate) struct QueuedLaunch {
    pub kernel: Arc<Kernel>,
    pub pipeline: Arc<Pipeline>,
    /// Element length of each buffer parameter (for error messages).
    pub lens: Vec<u64>,
    /// The launch timeout in force (`None`: none).
    pub timeout: Option<Duration>,
    /// The thread that made it: its error is reported to that thread.
    pub thread: ThreadId,
}

impl QueuedLaunch {
    /// How long the host waits for this launch: the device stops a runaway lane after its
    /// budget, the host well after that (a GPU slower than the budget assumes).
    fn host_limit(&self) -> Option<Duration> {
        self.timeout.map(|t| 4 * t + Duration::from_secs(10))
    }
}

struct Submitted {
    index: ::wgpu::SubmissionIndex,
    /// The launches (positions in `State::launches`) it runs.
    launches: Range<usize>,
}

#[derive(Default)]
struct State {
    recorded: Vec<::wgpu::CommandBuffer>,
    /// Launches since the last wait; launch `i` owns error slot `i`.
    launches: Vec<QueuedLaunch>,
    /// `launches[unsubmitted..]` are recorded but not submitted.
    unsubmitted: usize,
    submitted: Vec<Submitted>,
    /// Per thread, the first error of its launches that no wait of that thread reported yet.
    errors: HashMap<ThreadId, BackendError>,
}

/// The queue of one device.
pub(crate) struct WorkQueue {
    state: Mutex<State>,
    /// `ERROR_SLOTS` slots of `stride` bytes, zero between launches.
    errors: ::wgpu::Buffer,
    /// Where a wait copies the used slots to read them.
    errors_readback: ::wgpu::Buffer,
    stride: u64,
}

impl WorkQueue {
    pub fn new(device: &::wgpu::Device, limits: &::wgpu::Limits) -> WorkQueue {
        let align = (limits.min_storage_buffer_offset_alignment as u64).max(4);
        let stride = ERROR_BYTES.div_ceil(align) * align;
        let buffer = |label, usage| {
            device.create_buffer(&::wgpu::BufferDescriptor {
                label: Some(label),
                size: stride * ERROR_SLOTS,
                usage,
                mapped_at_creation: false,
            })
        };
        use ::wgpu::BufferUsages as U;
        WorkQueue {
            state: Mutex::new(State::default()),
            errors: buffer(
                "hologram error words",
                U::STORAGE | U::COPY_SRC | U::COPY_DST,
            ),
            errors_readback: buffer("hologram error readback", U::MAP_READ | U::COPY_DST),
            stride,
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| BackendError::Device("the wgpu work queue was poisoned by a panic".into()))
    }

    /// Queues a launch: `record` records it with its error slot bound and returns the command
    /// buffer. Waits first only when every error slot is taken.
    pub fn launch(
        &self,
        gpu: &Gpu,
        launch: QueuedLaunch,
        record: impl FnOnce(::wgpu::BufferBinding<'_>) -> Result<::wgpu::CommandBuffer>,
    ) -> Result<()> {
        let mut st = self.lock()?;
        if st.launches.len() as u64 == ERROR_SLOTS {
            // The launches' errors are reported at their threads' next synchronization.
            self.wait_locked(gpu, &mut st)?;
        }
        let slot = st.launches.len() as u64;
        let cb = record(::wgpu::BufferBinding {
            buffer: &self.errors,
            offset: slot * self.stride,
            size: std::num::NonZeroU64::new(ERROR_BYTES),
        })?;
        st.recorded.push(cb);
        st.launches.push(launch);
        if st.recorded.len() >= SUBMIT_AT {
            self.submit_locked(gpu, &mut st);
        }
        Ok(())
    }

    /// Queues device work that reports no error (a copy between buffers).
    pub fn record(&self, gpu: &Gpu, cb: ::wgpu::CommandBuffer) -> Result<()> {
        let mut st = self.lock()?;
        st.recorded.push(cb);
        if st.recorded.len() >= SUBMIT_AT {
            self.submit_locked(gpu, &mut st);
        }
        Ok(())
    }

    /// Submits what is recorded, without waiting: work submitted (or written with
    /// `queue.write_buffer`) after this runs after it.
    pub fn flush(&self, gpu: &Gpu) -> Result<()> {
        let mut st = self.lock()?;
        self.submit_locked(gpu, &mut st);
        Ok(())
    }

    fn submit_locked(&self, gpu: &Gpu, st: &mut State) {
        if st.recorded.is_empty() {
            return;
        }
        let index = gpu.queue.submit(st.recorded.drain(..));
        let launches = st.unsubmitted..st.launches.len();
        st.unsubmitted = st.launches.len();
        st.submitted.push(Submitted { index, launches });
    }

    /// Waits for everything queued so far (copies written with `queue.write_buffer` included)
    /// and returns the first error of this thread's launches since its last wait.
    pub fn wait(&self, gpu: &Gpu) -> Result<()> {
        let mut st = self.lock()?;
        self.wait_locked(gpu, &mut st)?;
        match st.errors.remove(&std::thread::current().id()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// As [`WorkQueue::wait`], but a launch's error stays for the next wait to report (for
    /// copies into the device, which report no launch errors).
    pub fn wait_keeping_errors(&self, gpu: &Gpu) -> Result<()> {
        let mut st = self.lock()?;
        self.wait_locked(gpu, &mut st)
    }

    /// Waits; launch errors go to `st.errors`, device failures are returned.
    fn wait_locked(&self, gpu: &Gpu, st: &mut State) -> Result<()> {
        gpu.check_fault()?;
        let used = st.launches.len() as u64 * self.stride;
        if used > 0 {
            let mut enc = gpu
                .device
                .create_command_encoder(&::wgpu::CommandEncoderDescriptor::default());
            enc.copy_buffer_to_buffer(&self.errors, 0, &self.errors_readback, 0, used);
            enc.clear_buffer(&self.errors, 0, Some(used));
            st.recorded.push(enc.finish());
        } else {
            // Flushes copies staged by `queue.write_buffer`.
            gpu.queue.submit(std::iter::empty());
        }
        self.submit_locked(gpu, st);
        let submitted = std::mem::take(&mut st.submitted);
        let launches = std::mem::take(&mut st.launches);
        st.unsubmitted = 0;
        for s in &submitted {
            let queued = &launches[s.launches.clone()];
            // No limit when any launch has none (or for copies alone).
            let limit = queued
                .iter()
                .map(QueuedLaunch::host_limit)
                .try_fold(Duration::ZERO, |sum, l| l.map(|l| sum + l))
                .filter(|_| !queued.is_empty());
            match gpu.device.poll(::wgpu::PollType::Wait {
                submission_index: Some(s.index.clone()),
                timeout: limit,
            }) {
                Ok(_) => {}
                Err(::wgpu::PollError::Timeout) => return Err(stuck(gpu, queued)),
                Err(e) => {
                    return Err(BackendError::Device(format!(
                        "waiting for the GPU failed: {e}"
                    )))
                }
            }
        }
        gpu.check_fault()?;
        if used == 0 {
            return Ok(());
        }
        let stride = self.stride as usize;
        let errors = &mut st.errors;
        gpu.map_then(&self.errors_readback, used, None, None, |bytes| {
            for (launch, slot) in launches.iter().zip(bytes.chunks_exact(stride)) {
                let words: Vec<u32> = slot[..ERROR_BYTES as usize]
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                if let Err(e) = super::launch::launch_result(gpu, launch, &words) {
                    errors.entry(launch.thread).or_insert(e);
                }
            }
        })
    }
}

/// The launches of a submission ran past their time and the GPU did not stop them: the device
/// is unusable from now on.
fn stuck(gpu: &Gpu, queued: &[QueuedLaunch]) -> BackendError {
    let mut names: Vec<&str> = Vec::new();
    for q in queued {
        if !names.contains(&q.kernel.name.as_str()) {
            names.push(&q.kernel.name);
        }
    }
    let name = match names.as_slice() {
        [one] => one.to_string(),
        many => format!("one of {}", many.join(", ")),
    };
    gpu.poison(format!(
        "kernel '{name}' ran past the launch timeout and the GPU did not stop it; create a new executor"
    ));
    let seconds = queued
        .iter()
        .filter_map(|q| q.timeout)
        .max()
        .unwrap_or_default()
        .as_secs_f64();
    BackendError::LaunchTimeout {
        kernel: name,
        seconds,
        stuck: true,
    }
}
