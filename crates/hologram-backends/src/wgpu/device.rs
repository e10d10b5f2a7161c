//! The device: creation with the adapter's limits and 64-bit features, error capture (wgpu
//! validation errors and device loss become [`BackendError`] values, never panics), and
//! waiting for submitted work.

use std::sync::{Arc, Mutex};

use super::adapter::{self, AdapterOptions};
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
}

/// The 64-bit features we use when the adapter has them.
/// With `HOLOGRAM_WGPU_CORE_ONLY=1` none are used: the code generator then takes the paths of
/// adapters without 64-bit support (Metal, many mobile GPUs), which lets them be tested on any
/// adapter.
fn wanted_features(available: ::wgpu::Features) -> ::wgpu::Features {
    if std::env::var("HOLOGRAM_WGPU_CORE_ONLY").as_deref() == Ok("1") {
        return ::wgpu::Features::empty();
    }
    let want = ::wgpu::Features::SHADER_INT64
        | ::wgpu::Features::SHADER_F64
        | ::wgpu::Features::SHADER_INT64_ATOMIC_ALL_OPS;
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
        Ok(Gpu {
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

    /// Waits until all submitted work is done.
    pub fn wait(&self) -> Result<()> {
        self.device
            .poll(::wgpu::PollType::wait_indefinitely())
            .map_err(|e| BackendError::Device(format!("waiting for the GPU failed: {e}")))?;
        self.check_fault()
    }

    /// Copies `len` bytes at `offset` (both multiples of 4) out of `buffer` into host memory.
    pub fn read(&self, buffer: &::wgpu::Buffer, offset: u64, len: u64) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let staging = self.scoped(
            || {
                let staging = self.device.create_buffer(&::wgpu::BufferDescriptor {
                    label: Some("hologram readback"),
                    size: len,
                    usage: ::wgpu::BufferUsages::MAP_READ | ::wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let mut enc = self
                    .device
                    .create_command_encoder(&::wgpu::CommandEncoderDescriptor::default());
                enc.copy_buffer_to_buffer(buffer, offset, &staging, 0, len);
                self.queue.submit([enc.finish()]);
                staging
            },
            |msg, oom| {
                if oom {
                    BackendError::OutOfMemory {
                        bytes: len as usize,
                        device: self.info.name.clone(),
                    }
                } else {
                    BackendError::Device(format!("read-back failed: {msg}"))
                }
            },
        )?;
        self.map_read(&staging)
    }

    /// Maps a MAP_READ buffer (after pending copies into it) and returns its bytes.
    pub fn map_read(&self, staging: &::wgpu::Buffer) -> Result<Vec<u8>> {
        self.map_read_within(staging, None)
    }

    /// As [`Gpu::map_read`], waiting at most `limit` for the GPU: past it, the result is
    /// `LaunchTimeout { stuck: true }` (with an empty kernel name, for the caller to fill in).
    pub fn map_read_within(
        &self,
        staging: &::wgpu::Buffer,
        limit: Option<std::time::Duration>,
    ) -> Result<Vec<u8>> {
        let result: Arc<Mutex<Option<std::result::Result<(), String>>>> =
            Arc::new(Mutex::new(None));
        let r = result.clone();
        staging.map_async(::wgpu::MapMode::Read, .., move |res| {
            if let Ok(mut slot) = r.lock() {
                *slot = Some(res.map_err(|e| e.to_string()));
            }
        });
        // Another thread's poll may run this buffer's callback (wgpu calls callbacks from
        // whichever thread polls): poll until the callback has run, within the limit.
        let started = std::time::Instant::now();
        let status = loop {
            match self.device.poll(::wgpu::PollType::Wait {
                submission_index: None,
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
            if let Some(status) = result.lock().ok().and_then(|mut s| s.take()) {
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
        let bytes = {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| BackendError::Device(format!("mapping failed: {e}")))?;
            view.to_vec()
        };
        staging.unmap();
        Ok(bytes)
    }
}
