//! Times `relu(a + b) * b` (one fused kernel) on the best available backend.
//!
//! `cargo run --release -p hologram-core --example fused_chain -- [log2(n)] [repeats]`

use std::time::Instant;

use hologram_core::{DType, Executor, Tensor};

fn main() -> Result<(), hologram_core::Error> {
    let args: Vec<String> = std::env::args().collect();
    let log2: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(24);
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(11);
    let exec = Executor::new_auto()?;
    let n = 1usize << log2;
    let a = Tensor::randn(&exec, &[n], 1, DType::F32)?.realize()?;
    let b = Tensor::randn(&exec, &[n], 2, DType::F32)?.realize()?;
    let mut times = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let c = a.add(&b)?.relu()?.mul(&b)?.realize()?;
        exec.synchronize()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        drop(c);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "relu(a+b)*b n=2^{log2} on {}: median {:.3} ms (min {:.3} ms)",
        exec.backend_type(),
        times[reps / 2],
        times[0]
    );
    Ok(())
}
