//! The queue core: what every handle on a queue stands on. A queue's name, the client's
//! connection and settings, its partition layout (learnt from Redis once), script
//! invocation on a partition's keys, and the wake-up subscription of each partition.
//!
//! Nothing here knows what the scripts do: producing, consuming, settling, dead letters,
//! browsing and the rest are modules of their own above this one, each a set of functions
//! on a [`QueueCore`], and [`Queue`](crate::Queue) is the facade that hands them out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redis::Value;
use tokio::sync::OnceCell;

use crate::store::announcements::Announcer;
use crate::store::connection;
use crate::store::formats::FormatGate;
use crate::store::keys::Keys;
use crate::store::partitions::{self, Layout};
use crate::store::script_call::Scripting;
pub(crate) use crate::store::script_call::{invocation, Call};
use crate::store::scripts::SCRIPTS;
use crate::store::target::Target;
use crate::store::wakeup::{Subscription, Subscriptions};
use crate::values::buckets::FullBuckets;
use crate::values::config::Config;
use crate::values::error::{Error, InvalidInput, Result};
use crate::values::names::QueueName;
use crate::values::options::MAX_REPLICA_WAIT;
use crate::values::recording::QueueMetrics;

/// What a client knows of a queue's place in Redis, shared by every handle on the queue made
/// from one [`DelayQ`](crate::DelayQ).
pub(crate) type LayoutCell = Arc<KnownLayout>;

/// A queue's partitions, learnt from Redis on first use (the count never changes, not even
/// by a delete), and whether the queue may be missing from the registry of queue names as
/// far as this client knows (it deleted the queue, or learnt the layout by a read or a
/// consumer): then its next write lists it.
#[derive(Default)]
pub(crate) struct KnownLayout {
    partitions: OnceCell<Arc<Layout>>,
    unlisted: AtomicBool,
}

/// Whether learning a queue's layout lists the queue in the registry of queue names.
#[derive(Clone, Copy)]
enum Listing {
    /// Always (a write: the queue is in use).
    Always,
    /// Only when this call recorded its partition count (it was never used).
    IfMade,
}

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
    /// This client's announcement of the newest data format it reads.
    pub(crate) announcer: Arc<Announcer>,
    /// The data formats of the partitions this client calls on.
    pub(crate) formats: Arc<FormatGate>,
    /// How this client calls the queue scripts.
    pub(crate) scripting: Arc<Scripting>,
}

/// One queue, as every handle on it sees it.
pub(crate) struct QueueCore {
    name: QueueName,
    layout: LayoutCell,
    shared: Shared,
    metrics: Arc<QueueMetrics>,
    /// Buckets this process found full (buckets.rs).
    full_buckets: FullBuckets,
}

impl QueueCore {
    pub(crate) fn new(name: QueueName, layout: LayoutCell, shared: Shared) -> Self {
        QueueCore {
            metrics: Arc::new(QueueMetrics::new(&name)),
            name,
            layout,
            shared,
            full_buckets: FullBuckets::default(),
        }
    }

    pub(crate) fn name(&self) -> &QueueName {
        &self.name
    }

    /// The client's connection, for what runs on every master of a cluster (`SCAN`).
    pub(crate) fn ordinary(&self) -> &connection::Ordinary {
        &self.shared.conn
    }

    /// The client's settings.
    pub(crate) fn config(&self) -> &Config {
        &self.shared.config
    }

    pub(crate) fn metrics(&self) -> &Arc<QueueMetrics> {
        &self.metrics
    }

    pub(crate) fn full_buckets(&self) -> &FullBuckets {
        &self.full_buckets
    }

    /// The queue's partitions, read from Redis once, and recorded there for a queue not
    /// used yet, which is listed: what writes go by, since they start using the queue.
    pub(crate) async fn layout(&self) -> Result<Arc<Layout>> {
        let layout = self.learn_layout(Listing::Always).await?;
        // A load first: the swap writes, and sends on many threads would share the line.
        let unlisted = &self.layout.unlisted;
        if unlisted.load(Ordering::Relaxed) && unlisted.swap(false, Ordering::Relaxed) {
            // Deleted by this client since it learnt the layout: written to again, listed
            // again (one call, once per delete).
            if let Err(e) = self.list().await {
                unlisted.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
        Ok(layout)
    }

    /// [`layout`](Self::layout) for a consumer that lives on (a worker, a server's push
    /// runtime): it records the partition count, so that the queue cannot be made later
    /// with partitions it does not watch, but lists the queue only when it made it. A queue
    /// deleted keeps its count, and a consumer that starts on it must not list it again:
    /// only a message sent does.
    pub(crate) async fn watched_layout(&self) -> Result<Arc<Layout>> {
        self.learn_layout(Listing::IfMade).await
    }

    async fn learn_layout(&self, listing: Listing) -> Result<Arc<Layout>> {
        let layout = self
            .layout
            .partitions
            .get_or_try_init(|| async {
                let (count, created) = self.record_partitions(Some(None)).await?;
                let layout = Arc::new(Layout::new(&self.name, count.unwrap_or(1)));
                if created {
                    self.stamp_new(&layout).await?;
                }
                if created || matches!(listing, Listing::Always) {
                    // The registry lives in a slot of its own, so it cannot be written by
                    // the script above on a cluster. This runs once per queue per client
                    // (the layout is learnt once), never once per message.
                    self.list().await?;
                } else {
                    // Learnt without listing (a consumer): this client's first write lists
                    // it, since it may have been deleted.
                    self.mark_unlisted();
                }
                Ok::<_, Error>(layout)
            })
            .await?;
        Ok(layout.clone())
    }

    /// The queue's partitions for a call that only looks or settles: nothing is recorded for
    /// a queue not used yet, which has one partition (and nothing in it) until it is.
    pub(crate) async fn known_layout(&self) -> Result<Arc<Layout>> {
        if let Some(layout) = self.layout.partitions.get() {
            return Ok(layout.clone());
        }
        match self.record_partitions(None).await?.0 {
            Some(count) => {
                // Learnt by a read, not listed: this client's first write lists it.
                self.mark_unlisted();
                let layout = Arc::new(Layout::new(&self.name, count));
                Ok(self
                    .layout
                    .partitions
                    .get_or_init(|| async { layout })
                    .await
                    .clone())
            }
            None => Ok(Arc::new(Layout::new(&self.name, 1))),
        }
    }

    /// This client took the queue out of the registry of queue names (a delete), or learnt
    /// its layout without listing it: its next write through [`layout`](Self::layout) lists
    /// it (again).
    pub(crate) fn mark_unlisted(&self) {
        self.layout.unlisted.store(true, Ordering::Relaxed);
    }

    /// Puts the queue in the registry of queue names (`dq:queues`).
    pub(crate) async fn list(&self) -> Result<()> {
        let _: i64 = redis::cmd("SADD")
            .arg(Keys::QUEUES)
            .arg(self.name.as_str())
            .query_async(&mut self.connection())
            .await?;
        Ok(())
    }

    /// A queue just created (`layout`) is stamped with the newest data format, unless a
    /// process that reads only older ones is running: then it starts at format 1, which
    /// that process reads, until it is upgraded.
    pub(crate) async fn stamp_new(&self, layout: &Layout) -> Result<()> {
        match self.stamp_format(layout).await {
            Err(Error::OlderProcesses { .. }) => Ok(()),
            other => other,
        }
    }

    /// Reads the queue's partition count, `None` if it has none yet; with `Some(wanted)`,
    /// records `wanted` (1 for `None`) for a queue that has none, and returns what Redis
    /// holds, and whether this call recorded it. It lists nothing: whoever learns the
    /// layout decides that ([`learn_layout`](Self::learn_layout)).
    pub(crate) async fn record_partitions(
        &self,
        wanted: Option<Option<u16>>,
    ) -> Result<(Option<u16>, bool)> {
        let mut inv = SCRIPTS.partitions.prepare_invoke();
        inv.key(Keys::partitions(&self.name))
            .key(Keys::new(self.name.as_str()).seq());
        match wanted {
            None => inv.arg("?"),
            Some(None) => inv.arg(""),
            Some(Some(p)) => inv.arg(p),
        };
        // The partition count is read before any format: it names no partition's data.
        let reply = inv.invoke_async(&mut self.connection()).await?;
        let created = matches!(reply, Value::Int(_));
        let count = partitions::parse_count(&reply)?;
        Ok((count, created))
    }

    /// The data format of partition `keys`, once this client may call on it: its
    /// announcement is current and the partition's format is one it reads (else
    /// [`Error::NewerFormat`], and nothing was written). Every script call passes this
    /// ([`invoke`](Self::invoke)); so must every write that runs no script.
    pub(crate) async fn admit(&self, keys: &Keys) -> Result<u32> {
        self.admit_control(keys.control()).await
    }

    /// [`admit`](Self::admit), reading the format again when the one known is older than
    /// `needed` ([`FormatGate::admit_at_least`]).
    pub(crate) async fn admit_at_least(&self, keys: &Keys, needed: u32) -> Result<u32> {
        let shared = &self.shared;
        shared
            .formats
            .admit_at_least(&shared.announcer, &shared.conn, keys.control(), needed)
            .await
    }

    /// Whether partition `keys`' queue encrypts its payloads, as last read (at most a lease
    /// ago; [`FormatGate::encrypts`]).
    pub(crate) async fn encrypts(&self, keys: &Keys) -> Result<bool> {
        let shared = &self.shared;
        shared
            .formats
            .encrypts(&shared.announcer, &shared.conn, keys.control())
            .await
    }

    /// Forgets what was read of partition `keys`' format and settings.
    pub(crate) fn forget_reading(&self, keys: &Keys) {
        self.shared.formats.forget(keys.control());
    }

    async fn admit_control(&self, control: &str) -> Result<u32> {
        let shared = &self.shared;
        shared
            .formats
            .admit(&shared.announcer, &shared.conn, control)
            .await
    }

    /// Stamps the partitions of `layout` with the newest data format (see
    /// [`FormatGate::stamp`]).
    pub(crate) async fn stamp_format(&self, layout: &Layout) -> Result<()> {
        let shared = &self.shared;
        shared
            .formats
            .stamp(&shared.announcer, &shared.conn, layout)
            .await
    }

    /// The live wake-up subscription of partition `keys`, shared with its other consumers.
    pub(crate) async fn subscription(&self, keys: &Keys) -> Result<Arc<Subscription>> {
        let shared = &self.shared;
        shared
            .subscriptions
            .get(&shared.target, &shared.config, keys.wake())
            .await
    }

    /// The live subscription to shard channel `channel` (of one of the queue's partitions:
    /// its events), shared with its other listeners.
    pub(crate) async fn subscription_to(&self, channel: &str) -> Result<Arc<Subscription>> {
        let shared = &self.shared;
        shared
            .subscriptions
            .get(&shared.target, &shared.config, channel)
            .await
    }

    /// How this client calls the queue scripts.
    pub(crate) fn scripting(&self) -> &Scripting {
        &self.shared.scripting
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

    /// Runs a script call on the shared connection, once the partition's data format
    /// admits it ([`admit`](Self::admit)).
    pub(crate) async fn invoke(&self, call: &Call<'_>) -> Result<Value> {
        self.admit_control(&call.control).await?;
        let mut conn = self.shared.conn.get();
        Ok(self.shared.scripting.invoke(&mut conn, call).await?)
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
