//! The fault scenarios of `run --scenario NAME`: each puts one fault that production meets
//! more often than a kill on an otherwise quiet run (no random kills, no cuts), with the same
//! processes, histories and checker (nothing lost, nothing early, never two live holders),
//! and the figures that say what the fault did (`figures.rs`). docs/reliability.md has their
//! table.
//!
//! - `slow-network`: 50 ms ± 20 ms each way and 2 % of packets lost between every process
//!   and Redis (the proxy's delay line: this kernel has no `tc netem`), for half the run.
//! - `clock-step`: the clock of every delayq process (producers, workers, HTTP consumers,
//!   the server; not Redis's) steps 5 minutes ahead, then 5 minutes behind, then back
//!   (libfaketime, from Debian's `faketime`). The histories keep the true time
//!   (`history::now_us`).
//! - `maxmemory`: Redis's `maxmemory` is set to what it uses, under the steady send load,
//!   then lifted: sends are refused (`OOM`, HTTP 503 `redis_full`) and tried again, while
//!   everything that drains goes on.
//! - `partition-server`: the server runs on a host of its own (`netns.rs`), and is cut off
//!   from Redis (packets dropped, connections left open) for 3 leases, twice, while its HTTP
//!   clients still reach it.
//! - `partition-consumer`: one more library worker runs on a host of its own, which is cut
//!   off from everything for 3 leases, twice, while its handlers run.
//! - `partition-replica`: Redis has a replica on a host of its own, every send waits for it
//!   (`WAIT 1`, 2 s), and the replica is cut off from its master twice: sends are answered
//!   "not replicated" and sent again (the same caller id), and the replica catches up.
//! - `reconnect-storm`: a crowd of 1,000 more clients (each its own connections and a worker
//!   of its own, in one process, straight to Redis) while Redis is killed and started again
//!   twice, while the producers still send: how fast they are back, and that none missed a
//!   wake-up (nothing stuck, first deliveries on time).
//! - `retry-storm`: every handler fails for a fifth of the run (a file that the handlers
//!   look for, `plan::storming`), then recovers: retries with backoff, nothing dead.
//! - `priority-flood`: a flood of priority-9 messages (five times the run's, sent in 6 s,
//!   more than the consumers take) beside the run's own trickle at the default 5: how long the trickle
//!   waits (priority is strict, docs/library.md).
//! - `disk-full`: the AOF lives on a small filesystem of the run's own (a 64 MiB tmpfs).
//!   It is filled twice: with `appendfsync everysec`, Redis refuses writes (`MISCONF`)
//!   until it is freed; with `always`, Redis exits at its first write that fails (its
//!   documented behaviour), and is started again once the disk is freed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::netns::Host;
use super::planned::Planned;
use super::replica::Replica;
use crate::figures::NOTES;
use crate::plan;
use crate::processes::{Launcher, Placement, Proc, Role};
use redis_fixture::RedisServer;

/// One scenario of `run --scenario`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    SlowNetwork,
    ClockStep,
    Maxmemory,
    DiskFull,
    PartitionServer,
    PartitionConsumer,
    ReconnectStorm,
    RetryStorm,
    PriorityFlood,
    PartitionReplica,
}

/// The reconnect-storm scenario's crowd of clients.
pub const CROWD: usize = 1000;

/// How far the clock-step scenario steps the clocks, in seconds.
pub const CLOCK_STEP_SECS: i64 = 300;

/// The size of the disk-full scenario's filesystem.
const DISK_MIB: u64 = 64;

/// Where Debian's `faketime` puts the library, by architecture.
const LIBFAKETIME: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
];

impl Scenario {
    /// Its faults, at fractions of the fault phase.
    pub(super) fn plan(self) -> &'static [(f64, Planned)] {
        match self {
            Scenario::SlowNetwork => &[(0.10, Planned::SlowNetwork), (0.60, Planned::FastNetwork)],
            Scenario::ClockStep => &[
                (0.20, Planned::StepClock(CLOCK_STEP_SECS)),
                (0.45, Planned::StepClock(-CLOCK_STEP_SECS)),
                (0.70, Planned::StepClock(0)),
            ],
            Scenario::Maxmemory => &[(0.15, Planned::FillMemory), (0.55, Planned::FreeMemory)],
            Scenario::DiskFull => &[
                (
                    0.10,
                    Planned::FillDisk {
                        fsync_always: false,
                    },
                ),
                (0.30, Planned::FreeDisk),
                (0.45, Planned::FillDisk { fsync_always: true }),
                (0.65, Planned::FreeDisk),
            ],
            Scenario::PartitionServer
            | Scenario::PartitionConsumer
            | Scenario::PartitionReplica => &[
                (0.20, Planned::Partition),
                (0.35, Planned::Heal),
                (0.55, Planned::Partition),
                (0.70, Planned::Heal),
            ],
            Scenario::ReconnectStorm => {
                &[(0.20, Planned::RestartStorm), (0.45, Planned::RestartStorm)]
            }
            Scenario::RetryStorm => &[(0.20, Planned::StormOn), (0.40, Planned::StormOff)],
            Scenario::PriorityFlood => &[(0.20, Planned::Flood)],
        }
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::SlowNetwork => "slow-network",
            Scenario::ClockStep => "clock-step",
            Scenario::Maxmemory => "maxmemory",
            Scenario::DiskFull => "disk-full",
            Scenario::PartitionServer => "partition-server",
            Scenario::PartitionConsumer => "partition-consumer",
            Scenario::ReconnectStorm => "reconnect-storm",
            Scenario::RetryStorm => "retry-storm",
            Scenario::PriorityFlood => "priority-flood",
            Scenario::PartitionReplica => "partition-replica",
        }
    }
}

/// What a scenario needs before the run starts: Redis's extra arguments, the environment
/// of every process, and what it must give back at the end.
#[derive(Default)]
pub(super) struct Prepared {
    pub redis_args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The clock-step scenario's offset file (libfaketime reads it again every second).
    pub clock: Option<PathBuf>,
    pub disk: Option<SmallDisk>,
    /// The host of its own that the server (partition-server) or one more library worker
    /// (partition-consumer) runs on.
    pub host: Option<(Host, HostRole)>,
    /// The reconnect-storm scenario's crowd: this many clients in one more worker process.
    pub crowd: Option<usize>,
    /// Where the controller writes what it measured of a fault, for the figures.
    pub notes: PathBuf,
    /// The retry-storm scenario's file: every handler fails while it exists.
    pub storm: Option<PathBuf>,
    /// The partition-replica scenario's replica, on its host.
    pub replica: Option<Replica>,
}

/// Who runs on a scenario's host of its own.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum HostRole {
    Server,
    Worker,
    Replica,
}

/// Gets `dir` ready for `scenario`.
pub(super) fn prepare(scenario: Option<Scenario>, dir: &Path) -> Result<Prepared, String> {
    let mut prepared = Prepared {
        notes: dir.join(NOTES),
        ..Prepared::default()
    };
    match scenario {
        Some(Scenario::ClockStep) => {
            let lib = LIBFAKETIME
                .iter()
                .find(|p| Path::new(p).exists())
                .ok_or("clock-step needs libfaketime: install Debian's faketime")?;
            let clock = dir.join("clock-offset");
            set_clock(&clock, 0)?;
            prepared.env = vec![
                ("LD_PRELOAD".into(), (*lib).into()),
                (
                    "FAKETIME_TIMESTAMP_FILE".into(),
                    clock.display().to_string(),
                ),
                ("FAKETIME_CACHE_DURATION".into(), "1".into()),
                // tokio's timers and every lease's countdown run on the monotonic clock,
                // which a step of the wall clock does not move.
                ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
            ];
            prepared.clock = Some(clock);
        }
        Some(Scenario::DiskFull) => {
            let disk = SmallDisk::mount(&dir.join("aof-disk"))?;
            prepared.redis_args = vec!["--dir".into(), disk.mount.display().to_string()];
            prepared.disk = Some(disk);
        }
        Some(
            Scenario::PartitionServer | Scenario::PartitionConsumer | Scenario::PartitionReplica,
        ) => {
            let host = Host::create(1)?;
            // Redis listens on the host's link too (a private address of this machine's own
            // link, so protected mode, which takes any address but loopback for the world,
            // is off).
            prepared.redis_args = [
                "--bind",
                "127.0.0.1",
                &host.outer_ip(),
                "--protected-mode",
                "no",
            ]
            .map(String::from)
            .into();
            let role = match scenario {
                Some(Scenario::PartitionServer) => HostRole::Server,
                Some(Scenario::PartitionReplica) => HostRole::Replica,
                _ => HostRole::Worker,
            };
            prepared.host = Some((host, role));
        }
        Some(Scenario::ReconnectStorm) => prepared.crowd = Some(CROWD),
        Some(Scenario::RetryStorm) => {
            let storm = dir.join("storm");
            prepared.env = vec![(plan::STORM_ENV.into(), storm.display().to_string())];
            prepared.storm = Some(storm);
        }
        Some(Scenario::PriorityFlood) => {}
        Some(Scenario::SlowNetwork | Scenario::Maxmemory) | None => {}
    }
    Ok(prepared)
}

impl Prepared {
    /// Places the server on the scenario's host, if it has one for it: it reaches Redis
    /// (on `redis_port`) over the host's link.
    pub(super) fn place_server(&self, launcher: &mut Launcher, redis_port: u16) {
        if let Some((host, HostRole::Server)) = &self.host {
            launcher.place_server(Placement {
                prefix: host.prefix(),
                ip: host.ip(),
                redis_args: vec![
                    "--redis-url".into(),
                    format!("redis://{}:{redis_port}/", host.outer_ip()),
                    // Its address is on a link of this machine's own, not loopback: the
                    // server would refuse it without tokens, to keep the world out.
                    "--insecure-public".into(),
                ],
            });
        }
    }

    /// Starts the scenario's own worker processes, if it has any: the worker of its host,
    /// or its crowd (straight to Redis on `redis_port`: the proxy is a thread or two per
    /// connection, too many for a crowd).
    pub(super) fn extra_workers(
        &self,
        launcher: &mut Launcher,
        redis_port: u16,
    ) -> Result<Vec<Proc>, String> {
        let mut workers = Vec::new();
        if let Some((host, HostRole::Worker)) = &self.host {
            let url = format!("redis://{}:{redis_port}/", host.outer_ip());
            let args = ["work", "--redis-url", &url].map(String::from);
            let worker = launcher
                .chaos_on(&host.prefix(), Role::Worker, &args)
                .map_err(|e| e.to_string())?;
            workers.push(worker);
        }
        if let Some(crowd) = self.crowd {
            let (url, crowd) = (
                format!("redis://127.0.0.1:{redis_port}/"),
                crowd.to_string(),
            );
            let args = [
                "work",
                "--redis-url",
                &url,
                "--clients",
                &crowd,
                "--concurrency",
                &crowd,
            ];
            let args = args.map(String::from);
            workers.push(
                launcher
                    .chaos(Role::Worker, &args)
                    .map_err(|e| e.to_string())?,
            );
        }
        Ok(workers)
    }

    /// Adds `line` to what the figures show of the faults.
    pub(super) fn note(&self, line: &str) -> Result<(), String> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.notes)
            .map_err(|e| format!("{:?}: {e}", self.notes))?;
        writeln!(file, "{line}").map_err(|e| e.to_string())
    }

    /// Whether every send waits for a replica (partition-replica).
    pub(super) fn sends_wait(&self) -> bool {
        matches!(self.host, Some((_, HostRole::Replica)))
    }

    /// Starts the scenario's replica on its host, if it has one, replicating the Redis on
    /// `redis_port`, and waits until it is in sync.
    pub(super) fn start_replica(&mut self, dir: &Path, redis_port: u16) -> Result<(), String> {
        let Some((host, HostRole::Replica)) = &self.host else {
            return Ok(());
        };
        self.replica = Some(Replica::start(host, dir, redis_port)?);
        Ok(())
    }

    /// Cuts the scenario's host off: the server from Redis, a worker or a replica from
    /// everything.
    pub(super) fn partition(&self, redis_port: u16) -> Result<(), String> {
        match &self.host {
            Some((host, HostRole::Server)) => host.cut_from_port(redis_port),
            Some((host, HostRole::Worker | HostRole::Replica)) => host.cut_off(),
            None => Err("no host to partition".into()),
        }
    }

    /// Ends the partition.
    pub(super) fn heal(&self) -> Result<(), String> {
        match &self.host {
            Some((host, _)) => host.heal(),
            None => Err("no host to heal".into()),
        }
    }

    /// After a heal: waits for the scenario's replica, if it has one, to catch up with
    /// `master`, and notes how long that took for the figures.
    pub(super) fn after_heal(&self, master: &RedisServer) -> Result<(), String> {
        match &self.replica {
            Some(replica) => self.note(&replica.catch_up(master)?),
            None => Ok(()),
        }
    }
}

/// Steps the clocks of the processes started with [`Prepared::env`] to `secs` from the
/// true time.
pub(super) fn set_clock(file: &Path, secs: i64) -> Result<(), String> {
    // Written whole and renamed, so that libfaketime never reads half a line.
    let tmp = file.with_extension("new");
    std::fs::write(&tmp, format!("{secs:+}\n")).map_err(|e| format!("{tmp:?}: {e}"))?;
    std::fs::rename(&tmp, file).map_err(|e| format!("{file:?}: {e}"))
}

/// A size-limited tmpfs for Redis's AOF, unmounted when dropped.
pub(super) struct SmallDisk {
    mount: PathBuf,
}

impl SmallDisk {
    fn mount(at: &Path) -> Result<SmallDisk, String> {
        std::fs::create_dir_all(at).map_err(|e| format!("{at:?}: {e}"))?;
        let size = format!("size={DISK_MIB}m");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &size, "tmpfs"])
            .arg(at)
            .status()
            .map_err(|e| format!("mount: {e}"))?;
        if !status.success() {
            return Err(format!(
                "disk-full mounts a tmpfs at {at:?}, which needs root: mount {status}"
            ));
        }
        Ok(SmallDisk {
            mount: at.to_path_buf(),
        })
    }

    fn filler(&self) -> PathBuf {
        self.mount.join("filler")
    }

    /// Fills the disk to its last byte; returns how many bytes that took.
    pub(super) fn fill(&self) -> Result<u64, String> {
        let path = self.filler();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("{path:?}: {e}"))?;
        let mut written = 0u64;
        // Big pieces, then small ones into what is left.
        for piece in [1 << 20, 4096, 1] {
            let chunk = vec![0u8; piece];
            while file.write_all(&chunk).is_ok() {
                written += piece as u64;
            }
        }
        Ok(written)
    }

    /// Frees what [`fill`](Self::fill) took.
    pub(super) fn free(&self) -> Result<(), String> {
        let path = self.filler();
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("{path:?}: {e}")),
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
    }
}
