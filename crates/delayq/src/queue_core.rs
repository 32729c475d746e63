//! The queue core: what every handle on a queue stands on. A queue's name, the client's
//! connection and settings, its partition layout (learnt from Redis once), script
//! invocation on a partition's keys, and the wake-up subscription of each partition.
//!
//! Nothing here knows what the scripts do: producing, consuming, settling, dead letters,
//! browsing and the rest are modules of their own above this one, each a set of functions
//! on a [`QueueCore`], and [`Queue`](crate::Queue) is the facade that hands them out.

use std::sync::Arc;

use redis::{Script, ScriptInvocation, Value};
use tokio::sync::OnceCell;

use crate::connection;
use crate::error::{Error, InvalidInput, Result};
use crate::keys::Keys;
use crate::names::QueueName;
use crate::options::{Config, MAX_REPLICA_WAIT};
use crate::partitions::{self, Layout};
use crate::record::DATA_FORMAT;
use crate::recording::QueueMetrics;
use crate::scripts::SCRIPTS;
use crate::target::Target;
use crate::wakeup::{Subscription, Subscriptions};

/// A queue's partitions, learnt from Redis on first use and shared by every handle on the
/// queue made from one [`DelayQ`](crate::DelayQ).
pub(crate) type LayoutCell = Arc<OnceCell<Arc<Layout>>>;

/// What a client shares with every queue handle it makes.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) target: Target,
    pub(crate) conn: connection::Ordinary,
    pub(crate) config: Arc<Config>,
    /// Wake-up subscriptions, one per partition, shared by every consumer of the client.
    pub(crate) subscriptions: Arc<Subscriptions>,
    /// The connection for sends that wait for replicas (opened on first use): `WAIT`
    /// blocks the connection it is sent on, and must not hold up everything else.
    pub(crate) durable: Arc<OnceCell<connection::Ordinary>>,
}

/// One queue, as every handle on it sees it.
pub(crate) struct QueueCore {
    name: QueueName,
    layout: LayoutCell,
    shared: Shared,
    metrics: Arc<QueueMetrics>,
    /// Partitions whose data format this handle has read (`send.rs`'s Lua-free batches
    /// check it once before their first write; scripts check it on every call).
    format_read: std::sync::Mutex<std::collections::HashSet<usize>>,
}

impl QueueCore {
    pub(crate) fn new(name: QueueName, layout: LayoutCell, shared: Shared) -> Self {
        QueueCore {
            metrics: Arc::new(QueueMetrics::new(&name)),
            name,
            layout,
            shared,
            format_read: Default::default(),
        }
    }

    pub(crate) fn name(&self) -> &QueueName {
        &self.name
    }

    pub(crate) fn metrics(&self) -> &Arc<QueueMetrics> {
        &self.metrics
    }

    /// The queue's partitions, read from Redis once, and recorded there for a queue not
    /// used yet: what sends and consumers go by, since they start using the queue.
    pub(crate) async fn layout(&self) -> Result<Arc<Layout>> {
        let layout = self
            .layout
            .get_or_try_init(|| async {
                let count = self.record_partitions(Some(None)).await?;
                Ok::<_, Error>(Arc::new(Layout::new(&self.name, count.unwrap_or(1))))
            })
            .await?;
        Ok(layout.clone())
    }

    /// The queue's partitions for a call that only looks or settles: nothing is recorded for
    /// a queue not used yet, which has one partition (and nothing in it) until it is.
    pub(crate) async fn known_layout(&self) -> Result<Arc<Layout>> {
        if let Some(layout) = self.layout.get() {
            return Ok(layout.clone());
        }
        match self.record_partitions(None).await? {
            Some(count) => {
                let layout = Arc::new(Layout::new(&self.name, count));
                Ok(self.layout.get_or_init(|| async { layout }).await.clone())
            }
            None => Ok(Arc::new(Layout::new(&self.name, 1))),
        }
    }

    /// Reads the queue's partition count, `None` if it has none yet; with `Some(wanted)`,
    /// records `wanted` (1 for `None`) for a queue that has none, and returns what Redis
    /// holds.
    pub(crate) async fn record_partitions(
        &self,
        wanted: Option<Option<u16>>,
    ) -> Result<Option<u16>> {
        let mut inv = SCRIPTS.partitions.prepare_invoke();
        inv.key(Keys::partitions(&self.name))
            .key(Keys::new(self.name.as_str()).seq());
        let records = wanted.is_some();
        match wanted {
            None => inv.arg("?"),
            Some(None) => inv.arg(""),
            Some(Some(p)) => inv.arg(p),
        };
        let count = partitions::parse_count(&self.invoke(&inv).await?)?;
        if records {
            // The registry lives in a slot of its own, so it cannot be written by the script
            // above on a cluster. This runs once per queue per client (the layout is learnt
            // once), never once per message.
            let _: i64 = redis::cmd("SADD")
                .arg(Keys::QUEUES)
                .arg(self.name.as_str())
                .query_async(&mut self.connection())
                .await?;
        }
        Ok(count)
    }

    /// Refuses partition `k` (of `keys`) if its data is of a newer format than this delayq
    /// reads ([`Error::NewerFormat`]), as `scripts/format.lua` does for every script: read
    /// from Redis once per handle, for the writes that run no script.
    pub(crate) async fn check_format(&self, k: usize, keys: &Keys) -> Result<()> {
        let read = |set: &std::collections::HashSet<usize>| set.contains(&k);
        if read(&self.format_read.lock().unwrap_or_else(|p| p.into_inner())) {
            return Ok(());
        }
        let named: Option<String> = redis::cmd("HGET")
            .arg(keys.control())
            .arg("format")
            .query_async(&mut self.connection())
            .await?;
        refuse_newer_format(named)?;
        self.format_read
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(k);
        Ok(())
    }

    /// The live wake-up subscription of partition `keys`, shared with its other consumers.
    pub(crate) async fn subscription(&self, keys: &Keys) -> Result<Arc<Subscription>> {
        let shared = &self.shared;
        shared
            .subscriptions
            .get(&shared.target, &shared.config, keys.wake())
            .await
    }

    /// A connection from the client's shared pool.
    pub(crate) fn connection(&self) -> connection::Conn {
        self.shared.conn.get()
    }

    /// The client's connection for sends that wait for replicas, opened on first use.
    pub(crate) async fn durable_connection(&self) -> Result<connection::Conn> {
        let shared = &self.shared;
        let durable = shared
            .durable
            .get_or_try_init(|| {
                // Its replies may wait for replicas on top of the usual response time.
                let timeout = shared.config.response_timeout + MAX_REPLICA_WAIT;
                let config = (*shared.config).clone().response_timeout(timeout);
                async move { shared.target.connect(&config).await }
            })
            .await?;
        Ok(durable.get())
    }

    /// Runs a script call on the shared connection.
    pub(crate) async fn invoke(&self, inv: &ScriptInvocation<'_>) -> Result<Value> {
        let mut conn = self.shared.conn.get();
        Ok(inv.invoke_async(&mut conn).await?)
    }

    /// A payload (sent, or given to a failed message for its next attempt) is held to the
    /// client's limit.
    pub(crate) fn check_payload(&self, payload: &[u8]) -> Result<()> {
        let limit = self.shared.config.max_payload_bytes;
        if payload.len() > limit {
            return Err(InvalidInput::PayloadTooLarge {
                size: payload.len(),
                limit,
            }
            .into());
        }
        Ok(())
    }
}

/// A script invocation with partition `keys` in place.
pub(crate) fn invocation<'a>(keys: &Keys, script: &'a Script) -> ScriptInvocation<'a> {
    let mut inv = script.prepare_invoke();
    for key in keys.all() {
        inv.key(key);
    }
    inv
}

/// A partition's data format as its control hash names it (none: format 1), if this delayq
/// reads it.
pub(crate) fn refuse_newer_format(named: Option<String>) -> Result<()> {
    match named {
        Some(f) if f.parse::<u32>().map_or(true, |f| f > DATA_FORMAT) => Err(Error::NewerFormat {
            found: f,
            supported: DATA_FORMAT,
        }),
        _ => Ok(()),
    }
}
