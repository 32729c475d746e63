//! One workload from start to finish: a fresh server (or cluster), the agents, the workload's
//! choreography (WORKLOADS.md "Workloads"), the end-of-run rules, the deliveries files, the
//! metrics, and the Redis CPU per message.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::agents::{AgentSpec, Fleet};
use super::deployment::{Deployment, Redis};
use super::env::Environment;
use super::http_server::HttpServer;
use super::redis_cpu::{RedisCpu, Sample};
use crate::agent::{Role, Via};
use crate::ceiling::Ceiling;
use crate::clock::now_ms;
use crate::error::Result;
use crate::metrics::{self, DeliveryRecord, Inputs};
use crate::protocol::Command;
use crate::report::WorkloadResult;
use crate::workload::Workload;

/// What every workload run needs to know.
pub struct RunContext {
    /// SCALE.
    pub scale: f64,
    /// `OUT/raw`: agent logs and deliveries files.
    pub raw_dir: PathBuf,
    /// Hard timeout per workload.
    pub hard_timeout: Duration,
    /// `$REDIS_EXTRA` words.
    pub redis_extra: Vec<String>,
    /// The environment, recorded in every result.
    pub environment: Environment,
    /// The ceiling, recorded in every result.
    pub ceiling: Option<Ceiling>,
    /// The `delayq` binary, for HTTP and push runs.
    pub delayq_bin: PathBuf,
    /// Events recorded per partition of the workloads' queues (`--events`), if any.
    pub events: Option<u64>,
    /// The key the workloads' payloads are sealed with (`--encrypt`), if any.
    pub encrypt: Option<delayq::Keyring>,
    /// Another system's agent command line (`--agent`), if any.
    pub agent: Option<Vec<String>>,
}

/// Consumer processes: delayq's recommended setup is one process running the worker runtime.
const CONSUMER_PROCESSES: usize = 1;
/// How long agents may take to connect and announce themselves (or start consuming).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Grace after deliveries ≥ N, to catch duplicates.
const GRACE: Duration = Duration::from_secs(2);
/// No delivery for this long after the last due time ends a run as stalled.
const STALL: Duration = Duration::from_secs(15);
/// How long stopping consumers (graceful shutdown, writing files) may take.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long agents may take to exit once dismissed.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// W4: `before` is read this long after the producer announced ready.
const W4_SETTLE: Duration = Duration::from_millis(500);
/// `delayq serve`'s arguments for `--via push`: the consumer's receiver is on loopback, which
/// push targets may not reach by default.
const PUSH_SERVE_ARGS: [&str; 2] = ["--push-allow", "127.0.0.0/8"];

/// What the choreography learned besides the agents' events.
#[derive(Default)]
struct Observed {
    consume_signal_ms: Option<f64>,
    memory: Option<(crate::metrics::MemoryInfo, crate::metrics::MemoryInfo)>,
    /// Redis CPU right before the first command to the agents, and when N were delivered.
    cpu: (Option<Sample>, Option<Sample>),
}

/// Runs `workload` on `deployment` with agents reaching delayq `via` the library, HTTP or
/// push, and returns its result (errors are recorded in it, never returned).
pub fn run(
    ctx: &RunContext,
    workload: Workload,
    via: Via,
    deployment: Deployment,
) -> WorkloadResult {
    let began = Instant::now();
    let n = workload.scaled_n(ctx.scale);
    tracing::info!(%workload, n, ?deployment, "workload starts");
    let consumers = if workload.has_consumers() {
        CONSUMER_PROCESSES
    } else {
        0
    };
    let cluster = match deployment {
        Deployment::Single => None,
        Deployment::Cluster(setup) => Some(setup),
    };
    let tag = match (via, cluster) {
        (Via::Library, None) => workload.to_string(),
        (Via::Http | Via::Push, None) => format!("{workload}-{}", via.as_str()),
        (_, Some(c)) => format!("{workload}-cluster{}-P{}", c.masters, c.partitions),
    };
    let deliveries_files: Vec<PathBuf> = (0..consumers)
        .map(|i| ctx.raw_dir.join(format!("{tag}-deliveries-{i}.tsv")))
        .collect();
    let logs: Vec<PathBuf> = std::iter::once(ctx.raw_dir.join(format!("{tag}-producer.log")))
        .chain((0..consumers).map(|i| consumer_log(&ctx.raw_dir, &tag, i)))
        .collect();
    let mut result = WorkloadResult {
        workload,
        system: "delayq".into(),
        via: via.as_str().into(),
        system_version: None,
        n,
        scale: ctx.scale,
        producer_config: Value::Null,
        consumer_config: Value::Null,
        consumer_processes: consumers,
        produced: Value::Null,
        stopped: Vec::new(),
        consume_signal_ms: None,
        memory_before: None,
        memory_after: None,
        errors: Vec::new(),
        metrics: Default::default(),
        wall_s: 0.0,
        redis_args: Vec::new(),
        files: logs
            .iter()
            .chain(&deliveries_files)
            .map(|p| p.display().to_string())
            .collect(),
        ceiling: ctx.ceiling.clone(),
        environment: ctx.environment.clone(),
        cluster,
        redis_cpu: None,
        cpu_vs_single: None,
    };
    for file in &deliveries_files {
        // A stale file from an earlier run must never be read as this run's deliveries.
        let _ = std::fs::remove_file(file);
    }

    let server = match Redis::start(deployment, &ctx.redis_extra) {
        Ok(server) => server,
        Err(e) => {
            result.errors.push(e.to_string());
            return result;
        }
    };
    result.redis_args = server.args();
    let http = match via {
        Via::Library => None,
        Via::Http | Via::Push => {
            let log = ctx.raw_dir.join(format!("{tag}-serve.log"));
            let extra: &[&str] = match via {
                Via::Push => &PUSH_SERVE_ARGS,
                _ => &[],
            };
            match HttpServer::start(&ctx.delayq_bin, server.port(), extra, &log) {
                Ok(http) => Some(http),
                Err(e) => {
                    result.errors.push(e.to_string());
                    return result;
                }
            }
        }
    };
    let hard_deadline = began + ctx.hard_timeout;
    let mut fleet = Fleet::of(ctx.agent.clone());
    let mut observed = Observed::default();
    let driven = server
        .before_agents()
        .and_then(|()| {
            spawn_agents(
                &mut fleet,
                workload,
                n,
                (server.port(), cluster.is_some()),
                (via, http.as_ref().map(HttpServer::port)),
                &deliveries_files,
                &logs,
            )
        })
        .and_then(|()| {
            // The second FLUSHALL of the contract: right before the driver starts the workload
            // (on a cluster, before the queue was created).
            server.before_start()?;
            if let Some(kept) = ctx.events {
                server.record_events(&workload.queue_names(), kept)?;
            }
            if let Some(keys) = &ctx.encrypt {
                server.encrypt(&workload.queue_names(), keys)?;
            }
            choreography(
                &mut fleet,
                &server,
                workload,
                n,
                hard_deadline,
                &mut observed,
            )
        });
    if let Err(e) = driven {
        result.errors.push(format!("{workload}: {e}"));
    }
    // Whatever happened, consumers are told to stop (and so write their files) and the
    // producer to leave.
    if let Err(e) = dismiss(&mut fleet) {
        result.errors.push(e.to_string());
    }
    fleet.finish(EXIT_TIMEOUT);
    // `delayq serve` before its Redis, so that it is not left retrying a Redis that is gone.
    drop(http);
    drop(server);

    for agent in fleet.agents() {
        if let Some((system, version, config)) = &agent.ready {
            result.system.clone_from(system);
            result.system_version.get_or_insert_with(|| version.clone());
            match agent.role {
                Role::Producer => result.producer_config = config.clone(),
                Role::Consumer if result.consumer_config.is_null() => {
                    result.consumer_config = config.clone()
                }
                Role::Consumer => {}
            }
        }
        if let Some(stopped) = &agent.stopped {
            result.stopped.push(stopped.clone());
        }
    }
    result.errors.extend(fleet.errors().iter().cloned());
    let produced = fleet.produced().map(|(p, _)| p.clone());
    if let Some((p, raw)) = fleet.produced() {
        result.produced = raw.clone();
        if p.count != n {
            result
                .errors
                .push(format!("producer enqueued {} messages, not {n}", p.count));
        }
    }

    let mut deliveries = Vec::new();
    for file in &deliveries_files {
        match read_deliveries(file) {
            Ok(mut d) => deliveries.append(&mut d),
            Err(e) => result.errors.push(e.to_string()),
        }
    }
    result.consume_signal_ms = observed.consume_signal_ms;
    if let Some((before, after)) = observed.memory {
        result.memory_before = Some(before);
        result.memory_after = Some(after);
    }
    result.metrics = metrics::compute(&Inputs {
        n,
        deliveries: workload.has_consumers().then_some(&deliveries[..]),
        produced: produced.as_ref(),
        consume_signal_ms: observed.consume_signal_ms,
        memory: observed.memory,
    });
    if workload == Workload::W4 {
        match result.metrics.pending_after {
            Some(pending) if pending == n => {}
            Some(pending) => result
                .errors
                .push(format!("pending_after is {pending}, expected {n}")),
            None => result.errors.push("no pending_after reported".into()),
        }
    }
    if let (Some(before), Some(after)) = &observed.cpu {
        match RedisCpu::between(n, before, after) {
            Ok(cpu) => result.redis_cpu = Some(cpu),
            Err(e) => result.errors.push(format!("Redis CPU: {e}")),
        }
    }
    result.wall_s = began.elapsed().as_secs_f64();
    tracing::info!(%workload, errors = result.errors.len(), "workload done");
    result
}

fn consumer_log(raw_dir: &Path, tag: &str, i: usize) -> PathBuf {
    if CONSUMER_PROCESSES == 1 {
        raw_dir.join(format!("{tag}-consumer.log"))
    } else {
        raw_dir.join(format!("{tag}-consumer-{i}.log"))
    }
}

fn spawn_agents(
    fleet: &mut Fleet,
    workload: Workload,
    n: u64,
    (port, cluster): (u16, bool),
    (via, http_port): (Via, Option<u16>),
    deliveries_files: &[PathBuf],
    logs: &[PathBuf],
) -> Result<()> {
    // Consumers first: in W1, W2b and W3 they must be up before production starts.
    for (i, file) in deliveries_files.iter().enumerate() {
        fleet.spawn(&AgentSpec {
            role: Role::Consumer,
            workload,
            port,
            n,
            deliveries: Some(file.clone()),
            log: logs.get(i + 1).cloned().ok_or("no log path")?,
            via,
            http_port,
            cluster,
        })?;
    }
    fleet.spawn(&AgentSpec {
        role: Role::Producer,
        workload,
        port,
        n,
        deliveries: None,
        log: logs.first().cloned().ok_or("no log path")?,
        via,
        http_port,
        cluster,
    })?;
    Ok(())
}

/// The workload's sequence of commands, up to the end of the run. Redis CPU is sampled right
/// before the first command and when N deliveries have been counted.
fn choreography(
    fleet: &mut Fleet,
    server: &Redis,
    workload: Workload,
    n: u64,
    hard_deadline: Instant,
    observed: &mut Observed,
) -> Result<()> {
    let ready_deadline = (Instant::now() + READY_TIMEOUT).min(hard_deadline);
    fleet.wait_until(ready_deadline, "all agents ready", |f| {
        f.agents().iter().all(|a| a.ready.is_some())
    })?;
    let producers = fleet.with_role(Role::Producer);
    let consumers = fleet.with_role(Role::Consumer);
    let producer = *producers.first().ok_or("no producer")?;
    let has_produced = |f: &Fleet| f.produced().is_some();
    let cpu = || -> Result<Option<Sample>> { Ok(Some(Sample::new(server.cpu()?))) };
    observed.cpu.0 = cpu()?;
    match workload {
        Workload::W4 => {
            std::thread::sleep(W4_SETTLE);
            let before = server.memory()?;
            fleet.send(producer, Command::Produce)?;
            fleet.wait_until(hard_deadline, "produced", has_produced)?;
            let after = server.memory()?;
            observed.memory = Some((before, after));
            observed.cpu.1 = cpu()?;
            return Ok(());
        }
        Workload::W2a => {
            // Consumers are connected but idle while everything is enqueued.
            fleet.send(producer, Command::Produce)?;
            fleet.wait_until(hard_deadline, "produced", has_produced)?;
            observed.consume_signal_ms = Some(now_ms());
            start_consumers(fleet, &consumers, hard_deadline)?;
        }
        Workload::W1 | Workload::W2b | Workload::W3 | Workload::W3q => {
            start_consumers(fleet, &consumers, hard_deadline)?;
            fleet.send(producer, Command::Produce)?;
        }
    }
    end_of_run(fleet, n, hard_deadline, || {
        observed.cpu.1 = cpu()?;
        Ok(())
    })
}

fn start_consumers(fleet: &mut Fleet, consumers: &[usize], hard_deadline: Instant) -> Result<()> {
    for &c in consumers {
        fleet.send(c, Command::Start)?;
    }
    let deadline = (Instant::now() + READY_TIMEOUT).min(hard_deadline);
    fleet.wait_until(deadline, "consumers started", |f| {
        consumers
            .iter()
            .all(|&c| f.agents().get(c).is_some_and(|a| a.started_ms.is_some()))
    })?;
    fleet.reset_last_delivery();
    Ok(())
}

/// WORKLOADS.md "End of a run": deliveries ≥ N plus 2 s of grace; or the last due time has
/// passed and nothing was delivered for 15 s (an error); or the hard timeout (an error).
/// `at_n` runs once, as soon as N deliveries have been counted.
fn end_of_run(
    fleet: &mut Fleet,
    n: u64,
    hard_deadline: Instant,
    mut at_n: impl FnMut() -> Result<()>,
) -> Result<()> {
    let mut reached_n: Option<Instant> = None;
    let mut last_due_passed: Option<Instant> = None;
    loop {
        fleet.poll(Duration::from_millis(50));
        if fleet.failed() {
            return Err("ended early: an agent failed".into());
        }
        let now = Instant::now();
        let total = fleet.consumer_total();
        if total >= n {
            if reached_n.is_none() {
                at_n()?;
            }
            let since = *reached_n.get_or_insert(now);
            if now - since >= GRACE {
                return Ok(());
            }
        }
        if let Some((p, _)) = fleet.produced() {
            if now_ms() > p.max_due_ms {
                let due_passed = *last_due_passed.get_or_insert(now);
                // Quiet time counts from the later of the last delivery and the last due
                // time: deliveries cannot be expected before anything is due.
                let quiet_since = due_passed.max(fleet.last_delivery());
                if now - quiet_since >= STALL {
                    return Err(format!(
                        "no delivery for {} s after the last due time: {total} of {n} delivered",
                        STALL.as_secs()
                    )
                    .into());
                }
            }
        }
        if now >= hard_deadline {
            return Err(format!("hard timeout: {total} of {n} delivered").into());
        }
    }
}

/// Stops consumers (waiting for their `stopped`) and tells the producer to exit.
fn dismiss(fleet: &mut Fleet) -> Result<()> {
    let consumers = fleet.with_role(Role::Consumer);
    let mut failures = Vec::new();
    for &c in &consumers {
        if let Err(e) = fleet.send(c, Command::Stop) {
            failures.push(e.to_string());
        }
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    // An agent that is gone will not report `stopped`; wait for the others only.
    loop {
        let all_stopped = consumers.iter().all(|&c| {
            fleet
                .agents()
                .get(c)
                .is_none_or(|a| a.stopped.is_some() || a.is_closed())
        });
        if all_stopped || Instant::now() >= deadline {
            if !all_stopped {
                failures.push(format!(
                    "consumers did not report stopped within {STOP_TIMEOUT:?}"
                ));
            }
            break;
        }
        fleet.poll(Duration::from_millis(100));
    }
    for p in fleet.with_role(Role::Producer) {
        if let Err(e) = fleet.send(p, Command::Exit) {
            failures.push(e.to_string());
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; ").into())
    }
}

/// Reads a deliveries file: `seq<TAB>due_ms<TAB>start_ms` per line.
fn read_deliveries(path: &Path) -> Result<Vec<DeliveryRecord>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read deliveries file {}: {e}", path.display()))?;
    parse_deliveries(&text).map_err(|e| format!("{}: {e}", path.display()).into())
}

fn parse_deliveries(text: &str) -> Result<Vec<DeliveryRecord>> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let mut fields = line.split('\t');
            let mut next = |what: &str| {
                fields
                    .next()
                    .map(str::trim)
                    .ok_or_else(|| format!("line {}: no {what}", i + 1))
            };
            let seq = next("seq")?;
            let due = next("due_ms")?;
            let start = next("start_ms")?;
            let bad = |what: &str, v: &str| format!("line {}: bad {what} {v:?}", i + 1);
            Ok(DeliveryRecord {
                seq: seq.parse().map_err(|_| bad("seq", seq))?,
                due_ms: due.parse().map_err(|_| bad("due_ms", due))?,
                start_ms: start.parse().map_err(|_| bad("start_ms", start))?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_file_format() -> Result<()> {
        let d = parse_deliveries("0\t1000.500\t1001.250\n7\t2.000\t1.000\n\n")?;
        assert_eq!(d.len(), 2);
        assert_eq!(
            d[1],
            DeliveryRecord {
                seq: 7,
                due_ms: 2.0,
                start_ms: 1.0
            }
        );
        assert!(parse_deliveries("1\t2\n").is_err());
        assert!(parse_deliveries("x\t2\t3\n").is_err());
        Ok(())
    }
}
