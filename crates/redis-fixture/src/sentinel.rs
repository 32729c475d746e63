//! A real Redis Sentinel deployment: a master, a replica, and three sentinels
//! that monitor them (quorum 2, master down after 2 s without answering), each its own `redis-server` child on a free loopback
//! port in its own temporary directory. For testing what clients do when the
//! master dies and the sentinels promote the replica.
//!
//! ```no_run
//! use std::time::Duration;
//! use redis_fixture::RedisSentinel;
//!
//! let mut deployment = RedisSentinel::start();
//! let master = deployment.master_index();
//! deployment.nodes()[master].cli(&["SET", "k", "v"]);
//! deployment.wait_for_replicas(Duration::from_secs(10)); // the SET survives the failover
//! deployment.kill_master();
//! let promoted = deployment.wait_for_failover(Duration::from_secs(60));
//! assert_eq!(deployment.nodes()[promoted].cli(&["GET", "k"]), "v");
//! deployment.restart(master); // comes back, and is made a replica of the new master
//! deployment.wait_for_replicas(Duration::from_secs(60));
//! ```

use std::collections::HashMap;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::cluster::info_field;
use crate::resp::Reply;
use crate::server::{RedisServer, ServerConfig};

/// The name the sentinels monitor the master by.
const MASTER_NAME: &str = "delayq-master";
const SENTINELS: usize = 3;
/// Sentinels that must agree the master is down before a failover.
const QUORUM: usize = 2;
/// How long the master may be unreachable before a sentinel thinks it down: short so that
/// failover tests take seconds, not the default 30 s. Not shorter: a sentinel starts timing
/// a master it has just promoted before it has even connected to it, and on a loaded test
/// machine 1 s was seen to run out then, failing the new master straight back over.
const DOWN_AFTER_MS: u32 = 2000;
/// How long a failover may take before it is retried (by then with another leader); also
/// sets how soon a failed attempt is retried. The default is 3 minutes.
const FAILOVER_TIMEOUT_MS: u32 = 5000;
/// How long the sentinels may take to find the replica and each other after starting
/// (they announce themselves every 2 s).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// A master with one replica (both with the append-only file, `appendfsync always`) and
/// three sentinels (quorum 2) on loopback. Every process is killed on drop.
///
/// Data nodes are addressed by index into [`nodes`](Self::nodes): 0 starts as the master,
/// 1 as its replica. Which one is the master changes with failovers, so
/// [`master_index`](Self::master_index) asks the sentinels every time.
pub struct RedisSentinel {
    nodes: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
    /// The port of the master [`kill_master`](Self::kill_master) killed (or
    /// [`failover`](Self::failover) demoted) last: the failover is over once the sentinels
    /// name another.
    old_master: Option<u16>,
}

impl RedisSentinel {
    /// Starts the master, its replica and three sentinels, and waits until the replica
    /// has synced and every sentinel knows the master, the replica and the two other
    /// sentinels (so that a failover can start as soon as the master dies). Takes a few
    /// seconds. Panics with every process's log on failure.
    pub fn start() -> RedisSentinel {
        let mut data = ServerConfig::appendonly();
        data.extra_args = [
            // The default waits 5 s for more replicas before every full sync.
            "--repl-diskless-sync-delay",
            "0",
            // Replicas report their offset, and a master its liveness, every second
            // instead of every 10.
            "--repl-ping-replica-period",
            "1",
        ]
        .map(String::from)
        .into();
        let master = RedisServer::start_with(data.clone());
        let mut replica_config = data;
        replica_config.extra_args.extend([
            "--replicaof".to_owned(),
            "127.0.0.1".to_owned(),
            master.port().to_string(),
        ]);
        let mut deployment = RedisSentinel {
            nodes: vec![master],
            sentinels: Vec::new(),
            old_master: None,
        };
        // If a process fails to start, the ones already started are killed (dropped) as
        // the panic unwinds.
        deployment
            .nodes
            .push(RedisServer::start_with(replica_config));
        let conf = format!(
            "sentinel monitor {MASTER_NAME} 127.0.0.1 {port} {QUORUM}\n\
             sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n\
             sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n",
            port = deployment.nodes[0].port()
        );
        let sentinel = ServerConfig {
            sentinel_conf: Some(conf),
            ..ServerConfig::default()
        };
        for _ in 0..SENTINELS {
            let started = RedisServer::start_with(sentinel.clone());
            deployment.sentinels.push(started);
        }
        deployment.wait_until(SETTLE_TIMEOUT, |d| d.check_settled());
        deployment
    }

    /// The name the sentinels know the master by.
    pub fn master_name(&self) -> &str {
        MASTER_NAME
    }

    /// `redis://127.0.0.1:port/` of every sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The sentinels, in the order they were started.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// The data nodes: index 0 started as the master, 1 as its replica.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The index of the node the sentinels name as master now (`SENTINEL
    /// get-master-addr-by-name`, asked of the first sentinel that answers). Panics if none
    /// answers, or it names no node of ours.
    pub fn master_index(&self) -> usize {
        let mut errors = Vec::new();
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            match master_port(sentinel) {
                Ok(port) => match self.index_of_port(port) {
                    Some(index) => return index,
                    None => errors.push(format!("sentinel {i} names port {port}, no node")),
                },
                Err(e) => errors.push(format!("sentinel {i}: {e}")),
            }
        }
        self.fail(&format!(
            "no sentinel names the master:\n{}",
            errors.join("\n")
        ))
    }

    /// URL of the node the sentinels name as master now (see
    /// [`master_index`](Self::master_index)).
    pub fn master_url(&self) -> String {
        self.nodes[self.master_index()].url()
    }

    /// Kills the current master with SIGKILL, like a crash, and returns its index. The
    /// sentinels fail it over after two or three seconds;
    /// [`wait_for_failover`](Self::wait_for_failover) waits for that.
    pub fn kill_master(&mut self) -> usize {
        let master = self.master_index();
        self.old_master = Some(self.nodes[master].port());
        self.nodes[master].kill();
        master
    }

    /// Asks a sentinel for a failover while the master is up (`SENTINEL FAILOVER`): the
    /// replica is promoted and the master made its replica, which disconnects its clients.
    /// Returns the index of the old master; [`wait_for_failover`](Self::wait_for_failover)
    /// waits for the new one.
    pub fn failover(&mut self) -> usize {
        let master = self.master_index();
        self.old_master = Some(self.nodes[master].port());
        let mut errors = Vec::new();
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            match sentinel.command(&["SENTINEL", "FAILOVER", MASTER_NAME]) {
                Ok(Reply::Simple(ok)) if ok == "OK" => return master,
                Ok(other) => errors.push(format!("sentinel {i}: {other:?}")),
                Err(e) => errors.push(format!("sentinel {i}: {e}")),
            }
        }
        self.fail(&format!(
            "no sentinel started a failover:\n{}",
            errors.join("\n")
        ))
    }

    /// Kills node `i` with SIGKILL (see [`RedisServer::kill`]).
    pub fn kill(&mut self, i: usize) {
        self.node_mut(i).kill();
    }

    /// Starts node `i` again on the same port and directory, with its data (see
    /// [`RedisServer::restart`]). A master that was failed over comes back as a master
    /// of its own until the sentinels make it a replica of the new one (a few seconds);
    /// [`wait_for_replicas`](Self::wait_for_replicas) waits for that.
    pub fn restart(&mut self, i: usize) {
        self.node_mut(i).restart();
    }

    /// Waits until every running sentinel names the same master, one other than the
    /// master [`kill_master`](Self::kill_master) killed (or [`failover`](Self::failover)
    /// demoted), and that node is running and says
    /// it is a master (`ROLE`). Returns its index. Panics with every process's log after
    /// `timeout`.
    pub fn wait_for_failover(&self, timeout: Duration) -> usize {
        let mut promoted = None;
        self.wait_until(timeout, |d| {
            promoted = Some(d.check_failed_over()?);
            Ok(())
        });
        promoted.unwrap_or_else(|| self.fail("failover check passed without a master"))
    }

    /// Waits until every running node other than the master the sentinels name is its
    /// replica, with the link up, and has received everything the master had been sent
    /// when this was called: like `WAIT`, but across connections (`WAIT` only counts the
    /// writes of its own connection, and [`RedisServer::command`] opens a new one per
    /// command). Call it before killing a master whose writes must survive the failover,
    /// or after restarting a node to wait until it is a replica again. Panics with every
    /// process's log after `timeout`.
    pub fn wait_for_replicas(&self, timeout: Duration) {
        let master = self.master_index();
        let target = self
            .info(&self.nodes[master], "replication")
            .ok()
            .and_then(|info| info_field(&info, "master_repl_offset")?.parse::<u64>().ok())
            .unwrap_or_else(|| self.fail(&format!("node {master} reports no master_repl_offset")));
        let master_port = self.nodes[master].port();
        self.wait_until(timeout, |d| {
            for (i, node) in d.nodes.iter().enumerate() {
                if i == master || node.pid().is_none() {
                    continue;
                }
                let info = d.info(node, "replication")?;
                let following = info_field(&info, "master_port").and_then(|p| p.parse().ok());
                let link = info_field(&info, "master_link_status");
                let offset = info_field(&info, "slave_repl_offset")
                    .and_then(|o| o.parse::<u64>().ok())
                    .unwrap_or(0);
                if info_field(&info, "role") != Some("slave")
                    || following != Some(master_port)
                    || link != Some("up")
                    || offset < target
                {
                    let now = d.sentinels.first().map(crate::sentinel::master_port);
                    return Err(format!(
                        "node {i} is {:?} of port {following:?} (link {link:?}) at offset \
                         {offset}; the master, port {master_port}, is at {target} (sentinel \
                         0 now names {now:?})",
                        info_field(&info, "role")
                    ));
                }
            }
            Ok(())
        });
    }

    fn node_mut(&mut self, i: usize) -> &mut RedisServer {
        let count = self.nodes.len();
        self.nodes
            .get_mut(i)
            .unwrap_or_else(|| panic!("node {i} out of range: there are {count} data nodes"))
    }

    fn index_of_port(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port() == port)
    }

    /// The text of `INFO section` on `server`.
    fn info(&self, server: &RedisServer, section: &str) -> Result<String, String> {
        match server.command(&["INFO", section])? {
            Reply::Bulk(Some(text)) => Ok(String::from_utf8_lossy(&text).into_owned()),
            other => Err(format!("unexpected reply to INFO {section}: {other:?}")),
        }
    }

    /// Whether the deployment is ready for a failover: the replica is synced, and every
    /// sentinel sees the master up, the replica up and linked, and the other sentinels.
    fn check_settled(&self) -> Result<(), String> {
        let replica = self.info(&self.nodes[1], "replication")?;
        let link = info_field(&replica, "master_link_status");
        if link != Some("up") {
            return Err(format!("the replica has master_link_status:{link:?}"));
        }
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            let master = fields(&sentinel.command(&["SENTINEL", "MASTER", MASTER_NAME])?)
                .ok_or_else(|| format!("sentinel {i}: unexpected SENTINEL MASTER reply"))?;
            let expect = [
                ("flags", "master".to_owned()),
                ("num-slaves", (self.nodes.len() - 1).to_string()),
                ("num-other-sentinels", (SENTINELS - 1).to_string()),
            ];
            for (field, want) in expect {
                let got = master.get(field);
                if got != Some(&want) {
                    return Err(format!("sentinel {i} has {field} {got:?}, wants {want}"));
                }
            }
            let Reply::Array(Some(replicas)) =
                sentinel.command(&["SENTINEL", "REPLICAS", MASTER_NAME])?
            else {
                return Err(format!("sentinel {i}: unexpected SENTINEL REPLICAS reply"));
            };
            for replica in &replicas {
                let replica = fields(replica)
                    .ok_or_else(|| format!("sentinel {i}: unexpected replica entry"))?;
                let (flags, link) = (replica.get("flags"), replica.get("master-link-status"));
                if flags.map(String::as_str) != Some("slave")
                    || link.map(String::as_str) != Some("ok")
                {
                    return Err(format!(
                        "sentinel {i} sees a replica with flags {flags:?}, link {link:?}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The index of the new master once the failover is over (see
    /// [`wait_for_failover`](Self::wait_for_failover)).
    fn check_failed_over(&self) -> Result<usize, String> {
        let mut named = None;
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            if sentinel.pid().is_none() {
                continue;
            }
            let port = master_port(sentinel).map_err(|e| format!("sentinel {i}: {e}"))?;
            if Some(port) == self.old_master {
                return Err(format!("sentinel {i} still names the old master"));
            }
            match named {
                Some(first) if first != port => {
                    return Err(format!("sentinels name ports {first} and {port}"))
                }
                _ => named = Some(port),
            }
        }
        let port = named.ok_or("no sentinel is running")?;
        let index = self
            .index_of_port(port)
            .ok_or_else(|| format!("the sentinels name port {port}, no node"))?;
        let node = &self.nodes[index];
        if node.pid().is_none() {
            return Err(format!("the sentinels name node {index}, which is killed"));
        }
        match node.command(&["ROLE"])? {
            Reply::Array(Some(items))
                if items.first() == Some(&Reply::Bulk(Some(b"master".to_vec()))) =>
            {
                Ok(index)
            }
            other => Err(format!("node {index} answers ROLE with {other:?}")),
        }
    }

    /// Polls `check` until it passes; panics with its last complaint and every process's
    /// log at the deadline.
    fn wait_until(&self, timeout: Duration, mut check: impl FnMut(&Self) -> Result<(), String>) {
        let deadline = Instant::now() + timeout;
        loop {
            match check(self) {
                Ok(()) => return,
                Err(why) if Instant::now() >= deadline => {
                    self.fail(&format!("not ready after {timeout:?}: {why}"))
                }
                Err(_) => sleep(POLL_INTERVAL),
            }
        }
    }

    fn fail(&self, why: &str) -> ! {
        let mut report = format!("Redis Sentinel: {why}\n");
        let processes = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("node {i}"), n))
            .chain(
                self.sentinels
                    .iter()
                    .enumerate()
                    .map(|(i, s)| (format!("sentinel {i}"), s)),
            );
        for (name, server) in processes {
            let state = if server.pid().is_some() {
                "running"
            } else {
                "killed"
            };
            report.push_str(&format!(
                "=== {name}, port {} ({state}) ===\n{}\n",
                server.port(),
                server.diagnostics()
            ));
        }
        panic!("{report}")
    }
}

/// The master's port by `SENTINEL get-master-addr-by-name` on `sentinel`.
fn master_port(sentinel: &RedisServer) -> Result<u16, String> {
    match sentinel.command(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME])? {
        Reply::Array(Some(addr)) => match addr.get(1) {
            Some(Reply::Bulk(Some(port))) => String::from_utf8_lossy(port)
                .parse()
                .map_err(|e| format!("bad port in the master's address: {e}")),
            other => Err(format!(
                "unexpected port in the master's address: {other:?}"
            )),
        },
        other => Err(format!("unexpected master address {other:?}")),
    }
}

/// A flat `[name, value, name, value, ...]` reply (`SENTINEL MASTER`, each entry of
/// `SENTINEL REPLICAS`) as a map; `None` if it has another shape.
fn fields(reply: &Reply) -> Option<HashMap<String, String>> {
    let Reply::Array(Some(items)) = reply else {
        return None;
    };
    let text = |r: &Reply| match r {
        Reply::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    };
    items
        .chunks(2)
        .map(|pair| Some((text(pair.first()?)?, text(pair.get(1)?)?)))
        .collect()
}
