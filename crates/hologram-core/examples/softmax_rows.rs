//! Times a row softmax (`rows x 1024`) on the best available backend.
//!
//! `cargo run --release -p hologram-core --example softmax_rows -- [rows] [repeats]`

use std::time::Instant;

use hologram_core::{DType, Executor, Tensor};

fn main() -> Result<(), hologram_core::Error> {
    let args: Vec<String> = std::env::args().collect();
    let rows: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2048);
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(11);
    let exec = Executor::new_auto()?;
    let x = Tensor::randn(&exec, &[rows, 1024], 1, DType::F32)?.realize()?;
    let mut times = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let y = x.softmax(-1)?.realize()?;
        exec.synchronize()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        drop(y);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "softmax {rows}x1024 on {}: median {:.3} ms",
        exec.backend_type(),
        times[reps / 2]
    );
    Ok(())
}
