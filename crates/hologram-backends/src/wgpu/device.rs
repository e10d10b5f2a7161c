//! The device: creation with the adapter's limits and 64-bit features, error capture (wgpu
//! validation errors and device loss become [`BackendError`] values, never panics), and
//! mapping buffers to read them.

use std::sync::{Arc, Mutex};

use super::adapter::{self, AdapterOptions};
use super::bind_groups::BindGroupCache;
use super::staging::StagingPool;
use super::work_queue::WorkQueue;
use crate::error::{BackendError, Result};

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
