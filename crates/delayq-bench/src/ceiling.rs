//! The raw Redis ceiling of WORKLOADS.md: `redis-benchmark` against a fresh server of its
//! own, pipelined (`-P 32`) and not (`-P 1 -c 50`), for SET, LPUSH and ZADD. delayq's
//! throughput figures are printed as ratios to it, which makes runs on different machines
//! roughly comparable.

use std::collections::BTreeMap;
use std::process::Command;

use serde::Serialize;

use crate::driver::server::BenchServer;
use crate::error::Result;

/// The tests run, as `-t` takes them.
const TESTS: &str = "set,lpush,zadd";

/// One `redis-benchmark` invocation.
#[derive(Debug, Clone, Serialize)]
pub struct CeilingRun {
    /// Short name, e.g. `P32`.
    pub label: String,
    /// Its arguments (port excluded).
    pub args: Vec<String>,
    /// Requests per second by test name (`SET`, `LPUSH`, `ZADD`).
    pub requests_per_s: BTreeMap<String, f64>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// Both invocations.
#[derive(Debug, Clone, Serialize)]
pub struct Ceiling {
    /// Requests per test (`-n`), scaled like every N.
    pub n: u64,
    /// The runs.
    pub runs: Vec<CeilingRun>,
}

impl Ceiling {
    /// A figure by run label and test name.
    pub fn get(&self, label: &str, test: &str) -> Option<f64> {
        self.runs
            .iter()
            .find(|r| r.label == label)
            .and_then(|r| r.requests_per_s.get(test).copied())
    }

    /// The highest figure of all, with its name (`SET P32`).
    pub fn best(&self) -> Option<(String, f64)> {
        self.runs
            .iter()
            .flat_map(|r| {
                r.requests_per_s
                    .iter()
                    .map(move |(t, v)| (format!("{t} {}", r.label), *v))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }
}

/// Runs the ceiling on a fresh server.
pub fn run(n: u64, redis_extra: &[String]) -> Result<Ceiling> {
    let server = BenchServer::start(redis_extra)?;
    let mut runs = Vec::new();
    for (label, extra) in [
        ("P32", &["-P", "32"][..]),
        ("P1c50", &["-P", "1", "-c", "50"][..]),
    ] {
        let mut args: Vec<String> = vec!["-q".into(), "-n".into(), n.to_string()];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(["-t".into(), TESTS.into()]);
        tracing::info!(?args, "redis-benchmark");
        // A fresh server per invocation would be fairer still, but the contract asks for one
        // server for the ceiling; emptying it keeps the second run from starting on the
        // first run's data.
        let flushed = server.flushall();
        let run = flushed.and_then(|()| benchmark(server.port(), &args));
        runs.push(match run {
            Ok(requests_per_s) => CeilingRun {
                label: label.into(),
                args,
                requests_per_s,
                error: None,
            },
            Err(e) => CeilingRun {
                label: label.into(),
                args,
                requests_per_s: BTreeMap::new(),
                error: Some(e.to_string()),
            },
        });
    }
    Ok(Ceiling { n, runs })
}

fn benchmark(port: u16, args: &[String]) -> Result<BTreeMap<String, f64>> {
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run redis-benchmark: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "redis-benchmark exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let figures = parse_output(&stdout);
    if figures.is_empty() {
        return Err(format!("no figures in redis-benchmark output: {stdout:?}").into());
    }
    Ok(figures)
}

/// Figures of `redis-benchmark -q` output: lines like `SET: 123456.79 requests per second,
/// p50=0.135 msec`, with progress lines separated by carriage returns in between.
pub fn parse_output(out: &str) -> BTreeMap<String, f64> {
    out.split(['\r', '\n'])
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let (number, _) = rest.trim().split_once(" requests per second")?;
            Some((name.trim().to_owned(), number.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quiet_output() {
        let out = "SET: rps=0.0 (overall: nan) avg_msec=nan (overall: nan)\r\
                   SET: 1234567.88 requests per second, p50=0.335 msec\n\
                   LPUSH: rps=12.0\rLPUSH: 999000.00 requests per second, p50=0.4 msec\n\
                   ZADD: 800000.50 requests per second, p50=0.5 msec\n\n";
        let f = parse_output(out);
        assert_eq!(f.len(), 3);
        assert_eq!(f.get("SET"), Some(&1_234_567.88));
        assert_eq!(f.get("LPUSH"), Some(&999_000.0));
        assert_eq!(f.get("ZADD"), Some(&800_000.5));
    }
}
