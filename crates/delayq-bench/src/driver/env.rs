//! The environment a run happened in, recorded with every result: numbers are only
//! comparable within one run on one machine, so the machine must be known.

use std::process::Command;

use serde::Serialize;

/// Machine, software and arguments of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    /// `model name` of /proc/cpuinfo.
    pub cpu_model: Option<String>,
    /// Cores available to this process.
    pub nproc: Option<usize>,
    /// `uname -r`.
    pub kernel: Option<String>,
    /// `redis-server --version`.
    pub redis_server_version: Option<String>,
    /// The driver's command line.
    pub args: Vec<String>,
    /// `$REDIS_EXTRA`, split into words (empty for reference runs).
    pub redis_extra: Vec<String>,
    /// /proc/loadavg when the run began: other work on the machine skews the numbers.
    pub loadavg_at_start: Option<String>,
    /// Wall clock ms when the run began.
    pub started_at_ms: f64,
}

impl Environment {
    /// Reads the environment; what cannot be read is left `None` rather than failing a run.
    pub fn collect(redis_extra: &[String]) -> Self {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        });
        Environment {
            cpu_model,
            nproc: std::thread::available_parallelism().ok().map(|n| n.get()),
            kernel: command_output("uname", &["-r"]),
            // The binary every server of the run is started from (redis-fixture's lookup).
            redis_server_version: redis_binaries::find_server(None)
                .ok()
                .and_then(|bin| command_output(&bin.to_string_lossy(), &["--version"])),
            args: std::env::args().collect(),
            redis_extra: redis_extra.to_vec(),
            loadavg_at_start: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .map(|s| s.trim().to_owned()),
            started_at_ms: crate::clock::now_ms(),
        }
    }
}

fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
