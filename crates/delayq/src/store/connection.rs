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
//! * With Redis Sentinel ([`DelayQ::connect_sentinel`](crate::DelayQ::connect_sentinel)) the
//!   ordinary connection is the single-server one, pointed at the master the sentinels name
//!   (`sentinel.rs`). An error that may mean the master has moved (refused, dropped, timed
//!   out, `READONLY`, `LOADING`) makes it ask the sentinels again, in the background and at
//!   most every [`LOOKUP_EVERY`]; if they name another server, the connection is replaced by
//!   one to it. The call that met the error fails (retryably): whether it took effect on the
//!   old master cannot be known, so it is the caller's to repeat.
//! * Waiting never blocks a connection: a consumer hears wake-ups on a subscription of its
//!   own (`wakeup.rs`), a RESP3 connection whose pushes carry no response timeout, so a long
//!   wait never runs into one and never holds up other traffic. No message is ever popped by
//!   a blocking command whose reply could be lost.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::store::sentinel::{master_may_have_moved, Sentinels};
use crate::values::config::Config;
use crate::values::error::Result;

/// The least time between two sentinel lookups of one connection: every call fails while
/// the master is down, and one lookup for the lot is enough.
const LOOKUP_EVERY: Duration = Duration::from_millis(250);

/// The ordinary, shared connection: cheap to clone. A single server's is replaced after a
/// response timeout; a cluster's manages its node connections itself.
#[derive(Clone)]
pub(crate) enum Ordinary {
    Single(Arc<Shared>),
    Cluster(ClusterConnection),
}

pub(crate) struct Shared {
    /// The sentinels that say where the master is, if it may move.
    sentinels: Option<Arc<Sentinels>>,
    /// How replacements connect.
    config: ConnectionManagerConfig,
    /// Longest one call may take, a reconnect included (the response timeout): a Redis that
    /// accepts connections but never answers (frozen) would otherwise hold a call for every
    /// connect attempt of the reconnect behind it.
    deadline: Duration,
    /// The connection in use.
    current: RwLock<Current>,
    /// Sentinel lookups: at most one at a time, and not more often than [`LOOKUP_EVERY`].
    lookups: std::sync::Mutex<Lookups>,
}

#[derive(Clone)]
struct Current {
    /// How many times the connection has been replaced.
    generation: u64,
    manager: ConnectionManager,
    /// The server it connects to.
    client: redis::Client,
}

#[derive(Default)]
struct Lookups {
    running: bool,
    last: Option<Instant>,
}

impl Ordinary {
    /// Connects (and fails if Redis cannot be reached now).
    pub(crate) async fn connect(client: &redis::Client, config: &Config) -> Result<Ordinary> {
        Ok(Ordinary::Single(Arc::new(
            Shared::connect(client, config, None).await?,
        )))
    }

    /// Connects to the master `sentinels` name now (and fails if there is none, or it
    /// cannot be reached); follows it when it moves.
    pub(crate) async fn connect_sentinel(
        sentinels: Arc<Sentinels>,
        config: &Config,
    ) -> Result<Ordinary> {
        let master = sentinels.master().await?;
        Ok(Ordinary::Single(Arc::new(
            Shared::connect(&master, config, Some(sentinels)).await?,
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
                let Current {
                    generation,
                    manager,
                    ..
                } = shared.read().clone();
                Conn::Single {
                    manager,
                    generation,
                    owner: shared.clone(),
                }
            }
            Ordinary::Cluster(conn) => Conn::Cluster(conn.clone()),
        }
    }

    /// Where a keyspace walk must look: the one server, or every master of a cluster (as its
    /// slot map says now).
    pub(crate) async fn scan_targets(&self) -> Result<Vec<Node>> {
        match self {
            Ordinary::Single(_) => Ok(vec![Node::Any]),
            Ordinary::Cluster(conn) => {
                // Each master as redis-rs addresses it: a node's own address in `CLUSTER
                // SLOTS` may be empty, meaning "the node that answered" (Valkey does so),
                // which only redis-rs, which asked, knows.
                let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                let answers = conn
                    .clone()
                    .route_command(redis::cmd("PING"), routing)
                    .await?;
                let Value::Map(answers) = answers else {
                    return Err(crate::values::error::Error::Protocol(format!(
                        "PING on every master answered {answers:?}"
                    )));
                };
                let mut masters = std::collections::BTreeSet::new();
                for (address, _) in answers {
                    let address: String =
                        redis::from_redis_value(address).map_err(redis::RedisError::from)?;
                    let parsed = address.rsplit_once(':').and_then(|(host, port)| {
                        Some((host.to_owned(), port.parse::<u16>().ok()?))
                    });
                    let Some(master) = parsed else {
                        return Err(crate::values::error::Error::Protocol(format!(
                            "a master's address {address:?} has no port"
                        )));
                    };
                    masters.insert(master);
                }
                Ok(masters
                    .into_iter()
                    .map(|(host, port)| Node::At { host, port })
                    .collect())
            }
        }
    }

    /// Runs `cmd` on `node`.
    pub(crate) async fn query_on<T: redis::FromRedisValue>(
        &self,
        node: &Node,
        cmd: &Cmd,
    ) -> Result<T> {
        let mut conn = self.get();
        let value = match (node, &mut conn) {
            (Node::At { host, port }, Conn::Cluster(cluster)) => {
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                cluster.route_command(cmd.clone(), routing).await?
            }
            _ => cmd.query_async::<Value>(&mut conn).await?,
        };
        Ok(redis::from_redis_value(value).map_err(redis::RedisError::from)?)
    }
}

/// One node to run a command on.
pub(crate) enum Node {
    /// Whichever node the connection picks (a single server).
    Any,
    /// A cluster node.
    At { host: String, port: u16 },
}

impl Shared {
    async fn connect(
        client: &redis::Client,
        config: &Config,
        sentinels: Option<Arc<Sentinels>>,
    ) -> Result<Shared> {
        let cfg = base_config(config).set_response_timeout(Some(config.response_timeout));
        let manager = ConnectionManager::new_with_config(client.clone(), cfg.clone()).await?;
        // A replacement is made because Redis did not answer within the response timeout;
        // connecting is given no longer, or a frozen Redis would hold each call for several
        // connection timeouts instead of failing it quickly.
        let impatient = config.connection_timeout.min(config.response_timeout);
        Ok(Shared {
            sentinels,
            config: cfg.set_connection_timeout(Some(impatient)),
            deadline: config.response_timeout,
            current: RwLock::new(Current {
                generation: 0,
                manager,
                client: client.clone(),
            }),
            lookups: std::sync::Mutex::default(),
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Current> {
        self.current.read().unwrap_or_else(|p| p.into_inner())
    }

    /// What to do after connection `generation` failed with `e`.
    fn failed(self: &Arc<Self>, generation: u64, e: &redis::RedisError) {
        if e.is_timeout() {
            self.replace(generation);
        }
        if let Some(sentinels) = &self.sentinels {
            if master_may_have_moved(e) {
                self.follow_master(sentinels.clone());
            }
        }
    }

    /// Replaces connection `generation` after it timed out, unless another caller already
    /// did. The new one connects on first use, so Redis being down does not fail this.
    fn replace(&self, generation: u64) {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        if current.generation != generation {
            return;
        }
        let client = current.client.clone();
        self.install(&mut current, client);
    }

    /// Points every later use at `client`'s server, with a connection made on first use.
    fn install(&self, current: &mut Current, client: redis::Client) {
        match ConnectionManager::new_lazy_with_config(client.clone(), self.config.clone()) {
            Ok(manager) => {
                *current = Current {
                    generation: current.generation + 1,
                    manager,
                    client,
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot replace a Redis connection"),
        }
    }

    /// Asks the sentinels, in the background, where the master is, and moves there if it is
    /// not the server in use. Skipped while a lookup runs or one began within
    /// [`LOOKUP_EVERY`]: the calls that keep failing until the master is found ask again.
    fn follow_master(self: &Arc<Self>, sentinels: Arc<Sentinels>) {
        {
            let mut lookups = self.lookups.lock().unwrap_or_else(|p| p.into_inner());
            if lookups.running || lookups.last.is_some_and(|t| t.elapsed() < LOOKUP_EVERY) {
                return;
            }
            *lookups = Lookups {
                running: true,
                last: Some(Instant::now()),
            };
        }
        // Clears `running` however the task ends, even if the runtime drops it.
        struct Done(Arc<Shared>);
        impl Drop for Done {
            fn drop(&mut self) {
                let mut lookups = self.0.lookups.lock().unwrap_or_else(|p| p.into_inner());
                lookups.running = false;
            }
        }
        let done = Done(self.clone());
        tokio::spawn(async move {
            let shared = &done.0;
            match sentinels.master().await {
                Ok(master) => {
                    let mut current = shared.current.write().unwrap_or_else(|p| p.into_inner());
                    if current.client.get_connection_info().addr()
                        != master.get_connection_info().addr()
                    {
                        tracing::warn!(
                            from = %current.client.get_connection_info().addr(),
                            to = %master.get_connection_info().addr(),
                            "the Redis master has moved"
                        );
                        shared.install(&mut current, master);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot find the Redis master"),
            }
        });
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
    fn check<T: Replies>(&self, result: redis::RedisResult<T>) -> redis::RedisResult<T> {
        let Conn::Single {
            generation, owner, ..
        } = self
        else {
            return result;
        };
        match &result {
            Err(e) => owner.failed(*generation, e),
            // redis-rs hands server errors back as values; they become errors only when the
            // reply is read, which is too late to see them here.
            Ok(replies) => {
                if let Some(e) = replies.server_error() {
                    owner.failed(*generation, &redis::RedisError::from(e.clone()));
                }
            }
        }
        result
    }
}

/// Replies that may carry a server error.
trait Replies {
    fn server_error(&self) -> Option<&redis::ServerError>;
}

impl Replies for Value {
    fn server_error(&self) -> Option<&redis::ServerError> {
        match self {
            Value::ServerError(e) => Some(e),
            _ => None,
        }
    }
}

impl Replies for Vec<Value> {
    fn server_error(&self) -> Option<&redis::ServerError> {
        self.iter().find_map(Replies::server_error)
    }
}

impl Conn {
    /// Runs `pipe` on one connection: the single server's, or on a cluster the connection to
    /// the master of `slot` (a pipeline whose commands must share a connection, such as a
    /// write and the `WAIT` that covers it).
    pub(crate) async fn query_pipeline_at(
        &mut self,
        slot: u16,
        pipe: &Pipeline,
    ) -> redis::RedisResult<Vec<Value>> {
        let result = match self {
            Conn::Single { manager, owner, .. } => {
                bounded(owner.deadline, pipe.query_async(manager)).await
            }
            Conn::Cluster(conn) => {
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                conn.route_pipeline(pipe.clone(), 0, pipe.len(), route)
                    .await
            }
        };
        self.check(result)
    }
}

impl Conn {
    /// Runs `transaction` (an atomic pipeline) on one connection: the single server's, or on
    /// a cluster the connection to the master of `slot`, where every key of it must live.
    /// Returns the reply of each command, ignored ones included. redis-rs's own cluster
    /// pipelines split commands by node and never send `MULTI`, so they cannot do this.
    ///
    /// After a reshard or failover the master last known for `slot` may answer every queued
    /// command with `MOVED` and abort the transaction, which redis-rs does not follow as it
    /// follows a plain `MOVED`. Nothing of an aborted transaction ran, so it is sent again to
    /// the node named, a few times at most.
    pub(crate) async fn transaction_at(
        &mut self,
        slot: u16,
        transaction: &Pipeline,
    ) -> redis::RedisResult<Vec<Value>> {
        // The replies to MULTI and to each queued command are skipped; EXEC's is kept.
        let (offset, count) = (transaction.len() + 1, 1);
        let replies = match self {
            Conn::Single { manager, owner, .. } => {
                bounded(
                    owner.deadline,
                    manager.req_packed_commands(transaction, offset, count),
                )
                .await
            }
            Conn::Cluster(conn) => {
                let mut route =
                    SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                let mut redirects = 0;
                loop {
                    let replies = conn
                        .route_pipeline(transaction.clone(), offset, count, route)
                        .await;
                    match replies.as_ref().err().and_then(aborted_by_moved) {
                        Some((host, port)) if redirects < MAX_TRANSACTION_REDIRECTS => {
                            redirects += 1;
                            route = SingleNodeRoutingInfo::ByAddress { host, port };
                        }
                        _ => break replies,
                    }
                }
            }
        };
        match self.check(replies)?.pop() {
            Some(Value::Array(results)) => match results.iter().find_map(|r| match r {
                // A command of the transaction that failed (Redis ran the others).
                Value::ServerError(e) => Some(e.clone()),
                _ => None,
            }) {
                Some(e) => Err(e.into()),
                None => Ok(results),
            },
            Some(Value::ServerError(e)) => Err(e.into()),
            other => Err(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "a transaction did not return its results",
                format!("{other:?}"),
            ))),
        }
    }
}

/// How many times [`Conn::transaction_at`] follows a `MOVED` before it hands the error back
/// (retryable): as many as redis-rs follows for a plain command.
const MAX_TRANSACTION_REDIRECTS: usize = 3;

/// The node (host, port) that a transaction aborted because its slot had moved should go to.
fn aborted_by_moved(e: &redis::RedisError) -> Option<(String, u16)> {
    if e.kind() != redis::ErrorKind::Server(redis::ServerErrorKind::ExecAbort) {
        return None;
    }
    let errors = e.clone().into_server_errors()?;
    let moved_to = |(_, e): &(usize, redis::ServerError)| -> Option<(String, u16)> {
        if e.kind() != Some(redis::ServerErrorKind::Moved) {
            return None;
        }
        // "MOVED <slot> <host>:<port>": the details are "<slot> <host>:<port>".
        let address = e.details()?.split_ascii_whitespace().nth(1)?;
        let (host, port) = address.rsplit_once(':')?;
        Some((host.to_owned(), port.parse().ok()?))
    };
    let mut targets = errors.iter().map(moved_to);
    let first = targets.next()??;
    // Every queued command must have been refused the same way: then none ran.
    targets.all(|t| t.as_ref() == Some(&first)).then_some(first)
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let result = match self {
                Conn::Single { manager, owner, .. } => {
                    bounded(owner.deadline, manager.req_packed_command(cmd)).await
                }
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
                Conn::Single { manager, owner, .. } => {
                    bounded(
                        owner.deadline,
                        manager.req_packed_commands(pipeline, offset, count),
                    )
                    .await
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

/// `call`, or a timeout error (which replaces the connection) if it takes over `limit`.
async fn bounded<T>(
    limit: Duration,
    call: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> redis::RedisResult<T> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => result,
        Err(_) => Err(redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "Redis did not answer within the response timeout",
        ))),
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
