//! The NCCL entry points the collectives call, loaded by hand.
//!
//! cudarc's loader looks for `libnccl.so` and `libnccl.so.<CUDA major>` (and panics when none
//! loads), but NCCL's SONAME is `libnccl.so.2`: that is the only name the NVIDIA wheels
//! (`nvidia-nccl-cu12/13`, which PyTorch depends on) ship, and the name a process that already
//! runs PyTorch has loaded. Opening the SONAME first reuses that library. cudarc still provides
//! the types (`ncclComm_t`, `ncclUniqueId`, the data type and operation enums).
//!
//! Every entry point returns a plain `c_int` here rather than cudarc's `ncclResult_t` enum: a
//! newer NCCL may return a code the enum does not list, which would be undefined behaviour.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use cudarc::nccl::sys::{cudaStream_t, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclUniqueId};
use libloading::Library;

/// Library names tried in order: the SONAME (NVIDIA's wheels, PyTorch), then the development
/// link of a system install.
const NAMES: &[&str] = &["libnccl.so.2", "libnccl.so"];

/// NCCL 2.10 added `ncclAvg` and bfloat16; older libraries are refused with a message.
const MIN_VERSION: c_int = 21000;

/// `ncclSuccess`.
pub(crate) const SUCCESS: c_int = 0;

type Comm = ncclComm_t;
type Stream = cudaStream_t;
type Ty = ncclDataType_t;
type Op = ncclRedOp_t;

macro_rules! api {
    ($($name:ident($($arg:ty),*);)*) => {
        /// The loaded library and its entry points (each returns an `ncclResult_t` as `c_int`).
        #[allow(non_snake_case)]
        pub(crate) struct Api {
            _lib: Library,
            $(pub $name: unsafe extern "C" fn($($arg),*) -> c_int,)*
            pub ncclGetErrorString: unsafe extern "C" fn(c_int) -> *const c_char,
            /// The library's version as `major * 10000 + minor * 100 + patch`.
            pub version: c_int,
        }

        impl Api {
            /// Resolves every entry point of `lib`, or names the first one missing.
            #[allow(non_snake_case)] // the locals are named after the C functions
            unsafe fn resolve(lib: Library) -> Result<Api, String> {
                $(
                    // SAFETY: the symbol's C signature is the one declared above (nccl.h), with
                    // the result read as the C `int` it is.
                    let $name = *unsafe {
                        lib.get::<unsafe extern "C" fn($($arg),*) -> c_int>(
                            concat!(stringify!($name), "\0").as_bytes(),
                        )
                    }
                    .map_err(|_| format!("NCCL has no {} (NCCL 2.10 or newer is needed)", stringify!($name)))?;
                )*
                // SAFETY: `const char* ncclGetErrorString(ncclResult_t)`; the enum is a C int.
                let ncclGetErrorString = *unsafe {
                    lib.get::<unsafe extern "C" fn(c_int) -> *const c_char>(b"ncclGetErrorString\0")
                }
                .map_err(|_| "NCCL has no ncclGetErrorString".to_string())?;
                Ok(Api { _lib: lib, $($name,)* ncclGetErrorString, version: 0 })
            }
        }
    };
}

api! {
    ncclGetVersion(*mut c_int);
    ncclGetUniqueId(*mut ncclUniqueId);
    ncclCommInitRank(*mut Comm, c_int, ncclUniqueId, c_int);
    ncclCommInitAll(*mut Comm, c_int, *const c_int);
    ncclCommAbort(Comm);
    ncclCommGetAsyncError(Comm, *mut c_int);
    ncclGroupStart();
    ncclGroupEnd();
    ncclAllReduce(*const c_void, *mut c_void, usize, Ty, Op, Comm, Stream);
    ncclBroadcast(*const c_void, *mut c_void, usize, Ty, c_int, Comm, Stream);
    ncclAllGather(*const c_void, *mut c_void, usize, Ty, Comm, Stream);
    ncclReduceScatter(*const c_void, *mut c_void, usize, Ty, Op, Comm, Stream);
}

// SAFETY: the entry points are plain C functions (NCCL is thread-safe across communicators); the
// library stays loaded for the process.
unsafe impl Send for Api {}
// SAFETY: as for `Send`: the table of function pointers is never mutated after loading.
unsafe impl Sync for Api {}

/// Why NCCL is unavailable when no library loads.
pub(crate) const NOT_FOUND: &str = "NCCL library not found (libnccl.so.2: `pip install nvidia-nccl-cu13` (PyTorch's CUDA wheels include it) and add its lib folder, site-packages/nvidia/nccl/lib, to LD_LIBRARY_PATH)";

/// The NCCL entry points, or why they are unavailable (probed once per process; `HOLOGRAM_NCCL=0`
/// turns NCCL off).
pub(crate) fn api() -> Result<&'static Api, &'static str> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(String::as_str)
}

fn load() -> Result<Api, String> {
    if std::env::var("HOLOGRAM_NCCL").is_ok_and(|v| v.trim() == "0") {
        return Err("NCCL is turned off by HOLOGRAM_NCCL=0".to_string());
    }
    for name in NAMES {
        // SAFETY: loading NCCL runs its initializers, which have no preconditions.
        let Ok(lib) = (unsafe { Library::new(*name) }) else {
            continue;
        };
        // SAFETY: the signatures are nccl.h's.
        let mut api = unsafe { Api::resolve(lib) }?;
        let mut version: c_int = 0;
        // SAFETY: writes one int.
        let status = unsafe { (api.ncclGetVersion)(&mut version) };
        if status != SUCCESS {
            return Err(format!("{name}: ncclGetVersion failed ({status})"));
        }
        if version < MIN_VERSION {
            return Err(format!(
                "{name} is NCCL {}; Hologram needs NCCL 2.10 or newer",
                version_text(version)
            ));
        }
        api.version = version;
        return Ok(api);
    }
    Err(NOT_FOUND.to_string())
}

/// `2.21.5` from NCCL's version code (`major * 10000 + minor * 100 + patch` since 2.9, `major *
/// 1000 + minor * 100 + patch` before).
pub(crate) fn version_text(code: c_int) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}

/// NCCL's description of a result code.
pub(crate) fn describe(api: &Api, status: c_int) -> String {
    // SAFETY: NCCL returns a pointer to a static string for every code (or null).
    let text = unsafe { (api.ncclGetErrorString)(status) };
    if text.is_null() {
        return format!("NCCL error {status}");
    }
    // SAFETY: a NUL-terminated static string (checked non-null above).
    let s = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    format!("{s} (NCCL error {status})")
}

#[cfg(test)]
mod tests {
    use super::version_text;

    #[test]
    fn version_codes_read_as_numbers() {
        assert_eq!(version_text(22105), "2.21.5");
        assert_eq!(version_text(22703), "2.27.3");
        assert_eq!(version_text(2804), "2.8.4");
    }
}
