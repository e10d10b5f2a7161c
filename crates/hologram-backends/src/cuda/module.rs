//! A loaded CUDA module holding one generated kernel.

use std::ffi::CString;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUfunction_attribute as FnAttr};
use cudarc::driver::{result as drv, CudaContext};

use super::codegen::entry_name;
use super::device::describe;
use crate::error::{BackendError, Result};

/// A module and its entry function.
pub(crate) struct Module {
    module: sys::CUmodule,
    /// The generated `__global__` function.
    pub function: sys::CUfunction,
    /// The most lanes per block this function can launch with (register use limits it).
    pub max_threads: u32,
    ctx: Arc<CudaContext>,
}

// SAFETY: module and function handles are plain driver handles, usable from any thread once
// the context is current (the backend binds it before each use).
unsafe impl Send for Module {}
// SAFETY: as for `Send`.
unsafe impl Sync for Module {}

impl Module {
    /// Loads a CUBIN (the context must be current).
    pub(crate) fn load(ctx: &Arc<CudaContext>, kernel: &str, image: &[u8]) -> Result<Module> {
        let fail = |what: &str| {
            let kernel = kernel.to_string();
            let what = what.to_string();
            move |e| BackendError::Compile {
                kernel,
                log: describe(&what, e),
            }
        };
        // SAFETY: `image` is a complete CUBIN that outlives the call (the driver copies it).
        let module = unsafe { drv::module::load_data(image.as_ptr() as *const _) }
            .map_err(fail("loading the compiled kernel (cuModuleLoadData)"))?;
        let name = CString::new(entry_name(kernel))
            .map_err(|_| BackendError::Device("bad entry name".into()))?;
        // SAFETY: `module` was just loaded.
        let function = match unsafe { drv::module::get_function(module, name) } {
            Ok(f) => f,
            Err(e) => {
                // SAFETY: unloaded once, here, on the error path.
                let _ = unsafe { drv::module::unload(module) };
                return Err(fail("finding the kernel's entry point")(e));
            }
        };
        // SAFETY: `function` belongs to the loaded module.
        let max_threads = unsafe {
            drv::function::get_function_attribute(
                function,
                FnAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            )
        }
        .map(|v| v.max(1) as u32)
        .unwrap_or(1024);
        Ok(Module {
            module,
            function,
            max_threads,
            ctx: ctx.clone(),
        })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the module is unloaded once, when its last user is gone.
            let _ = unsafe { drv::module::unload(self.module) };
        }
    }
}
