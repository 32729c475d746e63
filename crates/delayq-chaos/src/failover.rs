//! The Redis Cluster side of a chaos run (`run --cluster`): 3 masters with a replica each
//! (AOF, fsync always, 2 s node timeout), the run's queue created with 6 partitions so that
//! every master holds some, and the fault that only a cluster has: a master killed with `-9`,
//! its replica promoted, the old master started again (it rejoins as a replica of the node
//! that took over). One variant cuts the replica off a second before its master dies, so
//! that the replica promoted lacks the master's last writes: the case `SendOptions::replicas`
//! (Redis `WAIT`) exists for. A plain `kill -9` on loopback leaves the replica at most
//! microseconds behind, and so does a replica that is merely frozen: what the master sent
//! waits in the frozen replica's socket buffer and is read when it thaws. So the replica is
//! frozen (SIGSTOP), then the master drops its replication link (`CLIENT KILL TYPE replica`)
//! and goes on taking writes that reach no replica; the replica is thawed 2 s after the kill.
//!
//! A failover runs on a thread of its own (it takes seconds), while the controller goes on
//! killing workers; the cluster is shared behind a lock.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use redis_fixture::{RedisCluster, Reply};

use crate::evidence::{Leftovers, MasterKill, FREEZE};
use crate::history::{now_us, Event, Fault, Recorder};
use crate::plan;
use crate::processes::signal;

/// Masters of the cluster, each with one replica.
const MASTERS: usize = 3;
/// Partitions of the run's queue: two per master.
pub const PARTITIONS: u16 = 6;
/// How long a replica is cut off before its master is killed: the master's writes of that
/// second never reach it.
const LAG: Duration = Duration::from_secs(1);
/// How long a frozen replica stays frozen in all (like the single-node run's frozen Redis).
const FROZEN: Duration = FREEZE;
/// [`Cluster::frozen`] when no node is frozen.
const NOT_FROZEN: usize = usize::MAX;
/// How long the killed master stays down once its replica has taken over.
const DOWN: Duration = Duration::from_secs(2);
/// Longest a failover, or taking a restarted node back, may take.
const SETTLE: Duration = Duration::from_secs(30);

/// The cluster of a run and the failovers done to it.
pub struct Cluster {
    /// Shared with the failover thread: kill and restart take it exclusively.
    nodes: Arc<RwLock<RedisCluster>>,
    /// The node the failover thread has frozen ([`NOT_FROZEN`] if none): a command to it
    /// would wait out the fixture's call timeout, holding up the run's other faults.
    frozen: Arc<AtomicUsize>,
    urls: Vec<String>,
    /// Partition number → its hash tag, as found in Redis (a partition appears with its
    /// first message).
    tags: BTreeMap<u16, String>,
    /// The failover under way.
    running: Option<JoinHandle<Result<MasterKill, String>>>,
    /// Failovers done.
    pub kills: Vec<MasterKill>,
    /// The first masters not killed yet: each gets its turn before any master gets two.
    spared: Vec<usize>,
}

impl Cluster {
    /// Starts the cluster and creates the run's queue in it.
    pub fn start() -> Result<Cluster, String> {
        let nodes = RedisCluster::start(MASTERS, 1);
        let urls = nodes.urls();
        let spared = nodes.masters();
        let cluster = Cluster {
            nodes: Arc::new(RwLock::new(nodes)),
            frozen: Arc::new(AtomicUsize::new(NOT_FROZEN)),
            urls,
            tags: BTreeMap::new(),
            running: None,
            kills: Vec::new(),
            spared,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async {
            let nodes: Vec<&str> = cluster.urls.iter().map(String::as_str).collect();
            let config = crate::sealing::config(delayq::Config::default())?;
            let dq = delayq::DelayQ::connect_cluster(&nodes, config)
                .await
                .map_err(|e| format!("cannot connect to the cluster: {e}"))?;
            let queue = dq
                .create_queue(plan::QUEUE, PARTITIONS)
                .await
                .map_err(|e| format!("cannot create the queue: {e}"))?;
            let limit = delayq::Setting::GroupConcurrency(Some(plan::GROUP_CONCURRENCY));
            let events = delayq::Setting::Events(Some(plan::EVENTS_KEPT));
            // Its payloads sealed at rest from the first (sealing.rs).
            let sealed = delayq::Setting::Encryption(true);
            queue
                .configure(&[limit, events, sealed])
                .await
                .map_err(|e| format!("cannot set the group concurrency: {e}"))
        })?;
        cluster.set_bucket_horizon()?;
        Ok(cluster)
    }

    /// Every node's URL, comma-separated (as `--redis-cluster` takes them).
    pub fn urls(&self) -> String {
        self.urls.join(",")
    }

    /// Every node's URL.
    pub fn node_urls(&self) -> &[String] {
        &self.urls
    }

    fn read(&self) -> RwLockReadGuard<'_, RedisCluster> {
        read(&self.nodes)
    }

    /// Starts a failover of the master holding the most partitions (of those not killed
    /// yet, while there are any), on a thread; with `stall`, its replica lags behind first.
    /// Returns the node chosen, or `None` if a failover is still under way.
    pub fn begin_failover(
        &mut self,
        stall: bool,
        recorder: Arc<Recorder>,
    ) -> Result<Option<usize>, String> {
        if self.running.is_some() {
            return Ok(None);
        }
        let owners = self.owners();
        let masters = self.read().masters();
        let mut held: BTreeMap<usize, Vec<u16>> = masters.iter().map(|&m| (m, vec![])).collect();
        for (&k, &node) in &owners {
            held.entry(node).or_default().push(k);
        }
        let first_turn = |m: &usize| self.spared.contains(m);
        let target = held
            .iter()
            .max_by_key(|(m, parts)| {
                (
                    first_turn(m),
                    parts.len(),
                    std::cmp::Reverse(parts.first().copied().unwrap_or(u16::MAX)),
                )
            })
            .map(|(&m, _)| m)
            .ok_or("no master answers")?;
        let partitions = held.remove(&target).unwrap_or_default();
        let replica = self
            .replica_of(target)
            .ok_or_else(|| format!("master {target} has no replica to take over"))?;
        self.spared.retain(|&m| m != target);
        let nodes = self.nodes.clone();
        let frozen = self.frozen.clone();
        self.running = Some(std::thread::spawn(move || {
            let stall = stall.then_some(&*frozen);
            fail_over(&nodes, &recorder, target, replica, partitions, stall)
        }));
        Ok(Some(target))
    }

    /// The failover that has finished since the last call, if any.
    pub fn poll(&mut self) -> Result<Option<MasterKill>, String> {
        if self.running.as_ref().is_some_and(JoinHandle::is_finished) {
            return self.finish();
        }
        Ok(None)
    }

    /// Waits for the failover under way, if any, to finish.
    pub fn finish(&mut self) -> Result<Option<MasterKill>, String> {
        let Some(running) = self.running.take() else {
            return Ok(None);
        };
        let kill = running
            .join()
            .map_err(|_| "the failover thread panicked (see above)".to_owned())??;
        self.kills.push(kill.clone());
        Ok(Some(kill))
    }

    /// Cuts every client connection on every node (`CLIENT KILL`): the cluster's version of
    /// the single-node run's proxy cut. Replication and the cluster bus are left alone, and
    /// so is a frozen replica: it has no clients, and would not answer.
    pub fn cut_all(&self) {
        let nodes = self.read();
        for (i, node) in nodes.nodes().iter().enumerate() {
            if node.pid().is_none() || self.frozen.load(Ordering::SeqCst) == i {
                continue;
            }
            let _ = node.command(&["CLIENT", "KILL", "TYPE", "normal"]);
            let _ = node.command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
        }
    }

    /// The master serving each partition seen so far.
    fn owners(&mut self) -> BTreeMap<u16, usize> {
        self.find_partitions();
        let nodes = self.read();
        self.tags
            .iter()
            .filter_map(|(&k, tag)| Some((k, owner(&nodes, &format!("dq:{{{tag}}}:seq"))?)))
            .collect()
    }

    /// Gives every partition of the queue the run's short bucket horizon (a control field
    /// that only tests set: `plan::BUCKET_HORIZON_MS`), on the master that holds its control
    /// hash.
    fn set_bucket_horizon(&self) -> Result<(), String> {
        let nodes = self.read();
        let horizon = plan::BUCKET_HORIZON_MS.to_string();
        let pattern = format!("dq:{{{}*}}:control", plan::QUEUE);
        let mut set = 0;
        for m in nodes.masters() {
            let node = &nodes.nodes()[m];
            let Ok(Reply::Array(Some(keys))) = node.command(&["KEYS", &pattern]) else {
                return Err(format!("KEYS {pattern} on node {m} failed"));
            };
            for key in keys {
                let control = key.render();
                node.command(&["HSET", &control, "bucket_horizon_ms", &horizon])
                    .map_err(|e| format!("HSET {control}: {e}"))?;
                set += 1;
            }
        }
        if set != usize::from(PARTITIONS) {
            return Err(format!(
                "{set} of the queue's {PARTITIONS} partitions have a control hash"
            ));
        }
        Ok(())
    }

    /// Looks for partitions not seen yet: every used partition has a sequence key.
    fn find_partitions(&mut self) {
        if self.tags.len() == usize::from(PARTITIONS) {
            return;
        }
        let pattern = format!("dq:{{{}*}}:seq", plan::QUEUE);
        let nodes = self.read();
        let mut found = BTreeMap::new();
        for m in nodes.masters() {
            let mut cursor = "0".to_owned();
            loop {
                let reply = nodes.nodes()[m]
                    .command(&["SCAN", &cursor, "MATCH", &pattern, "COUNT", "1000"]);
                let Ok(Reply::Array(Some(parts))) = reply else {
                    break;
                };
                let [Reply::Bulk(Some(next)), Reply::Array(Some(keys))] = parts.as_slice() else {
                    break;
                };
                for key in keys {
                    if let Reply::Bulk(Some(key)) = key {
                        let key = String::from_utf8_lossy(key);
                        if let Some((k, tag)) = partition_of_key(&key) {
                            found.insert(k, tag);
                        }
                    }
                }
                cursor = String::from_utf8_lossy(next).into_owned();
                if cursor == "0" {
                    break;
                }
            }
        }
        drop(nodes);
        self.tags.extend(found);
    }

    /// The running replica of master `master`.
    fn replica_of(&self, master: usize) -> Option<usize> {
        let nodes = self.read();
        let port = nodes.nodes()[master].port().to_string();
        nodes.replicas().into_iter().find(|&r| {
            matches!(nodes.nodes()[r].command(&["INFO", "replication"]),
                Ok(Reply::Bulk(Some(info))) if String::from_utf8_lossy(&info)
                    .lines()
                    .any(|l| l.trim() == format!("master_port:{port}")))
        })
    }

    /// What is left of the queue, over all its partitions (`u64::MAX` for what could not be
    /// read). Partitions not seen yet were never used: they hold nothing.
    /// How many values of the nodes hold a payload in clear, of how many read (`sealing.rs`).
    pub fn payloads_in_clear(&self) -> (usize, usize) {
        crate::sealing::payloads_in_clear(self.read().nodes())
    }

    pub fn leftovers(&mut self) -> Leftovers {
        self.find_partitions();
        let nodes = self.read();
        let owners: Vec<(&String, Option<usize>)> = self
            .tags
            .values()
            .map(|tag| (tag, owner(&nodes, &format!("dq:{{{tag}}}:seq"))))
            .collect();
        let count = |cmd: &str, name: &str| -> u64 {
            if owners.is_empty() {
                return u64::MAX;
            }
            let mut total = 0u64;
            for (tag, node) in &owners {
                let key = format!("dq:{{{tag}}}:{name}");
                match node.and_then(|n| crate::evidence::count_of(&nodes.nodes()[n], cmd, &key)) {
                    Some(n) => total += n,
                    None => return u64::MAX,
                }
            }
            total
        };
        Leftovers::counted(count)
    }
}

/// A failover: (stall the replica, marking it in `stall`,) kill the master, wait for the
/// replica to take over, start the old master again and wait until it is a replica in sync.
fn fail_over(
    nodes: &RwLock<RedisCluster>,
    recorder: &Recorder,
    target: usize,
    replica: usize,
    partitions: Vec<u16>,
    stall: Option<&AtomicUsize>,
) -> Result<MasterKill, String> {
    let note = |fault: Fault, pid: Option<u32>| {
        let at_us = now_us();
        recorder.record(&Event::Fault { fault, pid, at_us });
        at_us
    };
    let thaw = |pid: u32| {
        let thawed = signal(pid, "CONT");
        if let Some(marker) = stall {
            marker.store(NOT_FROZEN, Ordering::SeqCst);
        }
        thawed
    };
    let frozen = match stall {
        Some(marker) => {
            let pid = read(nodes).nodes()[replica]
                .pid()
                .ok_or("the replica is not running")?;
            marker.store(replica, Ordering::SeqCst);
            if let Err(e) = signal(pid, "STOP") {
                marker.store(NOT_FROZEN, Ordering::SeqCst);
                return Err(e);
            }
            note(Fault::FreezeReplica, Some(pid));
            // The frozen replica cannot reconnect: from now on nothing reaches it.
            let cut = read(nodes).nodes()[target].command(&["CLIENT", "KILL", "TYPE", "replica"]);
            if !matches!(cut, Ok(Reply::Int(n)) if n > 0) {
                let _ = thaw(pid);
                return Err(format!(
                    "cannot cut master {target} off its replica: {cut:?}"
                ));
            }
            let at = now_us();
            std::thread::sleep(LAG);
            Some((pid, at))
        }
        None => None,
    };
    let killed = (|| {
        let pid = read(nodes).nodes()[target].pid();
        write(nodes).kill(target);
        let killed_us = note(Fault::KillMaster, pid);
        if let Some((pid, from)) = frozen {
            let thaw_at = from + FROZEN.as_micros() as u64;
            std::thread::sleep(Duration::from_micros(thaw_at.saturating_sub(now_us())));
            thaw(pid)?;
            note(Fault::ThawReplica, Some(pid));
        }
        Ok::<_, String>(killed_us)
    })();
    let killed_us = match killed {
        Ok(at) => at,
        Err(e) => {
            if let Some((pid, _)) = frozen {
                let _ = thaw(pid);
            }
            return Err(e);
        }
    };
    settle(nodes, "the replica's promotion")?;
    let promoted_us = note(Fault::Promoted, None);
    std::thread::sleep(DOWN);
    catch_unwind(AssertUnwindSafe(|| write(nodes).restart(target)))
        .map_err(|_| format!("node {target} did not restart (see above)"))?;
    note(Fault::RestartNode, read(nodes).nodes()[target].pid());
    settle(nodes, "the old master's return as a replica")?;
    let rejoined_us = note(Fault::Rejoined, None);
    Ok(MasterKill {
        node: target,
        partitions,
        stalled_from_us: frozen.map(|(_, at)| at),
        killed_us,
        promoted_us,
        rejoined_us,
    })
}

/// Waits until the cluster is whole; the fixture panics (with every node's log) if it is not
/// within [`SETTLE`].
fn settle(nodes: &RwLock<RedisCluster>, what: &str) -> Result<(), String> {
    catch_unwind(AssertUnwindSafe(|| read(nodes).wait_for_state_ok(SETTLE)))
        .map_err(|_| format!("the cluster did not settle after {what} (see above)"))
}

fn read(nodes: &RwLock<RedisCluster>) -> RwLockReadGuard<'_, RedisCluster> {
    nodes.read().unwrap_or_else(|p| p.into_inner())
}

fn write(nodes: &RwLock<RedisCluster>) -> RwLockWriteGuard<'_, RedisCluster> {
    nodes.write().unwrap_or_else(|p| p.into_inner())
}

/// The partition number and hash tag of a queue key (`dq:{chaos}:seq` is partition 0,
/// `dq:{chaos#3.417}:seq` partition 3).
fn partition_of_key(key: &str) -> Option<(u16, String)> {
    let tag = key.strip_prefix("dq:{")?.split_once('}')?.0;
    let k = match tag.strip_prefix(plan::QUEUE)? {
        "" => 0,
        rest => rest.strip_prefix('#')?.split_once('.')?.0.parse().ok()?,
    };
    Some((k, tag.to_owned()))
}

/// The node serving `key`: whichever running node answers for it rather than redirecting.
fn owner(nodes: &RedisCluster, key: &str) -> Option<usize> {
    let running = (0..nodes.nodes().len()).find(|&i| nodes.nodes()[i].pid().is_some())?;
    match nodes.nodes()[running].command(&["EXISTS", key]).ok()? {
        Reply::Error(e) if e.starts_with("MOVED ") => {
            let port: u16 = e.rsplit(':').next()?.trim().parse().ok()?;
            nodes.nodes().iter().position(|n| n.port() == port)
        }
        Reply::Int(_) => Some(running),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_read_from_keys() {
        assert_eq!(
            partition_of_key("dq:{chaos}:seq"),
            Some((0, "chaos".into()))
        );
        assert_eq!(
            partition_of_key("dq:{chaos#3.417}:seq"),
            Some((3, "chaos#3.417".into()))
        );
        assert_eq!(partition_of_key("dq:{other}:seq"), None);
        assert_eq!(partition_of_key("dq:{chaosx}:seq"), None);
    }
}
