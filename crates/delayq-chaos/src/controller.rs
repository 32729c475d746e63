//! The controller of a chaos run: starts Redis (AOF, fsync always) behind a TCP proxy,
//! `delayq serve`, producers, library workers and HTTP consumers as separate processes; then,
//! while messages come due, kills, stops, freezes and cuts them on a schedule; then lets the
//! queue drain, stops everything gracefully and hands the histories to the checker.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::Rng;
use redis_fixture::{Proxy, RedisServer, Reply, ServerConfig};

use crate::checker::{self, Leftovers};
use crate::history::{now_us, Event, Fault, Recorder};
use crate::plan;
use crate::processes::{signal, Launcher, Proc, Role};

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
    /// The short run for CI: 2,000 messages over 40 s.
    #[arg(long)]
    short: bool,
    /// Where histories and logs go (default: a new directory under the system's temp dir).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The `delayq` server binary (default: beside this one).
    #[arg(long)]
    delayq_bin: Option<PathBuf>,
}

/// How long the queue may take to drain once faults stop.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a SIGTERMed process may take to exit (its shutdown grace is 3 s).
const TERM_TIMEOUT: Duration = Duration::from_secs(15);
/// How long Redis stays frozen.
pub(crate) const FREEZE: Duration = Duration::from_secs(3);
/// How long Redis stays down after a kill.
const REDIS_DOWN: Duration = Duration::from_secs(1);

/// A fault at a fixed point of the run, as a fraction of the fault phase.
#[derive(Clone, Copy, Debug)]
enum Planned {
    TermWorker,
    KillRedis,
    FreezeRedis,
    KillServer,
    HalfOpen,
}

/// Runs the whole thing; returns whether the checker passed.
pub fn run(mut args: RunArgs) -> Result<bool, String> {
    if args.short {
        args.messages = 2_000;
        args.seconds = 40;
        args.workers = 2;
        args.consumers = 2;
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
    println!(
        "chaos run: {} messages, {} s of faults, histories in {}",
        args.messages,
        args.seconds,
        dir.display()
    );
    let mut run = Run::start(&dir, me, delayq_bin, &args)?;
    let faults = run.fault_phase(&args);
    let drained = faults.and_then(|()| run.drain());
    let leftovers = run.leftovers();
    run.stop_all();
    let lookup = Lookup::new(&run.redis.url())?;
    let report = checker::check(&dir, &leftovers, &run.counts, &|id| lookup.exists(id))?;
    println!("{}", report.table);
    std::fs::write(dir.join("report.txt"), &report.table).map_err(|e| e.to_string())?;
    if let Err(why) = drained {
        println!("FAILED: {why}");
        return Ok(false);
    }
    Ok(report.passed)
}

/// Asks Redis, through the library, whether a message is still there.
struct Lookup {
    runtime: tokio::runtime::Runtime,
    queue: delayq::Queue,
}

impl Lookup {
    fn new(url: &str) -> Result<Lookup, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let dq = runtime
            .block_on(delayq::DelayQ::connect(url))
            .map_err(|e| e.to_string())?;
        let queue = dq.queue(plan::QUEUE).map_err(|e| e.to_string())?;
        Ok(Lookup { runtime, queue })
    }

    /// True when the message is there, or when Redis cannot say (never call a message lost
    /// on a failed lookup).
    fn exists(&self, id: &str) -> bool {
        !matches!(self.runtime.block_on(self.queue.get(id)), Ok(None))
    }
}

struct Run {
    redis: RedisServer,
    proxy: Proxy,
    launcher: Launcher,
    server: Proc,
    server_port: u16,
    workers: Vec<Proc>,
    producers: Vec<Proc>,
    recorder: Recorder,
    counts: BTreeMap<Fault, u32>,
}

impl Run {
    fn start(dir: &Path, me: PathBuf, delayq_bin: PathBuf, args: &RunArgs) -> Result<Run, String> {
        let redis = RedisServer::start_with(ServerConfig::appendonly());
        let proxy = Proxy::start(redis.port());
        let mut launcher = Launcher::new(dir, me, delayq_bin);
        let server_port = redis_fixture::free_port();
        let server = launcher.server(&proxy.url(), server_port)?;
        let recorder =
            Recorder::create(&dir.join("controller.jsonl")).map_err(|e| e.to_string())?;
        let mut run = Run {
            redis,
            proxy,
            launcher,
            server,
            server_port,
            workers: Vec::new(),
            producers: Vec::new(),
            recorder,
            counts: BTreeMap::new(),
        };
        for i in 0..args.workers + args.consumers {
            let role = if i < args.workers {
                Role::Worker
            } else {
                Role::Consumer
            };
            run.spawn_worker(role)?;
        }
        // Two producers through the library, two through the API; sends fill the first 60 %
        // of the fault phase, delays reach to 95 %.
        let send_secs = args.seconds as f64 * 0.6;
        let max_delay_ms = args.seconds * 350;
        let share = args.messages.div_ceil(4);
        for p in 0..4u64 {
            let (via, target) = if p < 2 {
                ("library", run.proxy.url())
            } else {
                ("http", run.server_url())
            };
            let from = p * share;
            let to = ((p + 1) * share).min(args.messages);
            let producer_args = [
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
            .map(String::from);
            let producer = run
                .launcher
                .chaos(Role::Producer, &producer_args)
                .map_err(|e| e.to_string())?;
            run.producers.push(producer);
        }
        Ok(run)
    }

    fn server_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.server_port)
    }

    fn spawn_worker(&mut self, role: Role) -> Result<(), String> {
        let args = match role {
            Role::Worker => vec!["work".into(), "--redis-url".into(), self.proxy.url()],
            _ => vec!["consume".into(), "--server".into(), self.server_url()],
        };
        let worker = self
            .launcher
            .chaos(role, &args)
            .map_err(|e| e.to_string())?;
        self.workers.push(worker);
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

    /// Runs the fault schedule for `args.seconds`.
    fn fault_phase(&mut self, args: &RunArgs) -> Result<(), String> {
        let phase = Duration::from_secs(args.seconds);
        let mut planned: Vec<(Duration, Planned)> = [
            (0.15, Planned::HalfOpen),
            (0.20, Planned::KillRedis),
            (0.30, Planned::TermWorker),
            (0.35, Planned::KillServer),
            (0.40, Planned::FreezeRedis),
            (0.55, Planned::KillRedis),
            (0.60, Planned::HalfOpen),
            (0.70, Planned::TermWorker),
            (0.75, Planned::KillServer),
            (0.85, Planned::KillRedis),
        ]
        .into_iter()
        .map(|(at, what)| (phase.mul_f64(at), what))
        .collect();
        planned.reverse();
        let mut rng = rand::rng();
        let started = Instant::now();
        let mut next_kill = Duration::from_millis(rng.random_range(2000..4000));
        let mut next_cut = Duration::from_millis(rng.random_range(4000..8000));
        while started.elapsed() < phase {
            std::thread::sleep(Duration::from_millis(50));
            self.watch()?;
            let now = started.elapsed();
            if now >= next_kill {
                next_kill = now + Duration::from_millis(rng.random_range(2000..4000));
                self.kill_worker(rng.random_range(0..1000))?;
            }
            if now >= next_cut {
                next_cut = now + Duration::from_millis(rng.random_range(4000..8000));
                self.proxy.cut_all();
                self.note(Fault::CutConnections, None);
            }
            while planned.last().is_some_and(|(at, _)| *at <= now) {
                let Some((_, what)) = planned.pop() else {
                    break;
                };
                self.planned(what, rng.random_range(0..1000))?;
            }
        }
        Ok(())
    }

    fn planned(&mut self, what: Planned, pick: usize) -> Result<(), String> {
        match what {
            Planned::HalfOpen => {
                if self.proxy.hold_half_open(pick) {
                    self.note(Fault::HalfOpen, None);
                }
            }
            Planned::KillRedis => {
                self.redis.kill();
                self.note(Fault::KillRedis, None);
                std::thread::sleep(REDIS_DOWN);
                self.redis.restart();
                self.note(Fault::RestartRedis, None);
            }
            Planned::FreezeRedis => {
                let pid = self.redis.pid().ok_or("Redis is not running")?;
                signal(pid, "STOP")?;
                self.note(Fault::FreezeRedis, Some(pid));
                std::thread::sleep(FREEZE);
                signal(pid, "CONT")?;
                self.note(Fault::ThawRedis, Some(pid));
            }
            Planned::KillServer => {
                let pid = self.server.pid();
                let _ = self.server.child.kill();
                let _ = self.server.child.wait();
                self.note(Fault::KillServer, Some(pid));
                self.server = self.launcher.server(&self.proxy.url(), self.server_port)?;
                self.note(Fault::RestartServer, Some(self.server.pid()));
            }
            Planned::TermWorker => {
                let Some(i) = (0..self.workers.len()).find(|&i| {
                    self.workers[(i + pick) % self.workers.len()]
                        .terminated
                        .is_none()
                }) else {
                    return Ok(());
                };
                let i = (i + pick) % self.workers.len();
                let pid = self.workers[i].pid();
                signal(pid, "TERM")?;
                self.workers[i].terminated = Some(Instant::now());
                self.note(Fault::TermWorker, Some(pid));
                let role = self.workers[i].role;
                self.spawn_worker(role)?;
            }
        }
        Ok(())
    }

    /// Kills (-9) a worker that is not shutting down already, and starts another.
    fn kill_worker(&mut self, pick: usize) -> Result<(), String> {
        let running: Vec<usize> = (0..self.workers.len())
            .filter(|&i| self.workers[i].terminated.is_none())
            .collect();
        if running.is_empty() {
            return Ok(());
        }
        let mut victim = self.workers.swap_remove(running[pick % running.len()]);
        let pid = victim.pid();
        let _ = victim.child.kill();
        let _ = victim.child.wait();
        // Noted after the kill: whatever it recorded, it did before this time.
        self.note(Fault::KillWorker, Some(pid));
        self.spawn_worker(victim.role)
    }

    /// Notices processes that exited: a SIGTERMed worker's exit is expected (and must be
    /// clean and timely); any other exit is a crash, and the process is replaced.
    fn watch(&mut self) -> Result<(), String> {
        let mut i = 0;
        while i < self.workers.len() {
            let w = &mut self.workers[i];
            let pid = w.pid();
            match (w.exited(), w.terminated) {
                (Some(status), Some(_)) => {
                    let fault = if status.success() {
                        Fault::WorkerExited
                    } else {
                        Fault::Crashed
                    };
                    self.workers.swap_remove(i);
                    self.note(fault, Some(pid));
                }
                (None, Some(at)) if at.elapsed() > TERM_TIMEOUT => {
                    let _ = w.child.kill();
                    let _ = w.child.wait();
                    self.workers.swap_remove(i);
                    self.note(Fault::Crashed, Some(pid));
                }
                (Some(_), None) => {
                    let role = w.role;
                    self.workers.swap_remove(i);
                    self.note(Fault::Crashed, Some(pid));
                    self.spawn_worker(role)?;
                }
                _ => i += 1,
            }
        }
        if self.server.exited().is_some() {
            let pid = self.server.pid();
            self.note(Fault::Crashed, Some(pid));
            self.server = self.launcher.server(&self.proxy.url(), self.server_port)?;
        }
        let mut p = 0;
        while p < self.producers.len() {
            match self.producers[p].exited() {
                Some(status) => {
                    let pid = self.producers[p].pid();
                    self.producers.swap_remove(p);
                    if !status.success() {
                        self.note(Fault::Crashed, Some(pid));
                    }
                }
                None => p += 1,
            }
        }
        Ok(())
    }

    /// Waits for the producers to finish and the queue to empty.
    fn drain(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        loop {
            self.watch()?;
            let left = self.leftovers();
            if self.producers.is_empty() && left.pending + left.in_flight == 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "not drained after {DRAIN_TIMEOUT:?}: {} producers running, {} pending, {} in flight",
                    self.producers.len(), left.pending, left.in_flight
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// What is left of the queue in Redis.
    fn leftovers(&self) -> Leftovers {
        let count = |cmd: &str, key: &str| -> u64 {
            let key = format!("dq:{{{}}}:{key}", plan::QUEUE);
            match self.redis.command(&[cmd, &key]) {
                Ok(Reply::Int(n)) => n.max(0) as u64,
                _ => u64::MAX,
            }
        };
        Leftovers {
            pending: count("ZCARD", "pending"),
            in_flight: count("ZCARD", "leases"),
            dead: count("ZCARD", "dead"),
            index: count("HLEN", "index"),
            held: count("HLEN", "held"),
            dead_records: count("HLEN", "dead:msgs"),
            errors: count("HLEN", "errors"),
        }
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
            let pid = p.pid();
            match p.exited() {
                Some(status) if status.success() => {}
                _ => {
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                    self.note(Fault::Crashed, Some(pid));
                }
            }
        }
        let _ = signal(self.server.pid(), "TERM");
        let _ = self.server.child.wait();
    }
}
