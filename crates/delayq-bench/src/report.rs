//! What a run writes: one JSON per workload with everything the driver knew, and the
//! printed summary table (with delayq's throughput as ratios to the raw Redis ceiling).

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::ceiling::Ceiling;
use crate::driver::env::Environment;
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
    /// How the agents reached it: `library` or `http`.
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
}

impl WorkloadResult {
    /// Whether this workload makes the run fail: lost messages or errors; with `check`,
    /// duplicates too.
    pub fn failed(&self, check: bool) -> bool {
        !self.errors.is_empty()
            || self.metrics.lost.unwrap_or(0) > 0
            || (check && self.metrics.duplicates.unwrap_or(0) > 0)
    }

    /// The workload id, with `/http` for runs through the HTTP API.
    pub fn label(&self) -> String {
        if self.via == "library" {
            self.workload.to_string()
        } else {
            format!("{}/{}", self.workload, self.via)
        }
    }

    /// Writes `dir/<workload>.json` (`<workload>-http.json` through HTTP).
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

/// The summary table(s) as text.
pub fn summary(results: &[WorkloadResult], ceiling: Option<&Ceiling>) -> String {
    let mut s = String::new();
    let header = [
        "workload", "n", "enq/s", "e2e/s", "cons/s", "p50ms", "p90ms", "p99ms", "p99.9ms", "maxms",
        "minms", "early", "drain_s", "ideal_s", "window_s", "lost", "dups", "B/msg", "pending",
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
            r.errors.len().to_string(),
        ]);
    }
    push_table(&mut s, &rows);
    for r in results {
        for e in &r.errors {
            let _ = writeln!(s, "  {} error: {e}", r.label());
        }
        if let Some(ids) = r.metrics.dup_ids.as_ref().filter(|ids| !ids.is_empty()) {
            let shown: Vec<String> = ids.iter().take(20).map(u64::to_string).collect();
            let more = if ids.len() > 20 { ", …" } else { "" };
            let _ = writeln!(s, "  {} dup_ids: {}{more}", r.label(), shown.join(", "));
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
