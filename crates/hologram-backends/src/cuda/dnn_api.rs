//! The cuDNN entry points the convolution path calls, loaded by hand.
//!
//! cudarc opens `libcudnn.so` before `libcudnn.so.9`; in a process where PyTorch already loaded
//! its own cuDNN (by the SONAME `libcudnn.so.9`), that can load a second, different cuDNN whose
//! sub-libraries then refuse to work (`CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH`). Opening the
//! SONAME first reuses the library already in the process. cudarc still provides the types.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use cudarc::cudnn::sys::{
    cudaStream_t, cudnnConvolutionBwdDataAlgoPerf_t as DataPerf,
    cudnnConvolutionBwdDataAlgo_t as DataAlgo, cudnnConvolutionBwdFilterAlgoPerf_t as FilterPerf,
    cudnnConvolutionBwdFilterAlgo_t as FilterAlgo, cudnnConvolutionDescriptor_t,
    cudnnConvolutionFwdAlgoPerf_t as FwdPerf, cudnnConvolutionFwdAlgo_t as FwdAlgo,
    cudnnConvolutionMode_t, cudnnDataType_t, cudnnFilterDescriptor_t, cudnnHandle_t,
    cudnnMathType_t, cudnnStatus_t, cudnnTensorDescriptor_t, cudnnTensorFormat_t,
};
use libloading::Library;

type Tensor = cudnnTensorDescriptor_t;
type Filter = cudnnFilterDescriptor_t;
type Conv = cudnnConvolutionDescriptor_t;
type Handle = cudnnHandle_t;

/// Library names tried in order: the SONAME PyTorch loads, then the development link.
const NAMES: &[&str] = &["libcudnn.so.9", "libcudnn.so"];

macro_rules! api {
    ($($name:ident($($arg:ty),*);)*) => {
        /// The loaded library and its entry points (every one returns a `cudnnStatus_t`).
        #[allow(non_snake_case)]
        pub(crate) struct Api {
            _lib: Library,
            $(pub $name: unsafe extern "C" fn($($arg),*) -> cudnnStatus_t,)*
        }

        impl Api {
            /// Resolves every entry point of `lib`, or names the first one missing.
            #[allow(non_snake_case)] // the locals are named after the C functions
            unsafe fn resolve(lib: Library) -> Result<Api, String> {
                $(
                    // SAFETY: the symbol's C signature is the one declared above (cudnn.h).
                    let $name = *unsafe {
                        lib.get::<unsafe extern "C" fn($($arg),*) -> cudnnStatus_t>(
                            concat!(stringify!($name), "\0").as_bytes(),
                        )
                    }
                    .map_err(|_| format!("cuDNN has no {}", stringify!($name)))?;
                )*
                Ok(Api { _lib: lib, $($name,)* })
            }
        }
    };
}

api! {
    cudnnCreate(*mut Handle);
    cudnnDestroy(Handle);
    cudnnSetStream(Handle, cudaStream_t);
    cudnnCreateTensorDescriptor(*mut Tensor);
    cudnnSetTensor4dDescriptor(Tensor, cudnnTensorFormat_t, cudnnDataType_t, c_int, c_int, c_int, c_int);
    cudnnDestroyTensorDescriptor(Tensor);
    cudnnCreateFilterDescriptor(*mut Filter);
    cudnnSetFilter4dDescriptor(Filter, cudnnDataType_t, cudnnTensorFormat_t, c_int, c_int, c_int, c_int);
    cudnnDestroyFilterDescriptor(Filter);
    cudnnCreateConvolutionDescriptor(*mut Conv);
    cudnnSetConvolution2dDescriptor(Conv, c_int, c_int, c_int, c_int, c_int, c_int, cudnnConvolutionMode_t, cudnnDataType_t);
    cudnnSetConvolutionGroupCount(Conv, c_int);
    cudnnSetConvolutionMathType(Conv, cudnnMathType_t);
    cudnnDestroyConvolutionDescriptor(Conv);
    cudnnGetConvolutionForwardAlgorithm_v7(Handle, Tensor, Filter, Conv, Tensor, c_int, *mut c_int, *mut FwdPerf);
    cudnnGetConvolutionForwardWorkspaceSize(Handle, Tensor, Filter, Conv, Tensor, FwdAlgo, *mut usize);
    cudnnConvolutionForward(Handle, *const c_void, Tensor, *const c_void, Filter, *const c_void, Conv, FwdAlgo, *mut c_void, usize, *const c_void, Tensor, *mut c_void);
    cudnnGetConvolutionBackwardDataAlgorithm_v7(Handle, Filter, Tensor, Conv, Tensor, c_int, *mut c_int, *mut DataPerf);
    cudnnGetConvolutionBackwardDataWorkspaceSize(Handle, Filter, Tensor, Conv, Tensor, DataAlgo, *mut usize);
    cudnnConvolutionBackwardData(Handle, *const c_void, Filter, *const c_void, Tensor, *const c_void, Conv, DataAlgo, *mut c_void, usize, *const c_void, Tensor, *mut c_void);
    cudnnGetConvolutionBackwardFilterAlgorithm_v7(Handle, Tensor, Tensor, Conv, Filter, c_int, *mut c_int, *mut FilterPerf);
    cudnnGetConvolutionBackwardFilterWorkspaceSize(Handle, Tensor, Tensor, Conv, Filter, FilterAlgo, *mut usize);
    cudnnConvolutionBackwardFilter(Handle, *const c_void, Tensor, *const c_void, Tensor, *const c_void, Conv, FilterAlgo, *mut c_void, usize, *const c_void, Filter, *mut c_void);
}

// SAFETY: the entry points are plain C functions; the library stays loaded for the process.
unsafe impl Send for Api {}
// SAFETY: as for `Send`: the table of function pointers is never mutated.
unsafe impl Sync for Api {}

/// The cuDNN entry points, or why they are unavailable (probed once; `HOLOGRAM_CUDNN=0` turns
/// cuDNN off).
pub(crate) fn api() -> Result<&'static Api, &'static str> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(|| {
        if std::env::var("HOLOGRAM_CUDNN").is_ok_and(|v| v == "0") {
            return Err("turned off by HOLOGRAM_CUDNN=0".to_string());
        }
        for name in NAMES {
            // SAFETY: loading cuDNN runs its initializers, which have no preconditions.
            if let Ok(lib) = unsafe { Library::new(*name) } {
                // SAFETY: the signatures are cudnn.h's.
                let api = unsafe { Api::resolve(lib) }?;
                // A descriptor is the first call that needs cuDNN's sub-libraries: a library that
                // cannot load them is reported here, and convolutions take the im2col path.
                let mut t: cudnnTensorDescriptor_t = std::ptr::null_mut();
                // SAFETY: creates and destroys one descriptor.
                let status = unsafe { (api.cudnnCreateTensorDescriptor)(&mut t) };
                if status != cudnnStatus_t::CUDNN_STATUS_SUCCESS {
                    return Err(format!("{name} does not work in this process ({status:?})"));
                }
                // SAFETY: created just above.
                unsafe { (api.cudnnDestroyTensorDescriptor)(t) };
                return Ok(api);
            }
        }
        Err("cuDNN library not found (libcudnn.so.9: `pip install nvidia-cudnn-cu13` and add its lib folder to LD_LIBRARY_PATH)".to_string())
    })
    .as_ref()
    .map_err(String::as_str)
}

/// A failed status as an error naming the call.
pub(crate) fn check(what: &str, status: cudnnStatus_t) -> crate::error::Result<()> {
    if status == cudnnStatus_t::CUDNN_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(crate::error::BackendError::Device(format!(
            "cuDNN {what} failed: {status:?}"
        )))
    }
}
