//! What a plan replays: the device work a recording queued, step by step, and the recorder that
//! collects it while a plan is recorded.

use std::sync::Arc;
use std::thread::ThreadId;

use hologram_backends::Memory;
use hologram_backends::{
    Backend, BufferArg, CompiledKernel, ConvDesc, ConvPass, GemmDesc, KernelArg, LaunchConfig,
};

/// One unit of recorded device work.
#[derive(Clone)]
pub(crate) enum Step {
    /// A kernel launch with its arguments (buffers bound by memory, so a replay writes the same
    /// memory the recording wrote).
    Launch {
        kernel: CompiledKernel,
        config: LaunchConfig,
        args: Vec<KernelArg>,
    },
    /// A GEMM.
    Gemm {
        desc: GemmDesc,
        a: BufferArg,
        b: BufferArg,
        c: BufferArg,
    },
    /// A convolution pass a library runs (cuDNN).
    Conv {
        desc: ConvDesc,
        pass: ConvPass,
        a: BufferArg,
        b: BufferArg,
        out: BufferArg,
    },
    /// Host data written into device memory during the recording (a constant). A finished plan
    /// holds it in device memory of its own and replays it as a [`Step::Copy`].
    Upload {
        memory: Memory,
        offset: usize,
        data: Arc<[u8]>,
    },
    /// A copy between device buffers.
    Copy {
        src: Memory,
        src_offset: usize,
        dst: Memory,
        dst_offset: usize,
        len: usize,
    },
}

impl Step {
    /// Queues the step on `backend`.
    pub fn run(&self, backend: &dyn Backend) -> hologram_backends::Result<()> {
        match self {
            Step::Launch {
                kernel,
                config,
                args,
            } => backend.launch(kernel, config, args)?,
            Step::Gemm { desc, a, b, c } => backend.gemm(desc, a, b, c)?,
            Step::Conv {
                desc,
                pass,
                a,
                b,
                out,
            } => backend.conv(desc, *pass, a, b, out)?,
            Step::Upload {
                memory,
                offset,
                data,
            } => backend.copy_in(memory, *offset, data)?,
            Step::Copy {
                src,
                src_offset,
                dst,
                dst_offset,
                len,
            } => backend.copy(src, *src_offset, dst, *dst_offset, *len)?,
        }
        Ok(())
    }
}

impl Step {
    /// A short description for profiles: the kernel's name and launch size, the GEMM's shape.
    pub fn describe(&self) -> String {
        match self {
            Step::Launch { kernel, config, .. } => format!(
                "{} grid {:?} block {:?}",
                kernel.kernel().name,
                config.grid,
                config.block
            ),
            Step::Gemm { desc, .. } => format!(
                "gemm {} {}x{}x{} batch {} trans {}{}",
                desc.ty, desc.m, desc.n, desc.k, desc.batch, desc.trans_a as u8, desc.trans_b as u8
            ),
            Step::Conv { desc, pass, .. } => format!(
                "conv {pass:?} {} x{:?} w{:?} stride {:?}",
                desc.ty, desc.input, desc.weight, desc.stride
            ),
            Step::Upload { data, .. } => format!("upload {} B", data.len()),
            Step::Copy { len, .. } => format!("copy {len} B"),
        }
    }
}

/// The steps recorded so far, and the thread recording them (work other threads queue on the
/// executor meanwhile is not part of the plan).
pub(crate) struct Recorder {
    pub thread: ThreadId,
    pub steps: Vec<Step>,
}
