//! Host reference arrays in f64, random inputs, comparison at per-dtype tolerances, and the list
//! of backends to test.

#![allow(dead_code)]

use hologram_core::{BackendType, DType, Executor, Tensor};
use hologram_isa::semantics::{eval, Value};

/// A dense row-major f64 array.
#[derive(Clone, Debug, PartialEq)]
pub struct Arr {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![0; shape.len()];
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        s[i] = acc;
        acc *= shape[i];
    }
    s
}

impl Arr {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Value at a multi-index, broadcasting this array to a larger shape.
    pub fn at_broadcast(&self, idx: &[usize]) -> f64 {
        let lead = idx.len() - self.shape.len();
        let st = strides(&self.shape);
        let mut off = 0;
        for (i, &d) in self.shape.iter().enumerate() {
            let x = if d == 1 { 0 } else { idx[lead + i] };
            off += x * st[i];
        }
        self.data[off]
    }

    pub fn map(&self, f: impl Fn(f64) -> f64) -> Arr {
        Arr {
            shape: self.shape.clone(),
            data: self.data.iter().map(|&x| f(x)).collect(),
        }
    }

    pub fn zip(&self, other: &Arr, f: impl Fn(f64, f64) -> f64) -> Arr {
        let shape = bshape(&self.shape, &other.shape);
        let n: usize = shape.iter().product();
        let data = (0..n)
            .map(|i| {
                let idx = unravel(i, &shape);
                f(self.at_broadcast(&idx), other.at_broadcast(&idx))
            })
            .collect();
        Arr { shape, data }
    }

    /// Reduces one axis (keepdim).
    pub fn reduce_axis(&self, axis: usize, init: f64, f: impl Fn(f64, f64) -> f64) -> Arr {
        let mut shape = self.shape.clone();
        shape[axis] = 1;
        let n: usize = shape.iter().product();
        let data = (0..n)
            .map(|i| {
                let mut idx = unravel(i, &shape);
                let mut acc = init;
                for r in 0..self.shape[axis] {
                    idx[axis] = r;
                    acc = f(acc, self.data[ravel(&idx, &self.shape)]);
                }
                acc
            })
            .collect();
        Arr { shape, data }
    }
}

pub fn bshape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let da = if i + a.len() >= n {
                a[i + a.len() - n]
            } else {
                1
            };
            let db = if i + b.len() >= n {
                b[i + b.len() - n]
            } else {
                1
            };
            if da == 1 {
                db
            } else {
                da
            }
        })
        .collect()
}

pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            idx[d] = i % shape[d];
            i /= shape[d];
        }
    }
    idx
}

pub fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    let st = strides(shape);
    idx.iter().zip(&st).map(|(a, b)| a * b).sum()
}

/// A small xorshift RNG.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
    /// A random shape of rank `rank` with dimensions in 0..=max (rarely 0), often 1.
    pub fn shape(&mut self, rank: usize, max: usize) -> Vec<usize> {
        (0..rank)
            .map(|_| match self.below(10) {
                0 => 1,
                1 if self.below(4) == 0 => 0,
                _ => 1 + self.below(max),
            })
            .collect()
    }
}

/// Rounds an f64 to a dtype's value set.
pub fn round_to(x: f64, dt: DType) -> f64 {
    if dt == DType::Bool {
        return if x != 0.0 { 1.0 } else { 0.0 };
    }
    let v = eval::cvt(Value::F64(x), dt.storage()).unwrap();
    match eval::cvt(v, hologram_isa::Type::F64).unwrap() {
        Value::F64(f) => f,
        _ => f64::NAN,
    }
}

/// Random values for a dtype (integers small, floats in [lo, hi]).
pub fn random_arr(rng: &mut Rng, shape: &[usize], dt: DType, lo: f64, hi: f64) -> Arr {
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|_| {
            let x = if dt.is_float() {
                rng.uniform(lo, hi)
            } else if dt == DType::Bool {
                (rng.below(2)) as f64
            } else {
                let (l, h) = (
                    lo.max(if dt.is_signed() { -50.0 } else { 0.0 }),
                    hi.min(50.0),
                );
                (l + rng.below((h - l) as usize + 1) as f64).round()
            };
            round_to(x, dt)
        })
        .collect();
    Arr {
        shape: shape.to_vec(),
        data,
    }
}

/// Uploads an array as a tensor of `dt`.
pub fn upload(exec: &Executor, a: &Arr, dt: DType) -> Tensor {
    let ty = dt.storage();
    let mut bytes = Vec::with_capacity(a.numel() * ty.size_bytes());
    for &x in &a.data {
        let v = if dt == DType::Bool {
            Value::U8((x != 0.0) as u8)
        } else {
            eval::cvt(Value::F64(x), ty).unwrap()
        };
        bytes.extend_from_slice(&v.to_bits().to_le_bytes()[..ty.size_bytes()]);
    }
    Tensor::from_bytes(exec, &bytes, &a.shape, dt).unwrap()
}

/// Uploads an array as a non-contiguous view: a transposed copy, transposed back.
pub fn upload_strided(exec: &Executor, a: &Arr, dt: DType) -> Tensor {
    if a.shape.len() < 2 {
        // A strided slice of a doubled vector.
        let n = a.numel();
        let mut data = Vec::with_capacity(2 * n);
        for &x in &a.data {
            data.extend([x, -7.0]);
        }
        let t = upload(
            exec,
            &Arr {
                shape: vec![2 * n],
                data,
            },
            dt,
        );
        return t
            .slice(0, 0, 2 * n, 2)
            .unwrap()
            .reshape(&a.shape.iter().map(|&d| d as isize).collect::<Vec<_>>())
            .unwrap();
    }
    let r = a.shape.len();
    let mut tshape = a.shape.clone();
    tshape.swap(r - 1, r - 2);
    let mut data = vec![0.0; a.numel()];
    for i in 0..a.numel() {
        let mut idx = unravel(i, &a.shape);
        idx.swap(r - 1, r - 2);
        data[ravel(&idx, &tshape)] = a.data[i];
    }
    let t = upload(
        exec,
        &Arr {
            shape: tshape,
            data,
        },
        dt,
    );
    let v = t.transpose(-1, -2).unwrap();
    assert!(a.numel() <= 1 || a.shape[r - 1] <= 1 || a.shape[r - 2] <= 1 || !v.is_contiguous());
    v
}

pub fn download(t: &Tensor) -> Arr {
    Arr {
        shape: t.shape().to_vec(),
        data: t.to_f64_vec().unwrap(),
    }
}

/// Relative tolerance of a dtype for ordinary (not transcendental-heavy) ops.
pub fn tol(dt: DType) -> f64 {
    match dt {
        DType::F64 => 1e-12,
        DType::F32 => 2e-6,
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        _ => 0.0,
    }
}

/// Compares a result with a reference: integers exactly, floats within `rel` relative (plus the
/// same absolute slack near zero); NaN matches NaN.
pub fn assert_close(what: &str, got: &Arr, want: &Arr, rel: f64) {
    assert_eq!(got.shape, want.shape, "{what}: shape");
    for (i, (&g, &w)) in got.data.iter().zip(&want.data).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= rel * w.abs().max(1.0);
        assert!(
            ok,
            "{what}: element {i} (of shape {:?}): got {g}, want {w} (rel tol {rel})",
            got.shape
        );
    }
}

/// The executors to test: the CPU always, plus those named in `HOLOGRAM_TEST_BACKENDS`
/// (comma-separated, e.g. `vulkan,cuda`). A named backend that cannot start fails the test.
pub fn executors() -> Vec<Executor> {
    // The CPU twice: with recognized patterns on native loops, and all on the interpreter, so
    // both paths are held to the same results.
    let interp = std::sync::Arc::new(hologram_backends::CpuBackend::interpreter_only());
    let mut v = vec![
        Executor::cpu(),
        Executor::with_backend(BackendType::Cpu, interp),
    ];
    if let Ok(list) = std::env::var("HOLOGRAM_TEST_BACKENDS") {
        for name in list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "cpu")
        {
            let kind: BackendType = name.parse().unwrap();
            match Executor::new_with_backend(kind) {
                Ok(e) => v.push(e),
                Err(e) => panic!("HOLOGRAM_TEST_BACKENDS names {name}, which cannot start: {e}"),
            }
        }
    }
    v
}
