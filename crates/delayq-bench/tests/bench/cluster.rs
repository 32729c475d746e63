//! The cluster mode's short run (issue 10): W2a at scale 0.01 (1,000 messages) on one server
//! and on a 3-master cluster with P = 3. It must finish clean and report Redis CPU for each
//! of the three masters.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A CPU figure: a finite number, never negative.
fn is_cpu_figure(v: &Value) -> bool {
    v.as_f64().is_some_and(|x| x.is_finite() && x >= 0.0)
}

#[test]
fn w2a_on_a_three_master_cluster_reports_cpu_per_node() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-cluster-smoke");
    let _ = std::fs::remove_dir_all(&out);
    let run = Command::new(env!("CARGO_BIN_EXE_delayq-bench"))
        .args(["run", "--workloads", "W2a", "--scale", "0.01"])
        .args([
            "--cluster",
            "3",
            "--partitions",
            "3",
            "--skip-ceiling",
            "--check",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("cannot start delayq-bench");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "delayq-bench failed ({}):\n{stdout}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("Redis Cluster: 3 masters"), "{stdout}");

    let single = read_json(&out.join("W2a.json"));
    let single_nodes = single["redis_cpu"]["nodes"].as_array().map_or(0, Vec::len);
    assert_eq!(single_nodes, 1, "single node: {}", single["redis_cpu"]);

    let cluster = read_json(&out.join("W2a-cluster3-P3.json"));
    assert_eq!(cluster["errors"], Value::Array(vec![]), "{cluster}");
    assert_eq!(cluster["metrics"]["lost"], 0);
    assert_eq!(cluster["cluster"]["masters"], 3);
    assert_eq!(cluster["cluster"]["partitions"], 3);
    let cpu = &cluster["redis_cpu"];
    let nodes = cpu["nodes"].as_array().expect("redis_cpu.nodes");
    assert_eq!(nodes.len(), 3, "{cpu}");
    for node in nodes {
        assert!(is_cpu_figure(&node["cpu_s"]), "{node}");
        assert!(is_cpu_figure(&node["us_per_msg"]), "{node}");
    }
    assert!(is_cpu_figure(&cpu["total_us_per_msg"]), "{cpu}");
    assert!(
        is_cpu_figure(&cluster["cpu_vs_single"]["total_ratio"]),
        "{cluster}"
    );
}
