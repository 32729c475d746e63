//! A fresh Redis Cluster per cluster measurement (issue 10), through
//! `redis_fixture::RedisCluster`: `masters` masters, no replicas, set to the single-node
//! benchmark's persistence (`--save ""`, `--appendonly no`: the fixture starts its nodes with
//! an fsync-always AOF, turned off here with `CONFIG SET`), Redis' default
//! `cluster-node-timeout`, and `$REDIS_EXTRA` applied as `CONFIG SET` pairs. The queue is
//! created with its partitions here, before any agent starts.

use std::panic::{catch_unwind, AssertUnwindSafe};

use delayq::{Config, DelayQ};
use redis_fixture::{RedisCluster, RedisServer, Reply};
use serde::Serialize;

use super::redis_cpu::CpuTimes;
use crate::error::Result;
use crate::workload::Workload;

/// Redis' default `cluster-node-timeout` (the fixture shortens it for failover tests).
const NODE_TIMEOUT_MS: &str = "15000";
/// The settings recorded with each result, as the nodes report them (`CONFIG GET`).
const RECORDED: [&str; 7] = [
    "appendonly",
    "save",
    "cluster-enabled",
    "cluster-node-timeout",
    "hz",
    "maxmemory",
    "io-threads",
];

/// What a cluster measurement runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ClusterSetup {
    /// Masters (each with no replica).
    pub masters: usize,
    /// The queue's partitions, P.
    pub partitions: u16,
}

/// Whether `workload` is measured on the cluster: W1, W2a, W2b and W3 (issue 10). W3q uses
/// several queues and W4 measures one server's memory.
pub fn runs(workload: Workload) -> bool {
    matches!(
        workload,
        Workload::W1 | Workload::W2a | Workload::W2b | Workload::W3
    )
}

/// A running cluster, every node killed when dropped.
pub struct BenchCluster {
    inner: RedisCluster,
    /// What the nodes say they run with, `name value`, for the record.
    settings: Vec<String>,
}

impl BenchCluster {
    /// Starts a cluster of `masters` masters, sets every node to the benchmark's settings
    /// plus `extra` (`--name value` pairs) and empties it.
    pub fn start(masters: usize, extra: &[String]) -> Result<Self> {
        // The fixture panics (with every node's log) when the cluster does not form; one
        // failed measurement must not take the whole run down.
        let inner = catch_unwind(AssertUnwindSafe(|| RedisCluster::start(masters, 0))).map_err(
            |panic| {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown reason".into());
                format!("cannot start a Redis Cluster of {masters} masters: {why}")
            },
        )?;
        let mut set = vec![
            "CONFIG".to_owned(),
            "SET".into(),
            "appendonly".into(),
            "no".into(),
            "cluster-node-timeout".into(),
            NODE_TIMEOUT_MS.into(),
        ];
        set.extend(config_pairs(extra)?);
        let set: Vec<&str> = set.iter().map(String::as_str).collect();
        for node in inner.nodes() {
            expect_ok(node, &set)?;
        }
        let settings = settings(&inner.nodes()[0])?;
        let cluster = BenchCluster { inner, settings };
        cluster.flushall()?;
        Ok(cluster)
    }

    /// The port agents are given: one node, from which the client finds the others.
    pub fn port(&self) -> u16 {
        self.inner.nodes()[0].port()
    }

    /// The masters, in start order.
    pub fn masters(&self) -> Vec<&RedisServer> {
        let nodes = self.inner.nodes();
        self.inner
            .masters()
            .into_iter()
            .map(|i| &nodes[i])
            .collect()
    }

    /// How the cluster was set up, for the record.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![format!(
            "redis_fixture::RedisCluster::start({}, 0), then CONFIG SET on every node; now:",
            self.inner.nodes().len()
        )];
        args.extend(self.settings.iter().cloned());
        args
    }

    /// `FLUSHALL` on every master.
    pub fn flushall(&self) -> Result<()> {
        for node in self.masters() {
            expect_ok(node, &["FLUSHALL"])?;
        }
        Ok(())
    }

    /// `INFO cpu` of every master: `(port, times)`.
    pub fn cpu(&self) -> Result<Vec<(u16, CpuTimes)>> {
        self.masters()
            .into_iter()
            .map(|node| Ok((node.port(), CpuTimes::read(node)?)))
            .collect()
    }

    /// Creates queue `name` with `partitions` partitions, through the library, and checks
    /// that it has them.
    pub fn create_queue(&self, name: &str, partitions: u16) -> Result<()> {
        let urls: Vec<String> = self.masters().iter().map(|n| n.url()).collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
        runtime.block_on(async {
            let seeds: Vec<&str> = urls.iter().map(String::as_str).collect();
            let dq = DelayQ::connect_cluster(&seeds, Config::default())
                .await
                .map_err(|e| format!("cannot connect to the cluster {urls:?}: {e}"))?;
            let queue = dq
                .create_queue(name, partitions)
                .await
                .map_err(|e| format!("create_queue({name:?}, {partitions}): {e}"))?;
            match queue.partitions().await? {
                p if p == partitions => Ok(()),
                p => Err(format!("queue {name} has {p} partitions, not {partitions}").into()),
            }
        })
    }
}

/// `--name value` pairs (`$REDIS_EXTRA`) as `CONFIG SET` arguments.
fn config_pairs(extra: &[String]) -> Result<Vec<String>> {
    extra
        .chunks(2)
        .map(|pair| match pair {
            [name, value] if name.starts_with("--") => {
                Ok([name.trim_start_matches('-').to_owned(), value.clone()])
            }
            _ => Err(format!(
                "REDIS_EXTRA {extra:?}: on a cluster it must be `--name value` pairs (applied \
                 with CONFIG SET)"
            )
            .into()),
        })
        .collect::<Result<Vec<[String; 2]>>>()
        .map(|pairs| pairs.concat())
}

/// Runs `args` on `node` and expects `+OK`.
fn expect_ok(node: &RedisServer, args: &[&str]) -> Result<()> {
    match node.command(args)? {
        Reply::Simple(s) if s == "OK" => Ok(()),
        other => Err(format!("{args:?} on port {} replied {other:?}", node.port()).into()),
    }
}

/// The [`RECORDED`] settings of `node`, `name value` each.
fn settings(node: &RedisServer) -> Result<Vec<String>> {
    RECORDED
        .iter()
        .map(|name| match node.command(&["CONFIG", "GET", name])? {
            Reply::Array(Some(items)) => match items.get(1) {
                Some(Reply::Bulk(Some(v))) => Ok(format!("{name} {}", String::from_utf8_lossy(v))),
                other => Err(format!("CONFIG GET {name} replied {other:?}").into()),
            },
            other => Err(format!("CONFIG GET {name} replied {other:?}").into()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_extra_as_config_set() -> Result<()> {
        let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(
            config_pairs(&words("--hz 100 --maxmemory 1gb"))?,
            words("hz 100 maxmemory 1gb")
        );
        assert!(config_pairs(&[]).is_ok_and(|p| p.is_empty()));
        assert!(config_pairs(&words("--hz")).is_err());
        assert!(config_pairs(&words("hz 100")).is_err());
        Ok(())
    }
}
