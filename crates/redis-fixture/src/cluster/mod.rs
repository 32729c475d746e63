//! A real multi-node Redis Cluster: masters and replicas, each its own
//! `redis-server` child on a free loopback port, joined by
//! `redis-cli --cluster create`. For testing what clients do with `MOVED`
//! redirects, a master that dies and the replica that takes over, and a dead
//! node that comes back.
//!
//! ```no_run
//! use std::time::Duration;
//! use redis_fixture::{key_slot, RedisCluster};
//!
//! let mut cluster = RedisCluster::start(3, 1);
//! let owner = cluster.node_for_slot(key_slot("{q}k"));
//! cluster.nodes()[owner].cli(&["SET", "{q}k", "v"]);
//! cluster.wait_for_replicas(Duration::from_secs(10)); // the SET survives the failover
//! cluster.kill(owner); // its replica takes over after the node timeout
//! cluster.wait_for_state_ok(Duration::from_secs(30));
//! cluster.restart(owner); // comes back as a replica of the new master
//! cluster.wait_for_state_ok(Duration::from_secs(30));
//! ```

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::host::redis_cli_binary;
use crate::resp::Reply;
use crate::server::{RedisServer, ServerConfig};

mod slots;

pub(crate) use slots::info_field;
pub use slots::key_slot;
use slots::{check_coverage, parse_cluster_slots, SlotRange, SLOTS};

/// `cluster-node-timeout`: how long a node may be unreachable before it is
/// failed over. Short so that failover tests take seconds, not the default
/// 15 s; long enough that a loaded test machine does not fail nodes over by
/// itself.
const NODE_TIMEOUT_MS: u32 = 2000;
/// How long `redis-cli --cluster create` may take. It sleeps a second on
/// purpose, then waits for the nodes to agree.
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the cluster may take to settle after `--cluster create`:
/// gossip, and a full sync for every replica.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// A Redis Cluster of `masters * (1 + replicas_per_master)` real
/// `redis-server` processes on loopback, each with its own temporary
/// directory, `nodes.conf` and append-only file (`appendfsync always`), so
/// that a killed node restarts with its data and its place in the cluster.
/// Every node is killed on drop.
///
/// Nodes are addressed by index into [`nodes`](Self::nodes). Which index is a
/// master changes with failovers, so [`masters`](Self::masters) and
/// [`node_for_slot`](Self::node_for_slot) ask the live nodes every time.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// What `redis-cli --cluster create` printed, for failure messages.
    create_output: String,
}

impl RedisCluster {
    /// Starts `masters` masters with `replicas_per_master` replicas each and
    /// waits until every node says `cluster_state:ok`, knows every other
    /// node and all 16384 slots, every replica has synced with its master,
    /// and all nodes give the same `CLUSTER SLOTS` (masters and replicas).
    /// Takes about 3 s. Panics with every node's log on failure.
    ///
    /// `masters` must be at least 3: `redis-cli --cluster create` refuses
    /// fewer.
    pub fn start(masters: usize, replicas_per_master: usize) -> RedisCluster {
        assert!(
            masters >= 3,
            "RedisCluster::start({masters}, {replicas_per_master}): redis-cli --cluster create \
             needs at least 3 masters"
        );
        let count = masters * (1 + replicas_per_master);
        let node_timeout = NODE_TIMEOUT_MS.to_string();
        let mut config = ServerConfig::cluster_node();
        config.appendonly = true;
        config.extra_args = [
            "--cluster-node-timeout",
            &node_timeout,
            // A replica may take over however long it was cut off from its
            // master: tests stop and kill nodes at will, and a replica that
            // refuses to fail over would only make them flaky.
            "--cluster-replica-validity-factor",
            "0",
            // The default waits 5 s for more replicas before every full sync
            // (the first one, and after each failover or restart).
            "--repl-diskless-sync-delay",
            "0",
            // CLUSTER SLOTS leaves out replicas still at replication offset
            // 0, and an idle master moves the offset only with the PING it
            // sends every this many seconds (default 10).
            "--repl-ping-replica-period",
            "1",
        ]
        .map(String::from)
        .into();
        // If one node fails to start, the ones already started are dropped
        // (killed) while the panic unwinds out of collect.
        let nodes = (0..count)
            .map(|_| RedisServer::start_with(config.clone()))
            .collect();
        let mut cluster = RedisCluster {
            nodes,
            create_output: String::new(),
        };
        cluster.create(replicas_per_master);
        cluster.wait_until(SETTLE_TIMEOUT, |c| c.check(Some(masters)));
        cluster
    }

    /// Every node, masters and replicas, in the order they were started
    /// (which is also the order given to `redis-cli --cluster create`).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// `redis://127.0.0.1:port/` of every node, in [`nodes`](Self::nodes)
    /// order, killed ones included.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// Indices of the running nodes that say they are a master (`ROLE`),
    /// asked now. Nodes that do not answer are left out.
    pub fn masters(&self) -> Vec<usize> {
        self.with_role("master")
    }

    /// Indices of the running nodes that say they are a replica (`ROLE`),
    /// asked now. Nodes that do not answer are left out.
    pub fn replicas(&self) -> Vec<usize> {
        self.with_role("slave")
    }

    /// Index of the master serving `slot`, by `CLUSTER SLOTS` of the first
    /// running node that answers. Panics if none answers or none assigns
    /// the slot.
    pub fn node_for_slot(&self, slot: u16) -> usize {
        assert!(u32::from(slot) < SLOTS, "slot {slot} out of range");
        let mut errors = Vec::new();
        for i in self.live() {
            match self.slot_map(i) {
                Ok(map) => match map.iter().find(|r| r.start <= slot && slot <= r.end) {
                    Some(range) => match self.index_of_port(range.master_port) {
                        Some(owner) => return owner,
                        None => errors.push(format!(
                            "node {i} says slot {slot} is served by port {}, \
                             which is no node of this cluster",
                            range.master_port
                        )),
                    },
                    None => errors.push(format!("node {i} has no master for slot {slot}")),
                },
                Err(e) => errors.push(e),
            }
        }
        self.fail(&format!(
            "no node knows who serves slot {slot}:\n{}",
            errors.join("\n")
        ))
    }

    /// Index of the master serving `key` (see [`key_slot`]).
    pub fn node_for_key(&self, key: &str) -> usize {
        self.node_for_slot(key_slot(key))
    }

    /// Kills node `i` with SIGKILL, like a crash (see [`RedisServer::kill`]).
    /// If it was a master with a replica, the replica takes over after the
    /// node timeout (2 s) plus an election; [`wait_for_state_ok`](Self::wait_for_state_ok)
    /// waits for that.
    pub fn kill(&mut self, i: usize) {
        self.node_mut(i).kill();
    }

    /// Starts node `i` again on the same port and directory (see
    /// [`RedisServer::restart`]): it loads its data, reads `nodes.conf` and
    /// rejoins the cluster; a master that was failed over comes back as a
    /// replica of the node that took over. Returns once the node serves
    /// requests; call [`wait_for_state_ok`](Self::wait_for_state_ok) to wait
    /// for the cluster to take it back.
    pub fn restart(&mut self, i: usize) {
        self.node_mut(i).restart();
    }

    /// Waits until every running node says `cluster_state:ok`, all of them
    /// give the same `CLUSTER SLOTS`, every slot there is served by a
    /// running master, every replica listed there is running and every
    /// running replica of a master with slots is listed, and has synced with
    /// it. Use after [`kill`](Self::kill) (for the failover, or until a
    /// killed replica is noticed) or [`restart`](Self::restart). Panics with every node's log if that
    /// takes longer than `timeout`, e.g. after killing a master that had no
    /// replica.
    pub fn wait_for_state_ok(&self, timeout: Duration) {
        self.wait_until(timeout, |c| c.check(None));
    }

    fn node_mut(&mut self, i: usize) -> &mut RedisServer {
        let count = self.nodes.len();
        self.nodes
            .get_mut(i)
            .unwrap_or_else(|| panic!("node {i} out of range: the cluster has {count} nodes"))
    }

    /// Indices of the nodes not killed through the fixture.
    fn live(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(|&i| self.nodes[i].pid().is_some())
    }

    fn index_of_port(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port() == port)
    }

    fn with_role(&self, wanted: &str) -> Vec<usize> {
        self.live()
            .filter(|&i| self.role(i).is_ok_and(|role| role == wanted))
            .collect()
    }

    /// The first element of `ROLE`: `master`, `slave` (or `sentinel`).
    fn role(&self, i: usize) -> Result<String, String> {
        match self.nodes[i].command(&["ROLE"])? {
            Reply::Array(Some(items)) => match items.first() {
                Some(Reply::Bulk(Some(role))) => Ok(String::from_utf8_lossy(role).into_owned()),
                other => Err(format!("node {i}: unexpected ROLE reply head {other:?}")),
            },
            other => Err(format!("node {i}: unexpected ROLE reply {other:?}")),
        }
    }

    /// Runs an `INFO`-style command (`CLUSTER INFO`, `INFO replication`) on
    /// node `i` and returns its text.
    fn info(&self, i: usize, args: &[&str]) -> Result<String, String> {
        match self.nodes[i].command(args)? {
            Reply::Bulk(Some(text)) => Ok(String::from_utf8_lossy(&text).into_owned()),
            other => Err(format!("node {i}: unexpected reply to {args:?}: {other:?}")),
        }
    }

    /// Node `i`'s view of who serves which slots, from `CLUSTER SLOTS`,
    /// sorted by first slot.
    fn slot_map(&self, i: usize) -> Result<Vec<SlotRange>, String> {
        let reply = self.nodes[i].command(&["CLUSTER", "SLOTS"])?;
        let mut map = parse_cluster_slots(&reply)
            .ok_or_else(|| format!("node {i}: unexpected CLUSTER SLOTS reply {reply:?}"))?;
        map.sort_by_key(|r| r.start);
        Ok(map)
    }

    /// Runs `redis-cli --cluster create` over every node, with a deadline:
    /// it waits for the nodes to agree and could otherwise wait forever.
    fn create(&mut self, replicas_per_master: usize) {
        let mut args = vec!["--cluster".to_owned(), "create".to_owned()];
        args.extend(self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())));
        args.extend([
            "--cluster-replicas".to_owned(),
            replicas_per_master.to_string(),
            "--cluster-yes".to_owned(),
        ]);
        self.create_output = self.redis_cli_cluster(&args, "cluster-create.out");
    }

    /// Moves `count` slots from master `from` to master `to` with
    /// `redis-cli --cluster reshard`, as an operator would: slot by slot, the
    /// keys migrated while clients go on using them (they get `ASK` and
    /// `TRYAGAIN` meanwhile, `MOVED` after). redis-cli takes the source's
    /// lowest slots first. Returns once redis-cli has finished.
    pub fn reshard(&self, from: usize, to: usize, count: usize) {
        let id = |i: usize| self.nodes[i].cli(&["CLUSTER", "MYID"]).trim().to_owned();
        let args: Vec<String> = [
            "--cluster",
            "reshard",
            &format!("127.0.0.1:{}", self.nodes[from].port()),
            "--cluster-from",
            &id(from),
            "--cluster-to",
            &id(to),
            "--cluster-slots",
            &count.to_string(),
            "--cluster-yes",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        self.redis_cli_cluster(&args, "cluster-reshard.out");
    }

    /// Runs `redis-cli` with `args` and a deadline, its output kept in
    /// `out_name` in the first node's directory; fails the test if it fails.
    /// Returns the output.
    fn redis_cli_cluster(&self, args: &[String], out_name: &str) -> String {
        let out_path = self.nodes[0].dir().join(out_name);
        let out = File::create(&out_path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", out_path.display()));
        let err = out
            .try_clone()
            .unwrap_or_else(|e| panic!("cannot duplicate a file handle: {e}"));
        let command = format!("redis-cli {}", args.join(" "));
        let mut child = Command::new(redis_cli_binary())
            .args(args)
            // Plain output for the failure message, no ANSI colours.
            .env("TERM", "dumb")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| self.fail(&format!("cannot spawn `{command}`: {e}")));
        let deadline = Instant::now() + CREATE_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) if Instant::now() < deadline => sleep(POLL_INTERVAL),
                Ok(None) => break Err(format!("did not finish within {CREATE_TIMEOUT:?}")),
                Err(e) => break Err(format!("cannot wait for it: {e}")),
            }
        };
        if status.is_err() {
            // Fails only if it already exited; wait() reaps either way.
            let _ = child.kill();
            let _ = child.wait();
        }
        let output = std::fs::read_to_string(&out_path)
            .unwrap_or_else(|e| format!("<cannot read {}: {e}>", out_path.display()));
        match status {
            Ok(status) if status.success() => output,
            Ok(status) => self.fail(&format!("`{command}` failed: {status}\n{output}")),
            Err(why) => self.fail(&format!("`{command}` {why}\n{output}")),
        }
    }

    /// Polls `check` until it passes; panics with its last complaint and
    /// every node's log at the deadline.
    fn wait_until(&self, timeout: Duration, check: impl Fn(&Self) -> Result<(), String>) {
        let deadline = Instant::now() + timeout;
        loop {
            match check(self) {
                Ok(()) => return,
                Err(why) if Instant::now() >= deadline => {
                    self.fail(&format!("cluster not ready after {timeout:?}: {why}"))
                }
                Err(_) => sleep(POLL_INTERVAL),
            }
        }
    }

    /// Whether the running nodes form a healthy cluster (see
    /// [`wait_for_state_ok`](Self::wait_for_state_ok)). With
    /// `Some(masters)`, right after creation, additionally every node must
    /// be running and know all the others, and exactly `masters` of them
    /// must be masters.
    fn check(&self, formation: Option<usize>) -> Result<(), String> {
        let live: Vec<usize> = self.live().collect();
        if live.is_empty() {
            return Err("no node is running".into());
        }
        let mut agreed: Option<(usize, Vec<SlotRange>)> = None;
        // Each running node's own idea of its role.
        let mut roles: HashMap<usize, Role> = HashMap::new();
        for &i in &live {
            let info = self.info(i, &["CLUSTER", "INFO"])?;
            let slots = SLOTS.to_string();
            let mut expect = vec![
                ("cluster_state", "ok".to_owned()),
                ("cluster_slots_assigned", slots.clone()),
                ("cluster_slots_ok", slots),
            ];
            if formation.is_some() {
                expect.push(("cluster_known_nodes", self.nodes.len().to_string()));
            }
            for (field, want) in expect {
                let got = info_field(&info, field);
                if got != Some(want.as_str()) {
                    return Err(format!("node {i} has {field}:{got:?}, wants {want}"));
                }
            }

            // Replicas included: clients read them from CLUSTER SLOTS too,
            // and a node that still takes a fresh replica for an empty
            // master would vote and route differently from the others.
            let map = self.slot_map(i)?;
            check_coverage(&map).map_err(|e| format!("node {i}: {e}"))?;
            match &agreed {
                None => agreed = Some((i, map)),
                Some((first, first_map)) if *first_map != map => {
                    return Err(format!(
                        "nodes {first} and {i} disagree on the slots: {first_map:?} vs {map:?}"
                    ))
                }
                Some(_) => {}
            }

            let replication = self.info(i, &["INFO", "replication"])?;
            match info_field(&replication, "role") {
                Some("master") => {
                    roles.insert(i, Role::Master);
                }
                Some("slave") => {
                    let master = info_field(&replication, "master_port")
                        .and_then(|p| p.parse().ok())
                        .and_then(|p| self.index_of_port(p));
                    // A replica of a killed master cannot sync until the
                    // master comes back or the replica takes over.
                    let master_alive = master.is_some_and(|m| live.contains(&m));
                    let link = info_field(&replication, "master_link_status");
                    if master_alive && link != Some("up") {
                        return Err(format!(
                            "replica {i} has master_link_status:{link:?} to node {master:?}"
                        ));
                    }
                    roles.insert(i, Role::Replica { master });
                }
                other => return Err(format!("node {i} has role:{other:?}")),
            }
        }

        let map = agreed.map(|(_, map)| map).unwrap_or_default();
        let mut listed_replicas = HashSet::new();
        for range in &map {
            let owner = self.index_of_port(range.master_port);
            let Some(owner) = owner.filter(|m| roles.get(m) == Some(&Role::Master)) else {
                return Err(format!(
                    "slots {}-{} are served by port {} (node {owner:?}), \
                     which is not a running master",
                    range.start, range.end, range.master_port
                ));
            };
            for &port in &range.replica_ports {
                let replica = self.index_of_port(port);
                // Failed replicas are left out of CLUSTER SLOTS, so a listed
                // one that is dead has not been noticed yet.
                let expected = Role::Replica {
                    master: Some(owner),
                };
                let Some(replica) = replica.filter(|r| roles.get(r) == Some(&expected)) else {
                    return Err(format!(
                        "slots {}-{} list port {port} (node {replica:?}) as a replica of \
                         node {owner}, which it is not",
                        range.start, range.end
                    ));
                };
                listed_replicas.insert(replica);
            }
        }
        for (&i, role) in &roles {
            let Role::Replica {
                master: Some(master),
            } = *role
            else {
                continue;
            };
            // A replica of a master with slots must be known as one by all.
            let master_serves = map
                .iter()
                .any(|r| self.index_of_port(r.master_port) == Some(master));
            if master_serves && !listed_replicas.contains(&i) {
                return Err(format!(
                    "replica {i} of node {master} is not yet listed in CLUSTER SLOTS"
                ));
            }
        }

        if let Some(want) = formation {
            if live.len() != self.nodes.len() {
                return Err(format!(
                    "only {} of {} nodes running",
                    live.len(),
                    self.nodes.len()
                ));
            }
            let masters = roles.values().filter(|&r| *r == Role::Master).count();
            if masters != want {
                return Err(format!("{masters} masters, want {want}"));
            }
        }
        Ok(())
    }

    /// Waits until every running replica has received everything its master
    /// had been sent when this was called, like `WAIT` but across
    /// connections (`WAIT` only counts the writes of its own connection, and
    /// [`RedisServer::command`] opens a new one per command). Call it before
    /// killing a master whose writes must survive the failover. Panics with
    /// every node's log after `timeout`.
    pub fn wait_for_replicas(&self, timeout: Duration) {
        let mut targets = HashMap::new();
        for i in self.masters() {
            let offset = self
                .info(i, &["INFO", "replication"])
                .ok()
                .and_then(|info| info_field(&info, "master_repl_offset")?.parse::<u64>().ok());
            match offset {
                Some(offset) => targets.insert(self.nodes[i].port(), offset),
                None => self.fail(&format!("node {i} reports no master_repl_offset")),
            };
        }
        self.wait_until(timeout, |c| {
            for i in c.replicas() {
                let info = c.info(i, &["INFO", "replication"])?;
                let Some(target) = info_field(&info, "master_port")
                    .and_then(|p| p.parse::<u16>().ok())
                    .and_then(|p| targets.get(&p))
                else {
                    continue;
                };
                let offset = info_field(&info, "slave_repl_offset")
                    .and_then(|o| o.parse::<u64>().ok())
                    .unwrap_or(0);
                let link = info_field(&info, "master_link_status");
                if link != Some("up") || offset < *target {
                    return Err(format!(
                        "replica {i} is at offset {offset} (link {link:?}), its master at {target}"
                    ));
                }
            }
            Ok(())
        });
    }

    fn fail(&self, why: &str) -> ! {
        let mut report = format!("Redis Cluster: {why}\n");
        for (i, node) in self.nodes.iter().enumerate() {
            let state = if node.pid().is_some() {
                "running"
            } else {
                "killed"
            };
            report.push_str(&format!(
                "=== node {i}, port {} ({state}) ===\n{}\n",
                node.port(),
                node.diagnostics()
            ));
        }
        report.push_str(&format!(
            "=== redis-cli --cluster create ===\n{}",
            self.create_output
        ));
        panic!("{report}")
    }
}

/// What a node says it is (`INFO replication`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Master,
    /// `master` is the index of its master, if that is one of ours.
    Replica {
        master: Option<usize>,
    },
}
