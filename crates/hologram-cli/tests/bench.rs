//! `hologram bench` end to end on the CPU: every workload gives rows with positive times, in
//! the row schema of bench/run.py. No timing is asserted.

use std::process::Command;

const WORKLOADS: [&str; 11] = [
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
];

#[test]
fn quick_cpu_bench_writes_rows_for_every_workload() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let path = dir.path().join("out").join("bench.json");
    let out = Command::new(env!("CARGO_BIN_EXE_hologram"))
        .args(["bench", "--quick", "--backend", "cpu", "--max-log2", "12"])
        .arg("--json")
        .arg(&path)
        .output()
        .expect("run hologram bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("median"), "{stdout}");

    let text = std::fs::read_to_string(&path).expect("the JSON file");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(doc["device"], "cpu");
    assert!(doc["machine"]["cores"].as_u64().unwrap_or(0) >= 1, "{text}");
    assert_eq!(doc["machine"]["hologram_device"]["backend"], "cpu");
    let rows = doc["rows"].as_array().expect("rows");
    for w in WORKLOADS {
        let mine: Vec<_> = rows.iter().filter(|r| r["workload"] == w).collect();
        assert!(!mine.is_empty(), "no rows for {w}: {text}");
        for r in mine {
            assert_eq!(r["impl"], "hologram-rust", "{r}");
            assert!(r.get("error").is_none(), "{r}");
            assert!(r["size"].as_u64().unwrap_or(0) >= 1, "{r}");
            let (med, min) = (&r["median_us"], &r["min_us"]);
            assert!(med.as_f64().unwrap_or(0.0) > 0.0, "{r}");
            assert!(min.as_f64().unwrap_or(0.0) > 0.0, "{r}");
            assert!(min.as_f64() <= med.as_f64(), "{r}");
            assert!(r["note"].is_string(), "{r}");
            if let Some(rate) = r.get("rate") {
                assert!(rate.as_f64().unwrap_or(0.0) > 0.0, "{r}");
                assert!(r["unit"] == "GB/s" || r["unit"] == "GFLOP/s", "{r}");
            }
        }
    }
    // Sizes 2^10 and 2^12 only.
    let sizes: Vec<u64> = rows
        .iter()
        .filter(|r| r["workload"] == "add")
        .filter_map(|r| r["size"].as_u64())
        .collect();
    assert_eq!(sizes, vec![1024, 4096]);
}

#[test]
fn bench_rejects_a_size_out_of_range() {
    let out = Command::new(env!("CARGO_BIN_EXE_hologram"))
        .args(["bench", "--max-log2", "40"])
        .output()
        .expect("run hologram bench");
    assert!(!out.status.success());
}
