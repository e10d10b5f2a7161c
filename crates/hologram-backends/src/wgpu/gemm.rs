//! The wgpu backend's GEMM: f32 through the hand-written kernel of [`super::gemm_wgsl`], other
//! element types (and shapes the kernel cannot take) through the generic Atlas ISA kernel.
//!
//! Tiles: [`LARGE`] (128×128, 8×8 per lane) when the C matrices give at least
//! [`LARGE_MIN_WORKGROUPS`] such tiles, else [`SMALL`] (64×64, 4×4 per lane), which makes four
//! times as many workgroups for a GPU to spread over its cores. `HOLOGRAM_WGPU_GEMM_TILE=large`
//! or `small` forces one, and `generic` the generic kernel (for measuring on a new adapter).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hologram_isa::Type;

use super::device::Gpu;
use super::gemm_wgsl::{self, Params, Tile, Variant, LARGE, SMALL};
use super::memory::WgpuMemory;
use crate::backend::{Backend, BufferArg};
use crate::error::{BackendError, Result};
use crate::library::gemm::{generic_gemm, GemmDesc};

/// Fewest 128×128 tiles (all batches together) for which [`LARGE`] is chosen: below about one
/// workgroup per core of a large GPU, the smaller tile's extra parallelism wins.
pub const LARGE_MIN_WORKGROUPS: u64 = 128;

/// A ready pipeline of one variant.
pub(crate) struct GemmPipeline {
    pipeline: ::wgpu::ComputePipeline,
    layout: ::wgpu::BindGroupLayout,
}

/// Pipelines per variant (tile, transposes, vector access). One backend owns one device, so the
/// map is per adapter.
#[derive(Default)]
pub(crate) struct GemmPipelines {
    map: Mutex<HashMap<Variant, Arc<GemmPipeline>>>,
}

impl GemmPipelines {
    fn get_or_build(&self, gpu: &Gpu, v: &Variant) -> Result<Arc<GemmPipeline>> {
        if let Some(p) = self.map.lock().ok().and_then(|m| m.get(v).cloned()) {
            return Ok(p);
        }
        let p = Arc::new(build(gpu, v)?);
        if let Ok(mut m) = self.map.lock() {
            m.insert(*v, p.clone());
        }
        Ok(p)
    }

    /// Pipelines built so far.
    pub(crate) fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }
}

fn build(gpu: &Gpu, v: &Variant) -> Result<GemmPipeline> {
    let wgsl = gemm_wgsl::wgsl(v);
    let entry = |binding: u32, ty: ::wgpu::BufferBindingType| ::wgpu::BindGroupLayoutEntry {
        binding,
        visibility: ::wgpu::ShaderStages::COMPUTE,
        ty: ::wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    // A buffer may not be bound read-only and writable in one dispatch: A and B are read-only
    // only when neither is C's buffer.
    let storage = ::wgpu::BufferBindingType::Storage { read_only: false };
    let input = ::wgpu::BufferBindingType::Storage {
        read_only: v.read_only_ab,
    };
    let entries = [
        entry(gemm_wgsl::ERR_BINDING, storage),
        entry(
            gemm_wgsl::PARAMS_BINDING,
            ::wgpu::BufferBindingType::Uniform,
        ),
        entry(gemm_wgsl::A_BINDING, input),
        entry(gemm_wgsl::B_BINDING, input),
        entry(gemm_wgsl::C_BINDING, storage),
    ];
    let label = "hologram gemm_f32";
    let text = wgsl.clone();
    gpu.scoped(
        || {
            let module = gpu
                .device
                .create_shader_module(::wgpu::ShaderModuleDescriptor {
                    label: Some(label),
                    source: ::wgpu::ShaderSource::Wgsl(text.into()),
                });
            let layout = gpu
                .device
                .create_bind_group_layout(&::wgpu::BindGroupLayoutDescriptor {
                    label: Some(label),
                    entries: &entries,
                });
            let pl = gpu
                .device
                .create_pipeline_layout(&::wgpu::PipelineLayoutDescriptor {
                    label: Some(label),
                    bind_group_layouts: &[Some(&layout)],
                    immediate_size: 0,
                });
            let pipeline = gpu
                .device
                .create_compute_pipeline(&::wgpu::ComputePipelineDescriptor {
                    label: Some(label),
                    layout: Some(&pl),
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                });
            GemmPipeline { pipeline, layout }
        },
        |msg, _| BackendError::Compile {
            kernel: "gemm_f32".into(),
            log: format!("{msg}\n--- WGSL ---\n{wgsl}"),
        },
    )
}

/// The tile for a GEMM on this device, or `None` when the device's limits do not fit either
/// (or `HOLOGRAM_WGPU_GEMM_TILE=generic` asks for the generic kernel).
fn choose_tile(gpu: &Gpu, desc: &GemmDesc) -> Option<Tile> {
    let l = &gpu.limits;
    let fits = |t: &Tile| {
        t.lanes() <= l.max_compute_invocations_per_workgroup
            && t.lanes_x() <= l.max_compute_workgroup_size_x
            && t.lanes_y() <= l.max_compute_workgroup_size_y
            && t.shared_bytes() <= l.max_compute_workgroup_storage_size
    };
    let forced = match std::env::var("HOLOGRAM_WGPU_GEMM_TILE").as_deref() {
        Ok("large") => Some(LARGE),
        Ok("small") => Some(SMALL),
        Ok("generic") => return None,
        _ => None,
    };
    let tiles = |t: &Tile| {
        (desc.m as u64).div_ceil(t.bm as u64)
            * (desc.n as u64).div_ceil(t.bn as u64)
            * desc.batch as u64
    };
    let preferred = forced.unwrap_or(if tiles(&LARGE) >= LARGE_MIN_WORKGROUPS {
        LARGE
    } else {
        SMALL
    });
    [preferred, SMALL].into_iter().find(fits)
}

/// Runs `desc` on the device: the hand-written kernel for f32, the generic kernel otherwise.
/// True when the hand-written kernel ran.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm<B: Backend>(
    backend: &B,
    gpu: &Gpu,
    owner: usize,
    pipelines: &GemmPipelines,
    desc: &GemmDesc,
    a: &BufferArg,
    b: &BufferArg,
    c: &BufferArg,
) -> Result<bool> {
    desc.check(a, b, c)?;
    if desc.m == 0 || desc.n == 0 || desc.batch == 0 {
        return Ok(false);
    }
    let aligned = [a, b, c].iter().all(|x| x.offset % 4 == 0);
    let tile = choose_tile(gpu, desc);
    let max_dim = gpu.limits.max_compute_workgroups_per_dimension as u64;
    let (Some(tile), Type::F32, true) = (tile, desc.ty, aligned) else {
        // Other types, misaligned ranges (the generic launch reports them) and devices below
        // WebGPU's default limits.
        generic_gemm(backend, desc, a, b, c)?;
        return Ok(false);
    };
    let grid_x = (desc.n as u64).div_ceil(tile.bn as u64);
    let grid_y = (desc.m as u64).div_ceil(tile.bm as u64);
    if grid_x > max_dim || grid_y > max_dim {
        generic_gemm(backend, desc, a, b, c)?;
        return Ok(false);
    }
    let grid_z = (desc.batch as u64).min(max_dim) as u32;
    let bad = |reason: String| BackendError::InvalidArgument {
        kernel: "gemm".into(),
        reason,
    };
    let mut bufs = Vec::with_capacity(3);
    let mut offsets = [0u32; 3];
    for (i, (name, x)) in [("A", a), ("B", b), ("C", c)].into_iter().enumerate() {
        let mem = WgpuMemory::of(&x.memory, owner)?;
        // Every index the kernel forms lies below the range's end (checked by `desc.check`).
        let end = (x.offset + x.len) / 4;
        if end > u32::MAX as usize {
            return Err(bad(format!(
                "{name} reaches element {end}; the wgpu backend addresses at most 2^32 elements"
            )));
        }
        offsets[i] = (x.offset / 4) as u32;
        bufs.push(&mem.buffer);
    }
    let u = |v: usize| v as u32; // Checked to fit by `desc.check`.
    let vec_ok = |off: u32, ld: usize, stride: usize| {
        off % 4 == 0 && ld % 4 == 0 && (desc.batch == 1 || stride % 4 == 0)
    };
    let variant = Variant {
        tile,
        trans_a: desc.trans_a,
        trans_b: desc.trans_b,
        vec_a: vec_ok(offsets[0], desc.lda, desc.stride_a),
        vec_b: vec_ok(offsets[1], desc.ldb, desc.stride_b),
        vec_c: vec_ok(offsets[2], desc.ldc, desc.stride_c),
        read_only_ab: bufs[0] != bufs[2] && bufs[1] != bufs[2],
    };
    let params = Params {
        off_a: offsets[0],
        off_b: offsets[1],
        off_c: offsets[2],
        m: u(desc.m),
        n: u(desc.n),
        k: u(desc.k),
        lda: u(desc.lda),
        ldb: u(desc.ldb),
        ldc: u(desc.ldc),
        stride_a: u(desc.stride_a),
        stride_b: u(desc.stride_b),
        stride_c: u(desc.stride_c),
        batch: u32::try_from(desc.batch)
            .map_err(|_| bad(format!("batch {} exceeds u32", desc.batch)))?,
        alpha: desc.alpha as f32,
        beta: desc.beta as f32,
    };
    let pipeline = pipelines.get_or_build(gpu, &variant)?;
    let _span = tracing::debug_span!("gemm", backend = "wgpu", m = desc.m, n = desc.n, k = desc.k, batch = desc.batch, tile = ?(tile.bm, tile.bn)).entered();
    // Launches recorded before this GEMM (its operands' producers) go to the queue first.
    gpu.work.flush(gpu)?;
    let readback = gpu.scoped(
        || {
            use ::wgpu::util::DeviceExt;
            let params_buf = gpu
                .device
                .create_buffer_init(&::wgpu::util::BufferInitDescriptor {
                    label: Some("hologram gemm parameters"),
                    contents: bytemuck::cast_slice(&params.words()),
                    usage: ::wgpu::BufferUsages::UNIFORM,
                });
            let err_buf = gpu
                .device
                .create_buffer_init(&::wgpu::util::BufferInitDescriptor {
                    label: Some("hologram gemm error word"),
                    contents: &[0u8; 16],
                    usage: ::wgpu::BufferUsages::STORAGE | ::wgpu::BufferUsages::COPY_SRC,
                });
            let readback = gpu.device.create_buffer(&::wgpu::BufferDescriptor {
                label: Some("hologram gemm error readback"),
                size: 16,
                usage: ::wgpu::BufferUsages::MAP_READ | ::wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let entries = [
                (gemm_wgsl::ERR_BINDING, &err_buf),
                (gemm_wgsl::PARAMS_BINDING, &params_buf),
                (gemm_wgsl::A_BINDING, bufs[0]),
                (gemm_wgsl::B_BINDING, bufs[1]),
                (gemm_wgsl::C_BINDING, bufs[2]),
            ]
            .map(|(binding, buf)| ::wgpu::BindGroupEntry {
                binding,
                resource: buf.as_entire_binding(),
            });
            let group = gpu.device.create_bind_group(&::wgpu::BindGroupDescriptor {
                label: Some("hologram gemm_f32"),
                layout: &pipeline.layout,
                entries: &entries,
            });
            let mut enc = gpu
                .device
                .create_command_encoder(&::wgpu::CommandEncoderDescriptor::default());
            {
                let mut pass = enc.begin_compute_pass(&::wgpu::ComputePassDescriptor {
                    label: Some("hologram gemm_f32"),
                    timestamp_writes: None,
                });
                pass.set_pipeline(&pipeline.pipeline);
                pass.set_bind_group(0, &group, &[]);
                pass.dispatch_workgroups(grid_x as u32, grid_y as u32, grid_z);
            }
            enc.copy_buffer_to_buffer(&err_buf, 0, &readback, 0, 16);
            gpu.queue.submit([enc.finish()]);
            readback
        },
        |msg, oom| {
            if oom {
                BackendError::OutOfMemory {
                    bytes: 0,
                    device: gpu.info.name.clone(),
                }
            } else {
                BackendError::Device(format!("launch of 'gemm_f32' failed: {msg}"))
            }
        },
    )?;
    let word = gpu.map_then(&readback, 16, None, None, |bytes| bytes.to_vec())?;
    if word.iter().take(4).any(|&byte| byte != 0) {
        return Err(BackendError::Unsupported {
            kernel: "gemm_f32".into(),
            feature: super::launch::LOOP_CUT.into(),
            device: gpu.info.name.clone(),
        });
    }
    Ok(true)
}
