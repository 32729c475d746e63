//! Wake-ups: a consumer's subscription to its queue's wake channel.
//!
//! Scripts that make something due sooner than waiting consumers may know (a send, a retry, a
//! requeue) `SPUBLISH` to the queue's wake channel. Every subscribed consumer hears it, so a
//! consumer that is busy, or gone, cannot swallow a wake-up meant for the idle ones (a list
//! token popped with `BLPOP`, as delayq once used, reaches exactly one waiter).
//!
//! The subscription is a RESP3 connection of the consumer's own: messages arrive as pushes,
//! which set a flag here instead of queueing, so a consumer that does not wait for a while
//! holds one pending wake-up, not one per send. A dropped connection is reported as a
//! wake-up too (the consumer claims, and subscribes afresh before its next wait), since
//! whatever was published while it was down is lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ProtocolVersion, PushInfo, PushKind};
use tokio::sync::Notify;

use crate::error::Result;
use crate::options::Config;

/// A live subscription to one wake channel.
pub(crate) struct Subscription {
    /// Kept only to keep the connection open; dropping it unsubscribes.
    _conn: MultiplexedConnection,
    signal: Arc<Signal>,
}

/// Shared between the connection's push handler and the waiting consumer.
#[derive(Default)]
struct Signal {
    /// A wake-up arrived since the consumer last cleared it.
    pending: AtomicBool,
    /// The connection dropped: wake-ups may have been missed, and none will come.
    lost: AtomicBool,
    notify: Notify,
}

impl Subscription {
    /// Opens a connection of its own to the server of `client` and subscribes to `channel`.
    pub(crate) async fn open(
        client: &redis::Client,
        config: &Config,
        channel: &str,
    ) -> Result<Subscription> {
        let info = client.get_connection_info().clone();
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let client = redis::Client::open(info.set_redis_settings(settings))?;
        let signal = Arc::new(Signal::default());
        let on_push = {
            let signal = signal.clone();
            move |push: PushInfo| -> std::result::Result<(), std::convert::Infallible> {
                match push.kind {
                    PushKind::SMessage | PushKind::Message => {
                        signal.pending.store(true, Ordering::SeqCst)
                    }
                    PushKind::Disconnection => signal.lost.store(true, Ordering::SeqCst),
                    _ => return Ok(()),
                }
                signal.notify.notify_waiters();
                Ok(())
            }
        };
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
        Ok(Subscription {
            _conn: conn,
            signal,
        })
    }

    /// Forgets wake-ups heard so far: the claim about to be sent sees everything they
    /// announced. Call before each claim, never after.
    pub(crate) fn clear(&self) {
        self.signal.pending.store(false, Ordering::SeqCst);
    }

    /// True once the connection has dropped; a new subscription is needed.
    pub(crate) fn is_lost(&self) -> bool {
        self.signal.lost.load(Ordering::SeqCst)
    }

    /// Waits until a wake-up arrives (returns at once if one arrived since `clear`) or the
    /// connection drops.
    pub(crate) async fn woken(&self) {
        loop {
            let notified = self.signal.notify.notified();
            tokio::pin!(notified);
            // Registered before the flags are read, so a push in between is not missed.
            notified.as_mut().enable();
            if self.signal.pending.swap(false, Ordering::SeqCst) || self.is_lost() {
                return;
            }
            notified.await;
        }
    }
}
