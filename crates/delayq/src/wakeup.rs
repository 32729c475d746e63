//! Wake-ups: a consumer's subscription to its queue's wake channel.
//!
//! Scripts that make something due sooner than waiting consumers may know (a send, a retry, a
//! requeue) `SPUBLISH` to the queue's wake channel. Every subscribed consumer hears it, so a
//! consumer that is busy, or gone, cannot swallow a wake-up meant for the idle ones (a list
//! token popped with `BLPOP`, as delayq once used, reaches exactly one waiter).
//!
//! On a Redis Cluster the subscription is redis-rs's cluster connection in RESP3, which sends
//! the `SSUBSCRIBE` to the node that serves the channel's slot and renews it when the slot
//! moves. Each queue's subscription has one such connection for now.
//!
//! A subscription is a RESP3 connection whose pushes bump a counter instead of queueing, so
//! a consumer that does not wait for a while holds one pending wake-up, not one per send.
//! Consumers of one queue made from one [`DelayQ`](crate::DelayQ) share one subscription
//! (`Subscriptions`): a server with a thousand long-polls on a queue holds one connection
//! for their wake-ups. A dropped connection is reported as a wake-up too (consumers claim,
//! and the next one to wait subscribes afresh), since whatever was published while it was
//! down is lost. A connection that stays up while nothing gets through (half-open) would
//! never report a drop, so each subscription pings Redis every [`PING_EVERY`] and counts a
//! ping that fails or goes unanswered for the response timeout as a drop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ProtocolVersion, PushInfo, PushKind};
use tokio::sync::{Mutex, Notify};

use crate::client::Target;
use crate::error::Result;
use crate::options::Config;

/// How often a subscription checks that its connection still carries anything.
const PING_EVERY: Duration = Duration::from_secs(1);

/// The live subscriptions of one client, one per wake channel, shared by its consumers and
/// closed when the last of them is dropped.
#[derive(Default)]
pub(crate) struct Subscriptions(Mutex<HashMap<String, Weak<Subscription>>>);

impl Subscriptions {
    /// The live subscription to `channel`, opened if there is none (or it was lost).
    pub(crate) async fn get(
        &self,
        target: &Target,
        config: &Config,
        channel: &str,
    ) -> Result<Arc<Subscription>> {
        // Held across the open, so that consumers arriving together open one connection.
        let mut live = self.0.lock().await;
        if let Some(s) = live.get(channel).and_then(Weak::upgrade) {
            if !s.is_lost() {
                return Ok(s);
            }
        }
        live.retain(|_, s| s.strong_count() > 0);
        let s = Arc::new(Subscription::open(target, config, channel).await?);
        live.insert(channel.to_owned(), Arc::downgrade(&s));
        Ok(s)
    }
}

/// A live subscription to one wake channel.
pub(crate) struct Subscription {
    /// Kept only to keep the connection open; dropping it unsubscribes.
    _conn: PushConnection,
    signal: Arc<Signal>,
    /// The task that pings the connection (it holds a clone of it); stopped on drop.
    keepalive: tokio::task::AbortHandle,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.keepalive.abort();
    }
}

/// Shared between the connection's push handler and the waiting consumers.
#[derive(Default)]
struct Signal {
    /// Wake-ups heard so far; each consumer remembers the count it has seen.
    generation: AtomicU64,
    /// The connection dropped: wake-ups may have been missed, and none will come.
    lost: AtomicBool,
    notify: Notify,
}

impl Subscription {
    /// Opens a connection of its own (on a cluster: to the node that serves `channel`, which
    /// redis-rs follows through resharding) and subscribes to `channel`.
    async fn open(target: &Target, config: &Config, channel: &str) -> Result<Subscription> {
        let signal = Arc::new(Signal::default());
        let on_push = {
            let signal = signal.clone();
            move |push: PushInfo| -> std::result::Result<(), std::convert::Infallible> {
                match push.kind {
                    PushKind::SMessage | PushKind::Message => {
                        signal.generation.fetch_add(1, Ordering::SeqCst);
                    }
                    PushKind::Disconnection => signal.lost.store(true, Ordering::SeqCst),
                    _ => return Ok(()),
                }
                signal.notify.notify_waiters();
                Ok(())
            }
        };
        let conn = match target {
            Target::Single(client) => {
                let info = client.get_connection_info().clone();
                let settings = info
                    .redis_settings()
                    .clone()
                    .set_protocol(ProtocolVersion::RESP3);
                let client = redis::Client::open(info.set_redis_settings(settings))?;
                let cfg = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(config.connection_timeout))
                    .set_response_timeout(Some(config.response_timeout))
                    .set_push_sender(on_push);
                let mut conn = client
                    .get_multiplexed_async_connection_with_config(&cfg)
                    .await?;
                // In RESP3 the confirmation of SSUBSCRIBE is the reply to this request.
                redis::cmd("SSUBSCRIBE")
                    .arg(channel)
                    .query_async::<redis::Value>(&mut conn)
                    .await?;
                PushConnection::Single(conn)
            }
            Target::Cluster(nodes) => {
                let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
                let client = crate::connection::cluster_client(&nodes, config, Some(on_push))?;
                let mut conn = client.get_async_connection().await?;
                conn.ssubscribe(channel).await?;
                PushConnection::Cluster(conn)
            }
        };
        let keepalive = tokio::spawn(keep_alive(conn.clone(), signal.clone())).abort_handle();
        Ok(Subscription {
            _conn: conn,
            signal,
            keepalive,
        })
    }

    /// Wake-ups heard so far. Read it before each claim, never after: the claim sees
    /// everything they announced, and [`woken_since`](Self::woken_since) that count
    /// returns on the next one.
    pub(crate) fn generation(&self) -> u64 {
        self.signal.generation.load(Ordering::SeqCst)
    }

    /// True once the connection has dropped; a new subscription is needed.
    pub(crate) fn is_lost(&self) -> bool {
        self.signal.lost.load(Ordering::SeqCst)
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

/// Pings the subscription's connection until a ping fails (or times out): then the
/// subscription is lost, and its waiters are woken to claim and subscribe afresh.
async fn keep_alive(mut conn: PushConnection, signal: Arc<Signal>) {
    loop {
        tokio::time::sleep(PING_EVERY).await;
        if signal.lost.load(Ordering::SeqCst) {
            return;
        }
        let ping = match &mut conn {
            PushConnection::Single(c) => redis::cmd("PING").query_async::<redis::Value>(c).await,
            // Sent to every node.
            PushConnection::Cluster(c) => redis::cmd("PING").query_async::<redis::Value>(c).await,
        };
        if ping.is_err() {
            signal.lost.store(true, Ordering::SeqCst);
            signal.notify.notify_waiters();
            return;
        }
    }
}

/// A subscription's connection: to one server, or redis-rs's cluster connection, which
/// subscribes on the node that serves the channel.
#[derive(Clone)]
enum PushConnection {
    Single(MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}
