//! Per-call cost of tiny tensor ops in Rust (16 elements, CPU backend): recording an
//! element-wise op, running it into an existing tensor, a reduction read back as a number.
//! What the Python call path adds is measured by `bench/run.py --only python_overhead`.
//!
//! `cargo run --release -p hologram-core --example call_overhead -- [elements] [calls] [row]`
//! (`row`: only the rows whose name contains it)

use std::time::Instant;

use hologram_core::{BinaryFn, DType, Executor, LaunchConfig, ReduceOp, Tensor};
use hologram_isa::semantics::Value;

/// One timed operation.
type Call<'a> = Box<dyn FnMut() -> hologram_core::Result<()> + 'a>;

/// Microseconds per call of `f`, the best of five runs of `calls` calls.
fn per_call(calls: usize, mut f: impl FnMut() -> hologram_core::Result<()>) -> f64 {
    for _ in 0..calls.min(1000) {
        f().expect("warm-up call");
    }
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..calls {
                f().expect("timed call");
            }
            t.elapsed().as_secs_f64() * 1e6 / calls as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() -> hologram_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(16);
    let calls: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let only = args.get(3).cloned().unwrap_or_default();
    let exec = Executor::cpu();
    let a = Tensor::randn(&exec, &[n], 1, DType::F32)?.realize()?;
    let b = Tensor::randn(&exec, &[n], 2, DType::F32)?.realize()?;
    let c = Tensor::zeros(&exec, &[n], DType::F32)?.realize()?;
    // The floor: launching an already compiled kernel with prepared arguments.
    let add = exec.assemble(
        ".kernel add\n.param .buf.f32 x\n.param .buf.f32 y\n.param .buf.f32 z .rw\n.param .u32 n\n    setp.ge.u32 %p, %gid, n;\n@%p exit;\n    ld.f32 %a, x[%gid];\n    ld.f32 %b, y[%gid];\n    add.f32 %c, %a, %b;\n    st.f32 z[%gid], %c;\n",
    )?;
    let (x, y, z) = (
        exec.zeros::<f32>(n)?,
        exec.zeros::<f32>(n)?,
        exec.zeros::<f32>(n)?,
    );
    let launch_args = [x.arg(), y.arg(), z.arg(), Value::U32(n as u32).into()];
    let config = LaunchConfig::for_elements(n as u64, 256);
    let rows: [(&str, Call); 7] = [
        (
            "launch of a compiled add",
            Box::new(|| exec.launch(&add, &config, &launch_args)),
        ),
        (
            "a + b (recorded)",
            Box::new(|| a.binary(BinaryFn::Add, &b).map(drop)),
        ),
        (
            "a + 1 (recorded)",
            Box::new(|| a.binary(BinaryFn::Add, 1.0).map(drop)),
        ),
        (
            "(a + b).realize()",
            Box::new(|| a.binary(BinaryFn::Add, &b)?.realize().map(drop)),
        ),
        (
            "(a + b) into c",
            Box::new(|| a.binary(BinaryFn::Add, &b)?.copy_into(&c)),
        ),
        (
            "a.sum().item()",
            Box::new(|| a.reduce(ReduceOp::Sum, &[], false)?.item().map(drop)),
        ),
        (
            "a[:n/2] + b[:n/2] into c[:n/2]",
            Box::new(|| {
                let h = n / 2;
                a.slice(0, 0, h, 1)?
                    .binary(BinaryFn::Add, &b.slice(0, 0, h, 1)?)?
                    .copy_into(&c.slice(0, 0, h, 1)?)
            }),
        ),
    ];
    println!("{n} elements, {} backend", exec.backend_type());
    for (name, mut f) in rows.into_iter().filter(|(name, _)| name.contains(&only)) {
        println!("{name:<32} {:8.3} us", per_call(calls, &mut f));
    }
    Ok(())
}
