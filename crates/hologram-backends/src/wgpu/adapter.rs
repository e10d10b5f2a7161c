//! Choosing an adapter: hardware first; software rasterizers (llvmpipe/lavapipe, WARP) only
//! when asked for explicitly.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::error::{BackendError, Result};

/// Environment variable that lets the backend use a software adapter (e.g. Mesa's lavapipe).
pub const ALLOW_SOFTWARE_ENV: &str = "HOLOGRAM_WGPU_ALLOW_SOFTWARE";

/// Which native API to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    /// Apple's Metal (macOS).
    Metal,
    /// Vulkan (Linux, Windows, Android).
    Vulkan,
    /// DirectX 12 (Windows).
    Dx12,
}

impl Api {
    /// The wgpu backend set for this API.
    pub fn backends(self) -> ::wgpu::Backends {
        match self {
            Api::Metal => ::wgpu::Backends::METAL,
            Api::Vulkan => ::wgpu::Backends::VULKAN,
            Api::Dx12 => ::wgpu::Backends::DX12,
        }
    }

    /// Lower-case name (`metal`, `vulkan`, `dx12`).
    pub fn name(self) -> &'static str {
        match self {
            Api::Metal => "metal",
            Api::Vulkan => "vulkan",
            Api::Dx12 => "dx12",
        }
    }

    /// Why this API cannot exist on this operating system, if it cannot.
    pub fn unavailable_here(self) -> Option<&'static str> {
        match self {
            Api::Metal if !cfg!(target_os = "macos") => {
                Some("Metal exists only on macOS; on this machine use cuda, vulkan or cpu")
            }
            Api::Dx12 if !cfg!(target_os = "windows") => {
                Some("DirectX 12 exists only on Windows; on this machine use cuda, vulkan or cpu")
            }
            _ => None,
        }
    }
}

/// How to pick an adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterOptions {
    /// The native API.
    pub api: Api,
    /// Accept a software adapter when no hardware adapter exists.
    pub allow_software: bool,
}

impl AdapterOptions {
    /// Hardware adapters only, unless `HOLOGRAM_WGPU_ALLOW_SOFTWARE=1`.
    pub fn from_env(api: Api) -> Self {
        AdapterOptions {
            api,
            allow_software: software_allowed_by_env(),
        }
    }
}

/// True when `HOLOGRAM_WGPU_ALLOW_SOFTWARE` is set to `1` (or `true`/`yes`).
pub fn software_allowed_by_env() -> bool {
    std::env::var(ALLOW_SOFTWARE_ENV)
        .map(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
        .unwrap_or(false)
}

/// One adapter wgpu can see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterSummary {
    /// Adapter name, e.g. "NVIDIA H100 80GB HBM3" or "llvmpipe (LLVM 15.0.6, 256 bits)".
    pub name: String,
    /// Backend API (Vulkan, Metal, Dx12, Gl).
    pub backend: String,
    /// Discrete, integrated, virtual, CPU (software) or other.
    pub device_type: String,
    /// Driver name and version.
    pub driver: String,
    /// True for software rasterizers.
    pub software: bool,
}

fn is_software(info: &::wgpu::AdapterInfo) -> bool {
    info.device_type == ::wgpu::DeviceType::Cpu
}

fn rank(info: &::wgpu::AdapterInfo) -> u32 {
    match info.device_type {
        ::wgpu::DeviceType::DiscreteGpu => 0,
        ::wgpu::DeviceType::IntegratedGpu => 1,
        ::wgpu::DeviceType::VirtualGpu => 2,
        ::wgpu::DeviceType::Other => 3,
        ::wgpu::DeviceType::Cpu => 4,
    }
}

pub(crate) fn instance(backends: ::wgpu::Backends) -> ::wgpu::Instance {
    let mut desc = ::wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    // No validation layers (they are rarely installed and slow): wgpu validates on its own.
    desc.flags = ::wgpu::InstanceFlags::empty().with_env();
    ::wgpu::Instance::new(desc)
}

fn summarize(info: &::wgpu::AdapterInfo) -> AdapterSummary {
    let driver = [info.driver.as_str(), info.driver_info.as_str()]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    AdapterSummary {
        name: info.name.clone(),
        backend: format!("{:?}", info.backend),
        device_type: format!("{:?}", info.device_type),
        driver,
        software: is_software(info),
    }
}

/// Every Metal, Vulkan and DX12 adapter on this machine.
pub fn list_adapters() -> Vec<AdapterSummary> {
    [Api::Metal, Api::Vulkan, Api::Dx12]
        .into_iter()
        .filter(|api| api.unavailable_here().is_none())
        .flat_map(|api| {
            let (_, adapters) = probe(api);
            adapters
                .iter()
                .map(|a| summarize(&a.get_info()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The instance and adapters of an API, found once per process: probing loads drivers and
/// opens an instance (tens of milliseconds, and driver chatter on stderr, which
/// [`driver_output`](super::driver_output) keeps out of the terminal), so later executors and
/// availability checks reuse the first probe's answer.
fn probe(api: Api) -> (::wgpu::Instance, Vec<::wgpu::Adapter>) {
    type Probes = HashMap<Api, (::wgpu::Instance, Vec<::wgpu::Adapter>)>;
    static PROBES: OnceLock<Mutex<Probes>> = OnceLock::new();
    let mut probes = PROBES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    probes
        .entry(api)
        .or_insert_with(|| {
            let _span = tracing::debug_span!("probe adapters", api = api.name()).entered();
            super::driver_output::quietly(|| {
                let inst = instance(api.backends());
                let mut adapters = pollster::block_on(inst.enumerate_adapters(api.backends()));
                adapters.sort_by_key(|a| rank(&a.get_info()));
                (inst, adapters)
            })
        })
        .clone()
}

/// Picks the best adapter of the requested API: discrete, then integrated, then virtual GPUs;
/// a software adapter only with `allow_software`.
pub(crate) fn choose(opts: &AdapterOptions) -> Result<(::wgpu::Instance, ::wgpu::Adapter)> {
    let unavailable = |reason: String| BackendError::Unavailable {
        backend: opts.api.name().into(),
        reason,
    };
    if let Some(why) = opts.api.unavailable_here() {
        return Err(unavailable(why.into()));
    }
    let (inst, mut adapters) = probe(opts.api);
    if adapters.is_empty() {
        return Err(unavailable(format!(
            "no {} adapter was found (is a {} driver installed? on Linux: the Vulkan loader libvulkan1 and a driver)",
            opts.api.name(),
            opts.api.name()
        )));
    }
    let pick = adapters
        .iter()
        .position(|a| opts.allow_software || !is_software(&a.get_info()));
    match pick {
        Some(i) => {
            let adapter = adapters.swap_remove(i);
            Ok((inst, adapter))
        }
        None => {
            let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
            Err(unavailable(format!(
                "only software adapters were found ({}); set {ALLOW_SOFTWARE_ENV}=1 to use one",
                names.join(", ")
            )))
        }
    }
}
