//! Every program of the conformance suite (`tests/conformance/*.hasm`) assembles, and each has a
//! `NAME.json` that binds every kernel parameter by name.

use std::path::{Path, PathBuf};

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance")
}

fn programs() -> Vec<PathBuf> {
    let dir = suite_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "hasm"))
        .collect();
    files.sort();
    files
}

#[test]
fn conformance_programs_assemble() {
    let files = programs();
    assert!(
        files.len() >= 48,
        "expected at least 48 conformance programs, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for path in &files {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        if !text.starts_with("// ") {
            failures.push(format!(
                "{name}: the first line must be a '// ' comment saying what it tests"
            ));
        }
        let kernel = match hologram_isa::assemble(&text) {
            Ok(k) => k,
            Err(e) => {
                failures.push(format!("{name}: does not assemble: {e}"));
                continue;
            }
        };
        // The printed program assembles to the same kernel.
        let printed = hologram_isa::print(&kernel.to_program());
        match hologram_isa::assemble(&printed) {
            Ok(again) if again == kernel => {}
            Ok(_) => failures.push(format!(
                "{name}: printing and assembling again changes the kernel"
            )),
            Err(e) => failures.push(format!(
                "{name}: the printed program does not assemble: {e}"
            )),
        }
        let json_path = path.with_extension("json");
        let Ok(json) = std::fs::read_to_string(&json_path) else {
            failures.push(format!("{name}: missing {name}.json"));
            continue;
        };
        let Some(args_at) = json.find("\"args\"") else {
            failures.push(format!("{name}: {name}.json has no \"args\""));
            continue;
        };
        let args = &json[args_at..];
        for param in &kernel.params {
            if !args.contains(&format!("\"{}\"", param.name)) {
                failures.push(format!(
                    "{name}: {name}.json does not bind parameter '{}'",
                    param.name
                ));
            }
        }
        if !json.contains("\"expect\"") && !json.contains("\"expect_error\"") {
            failures.push(format!(
                "{name}: {name}.json has neither \"expect\" nor \"expect_error\""
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} problem(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_json_has_a_program() {
    let dir = suite_dir();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            assert!(
                path.with_extension("hasm").exists(),
                "{} has no .hasm",
                path.display()
            );
        }
    }
}
