//! The Redis a workload runs against: one fresh server (`server.rs`), or a fresh cluster
//! whose queue has P partitions (`cluster.rs`), with what the driver needs of either.

use delayq::{Config, DelayQ, Setting};

use super::cluster::{BenchCluster, ClusterSetup};
use super::redis_cpu::CpuTimes;
use super::server::BenchServer;
use crate::error::Result;
use crate::metrics::MemoryInfo;
use crate::workload::QUEUE_NAME;

/// Where a workload runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deployment {
    /// One redis-server, as WORKLOADS.md has it.
    Single,
    /// A Redis Cluster (issue 10).
    Cluster(ClusterSetup),
}

/// A running deployment, stopped when dropped.
pub enum Redis {
    /// One server.
    Single(BenchServer),
    /// A cluster and its queue's partition count.
    Cluster(BenchCluster, ClusterSetup),
}

impl Redis {
    /// Starts `deployment` fresh and empty, with `$REDIS_EXTRA`.
    pub fn start(deployment: Deployment, extra: &[String]) -> Result<Redis> {
        Ok(match deployment {
            Deployment::Single => Redis::Single(BenchServer::start(extra)?),
            Deployment::Cluster(setup) => {
                Redis::Cluster(BenchCluster::start(setup.masters, extra)?, setup)
            }
        })
    }

    /// The port agents connect to (on a cluster, one node of it).
    pub fn port(&self) -> u16 {
        match self {
            Redis::Single(s) => s.port(),
            Redis::Cluster(c, _) => c.port(),
        }
    }

    /// The arguments, for the record.
    pub fn args(&self) -> Vec<String> {
        match self {
            Redis::Single(s) => s.args(),
            Redis::Cluster(c, _) => c.args(),
        }
    }

    /// Before the agents are spawned: on a cluster, the second `FLUSHALL` of WORKLOADS.md and
    /// then `create_queue(P)`, which must precede any other use of the queue (and which a
    /// `FLUSHALL` would erase, hence the order). Nothing on one server.
    pub fn before_agents(&self) -> Result<()> {
        match self {
            Redis::Single(_) => Ok(()),
            Redis::Cluster(c, setup) => {
                c.flushall()?;
                c.create_queue(QUEUE_NAME, setup.partitions)
            }
        }
    }

    /// After the agents are spawned, before the first command: on one server the second
    /// `FLUSHALL` (agents write nothing when they connect). Nothing on a cluster.
    pub fn before_start(&self) -> Result<()> {
        match self {
            Redis::Single(s) => s.flushall(),
            Redis::Cluster(..) => Ok(()),
        }
    }

    /// Turns on events for queues `names` (`--events`), through the library, after the last
    /// `FLUSHALL` and before the first command of the workload.
    pub fn record_events(&self, names: &[String], kept: u64) -> Result<()> {
        let url = format!("redis://127.0.0.1:{}/", self.port());
        let cluster = matches!(self, Redis::Cluster(..));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
        runtime.block_on(async {
            let dq = match cluster {
                true => DelayQ::connect_cluster(&[url.as_str()], Config::default()).await,
                false => DelayQ::connect(&url).await,
            }
            .map_err(|e| format!("cannot connect to {url}: {e}"))?;
            for name in names {
                dq.queue(name)?
                    .configure(&[Setting::Events(Some(kept))])
                    .await
                    .map_err(|e| format!("events on {name}: {e}"))?;
            }
            Ok(())
        })
    }

    /// Turns on encryption for queues `names` (`--encrypt`) with `keys`, through the
    /// library, after the last `FLUSHALL` and before the first command of the workload.
    pub fn encrypt(&self, names: &[String], keys: &delayq::Keyring) -> Result<()> {
        let url = format!("redis://127.0.0.1:{}/", self.port());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
        runtime.block_on(async {
            let dq = DelayQ::connect_with(&url, Config::default().keys(keys.clone()))
                .await
                .map_err(|e| format!("cannot connect to {url}: {e}"))?;
            for name in names {
                dq.queue(name)?
                    .configure(&[Setting::Encryption(true)])
                    .await
                    .map_err(|e| format!("encryption on {name}: {e}"))?;
            }
            Ok(())
        })
    }

    /// `INFO memory` (W4, one server only).
    pub fn memory(&self) -> Result<MemoryInfo> {
        match self {
            Redis::Single(s) => s.memory(),
            Redis::Cluster(..) => Err("memory is measured on one server only".into()),
        }
    }

    /// `INFO cpu` of every master: `(port, times)`.
    pub fn cpu(&self) -> Result<Vec<(u16, CpuTimes)>> {
        match self {
            Redis::Single(s) => Ok(vec![(s.port(), s.cpu()?)]),
            Redis::Cluster(c, _) => c.cpu(),
        }
    }
}
