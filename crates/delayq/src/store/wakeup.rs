//! Wake-ups: consumers' subscriptions to their queues' wake channels, all carried by one
//! push connection per client.
//!
//! Scripts that make something due sooner than waiting consumers may know (a send, a retry, a
//! requeue) `SPUBLISH` to the queue's wake channel. Every subscribed consumer hears it, so a
//! consumer that is busy, or gone, cannot swallow a wake-up meant for the idle ones (a list
//! token popped with `BLPOP`, as delayq once used, reaches exactly one waiter).
//!
//! # One connection for every channel
//!
//! A queue may have hundreds of partitions, each with a wake channel of its own, so a
//! connection per channel would not do. Each [`DelayQ`](crate::DelayQ) has one hub
//! (`Subscriptions`): a single RESP3 push connection (on a single server, or the master the
//! sentinels name, a multiplexed connection; on a Redis Cluster, redis-rs's cluster
//! connection, which keeps one connection per node, sends each `SSUBSCRIBE` to the node that
//! serves the channel's slot and renews it when the slot moves) and a map from channel to
//! that channel's signal. The push handler hands each message to its channel's signal.
//!
//! A signal bumps a counter instead of queueing, so a consumer that does not wait for a while
//! holds one pending wake-up, not one per send. Consumers of one channel share its
//! [`Subscription`]: a server with a thousand long-polls on a queue subscribes once. When the
//! last of them is dropped the channel is unsubscribed (a long-running server that touched
//! many queues does not stay subscribed to all of them), and when no channel is left the hub
//! closes its connection.
//!
//! # A lost connection
//!
//! A dropped connection is reported as a wake-up on every channel (consumers claim, and the
//! next one to wait subscribes afresh on a new hub), since whatever was published while it
//! was down is lost. A connection that stays up while nothing gets through (half-open) would
//! never report a drop, so the hub pings Redis every [`PING_EVERY`] and counts a ping that
//! fails or goes unanswered for the response timeout as a drop. A hub is all or nothing: on
//! a cluster, losing one node's connection counts as losing all of them, which costs a
//! resubscription of every channel and keeps the bookkeeping simple.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ProtocolVersion, PushInfo, PushKind};
use tokio::sync::{Mutex, Notify};

use crate::store::target::Target;
use crate::values::config::Config;
use crate::values::error::Result;

/// How often the hub checks that its connection still carries anything.
const PING_EVERY: Duration = Duration::from_secs(1);

/// The wake-up subscriptions of one client: its hub, opened on first use and again after it
/// is lost, and closed once no subscription is left.
#[derive(Default)]
pub(crate) struct Subscriptions(Mutex<Weak<Hub>>);

impl Subscriptions {
    /// The live subscription to `channel`: shared if one exists, else made on the live hub
    /// (opened first if there is none, or it was lost).
    pub(crate) async fn get(
        &self,
        target: &Target,
        config: &Config,
        channel: &str,
    ) -> Result<Arc<Subscription>> {
        // Held across opening the hub and subscribing, so that consumers arriving together
        // open one hub and subscribe each channel once.
        let mut current = self.0.lock().await;
        let hub = match current.upgrade().filter(|hub| !hub.registry.is_dead()) {
            Some(hub) => hub,
            None => {
                let hub = Arc::new(Hub::open(target, config).await?);
                *current = Arc::downgrade(&hub);
                hub
            }
        };
        hub.subscribe(channel).await
    }
}

/// A live subscription to one wake channel, shared by the consumers that wait on it.
pub(crate) struct Subscription {
    /// Kept so that the connection stays open while anyone waits.
    hub: Arc<Hub>,
    channel: String,
    signal: Arc<Signal>,
    /// What the users of this subscription share, of a kind this module does not know (the
    /// consumers' claim news, the consumers' claim news): made by the first that asks.
    shared: OnceLock<Arc<dyn Any + Send + Sync>>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // Drop cannot wait for Redis, so the unsubscription is spawned. Without a runtime (the
        // client outlived it) there is nothing to spawn on; the connection is going away then.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let hub = self.hub.clone();
        let channel = std::mem::take(&mut self.channel);
        let signal = self.signal.clone();
        runtime.spawn(async move { hub.unsubscribe(&channel, &signal).await });
    }
}

impl Subscription {
    /// Wake-ups heard so far. Read it before each claim, never after: the claim sees
    /// everything they announced, and [`woken_since`](Self::woken_since) that count
    /// returns on the next one.
    pub(crate) fn generation(&self) -> u64 {
        self.signal.generation.load(Ordering::SeqCst)
    }

    /// The state of kind `T` that the users of this subscription share, made on first use.
    /// A subscription holds one kind: a second kind asked for gets one of its own each time.
    pub(crate) fn shared<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let any = self.shared.get_or_init(|| Arc::new(T::default())).clone();
        any.downcast::<T>().unwrap_or_default()
    }

    /// True once the connection has dropped; a new subscription is needed.
    pub(crate) fn is_lost(&self) -> bool {
        self.hub.registry.is_dead()
    }

    /// Waits until a wake-up beyond `seen` arrives (returns at once if one already has) or
    /// the connection drops.
    pub(crate) async fn woken_since(&self, seen: u64) {
        loop {
            let notified = self.signal.notify.notified();
            tokio::pin!(notified);
            // Registered before the counter is read, so a push in between is not missed.
            notified.as_mut().enable();
            if self.generation() != seen || self.is_lost() {
                return;
            }
            notified.await;
        }
    }
}

/// One wake channel's wake-ups, shared between the push handler and the waiting consumers.
#[derive(Default)]
struct Signal {
    /// Wake-ups heard so far; each consumer remembers the count it has seen.
    generation: AtomicU64,
    notify: Notify,
}

impl Signal {
    fn wake(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }
}

/// The push connection and its subscriptions.
struct Hub {
    conn: PushConnection,
    /// Shared with the push handler and the keepalive task.
    registry: Arc<Registry>,
    /// Serializes `SSUBSCRIBE` and `SUNSUBSCRIBE`: an unsubscription spawned by a dropped
    /// subscription must not overtake a new subscription to the same channel, or Redis would
    /// end up unsubscribed while a consumer counts on it.
    changes: Mutex<()>,
    /// The task that pings the connection (it holds a clone of it); stopped on drop.
    keepalive: tokio::task::AbortHandle,
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.keepalive.abort();
    }
}

/// What the push handler needs: where each channel's wake-ups go, and whether the
/// connection is gone.
#[derive(Default)]
struct Registry {
    channels: std::sync::Mutex<Channels>,
    /// The connection dropped (or stopped answering): wake-ups may have been missed, and none
    /// will come. Set once, under the `channels` lock.
    dead: AtomicBool,
}

/// Subscribed channels: the signal the push handler bumps, and the subscription consumers
/// share (weak: the consumers own it).
type Channels = HashMap<String, (Arc<Signal>, Weak<Subscription>)>;

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Channels> {
        self.channels.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Marks the connection lost and wakes every waiter, so they claim and resubscribe.
    fn die(&self) {
        let channels = self.lock();
        self.dead.store(true, Ordering::SeqCst);
        for (signal, _) in channels.values() {
            signal.notify.notify_waiters();
        }
    }

    fn on_push(&self, push: PushInfo) {
        match push.kind {
            // The data is [channel, message].
            PushKind::SMessage | PushKind::Message => {
                let channel = match push.data.first() {
                    Some(redis::Value::BulkString(name)) => std::str::from_utf8(name).ok(),
                    _ => None,
                };
                let signal = channel.and_then(|c| self.lock().get(c).map(|(s, _)| s.clone()));
                if let Some(signal) = signal {
                    signal.wake();
                }
            }
            PushKind::Disconnection => self.die(),
            _ => {}
        }
    }
}

impl Hub {
    /// Opens the push connection: to the server (on a cluster, to each node as channels
    /// need it; with Sentinel, to the master the sentinels name now).
    async fn open(target: &Target, config: &Config) -> Result<Hub> {
        let registry = Arc::new(Registry::default());
        let on_push = {
            let registry = registry.clone();
            move |push: PushInfo| -> std::result::Result<(), std::convert::Infallible> {
                registry.on_push(push);
                Ok(())
            }
        };
        let conn = match target {
            Target::Single(client) => {
                PushConnection::Single(open_single(client, config, on_push).await?)
            }
            Target::Sentinel(sentinels) => {
                let master = sentinels.master().await?;
                PushConnection::Master(open_single(&master, config, on_push).await?)
            }
            Target::Cluster(nodes) => {
                let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
                let client =
                    crate::store::connection::cluster_client(&nodes, config, Some(on_push))?;
                PushConnection::Cluster(client.get_async_connection().await?)
            }
        };
        let keepalive = tokio::spawn(keep_alive(conn.clone(), registry.clone())).abort_handle();
        Ok(Hub {
            conn,
            registry,
            changes: Mutex::new(()),
            keepalive,
        })
    }

    /// The live subscription to `channel` on this hub, subscribing if there is none.
    async fn subscribe(self: &Arc<Self>, channel: &str) -> Result<Arc<Subscription>> {
        let _changes = self.changes.lock().await;
        if let Some(live) = self
            .registry
            .lock()
            .get(channel)
            .and_then(|(_, s)| s.upgrade())
        {
            return Ok(live);
        }
        self.conn.clone().ssubscribe(channel).await?;
        // Registered after Redis confirmed: a wake-up published before this is seen by the
        // claim that every consumer makes before it first waits.
        let subscription = Arc::new(Subscription {
            hub: self.clone(),
            channel: channel.to_owned(),
            signal: Arc::new(Signal::default()),
            shared: OnceLock::new(),
        });
        self.registry.lock().insert(
            channel.to_owned(),
            (subscription.signal.clone(), Arc::downgrade(&subscription)),
        );
        Ok(subscription)
    }

    /// Unsubscribes `channel` after its last subscription (whose signal is `signal`) was
    /// dropped, unless a new subscription has taken its place meanwhile. Best effort: if it
    /// fails, the channel stays subscribed until the connection closes, which costs only
    /// unheard pushes.
    async fn unsubscribe(&self, channel: &str, signal: &Arc<Signal>) {
        let _changes = self.changes.lock().await;
        {
            let mut channels = self.registry.lock();
            match channels.get(channel) {
                Some((current, _)) if Arc::ptr_eq(current, signal) => {
                    channels.remove(channel);
                }
                _ => return,
            }
        }
        if self.registry.is_dead() {
            return;
        }
        if let Err(e) = self.conn.clone().sunsubscribe(channel).await {
            tracing::debug!(channel, error = %e, "cannot unsubscribe a wake channel");
        }
    }
}

/// Connects a RESP3 multiplexed connection to `client`'s server, its pushes going to
/// `on_push`.
async fn open_single(
    client: &redis::Client,
    config: &Config,
    on_push: impl redis::aio::AsyncPushSender,
) -> Result<MultiplexedConnection> {
    let info = client.get_connection_info().clone();
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    let client = redis::Client::open(info.set_redis_settings(settings))?;
    // Opened inside a call (the first receive of a queue): bounded like the call itself.
    let cfg = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(config.connection_timeout.min(config.response_timeout)))
        .set_response_timeout(Some(config.response_timeout))
        .set_push_sender(on_push);
    Ok(client
        .get_multiplexed_async_connection_with_config(&cfg)
        .await?)
}

/// Pings the hub's connection until a ping fails (or times out): then every subscription
/// on it is lost, and its waiters are woken to claim and subscribe afresh.
async fn keep_alive(mut conn: PushConnection, registry: Arc<Registry>) {
    loop {
        tokio::time::sleep(PING_EVERY).await;
        if registry.is_dead() {
            return;
        }
        if !conn.is_serving().await {
            registry.die();
            return;
        }
    }
}

/// The hub's connection: to one server, or to the master the sentinels named, or
/// redis-rs's cluster connection, which subscribes each channel on the node that serves it.
#[derive(Clone)]
enum PushConnection {
    Single(MultiplexedConnection),
    /// Lost once the server stops being the master: the sentinels close the connections of
    /// a master they demote, but a demotion they did not make would leave the hub listening
    /// on a replica while the scripts publish on the new master.
    Master(MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl PushConnection {
    async fn ssubscribe(mut self, channel: &str) -> redis::RedisResult<()> {
        match &mut self {
            // In RESP3 the confirmation of SSUBSCRIBE is the reply to this request.
            PushConnection::Single(c) | PushConnection::Master(c) => redis::cmd("SSUBSCRIBE")
                .arg(channel)
                .query_async::<redis::Value>(c)
                .await
                .map(drop),
            PushConnection::Cluster(c) => c.ssubscribe(channel).await,
        }
    }

    async fn sunsubscribe(mut self, channel: &str) -> redis::RedisResult<()> {
        match &mut self {
            PushConnection::Single(c) | PushConnection::Master(c) => redis::cmd("SUNSUBSCRIBE")
                .arg(channel)
                .query_async::<redis::Value>(c)
                .await
                .map(drop),
            PushConnection::Cluster(c) => c.sunsubscribe(channel).await,
        }
    }

    /// Whether the connection still carries anything (and, to a master, whether the
    /// server still is one).
    async fn is_serving(&mut self) -> bool {
        let ping = redis::cmd("PING");
        match self {
            PushConnection::Single(c) => ping.query_async::<redis::Value>(c).await.is_ok(),
            // ROLE answers [role, ...].
            PushConnection::Master(c) => matches!(
                redis::cmd("ROLE").query_async::<redis::Value>(c).await,
                Ok(redis::Value::Array(role))
                    if role.first() == Some(&redis::Value::BulkString(b"master".to_vec()))
            ),
            // Sent to every node.
            PushConnection::Cluster(c) => ping.query_async::<redis::Value>(c).await.is_ok(),
        }
    }
}
