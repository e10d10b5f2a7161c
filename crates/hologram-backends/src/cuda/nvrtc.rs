//! Compiling generated CUDA C with NVRTC. Needs only libnvrtc (not the driver), so CI checks
//! every generated program with NVRTC from PyPI on machines without a GPU.

use std::ffi::CString;
use std::sync::OnceLock;

use cudarc::nvrtc::{result as rtc, sys};

use super::device::libraries;
use crate::error::{BackendError, Result};

/// What NVRTC should produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// A CUBIN for a real architecture (`sm_90`): loads without JIT on any driver that runs it.
    Cubin,
    /// PTX for a virtual architecture (`compute_90`).
    Ptx,
}

/// Options every compile uses: IEEE arithmetic (no contraction into fma, no flush to zero,
/// correctly rounded division and square root), and no warnings about unused prelude helpers.
pub const OPTIONS: &[&str] = &[
    "-fmad=false",
    "--ftz=false",
    "--prec-div=true",
    "--prec-sqrt=true",
    "-std=c++17",
    "--diag-suppress=177,549,550",
];

/// NVRTC's version, or why NVRTC cannot be used.
pub fn version() -> Result<(i32, i32)> {
    static VERSION: OnceLock<std::result::Result<(i32, i32), String>> = OnceLock::new();
    VERSION
        .get_or_init(|| {
            libraries().nvrtc.clone()?;
            let (mut major, mut minor) = (0, 0);
            // SAFETY: the library is present with this symbol (checked above); writes two ints.
            unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
                .result()
                .map_err(|e| format!("nvrtcVersion failed: {e}"))?;
            Ok((major, minor))
        })
        .clone()
        .map_err(|reason| BackendError::Unavailable {
            backend: "cuda".into(),
            reason,
        })
}

/// Compiles `source` for `arch` (`sm_90` for [`Output::Cubin`], `compute_90` for
/// [`Output::Ptx`]). A compile error is a [`BackendError::Compile`] with NVRTC's log.
pub fn compile(kernel: &str, source: &str, arch: &str, output: Output) -> Result<Vec<u8>> {
    version()?;
    let fail = |log: String| BackendError::Compile {
        kernel: kernel.to_string(),
        log,
    };
    let src = CString::new(source)
        .map_err(|_| fail("the generated source contains a NUL byte".into()))?;
    let name = CString::new(format!("{kernel}.cu")).map_err(|_| fail("bad kernel name".into()))?;
    let prog = rtc::create_program(&src, Some(&name))
        .map_err(|e| fail(format!("nvrtcCreateProgram: {e}")))?;
    let mut opts: Vec<String> = OPTIONS.iter().map(|s| s.to_string()).collect();
    opts.push(format!("--gpu-architecture={arch}"));
    // SAFETY: `prog` is a live program; the options contain no NUL bytes.
    let compiled = unsafe { rtc::compile_program(prog, &opts) };
    // SAFETY: as above.
    let log = unsafe { rtc::get_program_log(prog) }
        .map(|l| {
            let bytes: Vec<u8> = l.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .unwrap_or_default();
    let result = match compiled {
        Err(e) => Err(fail(format!("{e}\n{log}"))),
        // SAFETY: the program compiled; the getters fill buffers of the sizes they report.
        Ok(()) => unsafe { binary(prog, output) }
            .map_err(|e| fail(format!("reading NVRTC's output: {e}"))),
    };
    // SAFETY: destroyed once, after its last use.
    let _ = unsafe { rtc::destroy_program(prog) };
    result
}

/// Reads the compiled binary (CUBIN bytes, or PTX text with its trailing NUL) of a program.
///
/// # Safety
/// `prog` is a live NVRTC program that compiled successfully.
unsafe fn binary(
    prog: sys::nvrtcProgram,
    output: Output,
) -> std::result::Result<Vec<u8>, rtc::NvrtcError> {
    match output {
        // SAFETY: `prog` is live and compiled (the contract).
        Output::Ptx => Ok(unsafe { rtc::get_ptx(prog) }?
            .into_iter()
            .map(|c| c as u8)
            .collect()),
        Output::Cubin => {
            let mut size = 0usize;
            // SAFETY: as above; writes one usize.
            unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }.result()?;
            let mut buf = vec![0u8; size];
            // SAFETY: as above; writes `size` bytes into `buf`, which holds that many.
            unsafe { sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut std::ffi::c_char) }
                .result()?;
            Ok(buf)
        }
    }
}

/// Compiles many `(name, source)` pairs on a few threads (NVRTC is thread-safe) and returns the
/// failures as `"name: error"` texts, for checks that compile every generated program.
pub fn compile_all(sources: &[(String, String)], arch: &str, output: Output) -> Vec<String> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut failures = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((name, code)) = sources.get(i) else {
                            break;
                        };
                        if let Err(e) = compile(name, code, arch, output) {
                            failures.push(format!("{name}: {e}"));
                        }
                    }
                    failures
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| {
                w.join()
                    .unwrap_or_else(|_| vec!["an NVRTC worker thread panicked".into()])
            })
            .collect()
    })
}
