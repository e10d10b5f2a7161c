//! `hologram`: the command line of the Hologram compute SDK.

// Every `unsafe` block says why it is sound (CI runs clippy with `-D warnings`).
#![warn(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]

#[macro_use]
mod output;
mod commands;
mod error;
mod npy;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::CliError;

#[derive(Parser)]
#[command(
    name = "hologram",
    version,
    about = "Run Atlas ISA kernels on the CPU, CUDA and wgpu backends"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List backends and devices, and why each unavailable backend is unavailable.
    Info {
        /// Also run a sample workload twice on each available backend and print the kernel
        /// cache, compiler and launch-path counters of each pass.
        #[arg(long)]
        stats: bool,
    },
    /// Validate .hasm files and print them (with --canonical: their canonical form and digest).
    Asm {
        /// The programs.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print the canonical form and its digest, and the instruction reduction.
        #[arg(long)]
        canonical: bool,
    },
    /// Run a .hasm kernel with arguments from the command line and .npy files.
    Run(commands::run::RunArgs),
    /// A short tour: runs a few programs on the best available backend.
    Demo {
        /// Backend (auto, cpu, cuda, metal, vulkan, dx12).
        #[arg(long, default_value = "auto")]
        backend: String,
        /// Elements per demo program.
        #[arg(long, default_value_t = 1 << 22)]
        n: usize,
    },
    /// Run the conformance suite on a backend.
    Conformance {
        /// Folder with NAME.hasm / NAME.json pairs.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Backend (auto, cpu, cuda, metal, vulkan, dx12).
        #[arg(long, default_value = "auto")]
        backend: String,
    },
    /// Run the conformance programs on two backends and compare every buffer they write.
    CrossCheck {
        /// Folder with NAME.hasm / NAME.json pairs.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The backend to check.
        #[arg(long, default_value = "cuda")]
        backend: String,
        /// The reference backend.
        #[arg(long, default_value = "cpu")]
        reference: String,
    },
    /// Benchmarks of tensor workloads (element-wise, reductions, softmax, matmul, latency,
    /// compile time, transfers) as a table and, with --json, the rows of bench/run.py.
    Bench(commands::bench::BenchArgs),
    /// GPU benchmarks (vector add bandwidth, launch latency, sgemm, bounds-check cost).
    BenchCuda(commands::bench_cuda::BenchArgs),
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOLOGRAM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    let cli = Cli::parse();
    let result: Result<(), CliError> = match cli.command {
        Command::Info { stats } => commands::info::run().and_then(|()| {
            if stats {
                commands::info_stats::run()
            } else {
                Ok(())
            }
        }),
        Command::Asm { files, canonical } => commands::asm::run(&files, canonical),
        Command::Run(args) => commands::run::run(&args),
        Command::Demo { backend, n } => commands::demo::run(&backend, n),
        Command::Conformance { dir, backend } => commands::conformance::run(dir, &backend),
        Command::CrossCheck {
            dir,
            backend,
            reference,
        } => commands::cross_check::run(dir, &reference, &backend),
        Command::Bench(args) => commands::bench::run(&args),
        Command::BenchCuda(args) => commands::bench_cuda::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output has gone (`hologram asm F | head`): nothing is wrong.
        Err(CliError::StdoutClosed) => ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "error: {e}");
            ExitCode::FAILURE
        }
    }
}
