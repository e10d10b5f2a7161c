//! The `hologram` binary end to end.

use std::process::Command;

fn hologram(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hologram"))
        .args(args)
        .output()
        .expect("run hologram");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn saxpy() -> String {
    format!(
        "{}/../../examples/kernels/saxpy.hasm",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn info_lists_every_backend() {
    let (ok, out, _) = hologram(&["info"]);
    assert!(ok);
    for b in ["cuda", "metal", "vulkan", "dx12", "cpu"] {
        assert!(out.contains(&format!("  {b}")), "{out}");
    }
    assert!(out.contains("default:"));
}

#[test]
fn asm_prints_canonical_layout_and_reports_errors_with_positions() {
    let (ok, out, _) = hologram(&["asm", &saxpy()]);
    assert!(ok);
    assert!(out.contains("    fma.f32 %y, a, %x, %y;"), "{out}");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.hasm");
    std::fs::write(
        &bad,
        ".kernel k\n.param .buf.f32 y\n    st.f32 y[0], 1.0;\n",
    )
    .unwrap();
    let (ok, _, err) = hologram(&["asm", bad.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("bad.hasm:3:5: cannot write 'y'"), "{err}");
}

fn write_npy_f32(path: &std::path::Path, data: &[f32]) {
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        data.len()
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for v in data {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn run_reads_and_writes_npy() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let n = 1000;
    write_npy_f32(
        dir.path().join("x.npy").as_path(),
        &(0..n).map(|i| i as f32).collect::<Vec<_>>(),
    );
    write_npy_f32(dir.path().join("y.npy").as_path(), &vec![1.0; n]);
    let (ok, out, err) = hologram(&[
        "run",
        &saxpy(),
        "--backend",
        "cpu",
        "--grid",
        "4",
        "--block",
        "256",
        "--arg",
        "a=2",
        "--arg",
        &format!("x=@{}", p("x.npy")),
        "--arg",
        &format!("y=@{}", p("y.npy")),
        "--arg",
        "n=1000",
        "--out",
        &format!("y={}", p("out.npy")),
        "--repeat",
        "3",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("saxpy on cpu"), "{out}");
    let bytes = std::fs::read(p("out.npy")).unwrap();
    let data: Vec<f32> = bytes[bytes.len() - 4 * n..]
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert!(data
        .iter()
        .enumerate()
        .all(|(i, &v)| v == 2.0 * i as f32 + 1.0));
    // Wrong bindings are usage errors, not crashes.
    let (ok, _, err) = hologram(&["run", &saxpy(), "--arg", "a=2"]);
    assert!(!ok && err.contains("missing --arg x="), "{err}");
    let (ok, _, err) = hologram(&[
        "run",
        &saxpy(),
        "--arg",
        "a=two",
        "--arg",
        "x=zeros:4",
        "--arg",
        "y=zeros:4",
        "--arg",
        "n=4",
    ]);
    assert!(!ok && err.contains("'two' is not a valid f32"), "{err}");
}

#[test]
fn unavailable_backend_is_an_error_not_a_crash() {
    let (ok, _, err) = hologram(&["conformance", "--backend", "dx12"]);
    assert!(!ok);
    assert!(err.contains("the dx12 backend is not available"), "{err}");
}

#[test]
fn the_launch_timeout_comes_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("endless.hasm");
    std::fs::write(
        &file,
        ".kernel endless\n.param .buf.u32 stop\n.param .buf.u32 y .rw\n    ld.u32 %s, stop[0];\n    mov.u32 %x, 0;\nSPIN:\n    add.u32 %x, %x, 1;\n    setp.eq.u32 %p, %x, %s;\n@%p bra DONE;\n    bra SPIN;\nDONE:\n    st.u32 y[%gid], %x;\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hologram"))
        .args([
            "run",
            file.to_str().unwrap(),
            "--backend",
            "cpu",
            "--grid",
            "1",
        ])
        .args([
            "--block",
            "32",
            "--arg",
            "stop=zeros:1",
            "--arg",
            "y=zeros:32",
        ])
        .env("HOLOGRAM_LAUNCH_TIMEOUT_S", "0.05")
        .output()
        .expect("run hologram");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("kernel 'endless' ran past the launch timeout of 0.05 s")
            && err.contains("HOLOGRAM_LAUNCH_TIMEOUT_S"),
        "{err}"
    );
}
