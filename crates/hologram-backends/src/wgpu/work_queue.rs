//! Work queued on the device without waiting for it.
//!
//! Launches and device-to-device copies are recorded into one command encoder per batch and
//! submitted in batches; the host waits only when it needs data (`copy_out`) or at a
//! synchronization. Each launch since the last wait writes its error words into its own slot of
//! one error buffer and reads its argument words from its own region of one argument ring (both
//! bound at dynamic offsets, so a launch creates no buffer, and its bind group can be reused:
//! see `bind_groups.rs`); argument words are kept after the ring and reused by launches with the
//! same words (see [`ARGS_KEPT_BYTES`]), others are written with one `queue.write_buffer` just
//! before their batch is submitted. A wait copies the error slots of launches that may fault out
//! in the same submission as the last batch (launches the launcher proved in bounds have none to
//! read: `launch::may_fault`), maps them once and reports the first launch (in launch order) that
//! failed, naming its kernel, as the CUDA backend reports its error record; slots stay zero
//! unless a launch faulted, and are cleared only then. A launch's error goes to the thread that
//! made the launch (threads that share a backend each see their own launches' errors, as when
//! launches waited).

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::Duration;

use hologram_isa::Kernel;

use super::codegen;
use super::device::{Gpu, MapRequest};
use super::pipeline_cache::Pipeline;
use super::profile;
use crate::error::{BackendError, Result};

/// Commands (launches, copies) recorded before they are submitted: enough to spare the driver a
/// submission per launch, few enough that the GPU starts early.
const SUBMIT_AT: usize = 8;

/// Launches between two waits (error slots); the launch past the last slot waits first.
const ERROR_SLOTS: u64 = 1024;

/// Bytes of one launch's error words.
const ERROR_BYTES: u64 = 4 * codegen::ERR_WORDS as u64;

/// Bytes of the argument ring; a launch that finds no room in it waits first (a wait frees the
/// whole ring). 1 MiB holds 1024 launches of kernels with up to 124 parameters at a 256-byte
/// offset alignment.
const ARGS_RING_BYTES: u64 = 1 << 20;

/// Bytes after the ring (in the same buffer) that keep argument words from launch to launch: a
/// launch whose words were written there before binds them where they are and writes nothing.
/// A batch that writes no argument words submits one command buffer instead of two (wgpu
/// submits its staged writes in a command buffer of their own, which costs NVIDIA's Vulkan
/// driver about 11 us per round trip); a loop that repeats its launches with the same buffers
/// and sizes (a benchmark, a training step, a plan) writes its words once.
const ARGS_KEPT_BYTES: u64 = 256 << 10;

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
    /// False when the launcher proved the launch cannot report an error (its slot stays zero
    /// and is not read back).
    pub may_fault: bool,
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
    /// The batch being recorded.
    encoder: Option<::wgpu::CommandEncoder>,
    /// The compute pass open in `encoder`: consecutive dispatches share one (a pass per
    /// launch cost wgpu's encoding a pass each at submission); a copy or the submission ends it.
    pass: Option<::wgpu::ComputePass<'static>>,
    /// Commands in `encoder`.
    recorded: usize,
    /// Launches since the last wait; launch `i` owns error slot `i`.
    launches: Vec<QueuedLaunch>,
    /// `launches[unsubmitted..]` are recorded but not submitted.
    unsubmitted: usize,
    submitted: Vec<Submitted>,
    /// Per thread, the first error of its launches that no wait of that thread reported yet.
    errors: HashMap<ThreadId, BackendError>,
    /// Argument words of the launches not submitted yet, padded to their ring offsets; they go
    /// to the ring at `args_pending_at` when the batch is submitted.
    args_pending: Vec<u32>,
    args_pending_at: u64,
    /// End of the ring's used part (the ring is free again after a wait).
    args_end: u64,
    /// Argument words kept after the ring, by content -> byte offset (see [`ARGS_KEPT_BYTES`]).
    kept: HashMap<Vec<u32>, u64>,
    /// End of the kept words' used part (relative to the end of the ring).
    kept_end: u64,
    /// `queue.write_buffer` was called since the last submission.
    writes_pending: bool,
}

/// The queue of one device.
pub(crate) struct WorkQueue {
    state: Mutex<State>,
    /// `ERROR_SLOTS` slots of `stride` bytes, zero between launches.
    errors: ::wgpu::Buffer,
    /// Where a wait copies the used slots to read them.
    errors_readback: ::wgpu::Buffer,
    stride: u64,
    /// The argument ring (`ARGS_RING_BYTES`).
    args: ::wgpu::Buffer,
    /// Alignment of dynamic storage-buffer offsets.
    align: u64,
}

impl WorkQueue {
    pub fn new(device: &::wgpu::Device, limits: &::wgpu::Limits) -> WorkQueue {
        let align = (limits.min_storage_buffer_offset_alignment as u64).max(4);
        let stride = ERROR_BYTES.div_ceil(align) * align;
        let buffer = |label, size, usage| {
            device.create_buffer(&::wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        use ::wgpu::BufferUsages as U;
        WorkQueue {
            state: Mutex::new(State::default()),
            errors: buffer(
                "hologram error words",
                stride * ERROR_SLOTS,
                U::STORAGE | U::COPY_SRC | U::COPY_DST,
            ),
            errors_readback: buffer(
                "hologram error readback",
                stride * ERROR_SLOTS,
                U::MAP_READ | U::COPY_DST,
            ),
            stride,
            args: buffer(
                "hologram argument ring",
                ARGS_RING_BYTES + ARGS_KEPT_BYTES,
                U::STORAGE | U::COPY_DST,
            ),
            align,
        }
    }

    /// The error slot binding of a launch's bind group (at a dynamic offset).
    pub fn error_binding(&self) -> ::wgpu::BufferBinding<'_> {
        ::wgpu::BufferBinding {
            buffer: &self.errors,
            offset: 0,
            size: NonZeroU64::new(ERROR_BYTES),
        }
    }

    /// The argument binding of a launch's bind group with `words` argument words (at a dynamic
    /// offset).
    pub fn args_binding(&self, words: usize) -> ::wgpu::BufferBinding<'_> {
        ::wgpu::BufferBinding {
            buffer: &self.args,
            offset: 0,
            size: NonZeroU64::new(4 * words.max(1) as u64),
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| BackendError::Device("the wgpu work queue was poisoned by a panic".into()))
    }

    /// Queues a launch with argument words `words`: `record` records it into the batch's encoder,
    /// given the dynamic offsets of its error slot and its arguments. Waits first only when every
    /// error slot or the argument ring is taken.
    pub fn launch(
        &self,
        gpu: &Gpu,
        launch: QueuedLaunch,
        words: &[u32],
        record: impl FnOnce(&mut Batch<'_>, &[u32; 2]),
    ) -> Result<()> {
        let bytes = 4 * words.len() as u64;
        if bytes > ARGS_RING_BYTES {
            return Err(BackendError::InvalidLaunch {
                kernel: launch.kernel.name.clone(),
                reason: format!(
                    "{bytes} bytes of launch arguments exceed the wgpu backend's {ARGS_RING_BYTES}"
                ),
            });
        }
        let mut st = self.lock()?;
        let mut at = st.args_end.div_ceil(self.align) * self.align;
        if st.launches.len() as u64 == ERROR_SLOTS || at + bytes > ARGS_RING_BYTES {
            // The launches' errors are reported at their threads' next synchronization.
            self.wait_locked(gpu, &mut st)?;
            at = 0;
        }
        let args_at = self.place_words(gpu, &mut st, words, at);
        let offsets = [
            (st.launches.len() as u64 * self.stride) as u32,
            args_at as u32,
        ];
        record(&mut Batch { gpu, st: &mut st }, &offsets);
        st.recorded += 1;
        st.launches.push(launch);
        if st.recorded >= SUBMIT_AT {
            self.submit_locked(gpu, &mut st);
        }
        Ok(())
    }

    /// Where a launch's argument words are bound: where the same words were kept, else kept
    /// now (written once, staged ahead of this batch's submission) while the kept space has
    /// room, else at ring offset `at` (written with the batch).
    fn place_words(&self, gpu: &Gpu, st: &mut State, words: &[u32], at: u64) -> u64 {
        if let Some(&kept) = st.kept.get(words) {
            return kept;
        }
        let bytes = 4 * words.len() as u64;
        let kept_at = st.kept_end.div_ceil(self.align) * self.align;
        if kept_at + bytes <= ARGS_KEPT_BYTES {
            let offset = ARGS_RING_BYTES + kept_at;
            gpu.queue
                .write_buffer(&self.args, offset, bytemuck::cast_slice(words));
            st.writes_pending = true;
            st.kept_end = kept_at + bytes;
            st.kept.insert(words.to_vec(), offset);
            return offset;
        }
        if st.args_pending.is_empty() {
            st.args_pending_at = at;
        } else {
            let end = st.args_pending_at + 4 * st.args_pending.len() as u64;
            let pad = ((at - end) / 4) as usize;
            st.args_pending.extend(std::iter::repeat_n(0, pad));
        }
        st.args_pending.extend_from_slice(words);
        st.args_end = at + bytes;
        at
    }

    /// Queues device work that reports no error (a copy between buffers).
    pub fn record(
        &self,
        gpu: &Gpu,
        record: impl FnOnce(&mut ::wgpu::CommandEncoder),
    ) -> Result<()> {
        let mut st = self.lock()?;
        record(encoder(gpu, &mut st));
        st.recorded += 1;
        if st.recorded >= SUBMIT_AT {
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

    /// Notes a `queue.write_buffer` (it reaches the device with the next submission).
    pub fn wrote(&self) -> Result<()> {
        self.lock()?.writes_pending = true;
        Ok(())
    }

    /// Writes the batch's argument words and submits the batch. Recording errors (wgpu reports
    /// them when the encoder is finished) go to the threads whose launches were in the batch.
    fn submit_locked(&self, gpu: &Gpu, st: &mut State) {
        st.pass = None;
        let Some(enc) = st.encoder.take() else {
            return;
        };
        let started = std::time::Instant::now();
        st.writes_pending = false;
        if !st.args_pending.is_empty() {
            gpu.queue.write_buffer(
                &self.args,
                st.args_pending_at,
                bytemuck::cast_slice(&st.args_pending),
            );
            st.args_pending.clear();
        }
        st.recorded = 0;
        let launches = st.unsubmitted..st.launches.len();
        st.unsubmitted = st.launches.len();
        let finishing = std::time::Instant::now();
        // A recording error goes to the batch's launches, not to the device's fault; the
        // finish claims its errors rather than scoping them (cheaper: `Gpu::claiming_errors`).
        let finished =
            gpu.check_fault()
                .and_then(|()| match gpu.claiming_errors(|| enc.finish()) {
                    (cb, None) => Ok(cb),
                    (_, Some(msg)) => Err(BackendError::Device(format!(
                        "recording launches failed: {msg}"
                    ))),
                });
        profile::FINISH.add(finishing);
        match finished {
            Ok(cb) => {
                let submitting = std::time::Instant::now();
                let index = gpu.queue.submit([cb]);
                profile::QUEUE_SUBMIT.add(submitting);
                st.submitted.push(Submitted { index, launches });
                profile::SUBMIT.add(started);
            }
            Err(e) => {
                for l in &st.launches[launches] {
                    st.errors.entry(l.thread).or_insert_with(|| e.clone());
                }
            }
        }
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
        // Slots up to the last launch that may fault (none: nothing to read back).
        let used = st
            .launches
            .iter()
            .rposition(|l| l.may_fault)
            .map_or(0, |last| (last as u64 + 1) * self.stride);
        if used > 0 {
            // Slots stay zero unless a launch faulted: they are cleared only then (below).
            let enc = encoder(gpu, st);
            enc.copy_buffer_to_buffer(&self.errors, 0, &self.errors_readback, 0, used);
        } else if st.writes_pending && st.encoder.is_none() {
            // Flushes copies staged by `queue.write_buffer` (a wait with nothing queued submits
            // nothing: each submission costs the driver a round).
            gpu.queue.submit(std::iter::empty());
            st.writes_pending = false;
        }
        self.submit_locked(gpu, st);
        // Requested before the wait, so the poll that sees the GPU finish also maps the words.
        let request = (used > 0).then(|| MapRequest::new(&self.errors_readback, used));
        let waiting = std::time::Instant::now();
        let submitted = std::mem::take(&mut st.submitted);
        let launches = std::mem::take(&mut st.launches);
        st.unsubmitted = 0;
        // Everything submitted is waited for below (or the device is poisoned): the ring is free,
        // and so are the kept words once they fill their space (no launch reads them any more).
        st.args_end = 0;
        if st.kept_end > ARGS_KEPT_BYTES / 4 * 3 {
            st.kept.clear();
            st.kept_end = 0;
        }
        // Short work is seen finished by polling the fence, without the blocking wait's
        // wake-up latency (`spin_wait.rs`); what still runs past the spin is waited for below.
        let idle = !submitted.is_empty()
            && super::spin_wait::until_idle(gpu, super::spin_wait::spin_limit(gpu))?;
        for s in submitted.iter().filter(|_| !idle) {
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
        profile::GPU_WAIT.add(waiting);
        gpu.check_fault()?;
        let Some(request) = request else {
            return Ok(());
        };
        let reading = std::time::Instant::now();
        let stride = self.stride as usize;
        let errors = &mut st.errors;
        let mut faulted = false;
        let read = gpu.map_finish(&self.errors_readback, used, request, None, None, |bytes| {
            faulted = bytes.iter().any(|&b| b != 0);
            for (launch, slot) in launches.iter().zip(bytes.chunks_exact(stride)) {
                let words: Vec<u32> = slot[..ERROR_BYTES as usize]
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                if let Err(e) = super::launch::launch_result(gpu, launch, &words) {
                    errors.entry(launch.thread).or_insert(e);
                }
            }
        });
        profile::ERROR_READ.add(reading);
        if faulted {
            // Zero the slots again before any later launch uses them (staged writes reach the
            // device ahead of the next submission).
            gpu.queue
                .write_buffer(&self.errors, 0, &vec![0u8; used as usize]);
            st.writes_pending = true;
        }
        read
    }
}

/// A launch's view of the batch: the encoder for copies, the open compute pass for dispatches.
pub(crate) struct Batch<'a> {
    gpu: &'a Gpu,
    st: &'a mut State,
}

impl Batch<'_> {
    /// The batch's encoder (ending the open compute pass).
    pub fn encoder(&mut self) -> &mut ::wgpu::CommandEncoder {
        encoder(self.gpu, self.st)
    }

    /// The batch's open compute pass (begun if none is).
    pub fn pass(&mut self) -> &mut ::wgpu::ComputePass<'static> {
        let pass = match self.st.pass.take() {
            Some(pass) => pass,
            None => encoder(self.gpu, self.st)
                .begin_compute_pass(&::wgpu::ComputePassDescriptor {
                    label: Some("hologram launches"),
                    timestamp_writes: None,
                })
                .forget_lifetime(),
        };
        self.st.pass.insert(pass)
    }
}

/// The batch's encoder, created by its first command; an open compute pass ends first.
fn encoder<'s>(gpu: &Gpu, st: &'s mut State) -> &'s mut ::wgpu::CommandEncoder {
    st.pass = None;
    st.encoder.get_or_insert_with(|| {
        gpu.device
            .create_command_encoder(&::wgpu::CommandEncoderDescriptor::default())
    })
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
