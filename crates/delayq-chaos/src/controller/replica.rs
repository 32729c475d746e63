//! The partition-replica scenario's replica: a `redis-server` on a host of the run's own
//! (`netns.rs`), replicating the run's Redis over the host's link, so that cutting the host
//! off partitions a master from its replica. Stopped when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis_fixture::RedisServer;

use super::netns::Host;

/// The replica's port, on its host's own address (the namespace has no one else's ports).
const PORT: u16 = 6390;

/// How long a replica may take to be in sync, at its start and after a partition heals.
const SYNC_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) struct Replica {
    child: Child,
    ip: String,
}

impl Replica {
    /// Starts a replica of the Redis on `master_port` (the run's side of `host`'s link) on
    /// `host`, with its files in `dir/replica`, and waits until it is in sync.
    pub(super) fn start(host: &Host, dir: &Path, master_port: u16) -> Result<Replica, String> {
        let files = dir.join("replica");
        std::fs::create_dir_all(&files).map_err(|e| format!("{files:?}: {e}"))?;
        let prefix = host.prefix();
        let child = Command::new(&prefix[0])
            .args(&prefix[1..])
            .arg(redis_fixture::redis_server_binary())
            .args(["--port", &PORT.to_string(), "--bind", &host.ip()])
            .args(["--protected-mode", "no", "--save", "", "--appendonly", "no"])
            .args(["--replicaof", &host.outer_ip(), &master_port.to_string()])
            .arg("--dir")
            .arg(&files)
            .arg("--logfile")
            .arg(files.join("redis.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the replica: {e}"))?;
        let replica = Replica {
            child,
            ip: host.ip(),
        };
        let deadline = Instant::now() + SYNC_TIMEOUT;
        while replica.field("master_link_status").as_deref() != Some("up") {
            if Instant::now() > deadline {
                return Err(format!("the replica did not sync within {SYNC_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(replica)
    }

    /// A field of the replica's `INFO replication`, if it answers.
    fn field(&self, name: &str) -> Option<String> {
        let out = Command::new(redis_fixture::redis_cli_binary())
            .args([
                "-h",
                &self.ip,
                "-p",
                &PORT.to_string(),
                "INFO",
                "replication",
            ])
            .output()
            .ok()?;
        field_of(&String::from_utf8_lossy(&out.stdout), name)
    }

    /// Waits until the replica has everything `master` has (its replication offset); says
    /// how far behind it was and how long that took.
    pub(super) fn catch_up(&self, master: &RedisServer) -> Result<String, String> {
        let started = Instant::now();
        let offset = |text: Option<String>| text.and_then(|t| t.parse::<u64>().ok());
        let master_offset = || offset(master.info_field("replication", "master_repl_offset"));
        let (first_master, first_replica) =
            (master_offset(), offset(self.field("slave_repl_offset")));
        let behind = match (first_master, first_replica) {
            (Some(m), Some(r)) => m.saturating_sub(r),
            _ => 0,
        };
        while started.elapsed() < SYNC_TIMEOUT {
            let (m, r) = (master_offset(), offset(self.field("slave_repl_offset")));
            if m.is_some() && r >= m && self.field("master_link_status").as_deref() == Some("up") {
                return Ok(format!(
                    "the replica was {behind} bytes of the replication stream behind at the heal, and caught up within {:.1} s",
                    started.elapsed().as_secs_f64()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "the replica did not catch up within {SYNC_TIMEOUT:?} of the heal"
        ))
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn field_of(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_owned())
}
