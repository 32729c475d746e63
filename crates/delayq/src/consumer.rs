//! Receiving messages: claim what is due, and otherwise wait without polling.
//!
//! A claim is one script call. When it finds nothing due it reports how long until the next
//! message comes due (or the next lease expires), by the Redis server's clock. The consumer
//! then waits for whichever comes first:
//! * a local timer set to that moment, which is what makes delivery punctual (Redis fires
//!   block timeouts on its `hz` timer, up to ~100 ms late with the default `hz 10`);
//! * a wake-up token on the queue's wake list, pushed by any script that makes something due
//!   sooner than consumers may know (a send, a retry, a requeue), popped with `BLPOP` on a
//!   connection of the consumer's own;
//! * the end of the caller's `wait`.
//!
//! When the timer wins, the consumer ends its own `BLPOP` by pushing to a private wake list
//! that the same `BLPOP` also watches, so its blocking connection is free again at once.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::time::Instant;

use crate::connection::{self, MAX_BLOCK};
use crate::error::{InvalidInput, Result};
use crate::queue::{Queue, MAX_BATCH};

/// A message handed to a consumer under a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Delivery {
    /// The message id.
    pub id: String,
    /// The payload, unchanged.
    pub payload: Vec<u8>,
    /// Which delivery this is, counting from 1.
    pub attempt: u32,
    /// When the message was due, ms since the Unix epoch (server clock).
    pub due_ms: u64,
    /// When the lease ends, ms since the Unix epoch (server clock).
    pub lease_deadline_ms: u64,
    /// Identifies this delivery; a stale holder's token no longer matches.
    pub(crate) token: u64,
}

impl Delivery {
    /// The lease token of this delivery.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// A copy without the payload: all that ack, nack and extend need.
    pub(crate) fn receipt(&self) -> Delivery {
        Delivery {
            id: self.id.clone(),
            payload: Vec::new(),
            attempt: self.attempt,
            due_ms: self.due_ms,
            lease_deadline_ms: self.lease_deadline_ms,
            token: self.token,
        }
    }
}

/// What one claim found.
pub(crate) struct Claim {
    pub(crate) deliveries: Vec<Delivery>,
    /// With no deliveries: time until something comes due or a lease expires, if anything.
    pub(crate) next_event: Option<Duration>,
}

#[derive(Debug, PartialEq, Eq)]
enum Woken {
    Token,
    Timer,
    Stop,
}

/// How to receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiveOptions {
    /// Most messages to take (1 to 1000).
    pub max: usize,
    /// Lease of each message taken.
    pub lease: Duration,
    /// Longest time to wait when nothing is due (zero: return at once).
    pub wait: Duration,
}

impl Default for ReceiveOptions {
    fn default() -> Self {
        ReceiveOptions {
            max: 1,
            lease: Duration::from_secs(30),
            wait: Duration::from_secs(5),
        }
    }
}

impl ReceiveOptions {
    fn validate(&self) -> Result<(), InvalidInput> {
        if self.max == 0 || self.max > MAX_BATCH {
            return Err(InvalidInput::Option(format!(
                "receive takes 1 to {MAX_BATCH} messages, not {}",
                self.max
            )));
        }
        if self.lease < Duration::from_millis(1) {
            return Err(InvalidInput::Option("a lease must be at least 1 ms".into()));
        }
        crate::options::checked_ms(self.lease, "lease")?;
        Ok(())
    }
}

/// Receives messages from one queue. One consumer serves one task at a time (`receive`
/// takes `&mut self`); make one per concurrent receiver.
pub struct Consumer {
    queue: Queue,
    /// Only for `BLPOP`: its reply may take up to [`MAX_BLOCK`], which ordinary traffic must
    /// not wait behind.
    blocking: ConnectionManager,
    /// This consumer's private wake list (see the module docs).
    own_wake: String,
}

impl Consumer {
    pub(crate) async fn new(queue: Queue) -> Result<Self> {
        let blocking = connection::blocking(queue.client(), queue.config()).await?;
        let own_wake = queue
            .keys()
            .consumer_wake(&format!("{:016x}", rand::random::<u64>()));
        Ok(Consumer {
            queue,
            blocking,
            own_wake,
        })
    }

    /// The queue this consumer receives from (ack, nack and extend deliveries there).
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Takes up to `max` due messages under a lease, waiting up to `wait` for one to come due.
    /// Also reclaims messages whose lease expired (counting the attempt). Returns an empty
    /// list when nothing came due in time.
    pub async fn receive(&mut self, options: &ReceiveOptions) -> Result<Vec<Delivery>> {
        self.receive_until(options, std::future::pending()).await
    }

    /// Like [`receive`](Self::receive), but also returns (empty) as soon as `stop` completes.
    /// Only the waiting is cut short, never a claim in progress, so no message is claimed
    /// without being returned.
    pub async fn receive_until(
        &mut self,
        options: &ReceiveOptions,
        stop: impl Future<Output = ()>,
    ) -> Result<Vec<Delivery>> {
        options.validate()?;
        tokio::pin!(stop);
        let deadline = Instant::now() + options.wait;
        loop {
            let claim = self.queue.claim(options.max, options.lease).await?;
            if !claim.deliveries.is_empty() {
                return Ok(claim.deliveries);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            let mut sleep = deadline - now;
            if let Some(next) = claim.next_event {
                sleep = sleep.min(next);
            }
            if !sleep.is_zero() && self.wait_for_wake(sleep, stop.as_mut()).await? == Woken::Stop {
                return Ok(Vec::new());
            }
        }
    }

    /// Waits until a wake-up token arrives, `timer` passes or `stop` completes.
    async fn wait_for_wake(
        &mut self,
        timer: Duration,
        stop: Pin<&mut impl Future<Output = ()>>,
    ) -> Result<Woken> {
        let mut blpop = redis::cmd("BLPOP");
        blpop
            .arg(self.queue.keys().wake())
            .arg(&self.own_wake)
            .arg(MAX_BLOCK.as_secs());
        let mut conn = self.blocking.clone();
        let wait = blpop.query_async::<Option<(String, String)>>(&mut conn);
        tokio::pin!(wait);
        // If the caller drops this future mid-wait, the BLPOP would stay blocked in Redis and
        // hold up the connection's next command for up to MAX_BLOCK: end it from a task.
        let mut on_drop = EndWaitOnDrop(Some((self.queue.clone(), self.own_wake.clone())));
        let woken = tokio::select! {
            woken = &mut wait => {
                on_drop.0 = None;
                woken?;
                return Ok(Woken::Token);
            }
            _ = tokio::time::sleep(timer) => Woken::Timer,
            _ = stop => Woken::Stop,
        };
        on_drop.0 = None;
        end_own_wait(&self.queue, &self.own_wake).await?;
        wait.await?;
        Ok(woken)
    }
}

/// Pushes to a consumer's private wake list, which ends its pending BLPOP at once.
async fn end_own_wait(queue: &Queue, own_wake: &str) -> Result<()> {
    let mut conn = queue.connection();
    // The expiry cleans up after a consumer that dies between the push and its pop.
    redis::pipe()
        .atomic()
        .lpush(own_wake, 1)
        .ignore()
        .pexpire(own_wake, 60_000)
        .ignore()
        .query_async::<()>(&mut conn)
        .await?;
    Ok(())
}

struct EndWaitOnDrop(Option<(Queue, String)>);

impl Drop for EndWaitOnDrop {
    fn drop(&mut self) {
        if let (Some((queue, own_wake)), Ok(runtime)) =
            (self.0.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(async move {
                let _ = end_own_wait(&queue, &own_wake).await;
            });
        }
    }
}
