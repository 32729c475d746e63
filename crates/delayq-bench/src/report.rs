//! What a run writes: one JSON per workload with everything the driver knew, and the
//! printed summary table (with delayq's throughput as ratios to the raw Redis ceiling, and
//! with `--cluster` a section comparing the cluster runs with the single node's).

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::ceiling::Ceiling;
use crate::driver::cluster::ClusterSetup;
use crate::driver::env::Environment;
use crate::driver::redis_cpu::{CpuVsSingle, RedisCpu};
use crate::error::Result;
use crate::metrics::{MemoryInfo, Metrics};
use crate::workload::Workload;

/// The result of one workload, written as `<workload>.json`.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadResult {
    /// Workload id.
    pub workload: Workload,
    /// The system under test.
    pub system: String,
    /// How the agents reached it: `library`, `http` or `push`.
    pub via: String,
    /// Its version, from the agents' `ready`.
    pub system_version: Option<String>,
    /// N.
    pub n: u64,
    /// SCALE.
    pub scale: f64,
    /// The producer's `ready` config, verbatim.
    pub producer_config: Value,
    /// The consumers' `ready` config, verbatim (the first consumer's).
    pub consumer_config: Value,
    /// Consumer processes.
    pub consumer_processes: usize,
    /// The raw `produced` event.
    pub produced: Value,
    /// The consumers' raw `stopped` events.
    pub stopped: Vec<Value>,
    /// W2a: when the driver told the consumers to start, wall clock ms.
    pub consume_signal_ms: Option<f64>,
    /// W4: memory before production.
    pub memory_before: Option<MemoryInfo>,
    /// W4: memory after production.
    pub memory_after: Option<MemoryInfo>,
    /// Everything that went wrong; a clean run has none.
    pub errors: Vec<String>,
    /// The numbers.
    pub metrics: Metrics,
    /// Wall-clock seconds the workload took, server start to agents gone.
    pub wall_s: f64,
    /// The redis-server's arguments.
    pub redis_args: Vec<String>,
    /// Agent logs and deliveries files.
    pub files: Vec<String>,
    /// The raw Redis ceiling of this run.
    pub ceiling: Option<Ceiling>,
    /// Where the run happened.
    pub environment: Environment,
    /// The Redis Cluster it ran on (`--cluster`); absent for one server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterSetup>,
    /// Redis CPU per message (every run of a `--cluster` invocation, single-node included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_cpu: Option<RedisCpu>,
    /// A cluster run's CPU figures over the single node's in the same invocation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_vs_single: Option<CpuVsSingle>,
}

impl WorkloadResult {
    /// Whether this workload makes the run fail: lost messages or errors; with `check`,
    /// duplicates too.
    pub fn failed(&self, check: bool) -> bool {
        !self.errors.is_empty()
            || self.metrics.lost.unwrap_or(0) > 0
            || (check && self.metrics.duplicates.unwrap_or(0) > 0)
    }

    /// The workload id, with `/http` (`/push`) for runs through the HTTP API (push delivery)
    /// and `/clusterM-PN` for
    /// runs on a cluster of M masters with N partitions.
    pub fn label(&self) -> String {
        let mut label = self.workload.to_string();
        if self.via != "library" {
            label = format!("{label}/{}", self.via);
        }
        if let Some(c) = self.cluster {
            label = format!("{label}/cluster{}-P{}", c.masters, c.partitions);
        }
        label
    }

    /// Writes `dir/<workload>.json` (`<workload>-http.json` through HTTP, `-push.json` by push,
    /// `<workload>-cluster3-P6.json` on a cluster).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(format!("{}.json", self.label().replace('/', "-")));
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(&path, json + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()).into())
    }
}

fn num(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.decimals$}"))
}

fn int(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// The summary table(s) as text; `cluster` holds the runs on a cluster (none without
/// `--cluster`), shown in a section of their own.
pub fn summary(
    results: &[WorkloadResult],
    cluster: &[WorkloadResult],
    ceiling: Option<&Ceiling>,
) -> String {
    let mut s = String::new();
    let header = [
        "workload",
        "n",
        "enq/s",
        "e2e/s",
        "cons/s",
        "p50ms",
        "p90ms",
        "p99ms",
        "p99.9ms",
        "maxms",
        "minms",
        "early",
        "drain_s",
        "ideal_s",
        "window_s",
        "lost",
        "dups",
        "B/msg",
        "pending",
        "redis_us/msg",
        "main_us/msg",
        "calls/msg",
        "scripts/msg",
        "errors",
    ];
    let mut rows = vec![header.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
    for r in results {
        let m = &r.metrics;
        let l = m.lateness.clone().unwrap_or_default();
        let has_lateness = l.count > 0;
        // Rates only where the workload defines them; W1's e2e rate is set by its delays.
        let e2e = matches!(r.workload, Workload::W2a | Workload::W2b)
            .then_some(m.e2e_rate)
            .flatten();
        rows.push(vec![
            r.label(),
            r.n.to_string(),
            num(m.enqueue_rate, 0),
            num(e2e, 0),
            num(m.consume_rate, 0),
            num(l.p50_ms, 1),
            num(l.p90_ms, 1),
            num(l.p99_ms, 1),
            num(l.p999_ms, 1),
            num(l.max_ms, 1),
            num(l.min_ms, 1),
            if has_lateness {
                l.early_count.to_string()
            } else {
                "-".into()
            },
            num(
                (r.workload == Workload::W1).then_some(m.drain_s).flatten(),
                2,
            ),
            num(
                (r.workload == Workload::W1)
                    .then_some(m.ideal_drain_s)
                    .flatten(),
                2,
            ),
            num(
                (r.workload == Workload::W1)
                    .then_some(m.due_window_s)
                    .flatten(),
                2,
            ),
            int(m.lost),
            int(m.duplicates),
            num(m.bytes_per_msg, 1),
            int(m.pending_after),
            num(r.redis_cpu.as_ref().map(|c| c.total_us_per_msg), 2),
            num(
                r.redis_cpu
                    .as_ref()
                    .and_then(|c| c.total_main_thread_us_per_msg),
                2,
            ),
            num(r.redis_cpu.as_ref().map(|c| c.calls_per_msg), 2),
            num(r.redis_cpu.as_ref().map(|c| c.script_calls_per_msg), 2),
            r.errors.len().to_string(),
        ]);
    }
    push_table(&mut s, &rows);
    if !cluster.is_empty() {
        s.push('\n');
        s.push_str(&cluster_section(results, cluster));
    }
    for r in results.iter().chain(cluster) {
        for e in &r.errors {
            let _ = writeln!(s, "  {} error: {e}", r.label());
        }
        if let Some(ids) = r.metrics.dup_ids.as_ref().filter(|ids| !ids.is_empty()) {
            let shown: Vec<String> = ids.iter().take(20).map(u64::to_string).collect();
            let more = if ids.len() > 20 { ", …" } else { "" };
            let _ = writeln!(s, "  {} dup_ids: {}{more}", r.label(), shown.join(", "));
        }
        if let Some(cpu) = r.redis_cpu.as_ref() {
            // The commands behind calls/msg, most called first.
            let top: Vec<String> = cpu
                .calls_per_msg_by_command
                .iter()
                .take(8)
                .map(|(name, n)| format!("{name} {n:.2}"))
                .collect();
            if !top.is_empty() {
                let _ = writeln!(
                    s,
                    "  {} calls/msg: {}; in scripts {:.2} µs/msg",
                    r.label(),
                    top.join(", "),
                    cpu.script_us_per_msg
                );
            }
        }
        if let Some((w, d)) = r.metrics.bytes_per_msg.zip(r.metrics.dataset_bytes_per_msg) {
            let _ = writeln!(
                s,
                "  {} bytes/msg: used_memory {w:.1}, used_memory_dataset {d:.1}",
                r.label()
            );
        }
    }
    if let Some(c) = ceiling {
        s.push('\n');
        s.push_str(&ceiling_tables(results, c));
    }
    s
}

/// The cluster section: per workload, its single-node run, then its cluster runs.
fn cluster_section(singles: &[WorkloadResult], clusters: &[WorkloadResult]) -> String {
    let mut s = String::new();
    let masters = clusters
        .first()
        .and_then(|r| r.cluster)
        .map_or(0, |c| c.masters);
    s.push_str(&format!(
        "Redis Cluster: {masters} masters, no replicas, a fresh cluster per row, beside the one \
         server of the same run.\n\
         Redis CPU (INFO cpu: used_cpu_sys + used_cpu_user) from the first command to the agents \
         until N delivered, us per message:\n\
         cpu min/max = a master's CPU over its share (N / masters); cpu all = all masters' CPU \
         over N; main all = the same, main threads only;\n\
         max/1, all/1 = cpu max, cpu all over the one server's cpu all (targets <= 1.2, <= 1.3).\n"
    ));
    let mut rows = vec![[
        "workload", "redis", "P", "enq/s", "e2e/s", "cons/s", "p50ms", "p99ms", "cpu min",
        "cpu max", "cpu all", "main all", "max/1", "all/1", "lost", "dups", "errors",
    ]
    .map(String::from)
    .to_vec()];
    let mut workloads: Vec<Workload> = clusters.iter().map(|r| r.workload).collect();
    workloads.dedup();
    for w in workloads {
        let single = singles
            .iter()
            .filter(|r| r.workload == w && r.via == "library" && r.cluster.is_none());
        for r in single.chain(clusters.iter().filter(|r| r.workload == w)) {
            let m = &r.metrics;
            // Lateness where it is a workload's figure (in W2 it is time spent queued).
            let l = match w {
                Workload::W1 | Workload::W3 => m.lateness.clone().unwrap_or_default(),
                _ => Default::default(),
            };
            let cpu = r.redis_cpu.as_ref();
            let vs = r.cpu_vs_single.as_ref();
            rows.push(vec![
                r.workload.to_string(),
                r.cluster
                    .map_or_else(|| "1 node".into(), |c| format!("{} masters", c.masters)),
                r.cluster
                    .map_or_else(|| "-".into(), |c| c.partitions.to_string()),
                num(m.enqueue_rate, 0),
                num(
                    matches!(w, Workload::W2a | Workload::W2b)
                        .then_some(m.e2e_rate)
                        .flatten(),
                    0,
                ),
                num(m.consume_rate, 0),
                num(l.p50_ms, 1),
                num(l.p99_ms, 1),
                num(cpu.map(|c| c.node_min_us_per_msg), 2),
                num(cpu.map(|c| c.node_max_us_per_msg), 2),
                num(cpu.map(|c| c.total_us_per_msg), 2),
                num(cpu.and_then(|c| c.total_main_thread_us_per_msg), 2),
                num(vs.map(|v| v.node_max_ratio), 2),
                num(vs.map(|v| v.total_ratio), 2),
                int(m.lost),
                int(m.duplicates),
                r.errors.len().to_string(),
            ]);
        }
    }
    push_table(&mut s, &rows);
    s
}

fn ceiling_tables(results: &[WorkloadResult], c: &Ceiling) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Raw Redis ceiling (redis-benchmark -n {}), requests/s:",
        c.n
    );
    let mut rows = vec![vec![
        "run".to_owned(),
        "SET".into(),
        "LPUSH".into(),
        "ZADD".into(),
        "error".into(),
    ]];
    for run in &c.runs {
        rows.push(vec![
            run.label.clone(),
            num(run.requests_per_s.get("SET").copied(), 0),
            num(run.requests_per_s.get("LPUSH").copied(), 0),
            num(run.requests_per_s.get("ZADD").copied(), 0),
            run.error.clone().unwrap_or_default(),
        ]);
    }
    push_table(&mut s, &rows);

    let zadd = c.get("P32", "ZADD");
    let best = c.best();
    let _ = writeln!(
        s,
        "\ndelayq throughput vs ceiling (ZADD P32 = {}; best = {}):",
        num(zadd, 0),
        best.as_ref()
            .map_or_else(|| "-".into(), |(name, v)| format!("{name} {v:.0}"))
    );
    let mut rows = vec![vec![
        "figure".to_owned(),
        "msgs/s".into(),
        "/ ZADD P32".into(),
        "/ best".into(),
    ]];
    for r in results {
        let m = &r.metrics;
        let mut figures = vec![("enqueue", m.enqueue_rate)];
        if matches!(r.workload, Workload::W2a | Workload::W2b) {
            figures.push(("e2e", m.e2e_rate));
        }
        if r.workload == Workload::W2a {
            figures.push(("consume", m.consume_rate));
        }
        if r.workload.paced() {
            // W3 is paced at 200 msg/s; its rate says nothing about throughput.
            continue;
        }
        for (what, v) in figures {
            let Some(v) = v else { continue };
            rows.push(vec![
                format!("{} {what}", r.label()),
                format!("{v:.0}"),
                num(zadd.map(|z| v / z), 4),
                num(best.as_ref().map(|(_, b)| v / b), 4),
            ]);
        }
    }
    push_table(&mut s, &rows);
    s
}

/// Appends rows as a table of right-aligned columns.
fn push_table(s: &mut String, rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|v| v.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:>w$}"))
            .collect();
        let _ = writeln!(s, "{}", cells.join("  ").trim_end());
    }
}
