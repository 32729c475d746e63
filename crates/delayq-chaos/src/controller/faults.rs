//! The faults of a chaos run: those at fixed points of the fault phase (a plan per kind of
//! run) and those at random intervals (worker kills, connection cuts), and how each is
//! injected.

use std::time::{Duration, Instant};

use rand::Rng;

use redis_fixture::{RedisServer, Reply};

use super::planned::Planned;
use super::scenarios;
use super::{Backend, Run, RunArgs, REDIS_DOWN};
use crate::evidence::FREEZE;
use crate::history::Fault;
use crate::plan;
use crate::processes::signal;
use crate::upgrade;

/// The faults at fixed points of a run on one Redis.
const SINGLE_PLAN: &[(f64, Planned)] = &[
    (0.15, Planned::HalfOpen),
    (0.20, Planned::KillRedis),
    (0.30, Planned::TermWorker),
    (0.35, Planned::KillServer),
    (0.40, Planned::FreezeRedis),
    (0.50, Planned::UpgradeFormat),
    (0.55, Planned::KillRedis),
    (0.60, Planned::HalfOpen),
    (0.70, Planned::TermWorker),
    (0.75, Planned::KillServer),
    (0.85, Planned::KillRedis),
];

/// The faults at fixed points of a short run on a cluster: every master is killed once (a
/// failover, restart and resync take about 7 s).
const CLUSTER_SHORT_PLAN: &[(f64, Planned)] = &[
    (0.15, Planned::KillMaster),
    (0.30, Planned::TermWorker),
    (0.35, Planned::KillServer),
    (0.45, Planned::StallAndKillMaster),
    (0.65, Planned::TermWorker),
    (0.70, Planned::KillServer),
    (0.75, Planned::KillMaster),
];

/// The same for a full run: every master once, then a promoted replica.
const CLUSTER_PLAN: &[(f64, Planned)] = &[
    (0.15, Planned::KillMaster),
    (0.30, Planned::TermWorker),
    (0.35, Planned::KillServer),
    (0.40, Planned::StallAndKillMaster),
    (0.60, Planned::KillMaster),
    (0.70, Planned::TermWorker),
    (0.75, Planned::KillServer),
    (0.80, Planned::StallAndKillMaster),
];

impl Run {
    /// Runs the fault schedule for `args.seconds`.
    pub(super) fn fault_phase(&mut self, args: &RunArgs) -> Result<(), String> {
        let phase = Duration::from_secs(args.seconds);
        let plan = match (args.scenario, args.cluster, args.short) {
            (Some(scenario), _, _) => scenario.plan(),
            (None, false, _) => SINGLE_PLAN,
            (None, true, true) => CLUSTER_SHORT_PLAN,
            (None, true, false) => CLUSTER_PLAN,
        };
        // A scenario's fault comes alone: no kills and no cuts beside it.
        let random_faults = args.scenario.is_none();
        let mut planned: Vec<(Duration, Planned)> = plan
            .iter()
            .map(|&(at, what)| (phase.mul_f64(at), what))
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
            if random_faults && now >= next_kill {
                next_kill = now + Duration::from_millis(rng.random_range(2000..4000));
                self.kill_worker(rng.random_range(0..1000))?;
            }
            if random_faults && now >= next_cut {
                next_cut = now + Duration::from_millis(rng.random_range(4000..8000));
                match &self.backend {
                    Backend::Single { proxy, .. } => proxy.cut_all(),
                    Backend::Cluster(cluster) => cluster.cut_all(),
                }
                self.note(Fault::CutConnections, None);
            }
            if let Backend::Cluster(cluster) = &mut self.backend {
                let finished = cluster.poll()?;
                self.count_failover(finished);
            }
            while planned.last().is_some_and(|(at, _)| *at <= now) {
                let Some((at, what)) = planned.pop() else {
                    break;
                };
                if !self.planned(what, rng.random_range(0..1000))? {
                    // Not now (a failover is still under way): a second later.
                    planned.push((at + Duration::from_secs(1), what));
                    planned.sort_by_key(|p| std::cmp::Reverse(p.0));
                    break;
                }
            }
        }
        Ok(())
    }

    /// Injects one planned fault; false if it has to wait.
    fn planned(&mut self, what: Planned, pick: usize) -> Result<bool, String> {
        match what {
            Planned::UpgradeFormat => {
                upgrade::upgrade(self.launcher.delayq_bin(), &self.backend.server_args())?;
                self.note(Fault::UpgradeFormat, None);
            }
            Planned::HalfOpen => {
                if self.proxy().is_some_and(|p| p.hold_half_open(pick)) {
                    self.note(Fault::HalfOpen, None);
                }
            }
            Planned::KillRedis => {
                let redis = self.redis().ok_or("no single Redis to kill")?;
                redis.kill();
                self.note(Fault::KillRedis, None);
                std::thread::sleep(REDIS_DOWN);
                self.redis().ok_or("no single Redis")?.restart();
                self.note(Fault::RestartRedis, None);
            }
            Planned::FreezeRedis => {
                let redis = self.redis().ok_or("no single Redis to freeze")?;
                let pid = redis.pid().ok_or("Redis is not running")?;
                signal(pid, "STOP")?;
                self.note(Fault::FreezeRedis, Some(pid));
                std::thread::sleep(FREEZE);
                signal(pid, "CONT")?;
                self.note(Fault::ThawRedis, Some(pid));
            }
            Planned::KillMaster | Planned::StallAndKillMaster => {
                let Backend::Cluster(cluster) = &mut self.backend else {
                    return Err("no cluster to fail over".into());
                };
                let stall = matches!(what, Planned::StallAndKillMaster);
                let chosen = cluster.begin_failover(stall, self.recorder.clone())?;
                return Ok(chosen.is_some());
            }
            Planned::KillServer => {
                let pid = self.server.pid();
                let _ = self.server.child.kill();
                let _ = self.server.child.wait();
                self.note(Fault::KillServer, Some(pid));
                self.server = self
                    .launcher
                    .server_on(&self.backend.server_args(), self.server_port)?;
                self.note(Fault::RestartServer, Some(self.server.pid()));
            }
            Planned::SlowNetwork
            | Planned::FastNetwork
            | Planned::StepClock(_)
            | Planned::FillMemory
            | Planned::FreeMemory
            | Planned::FillDisk { .. }
            | Planned::FreeDisk
            | Planned::Partition
            | Planned::Heal
            | Planned::RestartStorm
            | Planned::StormOn
            | Planned::StormOff
            | Planned::Flood => self.scenario_fault(what)?,
            Planned::TermWorker => {
                let Some(i) = (0..self.workers.len()).find(|&i| {
                    self.workers[(i + pick) % self.workers.len()]
                        .terminated
                        .is_none()
                }) else {
                    return Ok(true);
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
        Ok(true)
    }

    /// Injects one of a scenario's faults (`scenarios.rs`).
    fn scenario_fault(&mut self, what: Planned) -> Result<(), String> {
        match what {
            Planned::SlowNetwork => {
                let proxy = self.proxy().ok_or("no proxy to slow down")?;
                proxy.set_network(SLOW_LATENCY, SLOW_JITTER, SLOW_LOSS);
                self.note(Fault::SlowNetwork, None);
            }
            Planned::FastNetwork => {
                let proxy = self.proxy().ok_or("no proxy")?;
                proxy.set_network(Duration::ZERO, Duration::ZERO, 0.0);
                self.note(Fault::FastNetwork, None);
            }
            Planned::StepClock(secs) => {
                let file = self.prepared.clock.clone().ok_or("no clock to step")?;
                scenarios::set_clock(&file, secs)?;
                // The step has reached the processes once a new one reads it (libfaketime
                // reads the file again every second): proven, not assumed.
                let deadline = Instant::now() + Duration::from_secs(10);
                loop {
                    let offset = self.launcher.clock_offset_ms()?;
                    if (offset - secs * 1000).abs() < 2000 {
                        break;
                    }
                    if Instant::now() > deadline {
                        return Err(format!("the clocks read {offset} ms off, not {secs} s"));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                self.note(Fault::StepClock, None);
            }
            Planned::FillMemory => {
                let redis = self.redis().ok_or("no single Redis")?;
                let used = redis.used_memory().to_string();
                config_set(redis, "maxmemory", &used)?;
                self.note(Fault::FillMemory, None);
            }
            Planned::FreeMemory => {
                config_set(self.redis().ok_or("no single Redis")?, "maxmemory", "0")?;
                self.note(Fault::FreeMemory, None);
            }
            Planned::FillDisk { fsync_always } => {
                let policy = if fsync_always { "always" } else { "everysec" };
                config_set(
                    self.redis().ok_or("no single Redis")?,
                    "appendfsync",
                    policy,
                )?;
                let disk = self.prepared.disk.as_ref().ok_or("no disk to fill")?;
                disk.fill()?;
                self.note(Fault::FillDisk, None);
            }
            Planned::FreeDisk => {
                self.prepared
                    .disk
                    .as_ref()
                    .ok_or("no disk to free")?
                    .free()?;
                self.note(Fault::FreeDisk, None);
                let redis = self.redis().ok_or("no single Redis")?;
                if !redis.is_running() {
                    // It exited at the full disk (appendfsync always): started again on its
                    // AOF, as a supervisor would.
                    self.note(Fault::RedisExited, None);
                    self.redis().ok_or("no single Redis")?.restart();
                    self.note(Fault::RestartRedis, None);
                }
                // Back to the run's policy.
                config_set(
                    self.redis().ok_or("no single Redis")?,
                    "appendfsync",
                    "always",
                )?;
            }
            Planned::Partition => {
                let port = self.redis().ok_or("no single Redis")?.port();
                self.prepared.partition(port)?;
                self.note(Fault::Partition, None);
            }
            Planned::Heal => {
                self.prepared.heal()?;
                self.note(Fault::Heal, None);
                let Backend::Single { redis, .. } = &self.backend else {
                    return Err("no single Redis".into());
                };
                self.prepared.after_heal(redis)?;
            }
            Planned::RestartStorm => self.restart_storm()?,
            Planned::StormOn => {
                let storm = self.prepared.storm.as_ref().ok_or("no storm file")?;
                std::fs::write(storm, b"").map_err(|e| format!("{storm:?}: {e}"))?;
                self.note(Fault::StormOn, None);
            }
            Planned::StormOff => {
                let storm = self.prepared.storm.as_ref().ok_or("no storm file")?;
                std::fs::remove_file(storm).map_err(|e| format!("{storm:?}: {e}"))?;
                self.note(Fault::StormOff, None);
            }
            Planned::Flood => self.flood()?,
            other => return Err(format!("{other:?} is not a scenario's fault")),
        }
        Ok(())
    }

    /// Kills Redis, starts it again a second later, and measures how its clients come back:
    /// how many are connected 1, 2 and 5 s after it started, against before the kill, and
    /// how many connections it took in its first second and in those 5 s.
    fn restart_storm(&mut self) -> Result<(), String> {
        let redis = self.redis().ok_or("no single Redis")?;
        let before = info_field(redis, "clients", "connected_clients")?;
        redis.kill();
        self.note(Fault::KillRedis, None);
        std::thread::sleep(REDIS_DOWN);
        let redis = self.redis().ok_or("no single Redis")?;
        redis.restart();
        let started = Instant::now();
        let mut seen = Vec::new();
        for at in [1, 2, 5] {
            let wait = Duration::from_secs(at).saturating_sub(started.elapsed());
            std::thread::sleep(wait);
            let connected = info_field(redis, "clients", "connected_clients")?;
            let accepted = info_field(redis, "stats", "total_connections_received")?;
            seen.push((at, connected, accepted));
        }
        self.note(Fault::RestartRedis, None);
        let after: Vec<String> = seen
            .iter()
            .map(|(at, connected, _)| format!("{connected} at {at} s"))
            .collect();
        let line = format!(
            "Redis restarted with {before} clients connected before the kill: {}; \
             {} connections accepted in its first second, {} in 5 s",
            after.join(", "),
            seen[0].2,
            seen[2].2
        );
        self.prepared.note(&line)
    }

    /// Starts one more producer that sends [`FLOOD_COUNT`] messages at priority
    /// [`plan::FLOOD_PRIORITY`] within [`FLOOD_SECS`], due at once.
    fn flood(&mut self) -> Result<(), String> {
        let count = FLOOD_COUNT;
        let (target, _) = self.backend.library_target();
        let args = [
            "produce".to_owned(),
            "--via".into(),
            "library".into(),
            "--target".into(),
            target,
            "--from".into(),
            plan::FLOOD_FROM.to_string(),
            "--to".into(),
            (plan::FLOOD_FROM + count).to_string(),
            "--rate".into(),
            format!("{:.3}", count as f64 / FLOOD_SECS),
            "--max-delay-ms".into(),
            "0".into(),
            "--priority".into(),
            plan::FLOOD_PRIORITY.to_string(),
        ];
        let producer = self
            .launcher
            .chaos(crate::processes::Role::Producer, &args)
            .map_err(|e| e.to_string())?;
        self.producers.push(producer);
        self.note(Fault::Flood, None);
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
}

/// The slow network of the slow-network scenario: each way, 50 ms ± 20 ms, 2 % lost.
const SLOW_LATENCY: Duration = Duration::from_millis(50);
const SLOW_JITTER: Duration = Duration::from_millis(20);
const SLOW_LOSS: f64 = 0.02;

/// `CONFIG SET key value` on `redis`.
fn config_set(redis: &RedisServer, key: &str, value: &str) -> Result<(), String> {
    match redis.command(&["CONFIG", "SET", key, value]) {
        Ok(Reply::Error(e)) => Err(format!("CONFIG SET {key} {value}: {e}")),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("CONFIG SET {key} {value}: {e}")),
    }
}

/// Field `field` of `INFO section` on `redis`, as a number.
fn info_field(redis: &RedisServer, section: &str, field: &str) -> Result<u64, String> {
    redis
        .info_field(section, field)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("INFO {section} has no {field}"))
}

/// The priority flood: this many messages, sent within this many seconds: more than the
/// consumers take, in either mode. Not a multiple of the run: a full run's 100,000 left four
/// of its groups (concurrency 1, priority 9 first) more than the drain's 120 s of work.
const FLOOD_COUNT: u64 = 6_000;
const FLOOD_SECS: f64 = 6.0;
