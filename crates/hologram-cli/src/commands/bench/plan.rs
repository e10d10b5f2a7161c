//! What to measure: the cases of a run, their names (the workload names of `bench/run.py`, so
//! both result files merge), their sizes and the work each does (bytes or floating-point
//! operations, for the rate).

/// One measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// `a + b`, f32, n elements.
    Add(usize),
    /// `sigmoid(a)`, f32.
    Sigmoid(usize),
    /// `relu(a + b) * b`, f32, one fused kernel.
    Chain(usize),
    /// Sum of all n elements, f32.
    Sum(usize),
    /// Softmax over rows of 1024, f32, n elements in all.
    Softmax(usize),
    /// n × n × n matrix product, f32.
    Matmul(usize),
    /// `a + 1` on one element, realized and synchronized.
    Latency,
    /// A kernel never compiled before: compile, launch, synchronize.
    FirstRun,
    /// A kernel already in the cache: cache lookup, launch, synchronize.
    WarmRun,
    /// Copy of n f32 from host memory into a device buffer.
    HostToDevice(usize),
    /// Copy of n f32 from a device buffer into host memory.
    DeviceToHost(usize),
}

/// Row length of the softmax case.
pub const SOFTMAX_ROW: usize = 1024;

/// Elements of the buffer the compile-time cases run on.
pub const COMPILE_N: usize = 1024;

/// How a run is chosen from the command line.
#[derive(Debug, Clone, Copy)]
pub struct PlanOptions {
    /// Sizes are 2^10, 2^12, ... up to 2^max_log2 (included).
    pub max_log2: u32,
    /// The backend is a GPU (matmul 4096 runs).
    pub gpu: bool,
    /// Run matmul 4096 on the CPU as well.
    pub large: bool,
}

/// The element-wise, reduction and transfer sizes: powers of 4 from 2^10, and 2^max_log2.
pub fn sizes(max_log2: u32) -> Vec<usize> {
    let mut out: Vec<usize> = (10..=max_log2).step_by(2).map(|k| 1usize << k).collect();
    if max_log2 >= 10 && (max_log2 - 10) % 2 == 1 {
        out.push(1usize << max_log2);
    }
    out
}

/// Every case of a run, in the order they run: element-wise and reductions size by size,
/// softmax, matmul, latency, compile time, transfers.
pub fn plan(o: &PlanOptions) -> Vec<Case> {
    let sizes = sizes(o.max_log2);
    let mut cases = Vec::new();
    for &n in &sizes {
        cases.extend([Case::Add(n), Case::Sigmoid(n), Case::Chain(n), Case::Sum(n)]);
    }
    cases.extend(
        sizes
            .iter()
            .filter(|&&n| n >= SOFTMAX_ROW)
            .map(|&n| Case::Softmax(n)),
    );
    // The sizes bench/run.py uses: 256 and 1024 on the CPU, 1024 and 4096 on GPUs.
    let matmul: &[usize] = match (o.gpu, o.large) {
        (true, _) => &[1024, 4096],
        (false, false) => &[256, 1024],
        (false, true) => &[256, 1024, 4096],
    };
    cases.extend(matmul.iter().map(|&n| Case::Matmul(n)));
    cases.extend([Case::Latency, Case::FirstRun, Case::WarmRun]);
    for &n in &sizes {
        cases.extend([Case::HostToDevice(n), Case::DeviceToHost(n)]);
    }
    cases
}

impl Case {
    /// The workload name, as `bench/run.py` writes it.
    pub fn workload(self) -> &'static str {
        match self {
            Case::Add(_) => "add",
            Case::Sigmoid(_) => "sigmoid",
            Case::Chain(_) => "relu(a+b)*b",
            Case::Sum(_) => "sum",
            Case::Softmax(_) => "softmax rows",
            Case::Matmul(_) => "matmul float32",
            Case::Latency => "tiny kernel latency",
            Case::FirstRun => "first run (compile)",
            Case::WarmRun => "warm run (cached)",
            Case::HostToDevice(_) => "host->device",
            Case::DeviceToHost(_) => "device->host",
        }
    }

    /// The size column: elements, the matrix side for matmul, 1 for the tiny kernel.
    pub fn size(self) -> usize {
        match self {
            Case::Add(n)
            | Case::Sigmoid(n)
            | Case::Chain(n)
            | Case::Sum(n)
            | Case::Softmax(n)
            | Case::Matmul(n)
            | Case::HostToDevice(n)
            | Case::DeviceToHost(n) => n,
            Case::Latency => 1,
            Case::FirstRun | Case::WarmRun => COMPILE_N,
        }
    }

    /// The work of one run and its rate unit: bytes read and written (GB/s) for memory-bound
    /// cases, floating-point operations (GFLOP/s) for matmul; `None` for latencies.
    pub fn work(self) -> Option<(f64, &'static str)> {
        let n = self.size() as f64;
        match self {
            Case::Add(_) | Case::Chain(_) => Some((12.0 * n, "GB/s")),
            Case::Sigmoid(_) | Case::Softmax(_) => Some((8.0 * n, "GB/s")),
            Case::Sum(_) | Case::HostToDevice(_) | Case::DeviceToHost(_) => Some((4.0 * n, "GB/s")),
            Case::Matmul(_) => Some((2.0 * n * n * n, "GFLOP/s")),
            Case::Latency | Case::FirstRun | Case::WarmRun => None,
        }
    }

    /// Device bytes the case holds at once (inputs and outputs), for skipping cases that do not
    /// fit in the device's memory.
    pub fn device_bytes(self) -> u64 {
        let n = self.size() as u64;
        match self {
            Case::Add(_) | Case::Chain(_) => 12 * n,
            Case::Sigmoid(_) => 8 * n,
            // Softmax may keep a row-max and a row-sum temporary beside input and output.
            Case::Softmax(_) => 12 * n,
            Case::Sum(_) | Case::HostToDevice(_) | Case::DeviceToHost(_) => 4 * n,
            Case::Matmul(_) => 12 * n * n,
            Case::Latency | Case::FirstRun | Case::WarmRun => 4 * COMPILE_N as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_step_by_powers_of_four_and_end_at_the_maximum() {
        assert_eq!(sizes(12), vec![1 << 10, 1 << 12]);
        assert_eq!(sizes(13), vec![1 << 10, 1 << 12, 1 << 13]);
        assert_eq!(sizes(24).len(), 8);
    }

    #[test]
    fn the_plan_covers_every_workload() {
        let cpu = plan(&PlanOptions {
            max_log2: 12,
            gpu: false,
            large: false,
        });
        let mut names: Vec<&str> = cpu.iter().map(|c| c.workload()).collect();
        names.dedup();
        for w in [
            "add",
            "sigmoid",
            "relu(a+b)*b",
            "sum",
            "softmax rows",
            "matmul float32",
            "tiny kernel latency",
            "first run (compile)",
            "warm run (cached)",
            "host->device",
            "device->host",
        ] {
            assert!(names.contains(&w), "{w} missing");
        }
        assert!(!cpu.contains(&Case::Matmul(4096)));
        let gpu = plan(&PlanOptions {
            max_log2: 28,
            gpu: true,
            large: false,
        });
        assert!(gpu.contains(&Case::Matmul(4096)));
        assert!(gpu.contains(&Case::Add(1 << 28)));
    }

    #[test]
    fn matmul_rate_is_in_gflops() {
        assert_eq!(
            Case::Matmul(1024).work(),
            Some((2.0 * 1024f64.powi(3), "GFLOP/s"))
        );
        assert_eq!(Case::Add(10).work(), Some((120.0, "GB/s")));
        assert_eq!(Case::Latency.work(), None);
    }
}
