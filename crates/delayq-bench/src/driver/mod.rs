//! The driver (`delayq-bench run`): the raw Redis ceiling, then each workload against a
//! fresh redis-server with the agents as separate processes; one JSON per workload, a
//! summary table, and an exit code that fails on lost messages, errors or crashed agents
//! (and, with `--check`, on duplicates). With `--cluster M`, each of W1, W2a, W2b and W3
//! also runs on a fresh Redis Cluster of M masters once per `--partitions` count, right
//! after its single-node run, and every run reports Redis CPU per message (issue 10).
//!
//! Layout: `server.rs` (redis-server per measurement), `cluster.rs` (Redis Cluster per
//! measurement, and the queue's partitions), `deployment.rs` (either of the two),
//! `redis_cpu.rs` (Redis CPU per message), `agents.rs` (child processes and their events),
//! `workload_run.rs` (one workload's choreography and end-of-run rules), `env.rs` (the
//! recorded environment), `http_server.rs` (`delayq serve` for `--via http` and `push`),
//! `otlp.rs` (the receiver of the agents' spans, for `--otlp`).

mod agents;
pub mod cluster;
mod deployment;
pub mod env;
pub mod http_server;
mod otlp;
pub mod redis_cpu;
pub mod server;
mod workload_run;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::agent::Via;
use crate::ceiling;
use crate::error::Result;
use crate::report::{self, WorkloadResult};
use crate::workload::Workload;
use deployment::Deployment;
use env::Environment;
use redis_cpu::CpuVsSingle;
use workload_run::RunContext;

/// Command line of `delayq-bench run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Multiplies every N (minimum 100); overrides $SCALE. Default 1.
    #[arg(long)]
    pub scale: Option<f64>,
    /// Workloads to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "W1,W2a,W2b,W3,W3q,W4")]
    pub workloads: Vec<Workload>,
    /// Where results go (`<workload>.json`, `summary.txt`, `raw/`).
    #[arg(long, default_value = "target/bench-results")]
    pub out: PathBuf,
    /// Hard timeout of one workload, seconds.
    #[arg(long, default_value_t = 570)]
    pub hard_timeout_s: u64,
    /// Skip the raw Redis ceiling (redis-benchmark).
    #[arg(long)]
    pub skip_ceiling: bool,
    /// Also fail (exit non-zero) on duplicate deliveries.
    #[arg(long)]
    pub check: bool,
    /// How the agents reach delayq, comma-separated: `library` (straight to Redis), `http`
    /// (through `delayq serve`, started per workload), `push` (`delayq serve` pushes to the
    /// consumer; W1 and W3 only); each runs every workload it can.
    #[arg(long, value_delimiter = ',', default_value = "library")]
    pub via: Vec<Via>,
    /// The `delayq` binary for `--via http` and `push` (default: beside this one).
    #[arg(long)]
    pub delayq_bin: Option<PathBuf>,
    /// Also run W1, W2a, W2b and W3 (those selected) on a Redis Cluster of this many
    /// masters (at least 3, no replicas), a fresh one per partition count, through the
    /// library; every run then reports Redis CPU per message.
    #[arg(long)]
    pub cluster: Option<usize>,
    /// With `--cluster`: the queue's partition counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "3,6,12")]
    pub partitions: Vec<u16>,
    /// Record events on the workloads' queues, about this many per partition
    /// (`Setting::Events`), to measure what events cost; default: none.
    #[arg(long)]
    pub events: Option<u64>,
    /// Seal the workloads' payloads at rest (`Setting::Encryption`) with a key the driver
    /// makes (its agents read it from `DELAYQ_BENCH_KEYS_FILE`), to measure what encryption
    /// costs; through the library only.
    #[arg(long)]
    pub encrypt: bool,
    /// Trace: the agents export OpenTelemetry spans over OTLP to a receiver that this
    /// process runs, to measure what tracing costs (`otlp.rs`).
    #[arg(long)]
    pub otlp: bool,
    /// Another system's agent (its command line, e.g. `node bench/bullmq-agent/agent.js`),
    /// driven through the same workloads, fresh Redis and measurements instead of delayq's
    /// own agents: a side-by-side run. Single server, `--via library` only.
    #[arg(long)]
    pub agent: Option<String>,
}

/// Runs the benchmark; the exit code says whether it was clean.
pub fn main(args: RunArgs) -> ExitCode {
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// The scale: `--scale`, else `$SCALE`, else 1.
fn scale(args: &RunArgs) -> Result<f64> {
    let scale = match args.scale {
        Some(s) => s,
        None => match std::env::var("SCALE") {
            Ok(s) if !s.trim().is_empty() => s
                .trim()
                .parse()
                .map_err(|e| format!("SCALE={s:?} is not a number: {e}"))?,
            _ => 1.0,
        },
    };
    if !(scale.is_finite() && scale > 0.0) {
        return Err(format!("scale must be a positive number, not {scale}").into());
    }
    Ok(scale)
}

/// With `--encrypt`: a key file of one new key in `dir`, named in the environment that the
/// agents inherit (`DELAYQ_BENCH_KEYS_FILE`), and its keys for the driver's own client.
fn sealing_keys(args: &RunArgs, dir: &std::path::Path) -> Result<Option<delayq::Keyring>> {
    if !args.encrypt {
        return Ok(None);
    }
    if args.via != [Via::Library] || args.cluster.is_some() {
        return Err("--encrypt runs through the library, on one server".into());
    }
    let line = delayq::Keyring::new_key_line("bench")?;
    let path = dir.join("bench.keys");
    std::fs::write(&path, &line).map_err(|e| format!("{}: {e}", path.display()))?;
    std::env::set_var("DELAYQ_BENCH_KEYS_FILE", &path);
    Ok(Some(delayq::Keyring::parse(&line)?))
}

/// `--agent`'s program and arguments, where its run can be made.
fn other_agent(args: &RunArgs) -> Result<Option<Vec<String>>> {
    let Some(command) = &args.agent else {
        return Ok(None);
    };
    let words: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
    if words.is_empty() {
        return Err("--agent: an empty command line".into());
    }
    if args.via != [Via::Library] || args.cluster.is_some() || args.events.is_some() || args.otlp {
        return Err(
            "--agent runs another system on one server: without --via http/push, --cluster, \
             --events or --otlp"
                .into(),
        );
    }
    Ok(Some(words))
}

/// The cluster runs asked for: `(masters, partition counts)`.
fn cluster_plan(args: &RunArgs) -> Result<Option<(usize, Vec<u16>)>> {
    let Some(masters) = args.cluster else {
        return Ok(None);
    };
    if masters < 3 {
        return Err(
            format!("--cluster {masters}: a Redis Cluster needs at least 3 masters").into(),
        );
    }
    if args.partitions.is_empty() || args.partitions.contains(&0) {
        return Err(format!("--partitions {:?}: counts of at least 1", args.partitions).into());
    }
    Ok(Some((masters, args.partitions.clone())))
}

/// Returns whether the run was clean.
fn run(args: &RunArgs) -> Result<bool> {
    let collector = args.otlp.then(otlp::Collector::start).transpose()?;
    let clean = run_workloads(args);
    if let Some(collector) = collector {
        tracing::info!(spans = collector.spans(), "spans received over OTLP");
    }
    clean
}

fn run_workloads(args: &RunArgs) -> Result<bool> {
    let scale = scale(args)?;
    let cluster_plan = cluster_plan(args)?;
    let redis_extra: Vec<String> = std::env::var("REDIS_EXTRA")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let out = std::env::current_dir()?.join(&args.out);
    let raw_dir = out.join("raw");
    std::fs::create_dir_all(&raw_dir)
        .map_err(|e| format!("cannot create {}: {e}", raw_dir.display()))?;
    let environment = Environment::collect(&redis_extra);
    tracing::info!(?environment, scale, out = %out.display(), "benchmark starts");

    let ceiling = if args.skip_ceiling {
        None
    } else {
        let n = ((1_000_000.0 * scale).round() as u64).max(10_000);
        match ceiling::run(n, &redis_extra) {
            Ok(c) => {
                write_json(&out.join("ceiling.json"), &c)?;
                Some(c)
            }
            Err(e) => {
                tracing::error!("raw Redis ceiling failed: {e}");
                None
            }
        }
    };

    let agent = other_agent(args)?;
    let delayq_bin = delayq_bin(args.delayq_bin.clone())?;
    let encrypt = sealing_keys(args, &raw_dir)?;
    let ctx = RunContext {
        scale,
        raw_dir,
        hard_timeout: Duration::from_secs(args.hard_timeout_s),
        redis_extra,
        environment,
        ceiling,
        delayq_bin,
        events: args.events,
        encrypt,
        agent,
    };
    let mut results: Vec<WorkloadResult> = Vec::new();
    let mut cluster_results: Vec<WorkloadResult> = Vec::new();
    for &via in &args.via {
        for &workload in &args.workloads {
            if via == Via::Http && workload.queue_names().len() > 1 {
                tracing::info!(%workload, "runs through the library only; skipped over HTTP");
                continue;
            }
            // Push delivery is measured where it differs from pulling: when messages come
            // due (W1's burst, W3's precision); the rest measures enqueueing or the pull API.
            if via == Via::Push && !matches!(workload, Workload::W1 | Workload::W3) {
                tracing::info!(%workload, "push runs W1 and W3 only; skipped with --via push");
                continue;
            }
            let result = workload_run::run(&ctx, workload, via, Deployment::Single);
            if let Err(e) = result.write(&out) {
                tracing::error!("{e}");
            }
            let Some((masters, partitions)) = &cluster_plan else {
                results.push(result);
                continue;
            };
            if via == Via::Library && cluster::runs(workload) {
                for &partitions in partitions {
                    let setup = cluster::ClusterSetup {
                        masters: *masters,
                        partitions,
                    };
                    let mut r = workload_run::run(&ctx, workload, via, Deployment::Cluster(setup));
                    r.cpu_vs_single = r
                        .redis_cpu
                        .as_ref()
                        .zip(result.redis_cpu.as_ref())
                        .and_then(|(c, single)| CpuVsSingle::new(c, single));
                    if let Err(e) = r.write(&out) {
                        tracing::error!("{e}");
                    }
                    cluster_results.push(r);
                }
            }
            results.push(result);
        }
    }

    let summary = report::summary(&results, &cluster_results, ctx.ceiling.as_ref());
    let header = format!(
        "delayq benchmark, scale {scale}, {} ({} cores), {}, REDIS_EXTRA={:?}\n\n",
        ctx.environment
            .cpu_model
            .as_deref()
            .unwrap_or("unknown CPU"),
        ctx.environment
            .nproc
            .map_or_else(|| "?".into(), |n| n.to_string()),
        ctx.environment
            .redis_server_version
            .as_deref()
            .unwrap_or("unknown redis-server"),
        ctx.redis_extra.join(" "),
    );
    print!("{header}{summary}");
    let summary_path = out.join("summary.txt");
    if let Err(e) = std::fs::write(&summary_path, format!("{header}{summary}")) {
        tracing::error!("cannot write {}: {e}", summary_path.display());
    }
    let failed: Vec<String> = results
        .iter()
        .chain(&cluster_results)
        .filter(|r| r.failed(args.check))
        .map(|r| r.label())
        .collect();
    if failed.is_empty() {
        println!(
            "\nOK: no lost messages, no errors{}",
            if args.check { ", no duplicates" } else { "" }
        );
        Ok(true)
    } else {
        println!("\nFAILED: {}", failed.join(", "));
        Ok(false)
    }
}

/// The `delayq` binary to run: `given`, else the one beside this executable.
pub fn delayq_bin(given: Option<PathBuf>) -> Result<PathBuf> {
    match given {
        Some(bin) => Ok(bin),
        None => Ok(std::env::current_exe()?
            .parent()
            .ok_or("this executable has no directory")?
            .join("delayq")),
    }
}

fn write_json<T: serde::Serialize>(path: &std::path::Path, value: &T) -> Result<()> {
    let json = serde_json::to_string_pretty(value)?;
    std::fs::write(path, json + "\n")
        .map_err(|e| format!("cannot write {}: {e}", path.display()).into())
}
