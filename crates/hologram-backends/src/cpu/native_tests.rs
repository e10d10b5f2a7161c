//! The native map loop against the values its shortcuts skip: `%gid` and constants stored or
//! computed with (their slots are written only when something reads them), over several chunks
//! and after other launches have left values in the per-thread register file.

use hologram_compiler::Canonical;
use hologram_isa::semantics::Value;

use super::CpuBackend;
use crate::backend::{Backend, BufferArg, KernelArg, LaunchConfig, Memory};

/// Elements per launch: three full chunks and a partial one.
const N: u32 = 3 * 4096 + 5;

fn launch_map(b: &CpuBackend, text: &str, input: &[u32]) -> Vec<u32> {
    let k = b
        .compile(&Canonical::assemble(text).expect("test kernel assembles"))
        .expect("test kernel compiles");
    let a: Memory = b.allocate(input.len() * 4).expect("allocate");
    b.copy_in(&a, 0, bytemuck::cast_slice(input))
        .expect("copy in");
    let c: Memory = b.allocate(N as usize * 4).expect("allocate");
    let args = [
        KernelArg::Buffer(BufferArg::whole(a)),
        KernelArg::Buffer(BufferArg::whole(c.clone())),
        KernelArg::Scalar(Value::U32(N)),
    ];
    b.launch(&k, &LaunchConfig::linear(N.div_ceil(256), 256), &args)
        .expect("launch");
    let mut out = vec![0u32; N as usize];
    b.copy_out(&c, 0, bytemuck::cast_slice_mut(&mut out))
        .expect("copy out");
    out
}

fn map(body: &str) -> String {
    format!(
        ".kernel m\n.param .buf.u32 a\n.param .buf.u32 c .rw\n.param .u32 n\n    setp.ge.u32 %p, %gid, n;\n@%p exit;\n{body}"
    )
}

/// A map with more registers than fit in a full chunk's register file (so it runs in narrower
/// chunks): a chain of 40 additions, then `%gid` added.
fn wide_map() -> String {
    let mut body = String::from("    ld.u32 %r0, a[%gid];\n");
    for i in 1..=40 {
        body += &format!("    add.u32 %r{i}, %r{}, {i};\n", i - 1);
    }
    body += "    add.u32 %s, %r40, %gid;\n    st.u32 c[%gid], %s;\n";
    map(&body)
}

#[test]
fn wide_maps_run_in_narrower_chunks() {
    let b = CpuBackend::new();
    let input: Vec<u32> = (0..N).map(|i| i.wrapping_mul(40_503)).collect();
    for _ in 0..2 {
        let before = b.stats().library_launches;
        let out = launch_map(&b, &wide_map(), &input);
        assert_eq!(
            b.stats().library_launches,
            before + 1,
            "the native loop ran"
        );
        for (i, &v) in out.iter().enumerate() {
            let expect = input[i].wrapping_add(40 * 41 / 2).wrapping_add(i as u32);
            assert_eq!(v, expect, "element {i}");
        }
    }
}

/// Each element's expected value, from its index.
type Expected<'a> = Box<dyn Fn(u32) -> u32 + 'a>;

#[test]
fn gid_and_constants_reach_the_native_loop_wherever_they_are_read() {
    let b = CpuBackend::new();
    let input: Vec<u32> = (0..N).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let cases: [(&str, Expected); 5] = [
        // Only loads and stores at %gid: the gid slot is never read.
        (
            "    ld.u32 %x, a[%gid];\n    add.u32 %y, %x, %x;\n    st.u32 c[%gid], %y;\n",
            Box::new(|i| input[i as usize].wrapping_mul(2)),
        ),
        // %gid stored as a value.
        ("    st.u32 c[%gid], %gid;\n", Box::new(|i| i)),
        // A literal stored as a value.
        ("    st.u32 c[%gid], 7;\n", Box::new(|_| 7)),
        // %gid and a literal computed with, next to a load at %gid.
        (
            "    ld.u32 %x, a[%gid];\n    mul.u32 %y, %gid, 3;\n    add.u32 %z, %x, %y;\n    st.u32 c[%gid], %z;\n",
            Box::new(|i| input[i as usize].wrapping_add(3 * i)),
        ),
        // A gather whose index is computed from %gid.
        (
            "    xor.u32 %j, %gid, 1;\n    min.u32 %k, %j, 12292;\n    ld.u32 %x, a[%k];\n    st.u32 c[%gid], %x;\n",
            Box::new(|i| input[(i ^ 1).min(N - 1) as usize]),
        ),
    ];
    // Twice over, so that every kernel also runs after the others have used the register file.
    for round in 0..2 {
        for (body, expect) in &cases {
            let before = b.stats().library_launches;
            let out = launch_map(&b, &map(body), &input);
            assert_eq!(
                b.stats().library_launches,
                before + 1,
                "the native loop ran:\n{body}"
            );
            for (i, &v) in out.iter().enumerate() {
                assert_eq!(
                    v,
                    expect(i as u32),
                    "round {round}, element {i} of:\n{body}"
                );
            }
        }
    }
}
