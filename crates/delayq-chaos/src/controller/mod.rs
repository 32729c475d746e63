//! The controller of a chaos run: starts Redis (AOF, fsync always) behind a TCP proxy,
//! `delayq serve`, producers, library workers and HTTP consumers as separate processes; then,
//! while messages come due, kills, stops, freezes and cuts them on a schedule; then lets the
//! queue drain, stops everything gracefully and hands the histories to the checker.
//!
//! With `--cluster`, Redis is a Redis Cluster instead (`failover.rs`), the proxy's faults give
//! way to master failovers, and producers send with `WAIT` for one replica (`--no-wait`: not).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_fixture::{Proxy, RedisServer, ServerConfig};

use crate::checker;
use crate::evidence::{ClusterRun, Leftovers, MasterKill};
use crate::failover::Cluster;
use crate::history::{now_us, Event, Fault, Recorder};
use crate::lookup::Lookup;
use crate::plan;
use crate::processes::{signal, Launcher, Proc, Role};
use crate::upgrade;

mod faults;
mod netns;
mod planned;
mod replica;
mod scenarios;

/// Settings of a run.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Messages to send.
    #[arg(long, default_value_t = 20_000)]
    messages: u64,
    /// Length of the fault phase, in seconds; sends fill its first 60 %, due times its first 95 %.
    #[arg(long, default_value_t = 150)]
    seconds: u64,
    /// Library worker processes.
    #[arg(long, default_value_t = 3)]
    workers: usize,
    /// HTTP consumer processes.
    #[arg(long, default_value_t = 2)]
    consumers: usize,
    /// The short run for CI: 2,000 messages over 40 s (with a scenario, 1,200 over 24 s).
    #[arg(long)]
    short: bool,
    /// Where histories and logs go (default: a new directory under the system's temp dir).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The `delayq` server binary (default: beside this one).
    #[arg(long)]
    delayq_bin: Option<PathBuf>,
    /// Run on a Redis Cluster (3 masters, a replica each; the queue in 6 partitions) and
    /// kill masters (-9) so that their replicas take over, instead of one Redis behind a
    /// proxy. Producers all send through the library, waiting for a replica (WAIT).
    #[arg(long)]
    cluster: bool,
    /// With --cluster: sends are acknowledged without waiting for a replica; the sends and
    /// acks a failover loses are counted instead of failing the run.
    #[arg(long, requires = "cluster")]
    no_wait: bool,
    /// One fault scenario alone, on one Redis, instead of the kills and cuts
    /// (`controller/scenarios.rs`; docs/reliability.md, "Scenarios").
    #[arg(long, value_enum, conflicts_with = "cluster")]
    scenario: Option<scenarios::Scenario>,
}

/// How long the queue may take to drain once faults stop.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a SIGTERMed process may take to exit (its shutdown grace is 3 s).
const TERM_TIMEOUT: Duration = Duration::from_secs(15);
/// How long Redis stays down after a kill.
const REDIS_DOWN: Duration = Duration::from_secs(1);

/// Runs the whole thing; returns whether the checker passed.
pub fn run(mut args: RunArgs) -> Result<bool, String> {
    if args.short {
        args.messages = 2_000;
        args.seconds = 40;
        args.workers = 2;
        args.consumers = 2;
        if args.scenario.is_some() {
            // A scenario's one fault needs less run around it: CI runs them all.
            args.messages = 1_200;
            args.seconds = 24;
        }
    }
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("delayq-chaos-{}", now_us())),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{dir:?}: {e}"))?;
    // Histories are appended to: an old run's would mix with this one's.
    if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!("{} is not empty", dir.display()));
    }
    let me = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let delayq_bin = match &args.delayq_bin {
        Some(bin) => bin.clone(),
        None => me.with_file_name("delayq"),
    };
    let scenario = args.scenario.map(|s| format!(", scenario {}", s.name()));
    let on = match (args.cluster, args.no_wait) {
        (false, _) => scenario.as_deref().unwrap_or(""),
        (true, false) => " on a Redis Cluster, sends waiting for a replica",
        (true, true) => " on a Redis Cluster, sends not waiting for replicas",
    };
    println!(
        "chaos run{on}: {} messages, {} s of faults, histories in {}",
        args.messages,
        args.seconds,
        dir.display()
    );
    let mut run = Run::start(&dir, me, delayq_bin, &args)?;
    let faults = run.fault_phase(&args);
    // A failover still under way ends before anything else.
    let faults = faults.and(run.finish_failover());
    let drained = faults.and_then(|()| run.drain());
    // On one Redis the queue was upgraded from format 1 during the faults.
    let drained = match &run.backend {
        Backend::Single { .. } => drained.and_then(|()| {
            upgrade::check_current(run.launcher.delayq_bin(), &run.backend.server_args())
        }),
        Backend::Cluster(_) => drained,
    };
    let mut leftovers = run.leftovers();
    run.stop_all();
    let (lookup, cluster) = match &run.backend {
        Backend::Single { redis, .. } => (Lookup::new(&[redis.url()], false)?, None),
        Backend::Cluster(cluster) => (
            Lookup::new(cluster.node_urls(), true)?,
            Some(ClusterRun {
                partitions: crate::failover::PARTITIONS,
                wait: !args.no_wait,
                kills: cluster.kills.clone(),
            }),
        ),
    };
    leftovers.dead_letters = lookup.dead_letters()?;
    leftovers.events = lookup.events()?;
    let report = checker::check(&dir, &leftovers, &run.counts, cluster.as_ref(), &|id| {
        lookup.exists(id)
    })?;
    // Payloads encrypted at rest (the cluster run's queue, sealing.rs): none in clear, none
    // made unreadable.
    let sealed_at_rest = match &run.backend {
        Backend::Cluster(cluster) => {
            let (in_clear, read) = cluster.payloads_in_clear();
            let undecryptable = leftovers
                .dead_letters
                .iter()
                .filter(|d| {
                    d.last_error
                        .as_deref()
                        .is_some_and(|e| e.starts_with("undecryptable"))
                })
                .count();
            println!(
                "encrypted at rest: {in_clear} of {read} values in Redis hold a payload in clear; {undecryptable} dead letters undecryptable"
            );
            Some((in_clear, undecryptable))
        }
        Backend::Single { .. } => None,
    };
    let figures = args
        .scenario
        .map(|s| crate::figures::of_scenario(&dir, s.name()))
        .transpose()?
        .unwrap_or_default();
    println!("{}{figures}", report.table);
    for crash in &run.crashes {
        println!("crashed or hung: {crash}");
    }
    std::fs::write(dir.join("report.txt"), format!("{}{figures}", report.table))
        .map_err(|e| e.to_string())?;
    if let Err(why) = drained {
        println!("FAILED: {why}");
        return Ok(false);
    }
    if report.grouped == 0 {
        // Without grouped messages the group rows prove nothing.
        println!("FAILED: no message was sent with a group");
        return Ok(false);
    }
    if report.events == 0 {
        // Without events the event rows prove nothing.
        println!("FAILED: the queue recorded no event");
        return Ok(false);
    }
    if let Some((in_clear, undecryptable)) = sealed_at_rest {
        if in_clear > 0 || undecryptable > 0 {
            println!("FAILED: a payload in clear in Redis, or one that could not be opened");
            return Ok(false);
        }
    }
    if report.with_deadline == 0 {
        // Without deadlines the expiry rows prove nothing.
        println!("FAILED: no message was sent with a deadline");
        return Ok(false);
    }
    Ok(report.passed)
}

/// Where the queue lives.
enum Backend {
    /// One Redis behind a proxy that cuts connections and holds them half-open.
    Single { redis: RedisServer, proxy: Proxy },
    /// A Redis Cluster whose masters fail over.
    Cluster(Cluster),
}

impl Backend {
    /// How a library process reaches Redis: its arguments after `--redis-url` or
    /// `--target`, and then the flag that says it is a cluster.
    fn library_target(&self) -> (String, Option<&'static str>) {
        match self {
            Backend::Single { proxy, .. } => (proxy.url(), None),
            Backend::Cluster(cluster) => (cluster.urls(), Some("--cluster")),
        }
    }

    /// `delayq serve`'s Redis flags.
    fn server_args(&self) -> Vec<String> {
        match self {
            Backend::Single { proxy, .. } => vec!["--redis-url".into(), proxy.url()],
            Backend::Cluster(cluster) => vec!["--redis-cluster".into(), cluster.urls()],
        }
    }
}

struct Run {
    backend: Backend,
    launcher: Launcher,
    server: Proc,
    server_port: u16,
    workers: Vec<Proc>,
    producers: Vec<Proc>,
    /// Shared with the failover thread of a cluster run.
    recorder: Arc<Recorder>,
    counts: BTreeMap<Fault, u32>,
    /// What the report says of each process that crashed or hung.
    crashes: Vec<String>,
    /// What the run's scenario set up (its clock file, its disk).
    prepared: scenarios::Prepared,
}

impl Run {
    fn start(dir: &Path, me: PathBuf, delayq_bin: PathBuf, args: &RunArgs) -> Result<Run, String> {
        let mut prepared = scenarios::prepare(args.scenario, dir)?;
        let backend = match args.cluster {
            false => {
                let mut config = ServerConfig::appendonly();
                config.extra_args = prepared.redis_args.clone();
                let redis = RedisServer::start_with(config);
                upgrade::as_the_release_before(&redis)?;
                let proxy = Proxy::start(redis.port());
                if args.scenario.is_some() {
                    // A scenario's fault comes alone: the queue is of the newest format
                    // from the start.
                    let redis_args = ["--redis-url".into(), proxy.url()];
                    upgrade::upgrade(&delayq_bin, &redis_args)?;
                    upgrade::keep_ids(&delayq_bin, &redis_args)?;
                }
                Backend::Single { redis, proxy }
            }
            true => {
                // Its queue encrypts its payloads: every process the run starts finds the
                // key in its environment (sealing.rs).
                crate::sealing::make_keys(dir)?;
                Backend::Cluster(Cluster::start()?)
            }
        };
        let mut launcher = Launcher::new(dir, me, delayq_bin);
        for (key, value) in &prepared.env {
            launcher.set_env(key, value);
        }
        if let Backend::Single { redis, .. } = &backend {
            prepared.place_server(&mut launcher, redis.port());
            prepared.start_replica(dir, redis.port())?;
        }
        let server_port = redis_fixture::free_port();
        let server = launcher.server_on(&backend.server_args(), server_port)?;
        let recorder =
            Recorder::create(&dir.join("controller.jsonl")).map_err(|e| e.to_string())?;
        let mut run = Run {
            backend,
            launcher,
            server,
            server_port,
            workers: Vec::new(),
            producers: Vec::new(),
            recorder: Arc::new(recorder),
            counts: BTreeMap::new(),
            crashes: Vec::new(),
            prepared,
        };
        for i in 0..args.workers + args.consumers {
            let role = if i < args.workers {
                Role::Worker
            } else {
                Role::Consumer
            };
            run.spawn_worker(role)?;
        }
        if let Backend::Single { redis, .. } = &run.backend {
            let port = redis.port();
            let extra = run.prepared.extra_workers(&mut run.launcher, port)?;
            run.workers.extend(extra);
        }
        // Two producers through the library, two through the API; sends fill the first 60 %
        // of the fault phase, delays reach to 95 %. On a cluster all four use the library:
        // only it can wait for a replica.
        let send_secs = args.seconds as f64 * 0.6;
        let max_delay_ms = args.seconds * 350;
        let share = args.messages.div_ceil(4);
        let (library_target, cluster_flag) = run.backend.library_target();
        // A scenario whose sends wait for a replica sends through the library only, too.
        let waits = (args.cluster && !args.no_wait) || run.prepared.sends_wait();
        for p in 0..4u64 {
            let (via, target) = if p < 2 || args.cluster || waits {
                ("library", library_target.clone())
            } else {
                ("http", run.server_url())
            };
            let from = p * share;
            let to = ((p + 1) * share).min(args.messages);
            let mut producer_args: Vec<String> = [
                "produce",
                "--via",
                via,
                "--target",
                &target,
                "--from",
                &from.to_string(),
                "--to",
                &to.to_string(),
                "--rate",
                &format!("{:.3}", (to - from) as f64 / send_secs),
                "--max-delay-ms",
                &max_delay_ms.to_string(),
            ]
            .map(String::from)
            .into();
            if via == "library" {
                producer_args.extend(cluster_flag.map(String::from));
                if waits {
                    producer_args.extend(["--wait-replicas".into(), "1".into()]);
                }
            }
            let producer = run
                .launcher
                .chaos(Role::Producer, &producer_args)
                .map_err(|e| e.to_string())?;
            run.producers.push(producer);
        }
        Ok(run)
    }

    fn server_url(&self) -> String {
        format!("http://{}:{}", self.launcher.server_ip(), self.server_port)
    }

    fn spawn_worker(&mut self, role: Role) -> Result<(), String> {
        let args = match role {
            Role::Worker => {
                let (url, cluster_flag) = self.backend.library_target();
                let mut args = vec!["work".into(), "--redis-url".into(), url];
                args.extend(cluster_flag.map(String::from));
                args
            }
            _ => vec!["consume".into(), "--server".into(), self.server_url()],
        };
        let worker = self
            .launcher
            .chaos(role, &args)
            .map_err(|e| e.to_string())?;
        self.workers.push(worker);
        Ok(())
    }

    /// The single Redis (not on a cluster).
    fn redis(&mut self) -> Option<&mut RedisServer> {
        match &mut self.backend {
            Backend::Single { redis, .. } => Some(redis),
            Backend::Cluster(_) => None,
        }
    }

    /// The proxy in front of the single Redis (not on a cluster).
    fn proxy(&self) -> Option<&Proxy> {
        match &self.backend {
            Backend::Single { proxy, .. } => Some(proxy),
            Backend::Cluster(_) => None,
        }
    }

    /// Counts the faults of a failover that has finished (its thread recorded them).
    fn count_failover(&mut self, kill: Option<MasterKill>) {
        let Some(kill) = kill else {
            return;
        };
        let mut faults = vec![
            Fault::KillMaster,
            Fault::Promoted,
            Fault::RestartNode,
            Fault::Rejoined,
        ];
        if kill.stalled_from_us.is_some() {
            faults.extend([Fault::FreezeReplica, Fault::ThawReplica]);
        }
        for fault in faults {
            *self.counts.entry(fault).or_default() += 1;
        }
    }

    /// Waits for the failover under way, if any (cluster runs).
    fn finish_failover(&mut self) -> Result<(), String> {
        let kill = match &mut self.backend {
            Backend::Cluster(cluster) => cluster.finish()?,
            Backend::Single { .. } => None,
        };
        self.count_failover(kill);
        Ok(())
    }

    fn note(&mut self, fault: Fault, pid: Option<u32>) {
        *self.counts.entry(fault).or_default() += 1;
        self.recorder.record(&Event::Fault {
            fault,
            pid,
            at_us: now_us(),
        });
    }

    /// Notices processes that exited: a SIGTERMed worker's exit is expected (and must be
    /// clean and timely); any other exit is a crash, and the process is replaced.
    fn watch(&mut self) -> Result<(), String> {
        let mut i = 0;
        while i < self.workers.len() {
            let w = &mut self.workers[i];
            match (w.exited(), w.terminated) {
                (Some(status), Some(_)) => {
                    let w = self.workers.swap_remove(i);
                    if status.success() {
                        self.note(Fault::WorkerExited, Some(w.pid()));
                    } else {
                        self.crashed(&w, &format!("exited with {status} after SIGTERM"));
                    }
                }
                (None, Some(at)) if at.elapsed() > TERM_TIMEOUT => {
                    let _ = w.child.kill();
                    let _ = w.child.wait();
                    let w = self.workers.swap_remove(i);
                    self.crashed(
                        &w,
                        &format!("did not exit within {TERM_TIMEOUT:?} of SIGTERM"),
                    );
                }
                (Some(status), None) => {
                    let w = self.workers.swap_remove(i);
                    self.crashed(&w, &format!("exited with {status} unasked"));
                    self.spawn_worker(w.role)?;
                }
                _ => i += 1,
            }
        }
        if let Some(status) = self.server.exited() {
            let why = format!("exited with {status} unasked");
            self.note(Fault::Crashed, Some(self.server.pid()));
            self.crashes.push(self.server.crash_report(&why));
            self.server = self
                .launcher
                .server_on(&self.backend.server_args(), self.server_port)?;
        }
        let mut p = 0;
        while p < self.producers.len() {
            match self.producers[p].exited() {
                Some(status) => {
                    let producer = self.producers.swap_remove(p);
                    if !status.success() {
                        self.crashed(&producer, &format!("exited with {status}"));
                    }
                }
                None => p += 1,
            }
        }
        Ok(())
    }

    /// Counts a process that crashed or hung, and keeps what the report says of it.
    fn crashed(&mut self, proc: &Proc, why: &str) {
        self.note(Fault::Crashed, Some(proc.pid()));
        self.crashes.push(proc.crash_report(why));
    }

    /// Waits for the producers to finish and the queue to empty.
    fn drain(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        loop {
            self.watch()?;
            let left = self.leftovers();
            if self.producers.is_empty() && left.pending + left.groups + left.in_flight == 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "not drained after {DRAIN_TIMEOUT:?}: {} producers running, {} pending, {} groups with messages, {} in flight",
                    self.producers.len(), left.pending, left.groups, left.in_flight
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// What is left of the queue in Redis.
    fn leftovers(&mut self) -> Leftovers {
        let redis = match &mut self.backend {
            Backend::Single { redis, .. } => redis,
            Backend::Cluster(cluster) => return cluster.leftovers(),
        };
        let count = |cmd: &str, key: &str| -> u64 {
            let key = format!("dq:{{{}}}:{key}", plan::QUEUE);
            crate::evidence::count_of(redis, cmd, &key).unwrap_or(u64::MAX)
        };
        Leftovers::counted(count)
    }

    /// SIGTERMs every process and waits for each (killing what does not stop in time).
    fn stop_all(&mut self) {
        let mut all: Vec<Proc> = self
            .workers
            .drain(..)
            .chain(self.producers.drain(..))
            .collect();
        for p in &all {
            let _ = signal(p.pid(), "TERM");
        }
        let deadline = Instant::now() + TERM_TIMEOUT;
        for p in &mut all {
            while p.exited().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            match p.exited() {
                Some(status) if status.success() => {}
                Some(status) => self.crashed(p, &format!("exited with {status} after SIGTERM")),
                None => {
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                    self.crashed(
                        p,
                        &format!("did not exit within {TERM_TIMEOUT:?} of SIGTERM"),
                    );
                }
            }
        }
        let _ = signal(self.server.pid(), "TERM");
        let _ = self.server.child.wait();
    }
}
