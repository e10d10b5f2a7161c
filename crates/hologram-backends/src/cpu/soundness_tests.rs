//! Launches that would be undefined behaviour in Rust if the backend did them carelessly: blocks
//! that race on a buffer, buffers that overlap with different element sizes, overlapping
//! outputs of the native loops, misaligned imported memory, host threads that copy while others
//! launch. Each checks what can be checked of the result; run under Miri
//! (`cargo +nightly miri test -p hologram-backends --lib cpu::`) they also check that no access
//! is a data race.

use std::sync::Arc;

use hologram_compiler::Canonical;
use hologram_isa::semantics::Value;

use super::CpuBackend;
use crate::backend::{Backend, BufferArg, Interop, KernelArg, LaunchConfig, Library, Memory};
use crate::error::BackendError;

fn compile(b: &CpuBackend, text: &str) -> crate::CompiledKernel {
    let c = Canonical::assemble(text).expect("test kernel assembles");
    b.compile(&c).expect("test kernel compiles")
}

fn buffer(b: &CpuBackend, words: &[u32]) -> Memory {
    let m = b.allocate(words.len() * 4).expect("allocate");
    b.copy_in(&m, 0, bytemuck::cast_slice(words))
        .expect("copy in");
    m
}

fn read(b: &CpuBackend, m: &Memory) -> Vec<u32> {
    let mut out = vec![0u32; m.size() / 4];
    b.copy_out(m, 0, bytemuck::cast_slice_mut(&mut out))
        .expect("copy out");
    out
}

fn whole(m: &Memory) -> KernelArg {
    KernelArg::Buffer(BufferArg::whole(m.clone()))
}

/// Blocks of two lanes (a `.shared` array keeps one block per batch, so batches are blocks and
/// run on several threads) that all add to one counter and read it back meanwhile.
const RACY: &str = ".kernel racy
.param .buf.u32 x .rw
.shared .u32 pad[1]
    atom.add.u32 %old, x[0], 1;
    ld.u32 %seen, x[0];
    add.u32 %i, %gid, 1;
    st.u32 x[%i], %seen;
";

#[test]
fn blocks_that_race_on_a_buffer_use_atomics() {
    let b = CpuBackend::new();
    let k = compile(&b, RACY);
    let blocks = 8u32;
    let x = buffer(&b, &vec![0u32; 1 + 2 * blocks as usize]);
    b.launch(&k, &LaunchConfig::linear(blocks, 2), &[whole(&x)])
        .expect("launch");
    let out = read(&b, &x);
    assert_eq!(out[0], 2 * blocks, "every lane's atomic add counts");
    // Each lane saw the counter after its own block's adds, and at most the final count.
    for (lane, &seen) in out[1..].iter().enumerate() {
        assert!((2..=2 * blocks).contains(&seen), "lane {lane} read {seen}");
    }
}

/// A read-only parameter bound to the same memory as a written one: blocks read elements that
/// other blocks store.
const ALIASED_INPUT: &str = ".kernel aliased
.param .buf.u32 src
.param .buf.u32 dst .rw
.param .buf.u32 seen .rw
.shared .u32 pad[1]
    xor.u32 %j, %gid, 2;
    ld.u32 %v, src[%j];
    st.u32 dst[%gid], 5;
    st.u32 seen[%gid], %v;
";

#[test]
fn an_input_that_aliases_an_output_is_read_atomically() {
    let b = CpuBackend::new();
    let k = compile(&b, ALIASED_INPUT);
    let lanes = 16usize;
    let data = buffer(&b, &vec![0u32; lanes]);
    let seen = buffer(&b, &vec![7u32; lanes]);
    let args = [whole(&data), whole(&data), whole(&seen)];
    b.launch(&k, &LaunchConfig::linear(lanes as u32 / 2, 2), &args)
        .expect("launch");
    assert_eq!(read(&b, &data), vec![5; lanes]);
    // Each lane read a neighbour of another block before or after that block's store.
    assert!(read(&b, &seen).iter().all(|&v| v == 0 || v == 5));
}

/// The same memory bound as u32 and as u8: blocks store words that other blocks read bytewise.
const MIXED: &str = ".kernel mixed
.param .buf.u32 words .rw
.param .buf.u8 bytes
.param .buf.u32 seen .rw
.shared .u32 pad[1]
    mov.u32 %i, %gid;
    st.u32 words[%i], 0x01010101;
    xor.u32 %j, %i, 1;
    mul.u32 %j, %j, 4;
    ld.u8 %v, bytes[%j];
    cvt.u32.u8 %w, %v;
    st.u32 seen[%i], %w;
";

#[test]
fn buffers_that_overlap_with_different_element_sizes_run_on_one_thread() {
    let b = CpuBackend::new();
    let k = compile(&b, MIXED);
    let lanes = 16usize;
    let words = buffer(&b, &vec![0u32; lanes]);
    let seen = buffer(&b, &vec![7u32; lanes]);
    let args = [whole(&words), whole(&words), whole(&seen)];
    b.launch(&k, &LaunchConfig::linear(lanes as u32 / 2, 2), &args)
        .expect("launch");
    assert_eq!(read(&b, &words), vec![0x01010101; lanes]);
    // Each lane reads its neighbour's low byte: 1 if that lane stored first, else 0.
    assert!(read(&b, &seen).iter().all(|&v| v <= 1));
}

/// An element-wise map whose output is its input shifted by one element: chunks would read
/// what neighbouring chunks write.
const SHIFT: &str = ".kernel shift
.param .buf.f32 x
.param .buf.f32 y .rw
.param .u32 n
    setp.ge.u32 %p, %gid, n;
@%p exit;
    ld.f32 %a, x[%gid];
    add.f32 %b, %a, 1.0;
    st.f32 y[%gid], %b;
";

#[test]
fn a_map_whose_output_overlaps_its_input_off_by_one_stays_in_bounds() {
    let b = CpuBackend::new();
    let k = compile(&b, SHIFT);
    let n = 1usize << 17; // past the native loop's parallel threshold
    let m = b.allocate((n + 1) * 4).expect("allocate");
    let x = KernelArg::Buffer(BufferArg {
        memory: m.clone(),
        offset: 4,
        len: n * 4,
    });
    let y = KernelArg::Buffer(BufferArg {
        memory: m.clone(),
        offset: 0,
        len: n * 4,
    });
    let args = [x, y, Value::U32(n as u32).into()];
    b.launch(&k, &LaunchConfig::for_elements(n as u64, 256), &args)
        .expect("launch");
    // On one thread in element order, every y[i] = x[i] + 1 = old m[i + 1] + 1 = 1.
    let mut out = vec![0f32; n + 1];
    b.copy_out(&m, 0, bytemuck::cast_slice_mut(&mut out))
        .expect("copy out");
    assert!(out[..n].iter().all(|&v| v == 1.0));
}

#[test]
fn misaligned_imported_memory_is_an_error() {
    let b = CpuBackend::new();
    let k = compile(&b, RACY);
    let host: Arc<Vec<u64>> = Arc::new(vec![0u64; 8]);
    let address = host.as_ptr() as u64 + 1;
    let owner: crate::backend::MemoryOwner = Box::new(host.clone());
    // SAFETY: bytes 1..41 of a live 64-byte allocation, kept alive by `owner`; nothing else
    // writes it (the test only reads `host` after the memory is dropped).
    let m = unsafe { b.import_memory(address, 40, owner) }.expect("import");
    let err = b
        .launch(&k, &LaunchConfig::linear(1, 2), &[whole(&m)])
        .unwrap_err();
    assert!(
        matches!(&err, BackendError::InvalidArgument { reason, .. } if reason.contains("aligned")),
        "{err}"
    );
    drop(m);
    assert!(host.iter().all(|&w| w == 0), "nothing was written");
}

#[test]
fn copies_on_one_thread_and_launches_on_another_do_not_race() {
    let b = Arc::new(CpuBackend::new());
    let k = compile(&b, RACY);
    let x = buffer(&b, &[0u32; 9]);
    let reader = {
        let (b, x) = (b.clone(), x.clone());
        std::thread::spawn(move || {
            for _ in 0..4 {
                let v = read(&b, &x);
                assert!(v[0] <= 4 * 8, "{v:?}");
            }
        })
    };
    for _ in 0..4 {
        b.launch(&k, &LaunchConfig::linear(4, 2), &[whole(&x)])
            .expect("launch");
    }
    reader.join().expect("reader thread");
    assert_eq!(read(&b, &x)[0], 4 * 8);
}

/// Memory whose `size` overstates the allocation it hands out through `as_any`.
struct Overstated(super::CpuMemory);

impl crate::backend::DeviceMemory for Overstated {
    fn size(&self) -> usize {
        1 << 30
    }
    fn as_any(&self) -> &dyn std::any::Any {
        &self.0
    }
}

#[test]
fn a_memory_wrapper_that_overstates_its_size_cannot_reach_past_the_allocation() {
    let b = CpuBackend::new();
    let k = compile(&b, RACY);
    let lying: Memory = Arc::new(Overstated(super::CpuMemory::new(16).expect("allocate")));
    let far = KernelArg::Buffer(BufferArg {
        memory: lying.clone(),
        offset: 1 << 20,
        len: 64,
    });
    let err = b
        .launch(&k, &LaunchConfig::linear(1, 2), &[far])
        .unwrap_err();
    assert!(matches!(err, BackendError::CopyOutOfRange { .. }), "{err}");
    let arg = BufferArg {
        memory: lying,
        offset: 0,
        len: 4096,
    };
    let desc = crate::library::GemmDesc::new(hologram_isa::Type::F32, 8, 8, 8);
    let err = b.gemm(&desc, &arg, &arg, &arg).unwrap_err();
    assert!(matches!(err, BackendError::CopyOutOfRange { .. }), "{err}");
}

#[test]
fn a_gemm_operand_past_its_allocation_is_an_error() {
    let b = CpuBackend::new();
    let small = b.allocate(256).expect("allocate");
    let past = BufferArg {
        memory: small.clone(),
        offset: 1 << 20,
        len: 256,
    };
    let inside = BufferArg::whole(small);
    let desc = crate::library::GemmDesc::new(hologram_isa::Type::F32, 4, 4, 4);
    assert!(b.gemm(&desc, &past, &inside, &inside).is_err());
}

/// A batch whose C matrices are one and the same (C stride 0), large enough for the GEMM to be
/// shared among threads: matrices that meet must not be written by two threads at once. With
/// beta = 1 each product adds to C in turn, exactly (small integers). Sharing them among
/// threads loses sums in some runs (1 in 3 here); under Miri it is a reported data race.
#[test]
fn a_batch_whose_c_matrices_meet_accumulates_one_product_at_a_time() {
    let b = CpuBackend::new();
    let (m, n, k, batch) = (64, 64, 64, 32);
    let a: Vec<f32> = (0..batch * m * k).map(|i| (i % 5) as f32 - 2.0).collect();
    let bm: Vec<f32> = (0..batch * k * n).map(|i| (i % 3) as f32 - 1.0).collect();
    let c0: Vec<f32> = (0..m * n).map(|i| (i % 7) as f32).collect();
    let upload = |v: &[f32]| BufferArg::whole(buffer(&b, bytemuck::cast_slice(v)));
    let (ga, gb, gc) = (upload(&a), upload(&bm), upload(&c0));
    let mut desc = crate::library::GemmDesc::new(hologram_isa::Type::F32, m, n, k);
    (desc.batch, desc.stride_c, desc.beta) = (batch, 0, 1.0);
    b.gemm(&desc, &ga, &gb, &gc).expect("gemm");
    let got: Vec<f32> = bytemuck::cast_slice(&read(&b, &gc.memory)).to_vec();
    let mut want = c0;
    for z in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let s: f32 = (0..k)
                    .map(|p| a[z * m * k + i * k + p] * bm[z * k * n + p * n + j])
                    .sum();
                want[i * n + j] += s;
            }
        }
    }
    assert_eq!(got, want);
}
