//! Launching: pipeline lookup, the argument words, the bind group, the dispatch (folding grids
//! larger than the per-dimension dispatch limit), recording the launch for the work queue, and
//! decoding the device-side error words.

use std::sync::Arc;

use hologram_isa::{ArrayRef, Kernel, ParamKind, Type};

use super::codegen::{self, CodegenOptions, Generated};
use super::device::Gpu;
use super::memory::WgpuMemory;
use super::pipeline_cache::Pipeline;
use super::work_queue::QueuedLaunch;
use crate::backend::{KernelArg, LaunchConfig};
use crate::error::{BackendError, Result};

/// `HOLOGRAM_WGPU_DUMP_DIR=<dir>` writes each generated module's WGSL to
/// `<dir>/<kernel>.<trusted|plain>.wgsl` (trusted: built without wgpu's own index clamps)
/// before it is compiled, for reading what a kernel became or timing a hand-edited variant. A
/// failed write is reported once on stderr and otherwise ignored: dumping must not change what
/// runs.
fn dump_wgsl(kernel: &str, checked: bool, wgsl: &str) {
    static DIR: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let Some(dir) = DIR.get_or_init(|| std::env::var_os("HOLOGRAM_WGPU_DUMP_DIR").map(Into::into))
    else {
        return;
    };
    let safe: String = kernel
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let kind = if checked { "trusted" } else { "plain" };
    let path = dir.join(format!("{safe}.{kind}.wgsl"));
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&path, wgsl)) {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            eprintln!(
                "HOLOGRAM_WGPU_DUMP_DIR: writing {} failed: {e}",
                path.display()
            )
        });
    }
}

/// Builds the compute pipeline for generated WGSL. `checked`: the WGSL checks every access
/// itself (the launch's bounds checks are on), or the launcher proved every access of the
/// launches that use it in bounds (`CodegenOptions::proven`), so wgpu need not add its own
/// index clamps.
pub(crate) fn build_pipeline(
    gpu: &Gpu,
    kernel: &Kernel,
    generated: Generated,
    checked: bool,
) -> Result<Pipeline> {
    let compile_err = |msg: String| BackendError::Compile {
        kernel: kernel.name.clone(),
        log: msg,
    };
    // The error slot and the argument words sit at dynamic offsets of the work queue's buffers.
    let mut entries = vec![
        storage_entry(codegen::ERR_BINDING, false, true),
        storage_entry(codegen::ARGS_BINDING, true, true),
    ];
    for (_, binding) in &generated.buffer_bindings {
        entries.push(storage_entry(*binding, false, false));
    }
    for pool in &generated.pools {
        entries.push(storage_entry(pool.binding, false, false));
    }
    let wgsl = generated.wgsl.clone();
    dump_wgsl(&kernel.name, checked, &wgsl);
    let (pipeline, layout) = gpu.scoped(
        || {
            let desc = ::wgpu::ShaderModuleDescriptor {
                label: Some(&kernel.name),
                source: ::wgpu::ShaderSource::Wgsl(wgsl.into()),
            };
            let module = if checked {
                // Every other runtime check stays (loop bounding, division guards).
                let checks = ::wgpu::ShaderRuntimeChecks {
                    bounds_checks: false,
                    ..::wgpu::ShaderRuntimeChecks::checked()
                };
                // SAFETY: with bounds checks on, the generated code tests every index into a
                // buffer, shared or scratch array against its length before the access
                // (`codegen/inst.rs`, `checked`); the argument and error words are read at
                // constant indices inside their bindings, and the call stack's index is bounded
                // by the kernel's validated call depth. wgpu's own clamps would only repeat
                // those tests. A proven module (a dedicated form without its tests) is used
                // only for launches whose every workgroup the launcher showed passes the test
                // the checked module makes (`DedicatedChecks::in_bounds`), from the same
                // argument words.
                unsafe { gpu.device.create_shader_module_trusted(desc, checks) }
            } else {
                gpu.device.create_shader_module(desc)
            };
            let layout = gpu
                .device
                .create_bind_group_layout(&::wgpu::BindGroupLayoutDescriptor {
                    label: Some(&kernel.name),
                    entries: &entries,
                });
            let pl = gpu
                .device
                .create_pipeline_layout(&::wgpu::PipelineLayoutDescriptor {
                    label: Some(&kernel.name),
                    bind_group_layouts: &[Some(&layout)],
                    immediate_size: 0,
                });
            let pipeline = gpu
                .device
                .create_compute_pipeline(&::wgpu::ComputePipelineDescriptor {
                    label: Some(&kernel.name),
                    layout: Some(&pl),
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                });
            (pipeline, layout)
        },
        |msg, _| compile_err(format!("{msg}\n--- generated WGSL ---\n{}", generated.wgsl)),
    )?;
    Ok(Pipeline {
        pipeline,
        layout,
        generated,
    })
}

fn storage_entry(binding: u32, read_only: bool, dynamic: bool) -> ::wgpu::BindGroupLayoutEntry {
    ::wgpu::BindGroupLayoutEntry {
        binding,
        visibility: ::wgpu::ShaderStages::COMPUTE,
        ty: ::wgpu::BindingType::Buffer {
            ty: ::wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: dynamic,
            min_binding_size: None,
        },
        count: None,
    }
}

/// The blocks a lane may run before it reports a timeout (`None`: no limit), from the launch's
/// timeout.
fn budget_blocks(config: &LaunchConfig) -> Option<u64> {
    config
        .effective_timeout()
        .map(|t| (t.as_secs_f64() * crate::launch::WGPU_BLOCKS_PER_SECOND as f64).ceil() as u64)
}

/// Dispatch dimensions and the folding words of the argument header.
fn dispatch_dims(config: &LaunchConfig, max: u32, kernel: &Kernel) -> Result<([u32; 3], u32)> {
    if config.grid.iter().all(|&d| d <= max) {
        return Ok((config.grid, 0));
    }
    // As few idle workgroups as possible: y rows of x, with x * y just above the total.
    let total = config.grid_blocks();
    let max = max as u64;
    let rows = total.div_ceil(max);
    let (y, z) = if rows <= max {
        (rows, 1)
    } else {
        (max, rows.div_ceil(max))
    };
    let x = total.div_ceil(y * z);
    if z > max || x > max {
        return Err(BackendError::InvalidLaunch {
            kernel: kernel.name.clone(),
            reason: format!("{total} blocks exceed the device's dispatch limits ({max}^3)"),
        });
    }
    Ok(([x as u32, y as u32, z as u32], 1))
}

/// Where one pooled buffer parameter goes in its pool.
pub(crate) struct PoolPlacement<'a> {
    param: u32,
    pool: usize,
    src: &'a ::wgpu::Buffer,
    /// Word-aligned byte range of the argument in its allocation.
    start: u64,
    end: u64,
    /// Byte position in the pool.
    pos: u64,
    writable: bool,
}

/// Places every pooled parameter (16-byte aligned) and returns the pool sizes.
fn plan_pools<'a>(
    kernel: &Kernel,
    generated: &Generated,
    args: &'a [KernelArg],
) -> Result<(Vec<PoolPlacement<'a>>, Vec<u64>)> {
    let mut placed = Vec::new();
    let mut sizes = Vec::new();
    for (pi, pool) in generated.pools.iter().enumerate() {
        let mut pos = 0u64;
        for &p in &pool.params {
            let (param, arg) = (&kernel.params[p as usize], &args[p as usize]);
            let (KernelArg::Buffer(b), ParamKind::Buffer { access, .. }) = (arg, &param.kind)
            else {
                return Err(BackendError::InvalidArgument {
                    kernel: kernel.name.clone(),
                    reason: format!("'{}' must be a buffer", param.name),
                });
            };
            let mem = b
                .memory
                .as_any()
                .downcast_ref::<WgpuMemory>()
                .ok_or_else(|| BackendError::ForeignBuffer("not wgpu memory".into()))?;
            let (start, end) = super::memory::word_range(b.offset, b.len);
            placed.push(PoolPlacement {
                param: p,
                pool: pi,
                src: &mem.buffer,
                start,
                end,
                pos,
                writable: *access == hologram_isa::Access::ReadWrite,
            });
            pos += (end - start).div_ceil(16) * 16;
        }
        sizes.push(pos.max(16));
    }
    Ok((placed, sizes))
}

/// Everything one launch binds.
struct Bound<'a> {
    words: Vec<u32>,
    buffers: Vec<(u32, &'a ::wgpu::Buffer)>,
    /// Element length of each buffer parameter (for error messages).
    lens: Vec<u64>,
}

fn bind_args<'a>(
    kernel: &Kernel,
    generated: &Generated,
    config: &LaunchConfig,
    args: &'a [KernelArg],
    owner: usize,
    fold: (u32, u64),
    pooled: &[PoolPlacement<'a>],
) -> Result<Bound<'a>> {
    let bad = |reason: String| BackendError::InvalidArgument {
        kernel: kernel.name.clone(),
        reason,
    };
    let mut words = vec![0u32; generated.args_words.max(codegen::ARGS_HEADER_WORDS)];
    words[..3].copy_from_slice(&config.grid);
    words[3] = fold.0;
    words[4] = fold.1 as u32;
    words[6..8].copy_from_slice(&codegen::timeout_budget(budget_blocks(config)));
    let mut buffers = Vec::new();
    let mut lens = vec![0u64; kernel.params.len()];
    for (i, (param, arg)) in kernel.params.iter().zip(args).enumerate() {
        let w = codegen::param_word(i as u32);
        match (&param.kind, arg) {
            (ParamKind::Buffer { elem, .. }, KernelArg::Buffer(b)) => {
                let mem = WgpuMemory::of(&b.memory, owner)?;
                let size = elem.size_bytes();
                let off = b.offset / size;
                let len = buffer_elems(kernel, args, i as u32) as usize;
                if off + len > u32::MAX as usize {
                    return Err(bad(format!(
                        "buffer '{}' reaches element {}; the wgpu backend addresses at most 2^32 elements",
                        param.name,
                        off + len
                    )));
                }
                words[w] = off as u32;
                words[w + 1] = len as u32;
                if let Some(pl) = pooled.iter().find(|pl| pl.param == i as u32) {
                    words[w] = ((pl.pos + (b.offset as u64 - pl.start)) / size as u64) as u32;
                }
                lens[i] = len as u64;
                if let Some((_, binding)) = generated
                    .buffer_bindings
                    .iter()
                    .find(|(p, _)| *p == i as u32)
                {
                    buffers.push((*binding, &mem.buffer));
                }
            }
            (ParamKind::Scalar(_), KernelArg::Scalar(v)) => {
                let bits = v.to_bits();
                words[w] = bits as u32;
                words[w + 1] = (bits >> 32) as u32;
            }
            _ => {
                return Err(bad(format!(
                    "'{}' has the wrong kind of argument",
                    param.name
                )))
            }
        }
    }
    Ok(Bound {
        words,
        buffers,
        lens,
    })
}

/// Queues one launch; its device-side error is reported at the next wait (see `work_queue`).
pub(crate) fn run(
    gpu: &Gpu,
    owner: usize,
    kernel: &Arc<Kernel>,
    pipeline: &Arc<Pipeline>,
    config: &LaunchConfig,
    args: &[KernelArg],
) -> Result<()> {
    let started = std::time::Instant::now();
    let max = gpu.limits.max_compute_workgroups_per_dimension;
    let lanes = config.grid_blocks() * config.block_lanes();
    let (dims, fold) = if pipeline.generated.vector_map {
        // The 4-lane form of a map runs in its own shape (see `codegen/map.rs`).
        let dims =
            codegen::map::dispatch(lanes, max).ok_or_else(|| BackendError::InvalidLaunch {
                kernel: kernel.name.clone(),
                reason: format!("{lanes} lanes do not fit a 4-lane map launch"),
            })?;
        (dims, 0)
    } else {
        dispatch_dims(config, max, kernel)?
    };
    let (placed, pool_sizes) = plan_pools(kernel, &pipeline.generated, args)?;
    let mut bound = bind_args(
        kernel,
        &pipeline.generated,
        config,
        args,
        owner,
        (fold, config.grid_blocks()),
        &placed,
    )?;
    if pipeline.generated.vector_map {
        // At most `MAX_LANES` (2^31): the form is chosen only for launches that fit.
        bound.words[codegen::map::total_word(kernel)] = lanes as u32;
    }
    let queued = QueuedLaunch {
        kernel: kernel.clone(),
        pipeline: pipeline.clone(),
        lens: bound.lens.clone(),
        timeout: config.effective_timeout(),
        thread: std::thread::current().id(),
        may_fault: may_fault(&pipeline.generated, config, args, lanes, &bound.lens),
    };
    let (group, pools) = gpu.scoped(
        || bind_group(gpu, kernel, pipeline, &bound, &pool_sizes),
        |msg, oom| {
            if oom {
                BackendError::OutOfMemory {
                    bytes: 0,
                    device: gpu.info.name.clone(),
                }
            } else {
                BackendError::Device(format!("launch of '{}' failed: {msg}", kernel.name))
            }
        },
    )?;
    gpu.work
        .launch(gpu, queued, &bound.words, |batch, offsets| {
            record(batch, pipeline, &group, offsets, &placed, &pools, dims)
        })?;
    super::profile::LAUNCH.add(started);
    Ok(())
}

/// False when the launch provably cannot report an error: a 4-lane map whose lanes all lie
/// inside every buffer it accesses (or that runs without checks), with the budget for its
/// blocks and no loop-cut canary; or a dedicated reduction or row kernel whose every
/// workgroup passes its in-bounds test and whose loops stay under any driver's limiter
/// (`DedicatedChecks`). Its error slot then needs no read-back at the next wait.
fn may_fault(
    generated: &Generated,
    config: &LaunchConfig,
    args: &[KernelArg],
    lanes: u64,
    lens: &[u64],
) -> bool {
    if let Some(checks) = &generated.dedicated_checks {
        let len = |p: u32| lens.get(p as usize).copied().unwrap_or(0);
        return !with_proof_view(config, args, &len, |l| checks.cannot_fault(l));
    }
    let Some(checks) = &generated.map_checks else {
        return true;
    };
    if generated.loop_canary {
        return true;
    }
    let budget = budget_blocks(config);
    if !config.bounds_checks() {
        // No access is tested, so none reports; only the budget could.
        return budget.is_some_and(|b| b < checks.max_blocks);
    }
    let bound_value = checks.bound.and_then(|p| match args.get(p as usize) {
        // The device reads the parameter's low word (`hg_args`), as a u32.
        Some(KernelArg::Scalar(v)) => Some(v.to_bits() as u32 as u64),
        _ => None,
    });
    let len_of = |p: u32| lens.get(p as usize).copied().unwrap_or(0);
    !checks.cannot_fault(lanes, bound_value, len_of, budget)
}

/// Elements of buffer argument `p` (the length word the device reads); 0 for anything else.
pub(crate) fn buffer_elems(kernel: &Kernel, args: &[KernelArg], p: u32) -> u64 {
    match (kernel.params.get(p as usize), args.get(p as usize)) {
        (Some(param), Some(KernelArg::Buffer(b))) if param.is_buffer() => {
            (b.len / param.ty().size_bytes()) as u64
        }
        _ => 0,
    }
}

/// `f` of the launch as the dedicated kernels' proofs see it: the grid, the low word of each
/// scalar argument (what the device reads for a `u32`) and `len`, each buffer's elements.
pub(crate) fn with_proof_view<R>(
    config: &LaunchConfig,
    args: &[KernelArg],
    len: &dyn Fn(u32) -> u64,
    f: impl FnOnce(&codegen::dedicated_checks::Launch<'_>) -> R,
) -> R {
    let scalar = |p: u32| match args.get(p as usize) {
        Some(KernelArg::Scalar(v)) => Some(v.to_bits() as u32),
        _ => None,
    };
    f(&codegen::dedicated_checks::Launch {
        grid: config.grid,
        block_lanes: config.block_lanes(),
        scalar: &scalar,
        len,
    })
}

/// The launch's bind group (cached by the buffers it binds, see `bind_groups.rs`) and its
/// parameter pools (new for each launch that has them; such launches are not cached).
fn bind_group(
    gpu: &Gpu,
    kernel: &Kernel,
    pipeline: &Arc<Pipeline>,
    bound: &Bound<'_>,
    pool_sizes: &[u64],
) -> (::wgpu::BindGroup, Vec<::wgpu::Buffer>) {
    let pool_bufs: Vec<::wgpu::Buffer> = pool_sizes
        .iter()
        .map(|&size| {
            gpu.device.create_buffer(&::wgpu::BufferDescriptor {
                label: Some("hologram parameter pool"),
                size,
                usage: ::wgpu::BufferUsages::STORAGE
                    | ::wgpu::BufferUsages::COPY_SRC
                    | ::wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })
        .collect();
    let create = || {
        let mut entries = vec![
            ::wgpu::BindGroupEntry {
                binding: codegen::ERR_BINDING,
                resource: ::wgpu::BindingResource::Buffer(gpu.work.error_binding()),
            },
            ::wgpu::BindGroupEntry {
                binding: codegen::ARGS_BINDING,
                resource: ::wgpu::BindingResource::Buffer(gpu.work.args_binding(bound.words.len())),
            },
        ];
        for (binding, buf) in &bound.buffers {
            entries.push(::wgpu::BindGroupEntry {
                binding: *binding,
                resource: buf.as_entire_binding(),
            });
        }
        for (pool, buf) in pipeline.generated.pools.iter().zip(&pool_bufs) {
            entries.push(::wgpu::BindGroupEntry {
                binding: pool.binding,
                resource: buf.as_entire_binding(),
            });
        }
        gpu.device.create_bind_group(&::wgpu::BindGroupDescriptor {
            label: Some(&kernel.name),
            layout: &pipeline.layout,
            entries: &entries,
        })
    };
    if !pool_bufs.is_empty() {
        return (create(), pool_bufs);
    }
    let buffers = bound.buffers.iter().map(|(_, b)| (*b).clone()).collect();
    let group = gpu
        .groups
        .get_or_create(Arc::as_ptr(pipeline) as usize, buffers, create);
    (group, pool_bufs)
}

/// Records one launch (copies into parameter pools, the dispatch, copies back) into the batch:
/// the dispatch into its open compute pass, the copies (which end it) into its encoder.
#[allow(clippy::too_many_arguments)]
fn record(
    batch: &mut super::work_queue::Batch<'_>,
    pipeline: &Pipeline,
    group: &::wgpu::BindGroup,
    offsets: &[u32; 2],
    placed: &[PoolPlacement<'_>],
    pool_bufs: &[::wgpu::Buffer],
    dims: [u32; 3],
) {
    for pl in placed {
        if pl.end > pl.start {
            batch.encoder().copy_buffer_to_buffer(
                pl.src,
                pl.start,
                &pool_bufs[pl.pool],
                pl.pos,
                pl.end - pl.start,
            );
        }
    }
    let pass = batch.pass();
    pass.set_pipeline(&pipeline.pipeline);
    pass.set_bind_group(0, group, offsets);
    pass.dispatch_workgroups(dims[0], dims[1], dims[2]);
    for pl in placed.iter().filter(|pl| pl.writable && pl.end > pl.start) {
        batch.encoder().copy_buffer_to_buffer(
            &pool_bufs[pl.pool],
            pl.pos,
            pl.src,
            pl.start,
            pl.end - pl.start,
        );
    }
}

/// A queued launch's result from its error words.
pub(crate) fn launch_result(gpu: &Gpu, launch: &QueuedLaunch, err: &[u32]) -> Result<()> {
    let kernel = &launch.kernel;
    decode_error(kernel, &launch.pipeline.generated, &launch.lens, err).map_err(|e| match e {
        // The device only knows it spent the budget; the error names the timeout.
        BackendError::LaunchTimeout { stuck, .. } => {
            crate::launch::timeout_error(kernel, launch.timeout.unwrap_or_default(), stuck)
        }
        BackendError::Unsupported {
            kernel, feature, ..
        } => BackendError::Unsupported {
            kernel,
            feature,
            device: gpu.info.name.clone(),
        },
        e => e,
    })
}

/// What a driver that cuts loops short cannot run.
pub(crate) const LOOP_CUT: &str =
    "more than 65535 loop iterations in one lane: this Vulkan driver \
     (Mesa's lavapipe/llvmpipe) stops every shader's loops after 65535 iterations in all, which \
     would silently give wrong results; run the kernel on the CPU backend or a hardware GPU, or \
     split the lane's work over more lanes or launches";

/// Turns the error words into the launch's result.
fn decode_error(kernel: &Kernel, generated: &Generated, lens: &[u64], err: &[u32]) -> Result<()> {
    if err.first().copied().unwrap_or(0) == 0 {
        return Ok(());
    }
    let word = |i: usize| err.get(i).copied().unwrap_or(0);
    match word(1) {
        codegen::ERR_OUT_OF_BOUNDS => {
            let site = generated
                .sites
                .get(word(2) as usize)
                .copied()
                .ok_or_else(|| BackendError::Device("corrupt out-of-bounds report".into()))?;
            let (name, _, fixed) = kernel.array_info(site.array);
            let len = match kernel.array(site.array) {
                ArrayRef::Param(p) => lens.get(p as usize).copied().unwrap_or(0),
                _ => fixed.unwrap_or(0) as u64,
            };
            let (lo, hi) = (word(3) as u64, word(4) as u64);
            let index = match site.index_ty {
                Some(Type::I8 | Type::I16 | Type::I32) => lo as u32 as i32 as i128,
                Some(Type::U64) => ((hi << 32) | lo) as i128,
                Some(Type::I64) | None => ((hi << 32) | lo) as i64 as i128,
                Some(_) => lo as i128,
            };
            Err(BackendError::OutOfBounds {
                kernel: kernel.name.clone(),
                array: name.to_string(),
                index,
                len,
            })
        }
        codegen::ERR_BARRIER_DIVERGENCE => Err(BackendError::BarrierDivergence {
            kernel: kernel.name.clone(),
            block: word(2) as u64,
            pcs: vec![word(3), word(4)],
        }),
        codegen::ERR_TIMEOUT => Err(BackendError::LaunchTimeout {
            kernel: kernel.name.clone(),
            seconds: 0.0,
            stuck: false,
        }),
        codegen::ERR_LOOP_CUT => Err(BackendError::Unsupported {
            kernel: kernel.name.clone(),
            feature: LOOP_CUT.into(),
            device: String::new(),
        }),
        other => Err(BackendError::Device(format!(
            "unknown device error kind {other}"
        ))),
    }
}

/// The codegen options of a launch on this device.
pub(crate) fn options(gpu: &Gpu, config: &LaunchConfig) -> CodegenOptions {
    CodegenOptions {
        block: config.block,
        bounds_checks: config.bounds_checks(),
        int64: gpu.features.contains(::wgpu::Features::SHADER_INT64),
        float64: gpu.features.contains(::wgpu::Features::SHADER_F64),
        int64_atomics: gpu
            .features
            .contains(::wgpu::Features::SHADER_INT64_ATOMIC_ALL_OPS),
        max_storage_buffers: gpu.limits.max_storage_buffers_per_shader_stage,
        vector_map: false,
        subgroups: gpu.features.contains(::wgpu::Features::SUBGROUP),
        dedicated: None,
        proven: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_grids_fold_with_few_idle_workgroups() {
        let k =
            hologram_isa::assemble(".kernel k\n.param .buf.u32 y .rw\n    st.u32 y[%gid], 1;\n")
                .expect("assemble");
        let fit = LaunchConfig::linear(65535, 256);
        assert_eq!(
            dispatch_dims(&fit, 65535, &k).expect("fits"),
            ([65535, 1, 1], 0)
        );
        for total in [65536u32, 100_000, 16_777_216, u32::MAX / 2] {
            let cfg = LaunchConfig::linear(total, 1);
            let (d, fold) = dispatch_dims(&cfg, 65535, &k).expect("folds");
            let n = d.iter().map(|&x| x as u64).product::<u64>();
            assert_eq!(fold, 1);
            assert!(d.iter().all(|&x| x <= 65535), "{d:?}");
            assert!(
                n >= total as u64 && n - (total as u64) < (d[1] as u64) * (d[2] as u64),
                "{total}: {d:?}"
            );
        }
    }
}
