//! `hologram run FILE --grid ... --block ... --arg name=... --out name=file.npy`

use std::path::PathBuf;
use std::time::Instant;

use hologram_backends::{BufferArg, KernelArg, LaunchConfig, Memory};
use hologram_isa::{ParamKind, Type};

use hologram_core::named_args::{bind_by_name, parse_scalar};

use crate::error::CliError;
use crate::npy;

/// Arguments of `hologram run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The kernel.
    file: PathBuf,
    /// Blocks: X or X,Y or X,Y,Z.
    #[arg(long, default_value = "1")]
    grid: String,
    /// Lanes per block: X or X,Y or X,Y,Z.
    #[arg(long, default_value = "256")]
    block: String,
    /// Bind a parameter: `name=@file.npy` (buffer from a file), `name=zeros:N` (N zeros), or
    /// `name=VALUE` (scalar).
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    args: Vec<String>,
    /// Write a buffer parameter after the run: `name=file.npy`.
    #[arg(long = "out", value_name = "NAME=FILE")]
    outs: Vec<String>,
    /// Backend (auto, cpu, cuda, metal, vulkan, dx12).
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Launch this many times (buffers are restored before each run) and report the median.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Skip bounds checks on GPUs: only for kernels known to stay inside their buffers for
    /// these arguments (an out-of-bounds access is then undefined behaviour on CUDA).
    #[arg(long)]
    unchecked: bool,
}

fn dims(text: &str, what: &str) -> Result<[u32; 3], CliError> {
    let parts: Vec<&str> = text.split(',').collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(CliError::Usage(format!(
            "--{what} takes X, X,Y or X,Y,Z; got '{text}'"
        )));
    }
    let mut d = [1u32; 3];
    for (i, p) in parts.iter().enumerate() {
        d[i] = p
            .trim()
            .parse()
            .map_err(|_| CliError::Usage(format!("--{what}: '{p}' is not a number")))?;
    }
    Ok(d)
}

fn split_binding<'a>(text: &'a str, flag: &str) -> Result<(&'a str, &'a str), CliError> {
    text.split_once('=')
        .ok_or_else(|| CliError::Usage(format!("--{flag} takes NAME=VALUE; got '{text}'")))
}

/// The bytes a buffer parameter starts with: `@file.npy` or `zeros:N`.
fn buffer_bytes(name: &str, elem: Type, value: &str) -> Result<Vec<u8>, CliError> {
    if let Some(file) = value.strip_prefix('@') {
        let arr = npy::read(std::path::Path::new(file))?;
        if arr.ty != elem {
            return Err(CliError::Usage(format!(
                "{file} holds {} but parameter '{name}' is a buffer of {elem}",
                arr.ty
            )));
        }
        Ok(arr.data)
    } else if let Some(n) = value.strip_prefix("zeros:") {
        let n: usize = n
            .parse()
            .map_err(|_| CliError::Usage(format!("zeros:{n} needs a count")))?;
        Ok(vec![0u8; n * elem.size_bytes()])
    } else {
        Err(CliError::Usage(format!(
            "parameter '{name}' is a buffer: bind it with {name}=@file.npy or {name}=zeros:N"
        )))
    }
}

/// A binding error as the command line says it: `--arg NAME=...` for a missing parameter.
fn usage_text(message: String) -> String {
    match message.strip_prefix("missing an argument") {
        Some(rest) => {
            let name = rest.split('\'').nth(1).unwrap_or("NAME");
            format!("missing --arg {name}=... (an argument{rest})")
        }
        None => message,
    }
}

struct Bound {
    name: String,
    ty: Type,
    memory: Memory,
    initial: Vec<u8>,
}

pub fn run(a: &RunArgs) -> Result<(), CliError> {
    let kernel = super::assemble_file(&a.file)?;
    let exec = super::executor(&a.backend)?;
    let mut config = LaunchConfig::new(dims(&a.grid, "grid")?, dims(&a.block, "block")?);
    if a.unchecked {
        // SAFETY: `--unchecked` is the user's statement that the kernel stays inside its
        // buffers for these arguments; its help says that an out-of-bounds access is then
        // undefined behaviour. Only this process's memory is at stake.
        config = unsafe { config.without_bounds_checks() };
    }
    let mut given = Vec::new();
    for b in &a.args {
        let (name, value) = split_binding(b, "arg")?;
        given.push((name.to_string(), value));
    }
    let backend = exec.backend();
    let mut bound: Vec<Bound> = Vec::new();
    // File and usage problems inside the conversion are kept here (the binder's errors are the
    // core's); the first one is reported as it is.
    let mut usage: Option<CliError> = None;
    let bind = bind_by_name(&kernel, given, |p, value| match p.kind {
        ParamKind::Scalar(ty) => Ok(KernelArg::Scalar(parse_scalar(&p.name, ty, value)?)),
        ParamKind::Buffer { elem, .. } => {
            let bytes = match buffer_bytes(&p.name, elem, value) {
                Ok(bytes) => bytes,
                Err(e) => {
                    usage = Some(e);
                    return Err(hologram_core::Error::InvalidArgument(String::new()));
                }
            };
            let memory = backend.allocate(bytes.len())?;
            backend.copy_in(&memory, 0, &bytes)?;
            let arg = KernelArg::Buffer(BufferArg {
                memory: memory.clone(),
                offset: 0,
                len: bytes.len(),
            });
            bound.push(Bound {
                name: p.name.clone(),
                ty: elem,
                memory,
                initial: bytes,
            });
            Ok(arg)
        }
    });
    let args = match (bind, usage) {
        (_, Some(e)) => return Err(e),
        (Ok(args), None) => args,
        (Err(hologram_core::Error::InvalidArgument(m)), None) => {
            return Err(CliError::Usage(usage_text(m)))
        }
        (Err(e), None) => return Err(e.into()),
    };
    let mut outs = Vec::new();
    for o in &a.outs {
        let (name, file) = split_binding(o, "out")?;
        let b = bound.iter().find(|b| b.name == name).ok_or_else(|| {
            CliError::Usage(format!(
                "--out {name}: not a buffer parameter of the kernel"
            ))
        })?;
        outs.push((b, PathBuf::from(file)));
    }
    let t = Instant::now();
    let compiled = exec.compile_kernel(&kernel)?;
    let compile_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut times = Vec::new();
    let mut failure = None;
    for rep in 0..a.repeat.max(1) {
        if rep > 0 {
            for b in &bound {
                backend
                    .copy_in(&b.memory, 0, &b.initial)
                    .map_err(hologram_core::Error::from)?;
            }
            exec.synchronize()?;
        }
        let t = Instant::now();
        if let Err(e) = exec
            .launch(&compiled, &config, &args)
            .and_then(|()| exec.synchronize())
        {
            failure = Some(e);
            break;
        }
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    // After a failed launch the buffers are still written: what the launch left is what a user
    // needs to see to find out why it failed.
    let written = write_outs(backend.as_ref(), &outs);
    if let Some(error) = failure {
        let outs = match written {
            Ok(files) if files.is_empty() => "no --out files were asked for".to_string(),
            Ok(files) => format!(
                "{} hold the buffers as the failed launch left them (not a complete result)",
                files.join(", ")
            ),
            Err(e) => format!("the --out files could not be written: {e}"),
        };
        return Err(CliError::LaunchFailed {
            error: Box::new(error),
            outs,
        });
    }
    written?;
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    outln!(
        "{} on {} ({}): launch {median:.3} ms (median of {}, min {:.3} ms), compile {compile_ms:.3} ms",
        kernel.name,
        exec.backend_type(),
        exec.info().name,
        times.len(),
        sorted[0]
    )?;
    Ok(())
}

/// Reads each `--out` buffer back and writes it; returns the files written.
fn write_outs(
    backend: &dyn hologram_backends::Backend,
    outs: &[(&Bound, PathBuf)],
) -> Result<Vec<String>, CliError> {
    let mut files = Vec::new();
    for (b, file) in outs {
        let mut data = vec![0u8; b.initial.len()];
        backend
            .copy_out(&b.memory, 0, &mut data)
            .map_err(hologram_core::Error::from)?;
        npy::write(file, b.ty, &data)?;
        files.push(file.display().to_string());
    }
    Ok(files)
}
