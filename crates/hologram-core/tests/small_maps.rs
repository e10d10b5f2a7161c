//! Small element-wise maps of two operands run by the CPU backend's library code
//! (`Library::binary_map`) instead of a launched kernel: the same bits as the kernel on the
//! interpreter, for every form the path takes (tensor with tensor, tensor with scalar on either
//! side, in place), and the kernel where it declines.

use hologram_backends::CpuBackend;
use hologram_core::{BackendType, BinaryFn, DType, Element, Executor, Tensor};

fn interpreter() -> Executor {
    Executor::with_backend(
        BackendType::Cpu,
        std::sync::Arc::new(CpuBackend::interpreter_only()),
    )
}

/// Kernels an executor looked up for element-wise launches (compiled, found in the kernel
/// cache or in the launch cache): the library's maps look up none.
fn kernel_lookups(exec: &Executor) -> u64 {
    let k = exec.kernel_cache_stats();
    k.compiles + k.hits + k.launch_hits
}

/// `f` on the native CPU (where the library runs it) and on the interpreter; the same bits, and
/// on the native CPU one launch, which looked up no kernel when `taken` (one otherwise).
fn same_bits<T: Element + Copy + std::fmt::Debug>(
    what: &str,
    taken: bool,
    to_bits: impl Fn(T) -> u64,
    f: impl Fn(&Executor) -> Tensor,
) {
    let (native, interp) = (Executor::cpu(), interpreter());
    let before = (kernel_lookups(&native), native.launch_count());
    let got = f(&native).to_vec::<T>().unwrap();
    let after = (kernel_lookups(&native), native.launch_count());
    let want = f(&interp).to_vec::<T>().unwrap();
    let bits = |v: &[T]| v.iter().map(|&x| to_bits(x)).collect::<Vec<u64>>();
    assert_eq!(bits(&got), bits(&want), "{what}: {got:?} against {want:?}");
    let lookups = u64::from(!taken);
    assert_eq!(after.0 - before.0, lookups, "{what}: kernels looked up");
    // Counted as one launch either way (a kernel or the library).
    assert_eq!(after.1 - before.1, 1, "{what}: one launch");
}

const FNS: [BinaryFn; 6] = [
    BinaryFn::Add,
    BinaryFn::Sub,
    BinaryFn::Mul,
    BinaryFn::Div,
    BinaryFn::Min,
    BinaryFn::Max,
];

#[test]
fn float_maps_give_the_kernels_bits() {
    let xs: Vec<f32> = vec![
        1.5,
        -0.0,
        0.0,
        f32::NAN,
        f32::INFINITY,
        -3.25,
        1e-40,
        7.0,
        -1e30,
    ];
    let ys: Vec<f32> = vec![
        0.0,
        -0.0,
        2.0,
        1.0,
        f32::NEG_INFINITY,
        f32::NAN,
        3.0,
        -1e-39,
        0.5,
    ];
    let n = xs.len();
    for f in FNS {
        for s in [0.0f64, -0.0, 2.5, f64::NAN] {
            let t = |e: &Executor, v: &[f32]| {
                Tensor::from_slice(e, v, &[n]).unwrap().realize().unwrap()
            };
            same_bits::<f32>(
                &format!("{f:?} tensors"),
                true,
                |v| v.to_bits() as u64,
                |e| {
                    let (a, b) = (t(e, &xs), t(e, &ys));
                    a.binary(f, &b).unwrap().realize().unwrap()
                },
            );
            same_bits::<f32>(
                &format!("{f:?} x, {s}"),
                true,
                |v| v.to_bits() as u64,
                |e| t(e, &xs).binary(f, s).unwrap().realize().unwrap(),
            );
            same_bits::<f32>(
                &format!("{f:?} {s}, x"),
                true,
                |v| v.to_bits() as u64,
                |e| t(e, &xs).rbinary(f, s).unwrap().realize().unwrap(),
            );
            // In place: the result written over the first operand.
            same_bits::<f32>(
                &format!("{f:?} x into x"),
                true,
                |v| v.to_bits() as u64,
                |e| {
                    let (a, b) = (t(e, &xs), t(e, &ys));
                    a.binary_into(f, &b, &a).unwrap();
                    a
                },
            );
        }
        let d: Vec<f64> = xs.iter().map(|&v| v as f64 * 1.1).collect();
        same_bits::<f64>(&format!("{f:?} f64"), true, f64::to_bits, |e| {
            let a = Tensor::from_slice(e, &d, &[n]).unwrap().realize().unwrap();
            a.binary(f, 0.3).unwrap().realize().unwrap()
        });
    }
}

#[test]
fn integer_maps_give_the_kernels_bits() {
    // Division by zero (x / 0 == x), the most negative value over -1, wrapping products.
    let xs: Vec<i32> = vec![7, -7, 0, i32::MIN, i32::MAX, 5, -1, 123_456];
    let ys: Vec<i32> = vec![2, 0, -3, -1, 2, 5, i32::MIN, 77_777];
    let n = xs.len();
    for f in FNS
        .into_iter()
        .chain([BinaryFn::Rem, BinaryFn::And, BinaryFn::Xor])
    {
        // Operations without a scalar-operand function (rem, and, xor) run as kernels there.
        let scalar_taken = FNS.contains(&f);
        same_bits::<i32>(
            &format!("{f:?} i32"),
            true,
            |v| v as u32 as u64,
            |e| {
                let a = Tensor::from_slice(e, &xs, &[n]).unwrap();
                let b = Tensor::from_slice(e, &ys, &[n]).unwrap();
                a.binary(f, &b).unwrap().realize().unwrap()
            },
        );
        same_bits::<i32>(
            &format!("{f:?} i32, -3"),
            scalar_taken,
            |v| v as u32 as u64,
            |e| {
                let a = Tensor::from_slice(e, &xs, &[n]).unwrap();
                a.binary(f, -3.0).unwrap().realize().unwrap()
            },
        );
        let wide: Vec<i64> = xs.iter().map(|&v| v as i64 * 3_000_000_000).collect();
        same_bits::<i64>(
            &format!("{f:?} i64"),
            true,
            |v| v as u64,
            |e| {
                let a = Tensor::from_slice(e, &wide, &[n]).unwrap();
                let plus: Vec<i64> = wide.iter().map(|&v| v.wrapping_add(1)).collect();
                let b = Tensor::from_slice(e, &plus, &[n]).unwrap();
                a.binary(f, &b).unwrap().realize().unwrap()
            },
        );
    }
}

#[test]
fn other_maps_launch_their_kernels() {
    // Half floats compute in f32, a broadcast operand is not dense, and a map past the
    // calling thread's share is spread over the cores: all launch the kernel.
    let exec = Executor::cpu();
    let h = Tensor::from_slice(&exec, &[1.0f32, 2.0, 3.0], &[3])
        .unwrap()
        .cast(DType::F16)
        .unwrap()
        .realize()
        .unwrap();
    let m = Tensor::from_slice(&exec, &[1.0f32; 6], &[2, 3]).unwrap();
    let row = Tensor::from_slice(&exec, &[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let big = Tensor::from_slice(&exec, &vec![1.0f32; (1 << 16) + 1], &[(1 << 16) + 1]).unwrap();
    let runs: [(&str, &dyn Fn() -> Tensor); 3] = [
        ("f16", &|| h.add(1.0).unwrap()),
        ("broadcast", &|| m.add(&row).unwrap()),
        ("past 2^16", &|| big.mul(2.0).unwrap()),
    ];
    for (what, run) in runs {
        let before = kernel_lookups(&exec);
        let _ = run().realize().unwrap();
        assert_eq!(kernel_lookups(&exec) - before, 1, "{what}: a kernel");
    }
    // A plan records launches: while it records, the map is a kernel too.
    let x = Tensor::from_slice(&exec, &[1.0f32, 2.0], &[2]).unwrap();
    let before = kernel_lookups(&exec);
    let (plan, first) = hologram_core::plan::Plan::record(&exec, std::slice::from_ref(&x), |t| {
        Ok(vec![t[0].add(1.0)?.realize()?])
    })
    .unwrap();
    assert_eq!(kernel_lookups(&exec) - before, 1, "recorded: a kernel");
    assert_eq!(first[0].to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
    let y = Tensor::from_slice(&exec, &[5.0f32, 6.0], &[2]).unwrap();
    assert_eq!(
        plan.run(&[y]).unwrap()[0].to_vec::<f32>().unwrap(),
        vec![6.0, 7.0]
    );
}
