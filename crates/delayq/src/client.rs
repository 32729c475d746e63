//! The entry point: a connected client from which queue handles are made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::handles::queue_core::{LayoutCell, QueueCore, Shared};
use crate::queue::Queue;
use crate::store::announcements::{self, Announcer, Process};
use crate::store::connection;
use crate::store::formats::DATA_FORMAT;
use crate::store::keys::Keys;
use crate::store::partitions;
use crate::store::sentinel::Sentinels;
use crate::store::server::ServerInfo;
use crate::store::target::{NoPushes, Target};
use crate::values::config::Config;
use crate::values::error::{InvalidInput, Result};
use crate::values::names::QueueName;

/// A connection to one Redis server, or to a Redis Cluster, shared by all queue handles made
/// from it. Cheap to clone.
#[derive(Clone)]
pub struct DelayQ {
    shared: Shared,
    /// The server it connected to (a cluster's oldest master), checked on connect.
    server: Arc<ServerInfo>,
    /// Each queue's partitions, learnt once (they never change).
    layouts: Arc<Mutex<HashMap<QueueName, LayoutCell>>>,
}

impl DelayQ {
    /// Checks the server (`server.rs`) before anything is written, then starts.
    async fn start(target: Target, conn: connection::Ordinary, config: Config) -> Result<Self> {
        let server = crate::store::server::check(&conn).await?;
        Ok(DelayQ::new(target, conn, config, server))
    }

    fn new(target: Target, conn: connection::Ordinary, config: Config, server: ServerInfo) -> Self {
        DelayQ {
            server: Arc::new(server),
            shared: Shared {
                target,
                announcer: Announcer::start(
                    conn.clone(),
                    DATA_FORMAT,
                    config.process_role.as_deref(),
                ),
                conn,
                config: Arc::new(config),
                subscriptions: Arc::default(),
                durable: Arc::default(),
                formats: Arc::default(),
                scripting: Arc::default(),
            },
            layouts: Arc::default(),
        }
    }

    /// Connects with the default [`Config`].
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, Config::default()).await
    }

    /// Connects with `config`.
    pub async fn connect_with(url: &str, config: Config) -> Result<Self> {
        config.validate()?;
        let client = redis::Client::open(url)?;
        let conn = connection::Ordinary::connect(&client, &config).await?;
        DelayQ::start(Target::Single(Box::new(client)), conn, config).await
    }

    /// Connects to a Redis Cluster through `nodes` (URLs of any of its nodes; the rest are
    /// found from them). Commands follow `MOVED` and `ASK`, so a queue works whichever node
    /// owns its slot, through resharding and failover. Fails if no node answers now.
    pub async fn connect_cluster(nodes: &[&str], config: Config) -> Result<Self> {
        config.validate()?;
        let client = connection::cluster_client(nodes, &config, None::<NoPushes>)?;
        let conn = connection::Ordinary::connect_cluster(&client).await?;
        DelayQ::start(
            Target::Cluster(nodes.iter().map(|n| n.to_string()).collect()),
            conn,
            config,
        )
        .await
    }

    /// Connects to the master of a Redis Sentinel deployment: `sentinels` are URLs of its
    /// sentinels (any that answer will do), `master_name` the name they monitor the master
    /// by. The master is reached with the credentials, database and TLS mode of the first
    /// sentinel URL (the database is not used on the sentinels themselves).
    ///
    /// When the master fails over, calls fail with retryable errors
    /// ([`Error::is_retryable`](crate::Error::is_retryable)) until the sentinels have
    /// promoted a replica; then this client moves to the new master by itself, commands and
    /// consumers' wake-ups alike. Fails if no sentinel names a master that answers now.
    pub async fn connect_sentinel(
        sentinels: &[&str],
        master_name: &str,
        config: Config,
    ) -> Result<Self> {
        config.validate()?;
        let sentinels = Arc::new(Sentinels::new(sentinels, master_name, &config)?);
        let conn = connection::Ordinary::connect_sentinel(sentinels.clone(), &config).await?;
        DelayQ::start(Target::Sentinel(sentinels), conn, config).await
    }

    /// The server this client connected to, as it described itself then (on a cluster, the
    /// master with the oldest version). A server delayq cannot run on was refused then
    /// ([`Error::ServerTooOld`](crate::Error::ServerTooOld)).
    pub fn server(&self) -> &ServerInfo {
        &self.server
    }

    /// The processes using this Redis, each with the newest data format it reads: every
    /// client announces itself while it lives, and is listed until a lease
    /// ([`ANNOUNCEMENT_LEASE`](crate::ANNOUNCEMENT_LEASE)) after its last announcement. An
    /// upgrade of a queue's data format waits for those that read only older formats.
    pub async fn processes(&self) -> Result<Vec<Process>> {
        announcements::processes(&self.shared.conn).await
    }

    /// This client's name in [`processes`](Self::processes): host, process id and a random
    /// part.
    pub fn process_name(&self) -> &str {
        self.shared.announcer.name()
    }

    /// Takes this client's announcement back, for a process that stops: an upgrade need not
    /// wait a lease for it. A call after this announces it again.
    pub async fn withdraw(&self) -> Result<()> {
        self.shared.announcer.withdraw(&self.shared.conn).await
    }

    /// A handle on queue `name` (validated: see [`QueueName`]). A queue that does not exist
    /// yet is created, with one partition, by its first use.
    pub fn queue(&self, name: &str) -> Result<Queue> {
        let name = QueueName::new(name)?;
        let layout = self
            .layouts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(name.clone())
            .or_default()
            .clone();
        Ok(Queue::new(QueueCore::new(
            name,
            layout,
            self.shared.clone(),
        )))
    }

    /// Creates queue `name` with `partitions` partitions (1 to
    /// [`MAX_PARTITIONS`](crate::MAX_PARTITIONS)), spread over a cluster's masters. The count
    /// is fixed for the queue's life (see `partitions.rs` in the crate's docs): creating a
    /// queue again with the same count is fine; with another, or a queue already in use
    /// with one partition, it is refused. Create a partitioned queue before anything else
    /// uses it, since its first use records one partition.
    pub async fn create_queue(&self, name: &str, partitions: u16) -> Result<Queue> {
        partitions::check_count(partitions)?;
        let queue = self.queue(name)?;
        let core = queue.core();
        let (recorded, created) = core.record_partitions(Some(Some(partitions))).await?;
        let recorded = recorded.unwrap_or(1);
        if created {
            core.stamp_new(&partitions::Layout::new(queue.name(), recorded))
                .await?;
        }
        if recorded != partitions {
            return Err(InvalidInput::Option(format!(
                "queue {name} already has {recorded} partition(s); the count is fixed when a queue is first used"
            ))
            .into());
        }
        // Listed only once the count is the one asked for: a refused create uses nothing (a
        // deleted queue keeps its count, and must not come back to the list by a refusal).
        core.list().await?;
        core.layout().await?;
        Ok(queue)
    }

    /// A connection from the shared pool.
    pub(crate) fn connection(&self) -> connection::Conn {
        self.shared.conn.get()
    }

    /// A connection from the client's pool (to the server, or to the cluster, following
    /// `MOVED`), for keys of the caller's own next to delayq's (the server keeps its push
    /// targets this way). Cheap: it shares the client's multiplexed connection.
    pub fn redis(&self) -> RedisConnection {
        RedisConnection(self.shared.conn.get())
    }

    /// The queues of this Redis (every queue ever used: sent to, created, configured or
    /// given a schedule), by name. Read from a registry kept as queues are first used, so it
    /// costs time in proportion to the number of queues, not of keys. Queues made by a
    /// version of delayq without the registry are found once, by a walk of the keyspace the
    /// first time any client lists the queues, and registered.
    pub async fn queues(&self) -> Result<Vec<QueueName>> {
        crate::store::queue_registry::ensure_walked(&self.shared.conn).await?;
        let mut conn = self.shared.conn.get();
        let registered: Vec<String> = redis::cmd("SMEMBERS")
            .arg(Keys::QUEUES)
            .query_async(&mut conn)
            .await?;
        let mut names: Vec<QueueName> = registered
            .iter()
            .filter_map(|n| QueueName::new(n).ok())
            .collect();
        names.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        Ok(names)
    }
}

/// A connection from a [`DelayQ`]'s pool ([`DelayQ::redis`]): runs any command
/// (`redis::aio::ConnectionLike`).
pub struct RedisConnection(connection::Conn);

impl redis::aio::ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        self.0.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}
