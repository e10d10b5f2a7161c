//! A backend that runs the CUDA backend's generated code on the host: each kernel is translated
//! to CUDA C exactly as for a GPU, compiled with the host C++ compiler against a shim of the CUDA
//! built-ins (`cuda_emulation/shim.h`, one std::thread per lane where a block synchronizes), and
//! run in a child process. Many kernels can share one translation unit ([`Emulator::prebuild`]):
//! the compiler's start-up and the prelude are then paid once per batch, not once per kernel.

#![allow(dead_code)] // each test binary uses part of it

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use hologram_backends::cpu::CpuMemory;
use hologram_backends::cuda::codegen::{self, prelude::PRELUDE, CodegenOptions};
use hologram_backends::launch::{check_launch, check_range};
use hologram_backends::{
    Backend, BackendError, BackendType, Capabilities, CompiledKernel, DeviceInfo, DeviceMemory,
    KernelArg, LaunchConfig, Memory, Result,
};
use hologram_compiler::patterns::Pattern;
use hologram_compiler::Canonical;
use hologram_isa::{Kernel, ParamKind, Type};

pub fn has_compiler() -> bool {
    Command::new("c++")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn shim_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cuda_emulation")
}

/// The C++ expression passing launch value `vals[i]` as scalar type `ty`.
fn scalar_arg(ty: Type, i: usize) -> String {
    match ty {
        Type::F32 => format!("hg_pun<hg_f32>((hg_u32)vals[{i}])"),
        Type::F64 => format!("hg_pun<hg_f64>(vals[{i}])"),
        Type::Pred => format!("(hg_u8)vals[{i}]"),
        _ => format!("(hg_{})vals[{i}]", ty.name()),
    }
}

/// True when the CUDA backend would also build the vectorized map form (see its `compile`).
pub fn vector_map(c: &Canonical) -> bool {
    matches!(c.pattern(), Some(Pattern::Map(_)))
}

/// A content hash for file names and keys (FNV-1a).
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

/// One kernel's generated code inside a translation unit: in its own namespace (without C
/// linkage, so the plain and vectorized forms of one kernel can share a unit), with a function
/// `hg_call{i}` that calls it with the launch's buffers and scalars.
fn kernel_unit(i: usize, kernel: &Kernel, code: &str, vector_map: bool) -> String {
    let body = code.strip_prefix(PRELUDE).unwrap_or(code);
    let body = body.replace("extern \"C\" __global__", "__global__");
    let mut args = Vec::new();
    for (j, p) in kernel.params.iter().enumerate() {
        match p.kind {
            ParamKind::Buffer { elem, .. } => {
                args.push(format!("(hg_{}*)bufs[{j}].data()", elem.name()));
                args.push(format!("(hg_u64)(vals[{j}] / {})", elem.size_bytes()));
            }
            ParamKind::Scalar(ty) => args.push(scalar_arg(ty, j)),
        }
    }
    args.push("flag, rec, 0u, tmo".into());
    // The divisors' multipliers and shifts, which `launch` appends after the parameters.
    let np = kernel.params.len();
    for k in 0..codegen::divide::divisor_params(kernel).len() {
        args.push(format!(
            "(hg_u32)vals[{}], (hg_u32)vals[{}]",
            np + 2 * k,
            np + 2 * k + 1
        ));
    }
    if vector_map {
        // The vectorized map's last argument: the lanes of the launch it stands for.
        args.push("(hg_u64)total".into());
    }
    format!(
        "namespace hgk{i} {{\n{body}\n}}\nstatic void hg_call{i}(std::vector<std::vector<unsigned char>>& bufs, std::vector<unsigned long long>& vals, hg_u32* flag, hg_u64* rec, unsigned long long total, unsigned long long tmo) {{\n  hgk{i}::{entry}({args});\n}}\n",
        entry = codegen::entry_name(&kernel.name),
        args = args.join(", "),
    )
}

/// A host program running kernel `argv[1]`'s first word of input: reads the launch from
/// `argv[1]`, runs it, and writes the buffers and the error record to `argv[2]`.
fn translation_unit(kernels: &[(&Kernel, String, bool)]) -> String {
    let mut out = String::from(
        "#include \"shim.h\"\n#include <cstdio>\n#include <thread>\n#include <vector>\n",
    );
    out.push_str(PRELUDE);
    let mut table = Vec::new();
    for (i, (kernel, code, vector_map)) in kernels.iter().enumerate() {
        out.push_str(&kernel_unit(i, kernel, code, *vector_map));
        let threaded = kernel.facts.uses_barrier || !kernel.shared.is_empty();
        table.push(format!(
            "{{hg_call{i}, {}, {threaded}}}",
            kernel.params.len() + 2 * codegen::divide::divisor_params(kernel).len()
        ));
    }
    out.push_str(&format!(
        r#"
typedef void (*hg_call_t)(std::vector<std::vector<unsigned char>>&, std::vector<unsigned long long>&, hg_u32*, hg_u64*, unsigned long long, unsigned long long);
struct hg_entry {{ hg_call_t call; int params; bool threaded; }};
static const hg_entry hg_kernels[] = {{ {table} }};
int main(int argc, char** argv) {{
  if (argc != 3) return 2;
  FILE* in = std::fopen(argv[1], "rb");
  if (!in) return 3;
  unsigned int which = 0, g[3], b[3];
  unsigned long long total = 0, tmo = 0;
  if (std::fread(&which, 4, 1, in) != 1 || which >= {count}u) return 4;
  if (std::fread(g, 4, 3, in) != 3 || std::fread(b, 4, 3, in) != 3 || std::fread(&total, 8, 1, in) != 1 || std::fread(&tmo, 8, 1, in) != 1) return 4;
  const hg_entry& k = hg_kernels[which];
  const int np = k.params;
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
      k.call(bufs, vals, flag, rec, total, tmo);
      if (bar) bar->arrive_and_drop();
    }};
    if (k.threaded) {{
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
        table = table.join(", "),
        count = kernels.len(),
    ));
    out
}

/// Where a kernel's code lives: an executable and the kernel's index in it.
#[derive(Clone)]
struct Built {
    exe: PathBuf,
    index: u32,
}

struct EmuKernel {
    kernel: Arc<Kernel>,
    plain: Built,
    /// The vectorized form, for element-wise maps (launched as the CUDA backend launches it).
    map: Option<Built>,
}

/// Runs generated CUDA C on the host.
pub struct Emulator {
    dir: PathBuf,
    built: Mutex<HashMap<u64, Built>>,
    launches: Mutex<u64>,
    units: Mutex<u64>,
}

impl Emulator {
    /// An emulator working in a fresh temporary folder (one per emulator: tests of one process
    /// run at once, and each removes its folder when done).
    pub fn new(tag: &str) -> Emulator {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "hologram-cuda-emulation-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Emulator {
            dir,
            built: Mutex::new(HashMap::new()),
            launches: Mutex::new(0),
            units: Mutex::new(0),
        }
    }

    /// Removes the temporary folder.
    pub fn clean_up(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    fn code(kernel: &Kernel, vector_map: bool) -> Result<String> {
        let opts = CodegenOptions {
            vector_map,
            ..CodegenOptions::default()
        };
        codegen::generate(kernel, &opts)
    }

    fn key(code: &str, vector_map: bool) -> u64 {
        fnv(code) ^ vector_map as u64
    }

    /// Compiles the code of every kernel (and the vectorized form of maps) into one executable,
    /// which later [`Backend::compile`] calls of these kernels use.
    pub fn prebuild(&self, kernels: &[Canonical]) -> Result<()> {
        let mut parts: Vec<(&Kernel, String, bool)> = Vec::new();
        let mut keys = Vec::new();
        for c in kernels {
            let forms: &[bool] = if vector_map(c) {
                &[false, true]
            } else {
                &[false]
            };
            for &vm in forms {
                let code = Self::code(c.kernel(), vm)?;
                let key = Self::key(&code, vm);
                if keys.contains(&key) || self.built.lock().unwrap().contains_key(&key) {
                    continue;
                }
                keys.push(key);
                parts.push((c.kernel(), code, vm));
            }
        }
        if parts.is_empty() {
            return Ok(());
        }
        let exe = self.compile_unit(&parts)?;
        let mut built = self.built.lock().unwrap();
        for (index, key) in keys.into_iter().enumerate() {
            built.insert(
                key,
                Built {
                    exe: exe.clone(),
                    index: index as u32,
                },
            );
        }
        Ok(())
    }

    /// The executable holding a kernel's code, building it alone if no batch did.
    fn build(&self, kernel: &Kernel, vm: bool) -> Result<Built> {
        let code = Self::code(kernel, vm)?;
        let key = Self::key(&code, vm);
        if let Some(b) = self.built.lock().unwrap().get(&key) {
            return Ok(b.clone());
        }
        // One kernel, one form: a unit of its own.
        let exe = self.compile_unit(&[(kernel, code, vm)])?;
        let b = Built { exe, index: 0 };
        self.built.lock().unwrap().insert(key, b.clone());
        Ok(b)
    }

    /// Compiles one translation unit; returns the executable.
    fn compile_unit(&self, parts: &[(&Kernel, String, bool)]) -> Result<PathBuf> {
        let unit = {
            let mut u = self.units.lock().unwrap();
            *u += 1;
            *u
        };
        let src = self.dir.join(format!("unit{unit}.cpp"));
        let exe = self.dir.join(format!("unit{unit}"));
        std::fs::write(&src, translation_unit(parts))
            .map_err(|e| BackendError::Device(e.to_string()))?;
        let out = Command::new("c++")
            .args(["-std=c++20", "-O0", "-pthread", "-w", "-I"])
            .arg(shim_dir())
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .output()
            .map_err(|e| BackendError::Device(e.to_string()))?;
        if !out.status.success() {
            let names: Vec<&str> = parts.iter().map(|p| p.0.name.as_str()).collect();
            return Err(BackendError::Compile {
                kernel: names.join(", "),
                log: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        Ok(exe)
    }

    fn mem<'a>(&self, m: &'a Memory) -> Result<&'a CpuMemory> {
        m.as_any()
            .downcast_ref::<CpuMemory>()
            .ok_or_else(|| BackendError::ForeignBuffer("not host memory".into()))
    }
}

impl Backend for Emulator {
    fn kind(&self) -> BackendType {
        BackendType::Cuda
    }
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            kind: BackendType::Cuda,
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
        let plain = self.build(kernel, false)?;
        // As on the CUDA backend, the intent decides: maps get the vectorized form too.
        let map = if vector_map(canonical) {
            Some(self.build(kernel, true)?)
        } else {
            None
        };
        Ok(CompiledKernel::new(
            kernel.clone(),
            Arc::new(EmuKernel {
                kernel: kernel.clone(),
                plain,
                map,
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
        let (built, grid, block, total) = match (&k.map, codegen::map::geometry(config)) {
            (Some(b), Some((grid, block, total))) => (b, grid, block, total),
            _ => (&k.plain, config.grid, config.block, 0),
        };
        let mut input = built.index.to_le_bytes().to_vec();
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
        // Each divisor's multiplier and shift, as the CUDA backend computes them at launch.
        let divisors = codegen::divide::divisor_params(&k.kernel);
        for word in codegen::divide::magic_arguments(&divisors, args) {
            input.extend_from_slice(&1u64.to_le_bytes());
            input.extend_from_slice(&word.to_le_bytes());
        }
        let inp = self.dir.join(format!("launch{n}.in"));
        let outp = self.dir.join(format!("launch{n}.out"));
        std::fs::write(&inp, &input).map_err(|e| BackendError::Device(e.to_string()))?;
        let status = Command::new(&built.exe)
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
        let _ = std::fs::remove_file(&inp);
        let _ = std::fs::remove_file(&outp);
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
