//! `Library::gemm` on awkward descriptors, on every backend of `HOLOGRAM_TEST_BACKENDS`: sizes
//! off every tile edge (1×1×1, 65×33×17, sizes just past 128), all four transposes, padded
//! leading dimensions, batches with gaps between matrices, ranges at aligned and unaligned
//! offsets inside larger buffers, outer batches (attention's interleaved heads among them),
//! alpha/beta (C unread when beta is 0), k = 0, and out-of-range descriptors rejected with an
//! error value. Each f32 result is compared with an f64
//! host reference and with the CPU backend's result.

mod common;

use common::*;
use hologram_backends::{Backend, BufferArg, GemmDesc, OuterBatch};
use hologram_isa::Type;

/// One descriptor and where its operands lie: element offsets of A, B and C in their buffers.
struct Case {
    desc: GemmDesc,
    offsets: [usize; 3],
}

/// Elements operand `i` (A, B, C) of `d` spans from its offset, as `GemmDesc::check` counts
/// them.
fn span(d: &GemmDesc, i: usize) -> usize {
    let (rows, cols) = shapes(d)[i];
    let ld = [d.lda, d.ldb, d.ldc][i];
    let stride = [d.stride_a, d.stride_b, d.stride_c][i];
    let outer = [d.outer.stride_a, d.outer.stride_b, d.outer.stride_c][i];
    if rows == 0 || cols == 0 || d.batch == 0 || d.outer.count == 0 {
        return 0;
    }
    (d.outer.count - 1) * outer + (d.batch - 1) * stride + (rows - 1) * ld + cols
}

/// Stored (rows, cols) of A, B and C.
fn shapes(d: &GemmDesc) -> [(usize, usize); 3] {
    [
        if d.trans_a { (d.k, d.m) } else { (d.m, d.k) },
        if d.trans_b { (d.n, d.k) } else { (d.k, d.n) },
        (d.m, d.n),
    ]
}

#[allow(clippy::too_many_arguments)]
fn case(
    m: usize,
    n: usize,
    k: usize,
    trans_a: bool,
    trans_b: bool,
    batch: usize,
    pad: usize,
    gap: usize,
    offsets: [usize; 3],
    alpha: f64,
    beta: f64,
) -> Case {
    let mut d = GemmDesc::new(Type::F32, m, n, k);
    d.trans_a = trans_a;
    d.trans_b = trans_b;
    let [(ra, ca), (rb, cb), (rc, cc)] = shapes(&d);
    d.lda = ca.max(1) + pad;
    d.ldb = cb.max(1) + pad;
    d.ldc = cc.max(1) + pad;
    d.batch = batch;
    d.stride_a = ra * d.lda + gap;
    d.stride_b = rb * d.ldb + gap;
    d.stride_c = rc * d.ldc + gap;
    d.alpha = alpha;
    d.beta = beta;
    Case { desc: d, offsets }
}

/// `[B, H, rows, cols]` views of `[B, rows, 3, H, cols]` storage, as attention reads its heads
/// out of one projection: the batch is the heads (`cols` apart), the outer batch the `B`
/// sequences. `trans_b` reads B as the transposed keys (`Q·Kᵀ`); C is written the same way.
fn heads_case(b: usize, h: usize, rows: usize, cols: usize, trans_b: bool) -> Case {
    let ld = 3 * h * cols;
    let (n, k) = if trans_b { (rows, cols) } else { (cols, rows) };
    let mut d = GemmDesc::new(Type::F32, rows, n, k);
    d.trans_b = trans_b;
    (d.lda, d.ldb, d.ldc) = (ld, ld, ld.max(3 * h * n));
    (d.batch, d.stride_a, d.stride_b, d.stride_c) = (h, cols, cols, n);
    d.outer = OuterBatch {
        count: b,
        stride_a: rows * ld,
        stride_b: k.max(n) * ld,
        stride_c: rows * d.ldc,
    };
    Case {
        desc: d,
        offsets: [0, cols * h, 2],
    }
}

fn cases() -> Vec<Case> {
    let mut v = vec![
        case(1, 1, 1, false, false, 1, 0, 0, [0; 3], 1.0, 0.0),
        case(1, 1, 1, true, true, 1, 0, 0, [1, 2, 3], 2.0, 0.5),
        // k = 0: C = beta · C.
        case(5, 7, 0, false, false, 1, 0, 0, [0; 3], 1.0, 0.5),
        case(5, 7, 0, true, true, 2, 0, 0, [0; 3], 1.0, 0.0),
        // Aligned, a whole number of small tiles.
        case(64, 64, 64, false, false, 1, 0, 0, [0; 3], 1.0, 0.0),
        case(64, 64, 64, true, true, 1, 0, 0, [4, 8, 12], 1.0, 1.0),
        // Sizes past 128 with enough batches for the large tile, odd k (several steps).
        case(129, 130, 37, false, false, 8, 0, 0, [0; 3], 1.0, 0.0),
        case(129, 130, 37, true, true, 8, 4, 4, [4, 0, 8], 0.5, -1.0),
        case(131, 129, 21, true, false, 8, 1, 3, [1, 5, 2], 1.0, 0.0),
        case(130, 131, 9, false, true, 8, 0, 0, [0; 3], 1.0, 0.25),
        // Tall and wide edges.
        case(200, 3, 50, false, false, 1, 0, 0, [0; 3], 1.0, 0.0),
        case(3, 200, 50, true, false, 1, 0, 0, [0; 3], 1.0, 0.0),
    ];
    for ta in [false, true] {
        for tb in [false, true] {
            for (pad, gap, offsets, beta) in [
                (0, 0, [0; 3], 0.0),
                (3, 5, [1, 2, 3], 0.5),
                (4, 4, [4, 8, 4], 1.0),
            ] {
                v.push(case(65, 33, 17, ta, tb, 3, pad, gap, offsets, 1.5, beta));
                v.push(case(17, 65, 33, ta, tb, 2, pad, gap, offsets, 1.0, beta));
            }
            // Large enough for the CPU backend to share one matrix among threads in slices of
            // rows (tall) or of columns (wide), with lengths that do not divide evenly.
            v.push(case(150, 97, 70, ta, tb, 1, 3, 0, [1, 2, 3], 1.5, 0.5));
            v.push(case(70, 151, 61, ta, tb, 1, 0, 0, [0; 3], 1.0, 0.0));
        }
    }
    // Outer batches: whole strided batches repeated with a gap after each.
    for mut c in [
        case(65, 33, 17, false, true, 3, 1, 2, [1, 2, 3], 1.0, 0.5),
        case(17, 9, 33, true, false, 1, 0, 0, [0; 3], 1.5, 0.0),
    ] {
        let d = &mut c.desc;
        d.outer = OuterBatch {
            count: 3,
            stride_a: d.batch * d.stride_a + 7,
            stride_b: d.batch * d.stride_b + 5,
            stride_c: d.batch * d.stride_c + 3,
        };
        v.push(c);
    }
    v.push(heads_case(3, 2, 9, 5, true));
    v.push(heads_case(2, 4, 33, 16, false));
    v
}

/// Buffer contents: `offset` filler elements, then the operand's span, then a tail of filler.
/// Filler is NaN in A and B (a kernel reading outside the matrices would show it) and in C
/// when beta is 0 (C must not be read).
fn contents(rng: &mut Rng, offset: usize, len: usize, filler: f32) -> Vec<f32> {
    let mut v = vec![filler; offset + len + 5];
    for x in &mut v[offset..offset + len] {
        *x = rng.uniform(-1.0, 1.0) as f32;
    }
    v
}

fn reference(d: &GemmDesc, offs: [usize; 3], a: &[f32], b: &[f32], c: &[f32]) -> Vec<f64> {
    let mut out: Vec<f64> = c.iter().map(|&x| x as f64).collect();
    for (o, z) in (0..d.outer.count).flat_map(|o| (0..d.batch).map(move |z| (o, z))) {
        for i in 0..d.m {
            for j in 0..d.n {
                let mut s = 0.0;
                for p in 0..d.k {
                    let ai = offs[0]
                        + o * d.outer.stride_a
                        + z * d.stride_a
                        + if d.trans_a {
                            p * d.lda + i
                        } else {
                            i * d.lda + p
                        };
                    let bi = offs[1]
                        + o * d.outer.stride_b
                        + z * d.stride_b
                        + if d.trans_b {
                            j * d.ldb + p
                        } else {
                            p * d.ldb + j
                        };
                    s += a[ai] as f64 * b[bi] as f64;
                }
                let ci = offs[2] + o * d.outer.stride_c + z * d.stride_c + i * d.ldc + j;
                let old = if d.beta == 0.0 {
                    0.0
                } else {
                    d.beta * c[ci] as f64
                };
                out[ci] = d.alpha * s + old;
            }
        }
    }
    out
}

fn upload(backend: &dyn Backend, data: &[f32], offset: usize) -> BufferArg {
    let mem = backend.allocate(data.len() * 4).unwrap();
    backend
        .copy_in(&mem, 0, bytemuck::cast_slice(data))
        .unwrap();
    BufferArg {
        memory: mem,
        offset: offset * 4,
        len: (data.len() - offset) * 4,
    }
}

fn run(backend: &dyn Backend, d: &GemmDesc, offs: [usize; 3], data: [&[f32]; 3]) -> Vec<f32> {
    let a = upload(backend, data[0], offs[0]);
    let b = upload(backend, data[1], offs[1]);
    let c = upload(backend, data[2], offs[2]);
    backend.gemm(d, &a, &b, &c).unwrap();
    let mut out = vec![0f32; data[2].len()];
    backend
        .copy_out(&c.memory, 0, bytemuck::cast_slice_mut(&mut out))
        .unwrap();
    out
}

/// Within the f32 matmul tolerance of the op tests, scaled by the sizes of the terms.
fn check(what: &str, got: &[f32], want: &[f64], d: &GemmDesc) {
    let rel = tol(hologram_core::DType::F32) * 4.0 * (d.k as f64).sqrt().max(1.0) + 1e-6;
    let scale = (d.alpha.abs() * d.k as f64 + d.beta.abs()).max(1.0);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g as f64 - w).abs() <= rel * scale;
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

#[test]
fn gemm_matches_the_reference_on_awkward_descriptors() {
    let execs = executors();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (ci, Case { desc: d, offsets }) in cases().into_iter().enumerate() {
        let a = contents(&mut rng, offsets[0], span(&d, 0), f32::NAN);
        let b = contents(&mut rng, offsets[1], span(&d, 1), f32::NAN);
        let c_filler = if d.beta == 0.0 { f32::NAN } else { 0.75 };
        let mut c = contents(&mut rng, offsets[2], span(&d, 2), c_filler);
        if d.beta == 0.0 {
            // C is not read: NaNs inside the matrices must not reach the result either.
            for x in c.iter_mut().step_by(3) {
                *x = f32::NAN;
            }
        }
        let want = reference(&d, offsets, &a, &b, &c);
        let cpu = run(execs[0].backend().as_ref(), &d, offsets, [&a, &b, &c]);
        let what = |name: &str| {
            format!(
                "case {ci} on {name}: {}x{}x{} ta={} tb={} batch={} outer={:?} lda={} ldb={} ldc={} offsets={offsets:?} alpha={} beta={}",
                d.m, d.n, d.k, d.trans_a, d.trans_b, d.batch, d.outer, d.lda, d.ldb, d.ldc, d.alpha, d.beta
            )
        };
        check(&what("cpu (reference)"), &cpu, &want, &d);
        for exec in &execs[1..] {
            let before = exec.backend().stats().library_launches;
            let got = run(exec.backend().as_ref(), &d, offsets, [&a, &b, &c]);
            if exec.backend().kind().is_wgpu() {
                // f32 GEMMs run the wgpu backend's own kernel (once per outer batch), not the
                // generic one.
                assert_eq!(
                    exec.backend().stats().library_launches,
                    before + d.outer.count as u64,
                    "{}",
                    what("wgpu")
                );
            }
            let name = exec.backend_type().to_string();
            check(&what(&name), &got, &want, &d);
            let cpu64: Vec<f64> = cpu.iter().map(|&x| x as f64).collect();
            check(&format!("{} vs cpu", what(&name)), &got, &cpu64, &d);
        }
    }
}

#[test]
fn gemm_with_operands_in_one_buffer() {
    // A, B and C side by side in one allocation (C's buffer is also A's and B's).
    let mut rng = Rng(7);
    for (ta, tb) in [(false, false), (true, true)] {
        let mut d = GemmDesc::new(Type::F32, 33, 17, 9);
        (d.trans_a, d.trans_b) = (ta, tb);
        d.lda = if ta { d.m } else { d.k };
        d.ldb = if tb { d.k } else { d.n };
        d.beta = 0.5;
        let (la, lb, lc) = (d.m * d.k, d.k * d.n, d.m * d.n);
        let data: Vec<f32> = (0..la + lb + lc)
            .map(|_| rng.uniform(-1.0, 1.0) as f32)
            .collect();
        let offsets = [0, la, la + lb];
        let want = reference(&d, offsets, &data, &data, &data);
        for exec in executors() {
            let backend = exec.backend().as_ref();
            let mem = backend.allocate(data.len() * 4).unwrap();
            backend
                .copy_in(&mem, 0, bytemuck::cast_slice(&data))
                .unwrap();
            let arg = |at: usize, len: usize| BufferArg {
                memory: mem.clone(),
                offset: at * 4,
                len: len * 4,
            };
            backend
                .gemm(&d, &arg(0, la), &arg(la, lb), &arg(la + lb, lc))
                .unwrap();
            let mut got = vec![0f32; data.len()];
            backend
                .copy_out(&mem, 0, bytemuck::cast_slice_mut(&mut got))
                .unwrap();
            check(
                &format!("{} one buffer ta={ta} tb={tb}", exec.backend_type()),
                &got,
                &want,
                &d,
            );
        }
    }
}

#[test]
fn a_very_long_shared_dimension_is_exact_or_an_error() {
    // 1.2M-long dot product of ones: the exact sum is an f32 integer. lavapipe cuts shader
    // loops after 65535 iterations; there the GEMM must fail with `Unsupported`, never return a
    // short sum.
    let k = 1_200_000;
    let d = GemmDesc::new(Type::F32, 1, 1, k);
    for exec in executors() {
        let backend = exec.backend().as_ref();
        let ones = upload(backend, &vec![1f32; k], 0);
        let c = upload(backend, &[0f32], 0);
        match backend.gemm(&d, &ones, &ones, &c) {
            Ok(()) => {
                let mut out = [0f32];
                backend
                    .copy_out(&c.memory, 0, bytemuck::cast_slice_mut(&mut out))
                    .unwrap();
                assert_eq!(out[0], k as f32, "{}", exec.backend_type());
            }
            Err(e) => {
                assert!(
                    matches!(e, hologram_backends::BackendError::Unsupported { .. })
                        && e.to_string().contains("65535"),
                    "{}: {e}",
                    exec.backend_type()
                );
                eprintln!("{}: k = {k} refused: {e}", exec.backend_type());
            }
        }
    }
}

#[test]
fn out_of_range_descriptors_are_errors_before_any_launch() {
    for exec in executors() {
        let backend = exec.backend().as_ref();
        let buf = |n: usize| BufferArg::whole(backend.allocate(n * 4).unwrap());
        let d = GemmDesc::new(Type::F32, 8, 8, 8);
        let (big, small) = (buf(64), buf(63));
        let before = backend.stats();
        for (a, b, c) in [
            (&small, &big, &big),
            (&big, &small, &big),
            (&big, &big, &small),
        ] {
            let err = backend.gemm(&d, a, b, c).unwrap_err();
            assert!(
                err.to_string().contains("needs 64 elements"),
                "{}: {err}",
                exec.backend_type()
            );
        }
        let mut batched = d;
        batched.batch = 2;
        assert!(backend.gemm(&batched, &big, &big, &big).is_err());
        // An outer batch past the end of C (A and B fit).
        let mut outer = d;
        outer.outer = OuterBatch {
            count: 2,
            stride_a: 0,
            stride_b: 0,
            stride_c: 1,
        };
        let err = backend.gemm(&outer, &big, &big, &big).unwrap_err();
        assert!(
            err.to_string().contains("C needs 65 elements"),
            "{}: {err}",
            exec.backend_type()
        );
        assert_eq!(
            before.generic_launches,
            backend.stats().generic_launches,
            "{}: a rejected GEMM launched",
            exec.backend_type()
        );
    }
}
