//! The device: creation with the adapter's limits and 64-bit features, error capture (wgpu
//! validation errors and device loss become [`BackendError`] values, never panics), and
//! mapping buffers to read them.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use super::adapter::{self, AdapterOptions};
use super::bind_groups::BindGroupCache;
use super::staging::StagingPool;
use super::work_queue::WorkQueue;
use crate::error::{BackendError, Result};

thread_local! {
    /// While this thread runs [`Gpu::claiming_errors`]: the first wgpu error raised outside any
    /// error scope (wgpu calls the uncaptured-error handler on the thread that raised the
    /// error, before the call that raised it returns, and error scopes are per thread).
    static CLAIMED: RefCell<Option<Option<String>>> = const { RefCell::new(None) };
}

/// A device with its queue and what it can do.
pub(crate) struct Gpu {
    /// Kept alive for the adapter's lifetime.
    pub _instance: ::wgpu::Instance,
    pub _adapter: ::wgpu::Adapter,
    pub device: ::wgpu::Device,
    pub queue: ::wgpu::Queue,
    pub info: ::wgpu::AdapterInfo,
    pub limits: ::wgpu::Limits,
    pub features: ::wgpu::Features,
    /// Set when the device is lost or reports an error outside any error scope.
    pub fault: Arc<Mutex<Option<String>>>,
    /// Launches and copies queued without waiting, and their error words.
    pub work: WorkQueue,
    /// Mapped buffers that reads from the device go through.
    pub staging: StagingPool,
    /// Bind groups of earlier launches, for launches that bind the same buffers.
    pub groups: Arc<BindGroupCache>,
}

/// The optional features we use when the adapter has them: 64-bit types and atomics, and
/// subgroup operations (barrier bookkeeping per subgroup).
/// With `HOLOGRAM_WGPU_CORE_ONLY=1` none are used: the code generator then takes the paths of
/// adapters without them (Metal without 64-bit support, many mobile GPUs), which lets them be
/// tested on any adapter.
fn wanted_features(available: ::wgpu::Features) -> ::wgpu::Features {
    if std::env::var("HOLOGRAM_WGPU_CORE_ONLY").as_deref() == Ok("1") {
        return ::wgpu::Features::empty();
    }
    let want = ::wgpu::Features::SHADER_INT64
        | ::wgpu::Features::SHADER_F64
        | ::wgpu::Features::SHADER_INT64_ATOMIC_ALL_OPS
        | ::wgpu::Features::SUBGROUP;
    available & want
}

impl Gpu {
    /// Opens the adapter `opts` selects.
    pub fn open(opts: &AdapterOptions) -> Result<Gpu> {
        let (instance, adapter) = adapter::choose(opts)?;
        let info = adapter.get_info();
        let features = wanted_features(adapter.features());
        let limits = adapter.limits();
        let desc = ::wgpu::DeviceDescriptor {
            label: Some("hologram"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: ::wgpu::ExperimentalFeatures::disabled(),
            memory_hints: ::wgpu::MemoryHints::Performance,
            trace: ::wgpu::Trace::Off,
        };
        let (device, queue) =
            super::driver_output::quietly(|| pollster::block_on(adapter.request_device(&desc)))
                .map_err(|e| BackendError::Unavailable {
                    backend: opts.api.name().into(),
                    reason: format!("could not open {}: {e}", info.name),
                })?;
        let fault: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let f = fault.clone();
        device.on_uncaptured_error(Arc::new(move |e: ::wgpu::Error| {
            let claimed = CLAIMED.with(|c| match c.borrow_mut().as_mut() {
                Some(slot) => {
                    slot.get_or_insert_with(|| e.to_string());
                    true
                }
                None => false,
            });
            if claimed {
                return;
            }
            tracing::warn!(error = %e, "wgpu error outside an error scope");
            if let Ok(mut slot) = f.lock() {
                slot.get_or_insert_with(|| e.to_string());
            }
        }));
        let f = fault.clone();
        device.set_device_lost_callback(move |reason, msg| {
            if let Ok(mut slot) = f.lock() {
                slot.get_or_insert_with(|| format!("device lost ({reason:?}): {msg}"));
            }
        });
        let work = WorkQueue::new(&device, &limits);
        Ok(Gpu {
            work,
            staging: StagingPool::default(),
            groups: Arc::default(),
            _instance: instance,
            _adapter: adapter,
            device,
            queue,
            info,
            limits,
            features,
            fault,
        })
    }

    /// Marks the device unusable: every later call fails with `why`.
    pub fn poison(&self, why: String) {
        if let Ok(mut slot) = self.fault.lock() {
            slot.get_or_insert(why);
        }
    }

    /// Fails if the device was lost or reported an uncaptured error.
    pub fn check_fault(&self) -> Result<()> {
        match self.fault.lock().ok().and_then(|s| s.clone()) {
            Some(msg) => Err(BackendError::Device(msg)),
            None => Ok(()),
        }
    }

    /// Runs `f` inside validation and out-of-memory error scopes; a captured error becomes
    /// `on_error(message, was_out_of_memory)`.
    pub fn scoped<T>(
        &self,
        f: impl FnOnce() -> T,
        on_error: impl FnOnce(String, bool) -> BackendError,
    ) -> Result<T> {
        self.check_fault()?;
        let oom = self
            .device
            .push_error_scope(::wgpu::ErrorFilter::OutOfMemory);
        let val = self
            .device
            .push_error_scope(::wgpu::ErrorFilter::Validation);
        let out = f();
        let val_err = pollster::block_on(val.pop());
        let oom_err = pollster::block_on(oom.pop());
        if let Some(e) = oom_err {
            return Err(on_error(e.to_string(), true));
        }
        if let Some(e) = val_err {
            return Err(on_error(e.to_string(), false));
        }
        Ok(out)
    }

    /// Runs `f` and returns its value with the first wgpu error (validation, out of memory,
    /// internal) that `f`'s calls raised on this thread, which then does not poison the device.
    /// As [`Gpu::scoped`] for one call, without pushing and popping error scopes: they cost
    /// about 8 us of host time around each batch's `encoder.finish()` and the submission after
    /// it on NVIDIA's Vulkan driver (`bench/results/nvidia-h100/wgpu-error-scopes-*.txt`).
    /// Device loss is not claimed: it stays the device's fault.
    pub fn claiming_errors<T>(&self, f: impl FnOnce() -> T) -> (T, Option<String>) {
        let outer = CLAIMED.with(|c| c.borrow_mut().replace(None));
        let out = f();
        let claimed = CLAIMED.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
        (out, claimed.flatten())
    }

    /// Maps the first `len` bytes of a MAP_READ buffer (after the work that writes it, which
    /// ends with submission `after` or, without it, the latest) and passes them to `f`, waiting
    /// at most `limit` for the GPU: past it, the result is
    /// `LaunchTimeout { stuck: true }` (with an empty kernel name, for the caller to fill in).
    pub fn map_then<T>(
        &self,
        staging: &::wgpu::Buffer,
        len: u64,
        after: Option<::wgpu::SubmissionIndex>,
        limit: Option<std::time::Duration>,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<T> {
        let request = MapRequest::new(staging, len);
        self.map_finish(staging, len, request, after, limit, f)
    }

    /// As [`Gpu::map_then`] for a mapping already requested (so a wait for the GPU that runs
    /// in between also completes the mapping, sparing a second `poll`).
    pub fn map_finish<T>(
        &self,
        staging: &::wgpu::Buffer,
        len: u64,
        request: MapRequest,
        after: Option<::wgpu::SubmissionIndex>,
        limit: Option<std::time::Duration>,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<T> {
        let result = request.0;
        // Another thread's poll may run this buffer's callback (wgpu calls callbacks from
        // whichever thread polls): poll until the callback has run, within the limit.
        let started = std::time::Instant::now();
        let done = || result.lock().ok().and_then(|mut s| s.take());
        let mut already = done();
        if already.is_none() {
            // Short work: its mapping is seen done by non-blocking polls (`spin_wait.rs`).
            super::spin_wait::until(self, super::spin_wait::spin_limit(self), |_| {
                result.lock().map(|s| s.is_some()).unwrap_or(true)
            })?;
            already = done();
        }
        let status = loop {
            if let Some(status) = already.take() {
                break status;
            }
            match self.device.poll(::wgpu::PollType::Wait {
                submission_index: after.clone(),
                timeout: limit,
            }) {
                Ok(_) => self.check_fault()?,
                Err(::wgpu::PollError::Timeout) => {
                    return Err(BackendError::LaunchTimeout {
                        kernel: String::new(),
                        seconds: limit.unwrap_or_default().as_secs_f64(),
                        stuck: true,
                    })
                }
                Err(e) => {
                    return Err(BackendError::Device(format!(
                        "waiting for the GPU failed: {e}"
                    )))
                }
            }
            if let Some(status) = done() {
                break status;
            }
            // (Without a limit, a callback that has not run a minute after the GPU went idle
            // never will.)
            if started.elapsed() > limit.unwrap_or(std::time::Duration::from_secs(60)) {
                return Err(BackendError::Device("mapping did not complete".into()));
            }
            std::thread::yield_now();
        };
        if let Err(e) = status {
            return Err(BackendError::Device(format!("mapping failed: {e}")));
        }
        let out = {
            let view = staging
                .get_mapped_range(..len)
                .map_err(|e| BackendError::Device(format!("mapping failed: {e}")))?;
            f(&view)
        };
        staging.unmap();
        Ok(out)
    }
}

/// A requested mapping: the slot its callback fills.
pub(crate) struct MapRequest(Arc<Mutex<Option<std::result::Result<(), String>>>>);

impl MapRequest {
    /// Requests the mapping of the first `len` bytes of a MAP_READ buffer; it completes in a
    /// later `device.poll`, once the work using the buffer is done.
    pub fn new(staging: &::wgpu::Buffer, len: u64) -> MapRequest {
        let result: Arc<Mutex<Option<std::result::Result<(), String>>>> =
            Arc::new(Mutex::new(None));
        let r = result.clone();
        staging.map_async(::wgpu::MapMode::Read, ..len, move |res| {
            if let Ok(mut slot) = r.lock() {
                *slot = Some(res.map_err(|e| e.to_string()));
            }
        });
        MapRequest(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wgpu::adapter::Api;

    /// A Vulkan device (lavapipe in CI), or None when `HOLOGRAM_WGPU_TESTS=skip` and none opens.
    fn gpu() -> Option<Gpu> {
        let opts = AdapterOptions {
            api: Api::Vulkan,
            allow_software: true,
        };
        match Gpu::open(&opts) {
            Ok(g) => Some(g),
            Err(e) if std::env::var("HOLOGRAM_WGPU_TESTS").as_deref() == Ok("skip") => {
                eprintln!("skipped: {e}");
                None
            }
            Err(e) => {
                panic!("no Vulkan adapter: {e} (install lavapipe or set HOLOGRAM_WGPU_TESTS=skip)")
            }
        }
    }

    /// An encoder whose finish fails validation: a dispatch with no pipeline set.
    fn invalid_encoder(gpu: &Gpu) -> ::wgpu::CommandEncoder {
        let mut enc = gpu
            .device
            .create_command_encoder(&::wgpu::CommandEncoderDescriptor::default());
        {
            let mut pass = enc.begin_compute_pass(&::wgpu::ComputePassDescriptor::default());
            pass.dispatch_workgroups(1, 1, 1);
        }
        enc
    }

    #[test]
    fn claimed_errors_are_returned_and_leave_the_device_usable() {
        let Some(gpu) = gpu() else { return };
        let (_, claimed) = gpu.claiming_errors(|| invalid_encoder(&gpu).finish());
        let msg = claimed.expect("the finish's validation error is claimed");
        assert!(!msg.is_empty());
        gpu.check_fault()
            .expect("a claimed error does not poison the device");

        // Nested claims: the inner one takes its own call's error, the outer one sees none.
        let ((_, inner), outer) =
            gpu.claiming_errors(|| gpu.claiming_errors(|| invalid_encoder(&gpu).finish()));
        assert!(inner.is_some());
        assert_eq!(outer, None);
        let (_, none) = gpu.claiming_errors(|| {
            gpu.device
                .create_command_encoder(&::wgpu::CommandEncoderDescriptor::default())
                .finish()
        });
        assert_eq!(none, None);
        gpu.check_fault().expect("still usable");

        // Outside a claim the error is the device's fault, as before.
        let _ = invalid_encoder(&gpu).finish();
        let err = gpu
            .check_fault()
            .expect_err("an unclaimed error poisons the device");
        assert!(err.to_string().contains(&msg), "{err} / {msg}");
    }
}
