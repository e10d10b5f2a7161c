//! What the `hologram` binary writes: output that ends its last line, no panic when the reader
//! closes the pipe early, `--out` files after a failed launch, and `%gid` in a 2-D launch.

use std::io::Read;
use std::process::{Command, Stdio};

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

fn kernel_file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write kernel");
    path.to_str().expect("utf-8 path").to_string()
}

/// The u32 elements of a `.npy` file written by `hologram run`.
fn read_npy_u32(path: &str) -> Vec<u32> {
    let bytes = std::fs::read(path).expect("npy written");
    let header = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[10 + header..]
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

const STORE: &str = ".kernel store\n.param .buf.u32 y .rw\n    st.u32 y[%gid], 1;\nEND:\n";

#[test]
fn asm_output_ends_with_one_newline() {
    let dir = tempfile::tempdir().unwrap();
    let f = kernel_file(&dir, "store.hasm", STORE);
    for args in [
        vec!["asm", &f],
        vec!["asm", "--canonical", &f],
        vec!["asm", &f, &f],
        vec!["asm", "--canonical", &f, &f],
    ] {
        let (ok, out, err) = hologram(&args);
        assert!(ok, "{err}");
        assert!(
            out.ends_with('\n') && !out.ends_with("\n\n"),
            "{args:?}: {out:?}"
        );
    }
    // Several files: each program is introduced by its file name.
    let (_, out, _) = hologram(&["asm", &f, &f]);
    assert_eq!(
        out.matches(&format!("// {f}\n.kernel store\n")).count(),
        2,
        "{out}"
    );
}

#[test]
fn asm_into_a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let f = kernel_file(&dir, "store.hasm", STORE);
    // Far more text than a pipe holds, so the writer meets the closed pipe.
    let mut child = Command::new(env!("CARGO_BIN_EXE_hologram"))
        .arg("asm")
        .args(std::iter::repeat_n(&f, 4000))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run hologram");
    let mut first = [0u8; 16];
    let mut stdout = child.stdout.take().expect("stdout");
    stdout.read_exact(&mut first).expect("some output");
    drop(stdout); // what `| head -c 16` does
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("stderr");
    let status = child.wait().expect("exits");
    assert!(!err.contains("panicked"), "{err}");
    assert!(status.success(), "{status:?}: {err}");
}

#[test]
fn a_failed_launch_still_writes_the_out_files_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // Every lane stores 7, then stores out of bounds.
    let f = kernel_file(
        &dir,
        "oob.hasm",
        ".kernel oob\n.param .buf.u32 y .rw\n    st.u32 y[%gid], 7;\n    add.u32 %j, %gid, 100;\n    st.u32 y[%j], 1;\n",
    );
    let out_file = dir.path().join("y.npy").to_str().unwrap().to_string();
    let (ok, _, err) = hologram(&[
        "run",
        &f,
        "--backend",
        "cpu",
        "--grid",
        "1",
        "--block",
        "8",
        "--arg",
        "y=zeros:8",
        "--out",
        &format!("y={out_file}"),
    ]);
    assert!(!ok);
    assert!(err.contains("the launch failed"), "{err}");
    assert!(err.contains("out-of-bounds access"), "{err}");
    assert!(
        err.contains(&format!(
            "{out_file} hold the buffers as the failed launch left them"
        )),
        "{err}"
    );
    assert_eq!(read_npy_u32(&out_file), vec![7; 8]);
}

#[test]
fn gid_counts_x_fastest_over_a_2d_launch() {
    let dir = tempfile::tempdir().unwrap();
    // img[gid.y * 8 + gid.x] = %gid: with --grid 2,2 --block 4,4 the lane at (4, 0) stores 4.
    let f = kernel_file(
        &dir,
        "gid.hasm",
        ".kernel gid2d\n.param .buf.u32 img .rw\n    mad.u32 %k, %gid.y, 8, %gid.x;\n    st.u32 img[%k], %gid;\n",
    );
    let out_file = dir.path().join("img.npy").to_str().unwrap().to_string();
    let (ok, _, err) = hologram(&[
        "run",
        &f,
        "--backend",
        "cpu",
        "--grid",
        "2,2",
        "--block",
        "4,4",
        "--arg",
        "img=zeros:64",
        "--out",
        &format!("img={out_file}"),
    ]);
    assert!(ok, "{err}");
    assert_eq!(read_npy_u32(&out_file), (0..64).collect::<Vec<u32>>());
}
