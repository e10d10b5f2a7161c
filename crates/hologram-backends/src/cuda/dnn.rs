//! 2-D convolutions through cuDNN (the library PyTorch's CUDA convolutions use).
//!
//! Every (convolution, pass) gets its descriptors and algorithm once, from cuDNN's heuristics
//! (no benchmarking: nothing runs at planning time, so a plan being captured as a CUDA graph
//! sees the same calls); deterministic algorithms are preferred, like the `im2col`/`col2im`
//! path they replace. The workspace only grows, and a replaced one is kept until the backend
//! goes away, because a captured CUDA graph may still use it.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};

use cudarc::cudnn::sys::{
    cudnnConvolutionBwdDataAlgoPerf_t as DataPerf, cudnnConvolutionBwdDataAlgo_t as DataAlgo,
    cudnnConvolutionBwdFilterAlgoPerf_t as FilterPerf,
    cudnnConvolutionBwdFilterAlgo_t as FilterAlgo, cudnnConvolutionDescriptor_t,
    cudnnConvolutionFwdAlgoPerf_t as FwdPerf, cudnnConvolutionFwdAlgo_t as FwdAlgo,
    cudnnConvolutionMode_t, cudnnDataType_t, cudnnDeterminism_t, cudnnFilterDescriptor_t,
    cudnnHandle_t, cudnnMathType_t, cudnnStatus_t, cudnnTensorDescriptor_t, cudnnTensorFormat_t,
};

use super::dnn_api::{api, check, Api};
use hologram_isa::Type;

use super::device::Device;
use super::memory::{device_address, CudaMemory};
use crate::backend::BufferArg;
use crate::error::{BackendError, Result};
use crate::library::{ConvDesc, ConvPass, GemmPrecision};

/// The most workspace an algorithm may ask for; faster algorithms that need more are skipped.
const WORKSPACE_LIMIT: usize = 512 << 20;

/// Whether cuDNN can run this convolution: a type it has, sizes in its 32-bit ints.
pub(crate) fn supports(desc: &ConvDesc) -> bool {
    let fits = |v: usize| v <= i32::MAX as usize;
    let (x, w, y) = desc.sizes();
    matches!(desc.ty, Type::F32 | Type::F16 | Type::BF16 | Type::F64)
        && [x, w, y].into_iter().all(fits)
        && desc.groups >= 1
}

/// The algorithm chosen for one pass.
#[derive(Clone, Copy)]
enum Algo {
    Forward(FwdAlgo),
    Data(DataAlgo),
    Filter(FilterAlgo),
}

/// Descriptors and algorithm of one (convolution, pass).
struct ConvPlan {
    x: cudnnTensorDescriptor_t,
    w: cudnnFilterDescriptor_t,
    y: cudnnTensorDescriptor_t,
    conv: cudnnConvolutionDescriptor_t,
    algo: Algo,
    workspace: usize,
}

impl Drop for ConvPlan {
    fn drop(&mut self) {
        let Ok(a) = api() else { return };
        // SAFETY: each descriptor was created for this plan (or is null, which cuDNN rejects
        // harmlessly) and is destroyed once.
        unsafe {
            (a.cudnnDestroyTensorDescriptor)(self.x);
            (a.cudnnDestroyTensorDescriptor)(self.y);
            (a.cudnnDestroyFilterDescriptor)(self.w);
            (a.cudnnDestroyConvolutionDescriptor)(self.conv);
        }
    }
}

/// A cuDNN handle bound to the backend's stream, with its plans and workspace.
pub(crate) struct Dnn {
    api: &'static Api,
    handle: cudnnHandle_t,
    plans: HashMap<(ConvDesc, ConvPass), ConvPlan>,
    workspace: Option<CudaMemory>,
    // Workspaces a captured CUDA graph may still point into.
    retired: Vec<CudaMemory>,
}

// SAFETY: the handle and descriptors are used under the backend's mutex, context current.
unsafe impl Send for Dnn {}

fn data_type(t: Type) -> (cudnnDataType_t, cudnnDataType_t) {
    use cudnnDataType_t::*;
    match t {
        Type::F64 => (CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE),
        Type::F16 => (CUDNN_DATA_HALF, CUDNN_DATA_FLOAT),
        Type::BF16 => (CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT),
        _ => (CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT),
    }
}

fn math_type(desc: &ConvDesc) -> cudnnMathType_t {
    match (desc.ty, desc.precision) {
        // Exact f32: no TF32 rounding of the inputs.
        (Type::F32, GemmPrecision::Exact) => cudnnMathType_t::CUDNN_FMA_MATH,
        (Type::F64, _) => cudnnMathType_t::CUDNN_DEFAULT_MATH,
        _ => cudnnMathType_t::CUDNN_TENSOR_OP_MATH,
    }
}

/// The first usable algorithm of a heuristic list (sorted fastest first): deterministic and
/// within the workspace limit if any is, else any that works.
fn choose<P: Copy>(
    perfs: &[P],
    fields: impl Fn(&P) -> (cudnnStatus_t, usize, cudnnDeterminism_t),
) -> Option<P> {
    let ok = |p: &&P| {
        let (status, mem, _) = fields(p);
        status == cudnnStatus_t::CUDNN_STATUS_SUCCESS && mem <= WORKSPACE_LIMIT
    };
    perfs
        .iter()
        .filter(ok)
        .find(|p| fields(p).2 == cudnnDeterminism_t::CUDNN_DETERMINISTIC)
        .or_else(|| perfs.iter().find(ok))
        .copied()
}

fn int(v: usize) -> c_int {
    v as c_int
}

impl Dnn {
    /// Creates a handle on the device's stream (the context must be current).
    pub(crate) fn new(dev: &Device) -> Result<Dnn> {
        let a = api().map_err(|why| BackendError::Device(format!("cuDNN unavailable: {why}")))?;
        let mut handle: cudnnHandle_t = std::ptr::null_mut();
        // SAFETY: writes a fresh handle.
        check("cudnnCreate", unsafe { (a.cudnnCreate)(&mut handle) })?;
        // SAFETY: fresh handle; the stream lives as long as the device, which outlives `Dnn`.
        if let Err(e) = check("cudnnSetStream", unsafe {
            (a.cudnnSetStream)(handle, dev.stream as *mut _)
        }) {
            // SAFETY: destroyed once on this error path.
            unsafe { (a.cudnnDestroy)(handle) };
            return Err(e);
        }
        Ok(Dnn {
            api: a,
            handle,
            plans: HashMap::new(),
            workspace: None,
            retired: Vec::new(),
        })
    }

    fn plan(&mut self, desc: &ConvDesc, pass: ConvPass) -> Result<&ConvPlan> {
        if !self.plans.contains_key(&(*desc, pass)) {
            let plan = self.make_plan(desc, pass)?;
            self.plans.insert((*desc, pass), plan);
        }
        Ok(&self.plans[&(*desc, pass)])
    }

    fn make_plan(&self, desc: &ConvDesc, pass: ConvPass) -> Result<ConvPlan> {
        let a = self.api;
        let (data, compute) = data_type(desc.ty);
        let nchw = cudnnTensorFormat_t::CUDNN_TENSOR_NCHW;
        let [n, c, h, w] = desc.input.map(int);
        let [cout, cg, kh, kw] = desc.weight.map(int);
        let [ho, wo] = desc.output.map(int);
        // Descriptors are owned by `plan` as soon as they exist, so every error path frees them.
        let mut plan = ConvPlan {
            x: std::ptr::null_mut(),
            w: std::ptr::null_mut(),
            y: std::ptr::null_mut(),
            conv: std::ptr::null_mut(),
            algo: Algo::Forward(FwdAlgo::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM),
            workspace: 0,
        };
        // SAFETY: each call gets live descriptors (created just before) and valid pointers.
        unsafe {
            check(
                "cudnnCreateTensorDescriptor",
                (a.cudnnCreateTensorDescriptor)(&mut plan.x),
            )?;
            check(
                "cudnnCreateTensorDescriptor",
                (a.cudnnCreateTensorDescriptor)(&mut plan.y),
            )?;
            check(
                "cudnnCreateFilterDescriptor",
                (a.cudnnCreateFilterDescriptor)(&mut plan.w),
            )?;
            check(
                "cudnnCreateConvolutionDescriptor",
                (a.cudnnCreateConvolutionDescriptor)(&mut plan.conv),
            )?;
            check(
                "cudnnSetTensor4dDescriptor",
                (a.cudnnSetTensor4dDescriptor)(plan.x, nchw, data, n, c, h, w),
            )?;
            check(
                "cudnnSetTensor4dDescriptor",
                (a.cudnnSetTensor4dDescriptor)(plan.y, nchw, data, n, cout, ho, wo),
            )?;
            check(
                "cudnnSetFilter4dDescriptor",
                (a.cudnnSetFilter4dDescriptor)(plan.w, data, nchw, cout, cg, kh, kw),
            )?;
            check(
                "cudnnSetConvolution2dDescriptor",
                (a.cudnnSetConvolution2dDescriptor)(
                    plan.conv,
                    int(desc.padding[0]),
                    int(desc.padding[1]),
                    int(desc.stride[0]),
                    int(desc.stride[1]),
                    int(desc.dilation[0]),
                    int(desc.dilation[1]),
                    cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                    compute,
                ),
            )?;
            check(
                "cudnnSetConvolutionGroupCount",
                (a.cudnnSetConvolutionGroupCount)(plan.conv, int(desc.groups)),
            )?;
            check(
                "cudnnSetConvolutionMathType",
                (a.cudnnSetConvolutionMathType)(plan.conv, math_type(desc)),
            )?;
        }
        const ASK: usize = 8;
        let mut got: c_int = 0;
        let none =
            || BackendError::Device(format!("cuDNN has no algorithm for {pass:?} of {desc:?}"));
        let (h, x, wd, y, cv) = (self.handle, plan.x, plan.w, plan.y, plan.conv);
        let mut bytes = 0usize;
        // SAFETY: handle and descriptors are live; the result arrays hold ASK entries, and
        // zeroed entries are valid values of these plain C structs.
        unsafe {
            let math = match pass {
                ConvPass::Forward => {
                    let mut perfs: [FwdPerf; ASK] = std::mem::zeroed();
                    check(
                        "cudnnGetConvolutionForwardAlgorithm_v7",
                        (a.cudnnGetConvolutionForwardAlgorithm_v7)(
                            h,
                            x,
                            wd,
                            cv,
                            y,
                            ASK as c_int,
                            &mut got,
                            perfs.as_mut_ptr(),
                        ),
                    )?;
                    let p = choose(&perfs[..got.max(0) as usize], |p| {
                        (p.status, p.memory, p.determinism)
                    })
                    .ok_or_else(none)?;
                    check(
                        "cudnnGetConvolutionForwardWorkspaceSize",
                        (a.cudnnGetConvolutionForwardWorkspaceSize)(
                            h, x, wd, cv, y, p.algo, &mut bytes,
                        ),
                    )?;
                    plan.algo = Algo::Forward(p.algo);
                    p.mathType
                }
                ConvPass::BackwardData => {
                    let mut perfs: [DataPerf; ASK] = std::mem::zeroed();
                    check(
                        "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                        (a.cudnnGetConvolutionBackwardDataAlgorithm_v7)(
                            h,
                            wd,
                            y,
                            cv,
                            x,
                            ASK as c_int,
                            &mut got,
                            perfs.as_mut_ptr(),
                        ),
                    )?;
                    let p = choose(&perfs[..got.max(0) as usize], |p| {
                        (p.status, p.memory, p.determinism)
                    })
                    .ok_or_else(none)?;
                    check(
                        "cudnnGetConvolutionBackwardDataWorkspaceSize",
                        (a.cudnnGetConvolutionBackwardDataWorkspaceSize)(
                            h, wd, y, cv, x, p.algo, &mut bytes,
                        ),
                    )?;
                    plan.algo = Algo::Data(p.algo);
                    p.mathType
                }
                ConvPass::BackwardFilter => {
                    let mut perfs: [FilterPerf; ASK] = std::mem::zeroed();
                    check(
                        "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                        (a.cudnnGetConvolutionBackwardFilterAlgorithm_v7)(
                            h,
                            x,
                            y,
                            cv,
                            wd,
                            ASK as c_int,
                            &mut got,
                            perfs.as_mut_ptr(),
                        ),
                    )?;
                    let p = choose(&perfs[..got.max(0) as usize], |p| {
                        (p.status, p.memory, p.determinism)
                    })
                    .ok_or_else(none)?;
                    check(
                        "cudnnGetConvolutionBackwardFilterWorkspaceSize",
                        (a.cudnnGetConvolutionBackwardFilterWorkspaceSize)(
                            h, x, y, cv, wd, p.algo, &mut bytes,
                        ),
                    )?;
                    plan.algo = Algo::Filter(p.algo);
                    p.mathType
                }
            };
            // The math type the heuristic assumed for its algorithm.
            check(
                "cudnnSetConvolutionMathType",
                (a.cudnnSetConvolutionMathType)(plan.conv, math),
            )?;
        }
        plan.workspace = bytes;
        Ok(plan)
    }

    /// A workspace of at least `bytes` (null for none).
    fn workspace(&mut self, dev: &Device, bytes: usize) -> Result<u64> {
        if bytes == 0 {
            return Ok(0);
        }
        let have = self
            .workspace
            .as_ref()
            .map_or(0, crate::backend::DeviceMemory::size);
        if have < bytes {
            let fresh = CudaMemory::new(dev, bytes.next_power_of_two())?;
            if let Some(old) = self.workspace.replace(fresh) {
                self.retired.push(old);
            }
        }
        Ok(self.workspace.as_ref().map_or(0, |m| m.address()))
    }

    /// Enqueues one pass (arguments already checked by `desc.check`).
    pub(crate) fn conv(
        &mut self,
        dev: &Device,
        desc: &ConvDesc,
        pass: ConvPass,
        a: &BufferArg,
        b: &BufferArg,
        out: &BufferArg,
    ) -> Result<()> {
        let (pa, pb, po) = (device_address(a)?, device_address(b)?, device_address(out)?);
        let need = self.plan(desc, pass)?.workspace;
        let ws = self.workspace(dev, need)?;
        let plan = &self.plans[&(*desc, pass)];
        let (one32, zero32, one64, zero64) = (1f32, 0f32, 1f64, 0f64);
        let (alpha, beta): (*const c_void, *const c_void) = if desc.ty == Type::F64 {
            (&one64 as *const f64 as _, &zero64 as *const f64 as _)
        } else {
            (&one32 as *const f32 as _, &zero32 as *const f32 as _)
        };
        let (wsp, wsn) = (ws as *mut c_void, if ws == 0 { 0 } else { need });
        let a = self.api;
        // SAFETY: the operands were checked to fit their buffers (`ConvDesc::check`), the
        // descriptors match them, the workspace holds `need` bytes, alpha/beta outlive the call.
        unsafe {
            match plan.algo {
                Algo::Forward(algo) => check(
                    "cudnnConvolutionForward",
                    (a.cudnnConvolutionForward)(
                        self.handle,
                        alpha,
                        plan.x,
                        pa as *const c_void,
                        plan.w,
                        pb as *const c_void,
                        plan.conv,
                        algo,
                        wsp,
                        wsn,
                        beta,
                        plan.y,
                        po as *mut c_void,
                    ),
                ),
                Algo::Data(algo) => check(
                    "cudnnConvolutionBackwardData",
                    (a.cudnnConvolutionBackwardData)(
                        self.handle,
                        alpha,
                        plan.w,
                        pa as *const c_void,
                        plan.y,
                        pb as *const c_void,
                        plan.conv,
                        algo,
                        wsp,
                        wsn,
                        beta,
                        plan.x,
                        po as *mut c_void,
                    ),
                ),
                Algo::Filter(algo) => check(
                    "cudnnConvolutionBackwardFilter",
                    (a.cudnnConvolutionBackwardFilter)(
                        self.handle,
                        alpha,
                        plan.x,
                        pa as *const c_void,
                        plan.y,
                        pb as *const c_void,
                        plan.conv,
                        algo,
                        wsp,
                        wsn,
                        beta,
                        plan.w,
                        po as *mut c_void,
                    ),
                ),
            }
        }
    }
}

impl Drop for Dnn {
    fn drop(&mut self) {
        self.plans.clear();
        // SAFETY: destroyed once (the backend binds the context before dropping this).
        unsafe { (self.api.cudnnDestroy)(self.handle) };
    }
}
