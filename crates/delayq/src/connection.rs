//! Connections to Redis, and the rules they follow.
//!
//! * Ordinary traffic (sends, claims, acks) goes through one multiplexed, reconnecting
//!   connection with an explicit response timeout ([`Config::response_timeout`]), shared by
//!   every clone of a [`DelayQ`](crate::DelayQ) and its queues ([`Ordinary`]).
//! * A connection that drops is reconnected by redis-rs. One that stays established while
//!   nothing gets through (half-open: a dead router, a frozen NAT entry) never drops, and
//!   redis-rs would time out on it forever; so a response timeout replaces the connection.
//!   A Redis that is merely slow costs a reconnect, which is cheap.
//! * On a Redis Cluster ([`DelayQ::connect_cluster`](crate::DelayQ::connect_cluster)) the
//!   ordinary connection is redis-rs's cluster connection instead: one multiplexed connection
//!   per node, following `MOVED` and `ASK` after a reshard or failover and refreshing its
//!   slot map. Each script call touches one queue's keys, which share a hash tag, so it is
//!   routed whole to the node that owns them; a script missing there (a promoted replica)
//!   is loaded on every master and the call repeated.
//! * Waiting never blocks a connection: a consumer hears wake-ups on a subscription of its
//!   own (`wakeup.rs`), a RESP3 connection whose pushes carry no response timeout, so a long
//!   wait never runs into one and never holds up other traffic. No message is ever popped by
//!   a blocking command whose reply could be lost.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::error::Result;
use crate::options::Config;

/// The ordinary, shared connection: cheap to clone. A single server's is replaced after a
/// response timeout; a cluster's manages its node connections itself.
#[derive(Clone)]
pub(crate) enum Ordinary {
    Single(Arc<Shared>),
    Cluster(ClusterConnection),
}

pub(crate) struct Shared {
    client: redis::Client,
    /// How replacements connect.
    config: ConnectionManagerConfig,
    /// The connection in use, and how many times it has been replaced.
    current: RwLock<(u64, ConnectionManager)>,
}

impl Ordinary {
    /// Connects (and fails if Redis cannot be reached now).
    pub(crate) async fn connect(client: &redis::Client, config: &Config) -> Result<Ordinary> {
        Ok(Ordinary::Single(Arc::new(
            Shared::connect(client, config).await?,
        )))
    }

    /// Connects to a cluster through `client` (and fails if no node can be reached now).
    pub(crate) async fn connect_cluster(client: &ClusterClient) -> Result<Ordinary> {
        Ok(Ordinary::Cluster(client.get_async_connection().await?))
    }

    /// A handle for one or more commands.
    pub(crate) fn get(&self) -> Conn {
        match self {
            Ordinary::Single(shared) => {
                let (generation, manager) = shared.read().clone();
                Conn::Single {
                    manager,
                    generation,
                    owner: shared.clone(),
                }
            }
            Ordinary::Cluster(conn) => Conn::Cluster(conn.clone()),
        }
    }

    /// True on a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Ordinary::Cluster(_))
    }
}

impl Shared {
    async fn connect(client: &redis::Client, config: &Config) -> Result<Shared> {
        let cfg = base_config(config).set_response_timeout(Some(config.response_timeout));
        let manager = ConnectionManager::new_with_config(client.clone(), cfg.clone()).await?;
        // A replacement is made because Redis did not answer within the response timeout;
        // connecting is given no longer, or a frozen Redis would hold each call for several
        // connection timeouts instead of failing it quickly.
        let impatient = config.connection_timeout.min(config.response_timeout);
        Ok(Shared {
            client: client.clone(),
            config: cfg.set_connection_timeout(Some(impatient)),
            current: RwLock::new((0, manager)),
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, (u64, ConnectionManager)> {
        self.current.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces connection `generation` after it timed out, unless another caller already
    /// did. The new one connects on first use, so Redis being down does not fail this.
    fn replace(&self, generation: u64) {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        if current.0 != generation {
            return;
        }
        let fresh =
            ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone());
        match fresh {
            Ok(manager) => *current = (generation + 1, manager),
            Err(e) => tracing::warn!(error = %e, "cannot replace a timed-out Redis connection"),
        }
    }
}

/// One use of the ordinary connection. On a single server, a response timeout seen
/// through it replaces the connection for every later use.
pub(crate) enum Conn {
    Single {
        manager: ConnectionManager,
        generation: u64,
        owner: Arc<Shared>,
    },
    Cluster(ClusterConnection),
}

impl Conn {
    fn check<T>(&self, result: redis::RedisResult<T>) -> redis::RedisResult<T> {
        if let (
            Err(e),
            Conn::Single {
                generation, owner, ..
            },
        ) = (&result, self)
        {
            if e.is_timeout() {
                owner.replace(*generation);
            }
        }
        result
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let result = match self {
                Conn::Single { manager, .. } => manager.req_packed_command(cmd).await,
                Conn::Cluster(conn) => conn.req_packed_command(cmd).await,
            };
            self.check(result)
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let result = match self {
                Conn::Single { manager, .. } => {
                    manager.req_packed_commands(pipeline, offset, count).await
                }
                Conn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count).await,
            };
            self.check(result)
        })
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single { manager, .. } => manager.get_db(),
            Conn::Cluster(_) => 0,
        }
    }
}

/// The cluster client for `nodes` (any reachable subset of the cluster), with `config`'s
/// timeouts; `resp3` for subscriptions, whose wake-ups arrive as pushes.
pub(crate) fn cluster_client(
    nodes: &[&str],
    config: &Config,
    push: Option<impl redis::aio::AsyncPushSender>,
) -> Result<ClusterClient> {
    let mut builder = ClusterClient::builder(nodes.iter().copied())
        .connection_timeout(config.connection_timeout)
        .response_timeout(config.response_timeout)
        .retries(3);
    if let Some(push) = push {
        builder = builder
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(push);
    }
    Ok(builder.build()?)
}

fn base_config(config: &Config) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(config.connection_timeout))
        // Reconnects are retried by the caller (the worker backs off and carries on); a short
        // in-place retry keeps a dead Redis from stalling each request for long.
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(1))
}
