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
//! The `BLPOP` runs in a task of its own (the consumer's *listener*) and is left running when
//! the timer wins: the claim goes out at once on the ordinary connection, and the next wait
//! picks up the same listener. A token the listener takes while the consumer is busy is seen
//! at the next wait, so none is lost. When the consumer is dropped, it ends a pending `BLPOP`
//! by pushing to a private wake list that the `BLPOP` also watches.
//!
//! Timers are precise to well under a millisecond: tokio's timer has 1 ms granularity, so the
//! last stretch of a wait is slept on a blocking-pool thread.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::connection::{self, MAX_BLOCK};
use crate::error::{InvalidInput, Result};
use crate::queue::{check_count, Queue};

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
    /// Names the message in flight (its sequence number, fixed for its life).
    pub(crate) seq: [u8; 6],
    /// Whether the id is indexed (caller-given or moved) rather than generated.
    pub(crate) explicit_id: bool,
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
            seq: self.seq,
            explicit_id: self.explicit_id,
        }
    }

    /// The lease's name in Redis: sequence bytes then token, both big-endian.
    pub(crate) fn lease_member(&self) -> [u8; 12] {
        let mut member = [0u8; 12];
        member[..6].copy_from_slice(&self.seq);
        member[6..].copy_from_slice(&self.token.to_be_bytes()[2..]);
        member
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
        check_count("a receive", self.max)?;
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
    /// The `BLPOP` in progress, if any; it outlives a wait that a timer ended.
    listener: Option<Listener>,
    /// How far ahead of a due time to send the claim.
    lead: Lead,
}

/// A `BLPOP` running in its own task: the popped (list, token), or nothing on timeout.
type Listener = JoinHandle<redis::RedisResult<Option<(String, String)>>>;

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
            listener: None,
            lead: Lead::default(),
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
            let sent = Instant::now();
            let claim = self.queue.claim(options.max, options.lease).await?;
            let now = Instant::now();
            self.lead.observe(now - sent);
            if !claim.deliveries.is_empty() {
                return Ok(claim.deliveries);
            }
            if now >= deadline {
                return Ok(Vec::new());
            }
            let mut sleep = deadline - now;
            if let Some(next) = claim.next_event {
                // Claim a little ahead so that the request reaches Redis as the message comes
                // due; one that arrives early just comes back with a shorter wait.
                sleep = sleep.min(next.saturating_sub(self.lead.get()));
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
        let listener = match &mut self.listener {
            Some(listener) => listener,
            None => self.listener.insert(self.listen()),
        };
        let woken = tokio::select! {
            heard = listener => {
                self.listener = None;
                match heard {
                    Ok(reply) => {
                        reply?;
                    }
                    // The listener task panicked or was cancelled: treat it as a wake-up, a
                    // fresh one starts at the next wait.
                    Err(e) => tracing::warn!(error = %e, "wake-up listener ended"),
                }
                Woken::Token
            }
            () = sleep_precisely(timer) => Woken::Timer,
            () = stop => Woken::Stop,
        };
        Ok(woken)
    }

    /// Starts a `BLPOP` on the queue's wake list and this consumer's own.
    fn listen(&self) -> Listener {
        let mut blpop = redis::cmd("BLPOP");
        blpop
            .arg(self.queue.keys().wake())
            .arg(&self.own_wake)
            .arg(MAX_BLOCK.as_secs());
        let mut conn = self.blocking.clone();
        tokio::spawn(async move { blpop.query_async(&mut conn).await })
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        // A BLPOP left blocked would hold up this connection's next command for up to
        // MAX_BLOCK and keep a task alive: end it in Redis, and the task with it.
        if let Some(listener) = self.listener.take() {
            if !listener.is_finished() {
                listener.abort();
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    let (queue, own_wake) = (self.queue.clone(), self.own_wake.clone());
                    runtime.spawn(async move {
                        let _ = end_own_wait(&queue, &own_wake).await;
                    });
                }
            }
        }
    }
}

/// Half the recent claim round trip (the request's way to Redis), capped at 1 ms: how early to
/// send a claim for a known due time.
#[derive(Debug)]
struct Lead {
    round_trip_us: f64,
}

impl Default for Lead {
    fn default() -> Self {
        Lead {
            round_trip_us: 200.0,
        }
    }
}

impl Lead {
    fn observe(&mut self, round_trip: Duration) {
        // A slow outlier (a busy machine, a big batch) moves the average only a little.
        let us = (round_trip.as_secs_f64() * 1e6).min(2_000.0);
        self.round_trip_us += (us - self.round_trip_us) / 8.0;
    }

    fn get(&self) -> Duration {
        Duration::from_micros((self.round_trip_us / 2.0) as u64)
    }
}

/// Sleeps for `duration` with sub-millisecond precision: tokio's timer (1 ms granularity) for
/// all but the last 2 ms, a blocking-pool thread for all but the last 150 µs, and a yielding
/// spin for those, since waking an idle thread costs about that much on a virtual machine.
async fn sleep_precisely(duration: Duration) {
    const COARSE_MARGIN: Duration = Duration::from_millis(2);
    const SPIN: Duration = Duration::from_micros(150);
    let deadline = Instant::now() + duration;
    if duration > COARSE_MARGIN {
        tokio::time::sleep_until(deadline - COARSE_MARGIN).await;
    }
    let rest = deadline.saturating_duration_since(Instant::now());
    if rest > SPIN {
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(rest - SPIN)).await;
    }
    while Instant::now() < deadline {
        tokio::task::yield_now().await;
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
