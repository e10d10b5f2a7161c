//! The CUDA backend's generated code, run on the host: every conformance program is translated
//! to CUDA C exactly as for a GPU, compiled with the host C++ compiler against a shim of the CUDA
//! built-ins (`cuda_emulation/shim.h`, one std::thread per lane where a block synchronizes), and
//! run through the same harness as the real backends. This checks the code generator's logic
//! (control flow, types, conversions, bounds checks, atomics) on machines without a GPU; what it
//! cannot check is CUDA's own math library and hardware, which the GPU run covers.
//!
//! It also cross-checks the emulated code against the CPU interpreter on every buffer.
//!
//! Slow (it builds 78 C++ programs), so it is ignored by default: `cargo test -p
//! hologram-conformance --test cuda_emulation -- --ignored` (scripts/test.sh runs it). Needs `c++`
//! (GCC or Clang with C++20); skipped with a message when there is none, unless
//! `HOLOGRAM_REQUIRE_EMULATION=1`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use hologram_backends::cpu::CpuMemory;
use hologram_backends::cuda::codegen::{self, CodegenOptions};
use hologram_backends::launch::{check_launch, check_range};
use hologram_backends::{
    Backend, BackendError, BackendKind, Capabilities, CompiledKernel, DeviceInfo, DeviceMemory,
    KernelArg, LaunchConfig, Memory, Result,
};
use hologram_compiler::patterns::Pattern;
use hologram_compiler::Canonical;
use hologram_isa::{Kernel, ParamKind, Type};

fn work_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("hologram-cuda-emulation-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn shim_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cuda_emulation")
}

fn has_compiler() -> bool {
    Command::new("c++")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The C++ expression passing launch value `vals[i]` as scalar type `ty`.
fn scalar_arg(ty: Type, i: usize) -> String {
    match ty {
        Type::F32 => format!("hg_pun<hg_f32>((hg_u32)vals[{i}])"),
        Type::F64 => format!("hg_pun<hg_f64>(vals[{i}])"),
        Type::Pred => format!("(hg_u8)vals[{i}]"),
        _ => format!("({})vals[{i}]", c_type(ty)),
    }
}

fn c_type(ty: Type) -> String {
    format!("hg_{}", ty.name())
}

/// A host program that reads a launch from argv[1], runs it, and writes buffers and the error
/// record to argv[2].
fn host_program(kernel: &Kernel, code: &str, vector_map: bool) -> String {
    let mut args = Vec::new();
    for (i, p) in kernel.params.iter().enumerate() {
        match p.kind {
            ParamKind::Buffer { elem, .. } => {
                args.push(format!("({}*)bufs[{i}].data()", c_type(elem)));
                args.push(format!("(hg_u64)(vals[{i}] / {})", elem.size_bytes()));
            }
            ParamKind::Scalar(ty) => args.push(scalar_arg(ty, i)),
        }
    }
    args.push("flag, rec, 0u, tmo".into());
    if vector_map {
        // The vectorized map's last argument: the lanes of the launch it stands for.
        args.push("(hg_u64)total".into());
    }
    let threaded = kernel.facts.uses_barrier || !kernel.shared.is_empty();
    let entry = codegen::entry_name(&kernel.name);
    format!(
        r#"#include "shim.h"
#include <cstdio>
#include <thread>
#include <vector>
{code}
int main(int argc, char** argv) {{
  if (argc != 3) return 2;
  FILE* in = std::fopen(argv[1], "rb");
  if (!in) return 3;
  unsigned int g[3], b[3];
  unsigned long long total = 0, tmo = 0;
  if (std::fread(g, 4, 3, in) != 3 || std::fread(b, 4, 3, in) != 3 || std::fread(&total, 8, 1, in) != 1 || std::fread(&tmo, 8, 1, in) != 1) return 4;
  const int np = {np};
  std::vector<std::vector<unsigned char>> bufs(np + 1);
  std::vector<unsigned long long> vals(np + 1, 0);
  for (int i = 0; i < np; i++) {{
    unsigned long long kind = 0, v = 0;
    if (std::fread(&kind, 8, 1, in) != 1 || std::fread(&v, 8, 1, in) != 1) return 5;
    vals[i] = v;
    if (kind == 0) {{ bufs[i].resize(v + 16); if (v && std::fread(bufs[i].data(), 1, v, in) != v) return 6; }}
  }}
  std::fclose(in);
  hg_u32 flag[2] = {{0, 0}}; hg_u64 rec[5] = {{0, 0, 0, 0, 0}};
  blockDim = {{b[0], b[1], b[2]}}; gridDim = {{g[0], g[1], g[2]}};
  const unsigned int lanes = b[0] * b[1] * b[2];
  for (unsigned int bz = 0; bz < g[2]; bz++) for (unsigned int by = 0; by < g[1]; by++) for (unsigned int bx = 0; bx < g[0]; bx++) {{
    auto lane = [&](unsigned int l, std::barrier<>* bar) {{
      blockIdx = {{bx, by, bz}};
      threadIdx = {{l % b[0], (l / b[0]) % b[1], l / (b[0] * b[1])}};
      hg_emu_barrier = bar;
      {entry}({args});
      if (bar) bar->arrive_and_drop();
    }};
    if ({threaded}) {{
      hg_emu_new_block();
      std::barrier<> bar(lanes);
      std::vector<std::thread> ts;
      for (unsigned int l = 0; l < lanes; l++) ts.emplace_back(lane, l, &bar);
      for (auto& t : ts) t.join();
    }} else {{
      for (unsigned int l = 0; l < lanes; l++) lane(l, nullptr);
    }}
  }}
  FILE* out = std::fopen(argv[2], "wb");
  if (!out) return 7;
  for (int i = 0; i < np; i++) if (!bufs[i].empty()) std::fwrite(bufs[i].data(), 1, vals[i], out);
  std::fwrite(rec, 8, 5, out);
  std::fclose(out);
  return 0;
}}
"#,
        np = kernel.params.len(),
        args = args.join(", "),
    )
}

struct EmuKernel {
    kernel: Arc<Kernel>,
    exe: PathBuf,
    /// The vectorized form, for element-wise maps (launched as the CUDA backend launches it).
    map_exe: Option<PathBuf>,
}

/// Runs generated CUDA C on the host.
struct Emulator {
    dir: PathBuf,
    built: Mutex<HashMap<String, PathBuf>>,
    launches: Mutex<u64>,
}

impl Emulator {
    fn build(&self, kernel: &Kernel, vector_map: bool) -> Result<PathBuf> {
        let opts = CodegenOptions {
            vector_map,
            ..CodegenOptions::default()
        };
        let code = codegen::generate(kernel, &opts)?;
        let program = host_program(kernel, &code, vector_map);
        let key = format!("{}", hologram_compiler_free_hash(&program));
        if let Some(p) = self.built.lock().unwrap().get(&key) {
            return Ok(p.clone());
        }
        let src = self.dir.join(format!("{}_{key}.cpp", kernel.name));
        let exe = self.dir.join(format!("{}_{key}", kernel.name));
        std::fs::write(&src, program).map_err(|e| BackendError::Device(e.to_string()))?;
        let out = Command::new("c++")
            .args(["-std=c++20", "-O0", "-pthread", "-w", "-I"])
            .arg(shim_dir())
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .output()
            .map_err(|e| BackendError::Device(e.to_string()))?;
        if !out.status.success() {
            return Err(BackendError::Compile {
                kernel: kernel.name.clone(),
                log: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        self.built.lock().unwrap().insert(key, exe.clone());
        Ok(exe)
    }

    fn mem<'a>(&self, m: &'a Memory) -> Result<&'a CpuMemory> {
        m.as_any()
            .downcast_ref::<CpuMemory>()
            .ok_or_else(|| BackendError::ForeignBuffer("not host memory".into()))
    }
}

/// True when the CUDA backend would also build the vectorized map form (see its `compile`).
fn vector_map(c: &Canonical) -> bool {
    matches!(c.pattern(), Some(Pattern::Map(m)) if !m.gather)
}

/// A content hash for file names (FNV-1a; collisions only cost a rebuild of the same name).
fn hologram_compiler_free_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

impl Backend for Emulator {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            kind: BackendKind::Cuda,
            name: "generated CUDA C emulated on the host".into(),
            memory_bytes: None,
            compute_units: 1,
            arch: "host".into(),
            driver: None,
        }
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_block_lanes: 1024,
            max_shared_bytes: hologram_isa::MAX_SHARED_BYTES,
            host_memory: false,
        }
    }
    fn allocate(&self, bytes: usize) -> Result<Memory> {
        Ok(Arc::new(CpuMemory::new(bytes)?))
    }
    fn copy_in(&self, dst: &Memory, offset: usize, src: &[u8]) -> Result<()> {
        let m = self.mem(dst)?;
        check_range(offset, src.len(), m.size())?;
        // SAFETY: range checked; test-only host memory.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), m.as_ptr().add(offset), src.len()) };
        Ok(())
    }
    fn copy_out(&self, src: &Memory, offset: usize, dst: &mut [u8]) -> Result<()> {
        let m = self.mem(src)?;
        check_range(offset, dst.len(), m.size())?;
        // SAFETY: range checked.
        unsafe {
            std::ptr::copy_nonoverlapping(m.as_ptr().add(offset), dst.as_mut_ptr(), dst.len())
        };
        Ok(())
    }
    fn copy(&self, src: &Memory, so: usize, dst: &Memory, d_o: usize, len: usize) -> Result<()> {
        let mut tmp = vec![0u8; len];
        self.copy_out(src, so, &mut tmp)?;
        self.copy_in(dst, d_o, &tmp)
    }
    fn compile(&self, canonical: &Canonical) -> Result<CompiledKernel> {
        let kernel = canonical.kernel();
        let exe = self.build(kernel, false)?;
        // As on the CUDA backend, the intent decides: maps get the vectorized form too.
        let map_exe = if vector_map(canonical) {
            Some(self.build(kernel, true)?)
        } else {
            None
        };
        Ok(CompiledKernel::new(
            kernel.clone(),
            Arc::new(EmuKernel {
                kernel: kernel.clone(),
                exe,
                map_exe,
            }),
        ))
    }
    fn launch(
        &self,
        kernel: &CompiledKernel,
        config: &LaunchConfig,
        args: &[KernelArg],
    ) -> Result<()> {
        let k: &EmuKernel = kernel
            .downcast()
            .ok_or_else(|| BackendError::Device("foreign kernel".into()))?;
        check_launch(&k.kernel, config, args, &self.capabilities())?;
        let n = {
            let mut l = self.launches.lock().unwrap();
            *l += 1;
            *l
        };
        // Maps run in their vectorized shape, as on a GPU.
        let (exe, grid, block, total) = match (&k.map_exe, codegen::map::geometry(config)) {
            (Some(exe), Some((grid, block, total))) => (exe, grid, block, total),
            _ => (&k.exe, config.grid, config.block, 0),
        };
        let mut input = Vec::new();
        for v in grid.iter().chain(&block) {
            input.extend_from_slice(&v.to_le_bytes());
        }
        input.extend_from_slice(&total.to_le_bytes());
        let tmo = config
            .effective_timeout()
            .map_or(0u64, |t| t.as_nanos().clamp(1, u64::MAX as u128) as u64);
        input.extend_from_slice(&tmo.to_le_bytes());
        let mut buffers = Vec::new();
        for arg in args {
            match arg {
                KernelArg::Buffer(b) => {
                    input.extend_from_slice(&0u64.to_le_bytes());
                    input.extend_from_slice(&(b.len as u64).to_le_bytes());
                    let mut data = vec![0u8; b.len];
                    self.copy_out(&b.memory, b.offset, &mut data)?;
                    input.extend_from_slice(&data);
                    buffers.push(b.clone());
                }
                KernelArg::Scalar(v) => {
                    input.extend_from_slice(&1u64.to_le_bytes());
                    input.extend_from_slice(&v.to_bits().to_le_bytes());
                }
            }
        }
        let inp = self.dir.join(format!("launch{n}.in"));
        let outp = self.dir.join(format!("launch{n}.out"));
        std::fs::write(&inp, &input).map_err(|e| BackendError::Device(e.to_string()))?;
        let status = Command::new(exe)
            .arg(&inp)
            .arg(&outp)
            .status()
            .map_err(|e| BackendError::Device(e.to_string()))?;
        if !status.success() {
            return Err(BackendError::Device(format!(
                "emulated kernel exited with {status}"
            )));
        }
        let out = std::fs::read(&outp).map_err(|e| BackendError::Device(e.to_string()))?;
        let mut at = 0;
        for b in &buffers {
            self.copy_in(&b.memory, b.offset, &out[at..at + b.len])?;
            at += b.len;
        }
        let mut rec = [0u64; 5];
        for (i, r) in rec.iter_mut().enumerate() {
            let s = at + 8 * i;
            *r = u64::from_le_bytes(out[s..s + 8].try_into().expect("8 bytes"));
        }
        match codegen::launch_error(&k.kernel, &rec) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}

#[test]
#[ignore = "slow (builds 78 C++ programs): scripts/test.sh runs it with --ignored"]
fn conformance_suite_passes_on_emulated_cuda_code() {
    if !has_compiler() {
        assert!(
            std::env::var("HOLOGRAM_REQUIRE_EMULATION").as_deref() != Ok("1"),
            "no C++ compiler, and HOLOGRAM_REQUIRE_EMULATION=1"
        );
        println!("skipped: no C++ compiler (c++) for the CUDA emulation");
        return;
    }
    let suite =
        hologram_conformance::Suite::load(hologram_conformance::default_dir()).expect("load suite");
    let emu = Arc::new(Emulator {
        dir: work_dir(),
        built: Mutex::new(HashMap::new()),
        launches: Mutex::new(0),
    });
    // Build every program first, two at a time.
    let kernels: Vec<Canonical> = suite.cases.iter().map(|c| c.canonical.clone()).collect();
    let next = Arc::new(Mutex::new(0usize));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (emu, next, kernels) = (emu.clone(), next.clone(), kernels.clone());
            std::thread::spawn(move || loop {
                let i = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some(c) = kernels.get(i) else { break };
                if let Err(e) = emu.build(c.kernel(), false) {
                    panic!("{}: {e}", c.name());
                }
                if vector_map(c) {
                    if let Err(e) = emu.build(c.kernel(), true) {
                        panic!("{} (vectorized map): {e}", c.name());
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("build worker");
    }
    let maps = kernels.iter().filter(|c| vector_map(c)).count();
    println!("{maps} programs are element-wise maps and run in the vectorized form");
    let report = suite.run(emu.as_ref());
    println!("{}", report.summary());
    let cross = hologram_conformance::cross_check(
        &suite,
        &hologram_backends::CpuBackend::new(),
        emu.as_ref(),
    );
    println!("{}", cross.summary());
    let _ = std::fs::remove_dir_all(&emu.dir);
    assert!(report.all_passed(), "{}", report.summary());
    assert_eq!(cross.mismatches(), 0, "{}", cross.summary());
}
