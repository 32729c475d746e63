//! The scheduler: turns the ticks of recurring schedules (`schedules.rs`) into messages.
//!
//! Run one in every server, or as many as you like: a tick becomes one message however many
//! schedulers send it. A scheduler
//! * reloads its queues' definitions every `refresh`, and reads the Redis server's clock each
//!   time, so schedulers on hosts with skewed clocks agree on what is due;
//! * sends each tick `lead` before it comes due, as a message due at the tick: delivery is
//!   then as punctual as any delayed message, whatever the scheduler's own timing;
//! * fires a tick up to `grace` late as usual; a tick later than that was missed (no
//!   scheduler ran), and the schedule's [`MissedTicks`](crate::MissedTicks) policy decides
//!   whether it fires.
//!
//! Failures (Redis away, a definition that cannot be read) are logged and retried at the
//! next refresh; a tick that could not be sent is tried again then, under the same policy.
//! A tick the queue refuses (due further out than its max delay, lowered under the
//! schedule's jitter since it was put) is logged once, counted
//! (`delayq_schedule_ticks_refused_total`) and skipped: trying it again would be refused
//! again.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::DelayQ;
use crate::handles::schedule_definition::Definition;
use crate::handles::schedules::server_ms;
use crate::queue::Queue;
use crate::store::keys::Keys;
use crate::values::error::{Error, InvalidInput, Result};
use crate::values::names::QueueName;
use crate::values::options::now_ms as local_ms;
use crate::values::recurrence::ticks_to_fire;
use crate::values::schedule_firing::{Overlap, DEFAULT_LEAD};

/// Runs recurring schedules: see the module documentation.
pub struct Scheduler {
    dq: DelayQ,
    queues: Option<Vec<Queue>>,
    refresh: Duration,
    lead: Duration,
    grace: Duration,
}

/// What a scheduler knows of one schedule.
struct Entry {
    queue: Queue,
    def: Definition,
    /// Ticks up to here are settled: sent (by this scheduler or another) or skipped.
    done_ms: Option<u64>,
    /// A tick could not be sent: the entry waits for the next refresh (no tight retry).
    failed: bool,
}

impl Scheduler {
    /// A scheduler of every queue that has schedules. Defaults: refresh 1 s, lead 1 s,
    /// grace 10 s.
    pub fn new(dq: &DelayQ) -> Self {
        Scheduler {
            dq: dq.clone(),
            queues: None,
            refresh: Duration::from_secs(1),
            lead: DEFAULT_LEAD,
            grace: Duration::from_secs(10),
        }
    }

    /// Runs only the schedules of `queues`.
    pub fn queues(mut self, queues: &[Queue]) -> Self {
        self.queues = Some(queues.to_vec());
        self
    }

    /// How often definitions are read again (so how soon a change takes effect).
    pub fn refresh(mut self, every: Duration) -> Self {
        self.refresh = every.max(Duration::from_millis(10));
        self
    }

    /// How late a tick may fire and still count as on time rather than missed.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// How long before its tick a message is sent.
    pub fn lead(mut self, lead: Duration) -> Self {
        self.lead = lead;
        self
    }

    /// Runs until `stop` completes.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let mut entries: HashMap<(QueueName, String), Entry> = HashMap::new();
        // Server clock minus this host's, in ms.
        let mut offset_ms: i64 = 0;
        let mut next_refresh = Instant::now();
        let lead_ms = self.lead.as_millis() as u64;
        let grace_ms = self.grace.as_millis() as u64 + lead_ms;
        loop {
            if Instant::now() >= next_refresh {
                match self.reload(&mut entries).await {
                    Ok(offset) => offset_ms = offset,
                    Err(e) => tracing::warn!("scheduler: cannot read schedules: {e}"),
                }
                next_refresh = Instant::now() + self.refresh;
            }
            let horizon = server_now(offset_ms) + lead_ms;
            let mut wake_at = None;
            for entry in entries.values_mut().filter(|e| !e.def.paused && !e.failed) {
                entry.failed = !entry.fire(horizon, grace_ms).await;
                if entry.failed {
                    continue;
                }
                let from = entry.done_ms.unwrap_or(0).max(entry.def.created_ms);
                if let Some(next) = entry.def.recurrence.next_after(from) {
                    wake_at = Some(wake_at.map_or(next, |w: u64| w.min(next)));
                }
            }
            let until_refresh = next_refresh.saturating_duration_since(Instant::now());
            let until_tick = wake_at.map_or(until_refresh, |at| {
                let send_at = at.saturating_sub(lead_ms);
                Duration::from_millis(send_at.saturating_sub(server_now(offset_ms)))
            });
            tokio::select! {
                () = tokio::time::sleep(until_refresh.min(until_tick)) => {}
                () = &mut stop => return,
            }
        }
    }

    /// Reads the definitions again; returns the server clock's offset from this host's.
    async fn reload(&self, entries: &mut HashMap<(QueueName, String), Entry>) -> Result<i64> {
        let mut conn = self.dq.connection();
        let server = server_ms(&mut conn).await? as i64;
        let offset = server - local_ms() as i64;
        let queues = match &self.queues {
            Some(queues) => queues.clone(),
            None => {
                let names: Vec<String> = redis::cmd("SMEMBERS")
                    .arg(Keys::SCHEDULED_QUEUES)
                    .query_async(&mut conn)
                    .await?;
                names.iter().filter_map(|n| self.dq.queue(n).ok()).collect()
            }
        };
        let mut seen = std::collections::HashSet::new();
        for queue in queues {
            let schedules = queue.schedules();
            for def in schedules.definitions().await? {
                let key = (queue.name().clone(), def.name.clone());
                seen.insert(key.clone());
                match entries.get_mut(&key) {
                    Some(entry) => {
                        entry.def = def;
                        entry.failed = false;
                    }
                    None => {
                        let done_ms = schedules.last_tick(&def.name).await?;
                        let queue = queue.clone();
                        entries.insert(
                            key,
                            Entry {
                                queue,
                                def,
                                done_ms,
                                failed: false,
                            },
                        );
                    }
                }
            }
        }
        entries.retain(|key, _| seen.contains(key));
        Ok(offset)
    }
}

impl Entry {
    /// Sends what is due up to `horizon` (server ms), as the policy says; false when a tick
    /// could not be sent (it is tried again after the next refresh).
    async fn fire(&mut self, horizon: u64, grace_ms: u64) -> bool {
        let def = &self.def;
        let ticks = ticks_to_fire(
            &def.recurrence,
            def.missed,
            self.done_ms,
            def.created_ms,
            horizon,
            grace_ms,
        );
        let schedules = self.queue.schedules();
        for tick in ticks {
            if def.firing.overlap == Overlap::Skip {
                match schedules.last_tick_running(&def.name).await {
                    Ok(true) => {
                        tracing::debug!(queue = %self.queue.name(), schedule = %def.name, tick,
                            "scheduler: the last tick's message is still pending or in flight: tick skipped");
                        self.done_ms = Some(tick);
                        continue;
                    }
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(queue = %self.queue.name(), schedule = %def.name, tick,
                            "scheduler: cannot tell whether the last tick still runs: {e}");
                        return false;
                    }
                }
            }
            match schedules.send_tick(def, tick).await {
                Ok(_) => {}
                Err(Error::Invalid(InvalidInput::Schedule(why))) => {
                    // The queue refuses this tick, and would refuse it every time.
                    tracing::warn!(
                        queue = %self.queue.name(), schedule = %def.name, tick,
                        "scheduler: the queue refused a tick, skipped: {why}"
                    );
                    self.queue
                        .core()
                        .metrics()
                        .schedule_ticks_refused
                        .increment(1);
                }
                Err(e) => {
                    tracing::warn!(
                        queue = %self.queue.name(), schedule = %def.name, tick,
                        "scheduler: cannot send a tick: {e}"
                    );
                    return false;
                }
            }
            self.done_ms = Some(tick);
        }
        // Whatever the policy skipped up to the horizon stays skipped.
        self.done_ms = Some(self.done_ms.unwrap_or(0).max(horizon));
        true
    }
}

/// The server's clock now, estimated from this host's and the last offset read.
fn server_now(offset_ms: i64) -> u64 {
    (local_ms() as i64 + offset_ms).max(0) as u64
}
