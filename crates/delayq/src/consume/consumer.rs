//! Receiving messages: claim what is due, and otherwise wait without polling.
//!
//! A claim is one script call. When it finds nothing due it reports how long until the next
//! message comes due (or the next lease expires), by the Redis server's clock. The consumer
//! then waits for whichever comes first:
//! * a local timer set to that moment, which is what makes delivery punctual;
//! * a wake-up on the queue's wake channel (`wakeup.rs`), published by any script that makes
//!   something due sooner than consumers may know (a send, a retry, a requeue); every
//!   waiting consumer hears it, whatever the others are doing;
//! * the end of the caller's `wait`.
//!
//! A consumer of a [`QueueSet`](crate::QueueSet), or of a queue of several partitions, does the same for each
//! partition of each queue (a *lane*) at once: it claims from them in the set's order
//! (strict or weighted, `choice.rs`) until it has `max`; with nothing due anywhere it
//! waits on all their wake-ups and on the earliest of their due times, then claims only where
//! a wake-up or a due time says something may be due. A lane with nothing due costs nothing
//! while the consumer waits.
//!
//! The consumer subscribes before it claims and notes the wake-ups heard so far just before
//! each claim, so a wake-up published after a claim has looked is always heard by the next
//! wait. Consumers of one queue share the subscription (`wakeup.rs`), so they cost no
//! connection of their own.
//!
//! A claim whose reply never arrives (a response timeout, a `receive` future dropped while
//! its claim was under way) has still taken its messages in Redis. The consumer remembers
//! that claim's token base and repeats the claim with it on the next `receive`: Redis hands
//! back what that claim took, leases renewed, instead of leaving the messages stranded for a
//! lease and charging each an attempt nobody made.
//!
//! A claim may also take what comes due within the client's look-ahead
//! ([`Config::look_ahead`](crate::Config::look_ahead)); the consumer holds those
//! (`taken_ahead.rs`) and hands each over at its due time, so that spaced claims, and one
//! claim for several messages due close together, are still on time.
//!
//! Timers are precise to well under a millisecond: tokio's timer has 1 ms granularity, so the
//! last stretch of a wait is slept on a blocking-pool thread (`claim_timing.rs`).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::consume::ack_carry::AckCarry;
use crate::consume::choice::{Order, Picker};
use crate::consume::claim_news::{ClaimNews, Quiet};
use crate::consume::claim_timing::{sleep_precisely, Lead};
use crate::consume::partition_lane::{PartitionLane, RECHECK_AFTER};
use crate::consume::receipt_acks::{self, CarriedAck, ReceiptAcks};
use crate::consume::taken_ahead::TakenAhead;
use crate::handles::queue_core::QueueCore;
use crate::handles::settle;
use crate::telemetry::spans::{self, OpSpan};
use crate::values::delivery::Delivery;
use crate::values::error::{InvalidInput, Result};
use crate::values::message::DeadLettered;
use crate::values::names::QueueName;
use crate::values::options::{check_count, ReceiveOptions};
use crate::values::receipt::{Held, Receipt};

/// Receives messages from one queue, or from a [`QueueSet`](crate::QueueSet) (waiting on all its queues at
/// once). One consumer serves one task at a time (`receive` takes `&mut self`); make one per
/// concurrent receiver.
pub struct Consumer {
    lanes: Vec<PartitionLane>,
    picker: Picker,
    /// How far ahead of a due time to send the claim.
    lead: Lead,
    /// What its claims made dead letters, until taken.
    dead_lettered: Vec<DeadLettered>,
    /// A worker's acks, which its claims carry (`ack_carry.rs`).
    carry: Option<Arc<AckCarry>>,
    /// The receipts this receive acks on its way ([`Self::ack_then_receive_until`]).
    receipts: Option<ReceiptAcks>,
    /// What claims took ahead of its due time, until then.
    ahead: TakenAhead<Delivery>,
}

impl Consumer {
    /// A consumer of `queues` (with their weights), chosen among by `order`; `push` for
    /// push delivery ([`QueueSet::pushing`](crate::QueueSet::pushing)); `remember_claims`
    /// for one that receives more than once (a claim whose reply was lost is then repeated
    /// by the next receive).
    pub(crate) async fn new(
        queues: Vec<(Arc<QueueCore>, u32)>,
        order: Order,
        push: bool,
        remember_claims: bool,
    ) -> Result<Self> {
        let mut lanes = Vec::with_capacity(queues.len());
        let mut shape = Vec::with_capacity(queues.len());
        let name = format!("{:016x}", rand::random::<u64>());
        for (group, (queue, _)) in queues.iter().enumerate() {
            // A consumer that lives on records the layout, so that the queue cannot be
            // created later with partitions it would not watch. One made for a single
            // receive (an HTTP long-poll) records nothing: a receive is a read, and a queue
            // name a client invents must not leave keys behind (its next receive reads the
            // layout afresh).
            let layout = match remember_claims {
                true => queue.watched_layout().await?,
                false => queue.known_layout().await?,
            };
            for (partition, keys) in layout.parts().iter().enumerate() {
                let subscription = queue.subscription(keys).await?;
                lanes.push(PartitionLane {
                    partition,
                    claim_record: keys.claim_record(&name),
                    news: ClaimNews::of(&subscription),
                    subscription,
                    keys: keys.clone(),
                    group,
                    queue: queue.clone(),
                    seen: 0,
                    unanswered: None,
                    quiet: Quiet::Unknown,
                    news_seen: 0,
                    quiet_since: Instant::now(),
                    push,
                    remember_claims,
                });
                shape.push((group, layout.count()));
            }
        }
        let weights: Vec<u32> = queues.iter().map(|(_, w)| *w).collect();
        Ok(Consumer {
            picker: Picker::new(order, &weights, &shape),
            lanes,
            lead: Lead::default(),
            dead_lettered: Vec::new(),
            carry: None,
            receipts: None,
            ahead: TakenAhead::default(),
        })
    }

    /// Makes every claim carry the acks `acks` holds for its partition (a worker's).
    pub(crate) fn carry_acks(&mut self, acks: Arc<AckCarry>) {
        self.carry = Some(acks);
    }

    /// The names of the queues this consumer receives from, in the order of its set. A
    /// delivery names its queue in [`Delivery::queue`]: ack, nack and extend it there.
    pub fn queue_names(&self) -> impl Iterator<Item = &QueueName> {
        let mut last = None;
        self.lanes.iter().filter_map(move |l| {
            let first_of_queue = last != Some(l.group);
            last = Some(l.group);
            first_of_queue.then_some(l.queue.name())
        })
    }

    /// The messages this consumer's claims made dead letters since the last call: expired
    /// leases on their last attempt, records it could not read. A claim by another consumer
    /// reports its own, so each death is reported once, by the consumer that caused it
    /// (for alerting; the dead letters themselves are in
    /// [`Queue::dead_letters`](crate::Queue::dead_letters)).
    pub fn take_dead_lettered(&mut self) -> Vec<DeadLettered> {
        std::mem::take(&mut self.dead_lettered)
    }

    /// Hands back, unprocessed and without counting an attempt, what this consumer's claims
    /// took ahead of its due time ([`Config::look_ahead`](crate::Config::look_ahead)) and no
    /// `receive` handed over yet: each is pending again, for its due time. Returns how many
    /// were released. Dropping the consumer does the same in the background.
    pub async fn release_taken_ahead(&mut self) -> Result<usize> {
        let left = self.ahead.take_all();
        release_all(self.by_queue(left)).await
    }

    /// `deliveries` (with the position of their queue in the set) by their queue.
    fn by_queue(&self, deliveries: Vec<(usize, Delivery)>) -> Vec<(Arc<QueueCore>, Vec<Delivery>)> {
        let mut out: Vec<(usize, Arc<QueueCore>, Vec<Delivery>)> = Vec::new();
        for (position, d) in deliveries {
            match out.iter_mut().find(|(p, _, _)| *p == position) {
                Some((_, _, list)) => list.push(d),
                None => {
                    let Some(lane) = self.lanes.iter().find(|l| l.group == position) else {
                        continue;
                    };
                    out.push((position, lane.queue.clone(), vec![d]));
                }
            }
        }
        out.into_iter().map(|(_, q, list)| (q, list)).collect()
    }

    /// Takes up to `max` due messages under a lease, waiting up to `wait` for one to come due.
    /// Also reclaims messages whose lease expired (counting the attempt). Returns an empty
    /// list when nothing came due in time. A consumer of a set claims from its queues in the
    /// set's order; each delivery names its queue. What a claim took ahead of its due time
    /// ([`Config::look_ahead`](crate::Config::look_ahead)) is returned once due, even if
    /// that is after `wait` (by at most the look-ahead).
    ///
    /// Cancel safety: a `receive` dropped while its claim is under way, or failed because
    /// the reply timed out, loses nothing: the next `receive` on this consumer returns what
    /// that claim took (up to its `max`), before claiming anything new. A consumer dropped
    /// in that state leaves its messages to come back when their lease expires.
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
        Ok(self
            .receive_from_lanes(options, stop)
            .await?
            .into_iter()
            .map(|(_, d)| d)
            .collect())
    }

    /// Like [`receive_until`](Self::receive_until), and first acks `acks`: receipts of
    /// deliveries of this consumer's queue (a consumer of one queue), such as an HTTP client
    /// sends with its next receive for what it finished. Those of a partition the receive
    /// claims from go with that claim, in the same call to Redis. The rest wait up to 20 ms
    /// for one (the claim that takes the next message, if it comes due by then), then are
    /// acked on their own, as is all that is left when the receive ends: none waits for the
    /// receive's wait. Returns per receipt, in order, whether it was acked (`false`: its
    /// lease was lost, or it was acked before), and the deliveries.
    ///
    /// An error may come after some acks were made: acking those again answers `false`.
    pub async fn ack_then_receive_until(
        &mut self,
        acks: &[Receipt],
        options: &ReceiveOptions,
        stop: impl Future<Output = ()>,
    ) -> Result<(Vec<bool>, Vec<Delivery>)> {
        if acks.is_empty() {
            return Ok((Vec::new(), self.receive_until(options, stop).await?));
        }
        check_count("a batch of acks", acks.len())?;
        let Some(lane) = self.lanes.first() else {
            return Err(InvalidInput::Option("a consumer of no queue".into()).into());
        };
        if self.lanes.iter().any(|l| l.group != lane.group) {
            return Err(InvalidInput::Option(
                "acks go with a receive from one queue: receipts do not name their queue".into(),
            )
            .into());
        }
        let layout = lane.queue.known_layout().await?;
        let flush_by = Instant::now() + RECEIPT_LINGER;
        self.receipts = Some(ReceiptAcks::new(acks, flush_by, |r| layout.for_seq(r.seq)));
        let received = self.receive_until(options, stop).await;
        // What no claim carried is acked now. A failure here leaves those acks `false`; the
        // deliveries are returned all the same (nothing claimed goes unreturned).
        if let Err(e) = self.ack_leftover_receipts(None).await {
            tracing::warn!(error = %e, "acks given with a receive failed");
        }
        let acked = self.receipts.take().map(ReceiptAcks::results);
        Ok((acked.unwrap_or_default(), received?))
    }

    /// [`receive_until`](Self::receive_until), each delivery with the position of its queue
    /// in the set.
    pub(crate) async fn receive_from_lanes(
        &mut self,
        options: &ReceiveOptions,
        stop: impl Future<Output = ()>,
    ) -> Result<Vec<(usize, Delivery)>> {
        options.validate()?;
        tokio::pin!(stop);
        // None: no end (a wait too long to represent is a wait without end).
        let deadline = Instant::now().checked_add(options.wait);
        // Rounds claim where a wake-up or a due time says to. A call that does not wait
        // claims everywhere first: a send just before it may not have been heard yet (one
        // that waits hears it while waiting).
        let mut everywhere = options.wait.is_zero();
        let mut first = true;
        loop {
            let now = Instant::now();
            let due = self.ahead.take_due(now, options.max);
            if !due.is_empty() {
                return Ok(due);
            }
            // Past the wait, what this consumer took ahead is still handed over when it comes
            // due (within the look-ahead): nothing else is claimed or waited for.
            if !first && deadline.is_some_and(|d| now >= d) {
                let Some(at) = self.ahead.next_due() else {
                    return Ok(Vec::new());
                };
                tokio::select! {
                    () = sleep_precisely(at.saturating_duration_since(now)) => continue,
                    () = &mut stop => return Ok(Vec::new()),
                }
            }
            first = false;
            let taken = self.claim_round(options, everywhere).await?;
            everywhere = false;
            if !taken.is_empty() {
                return Ok(taken);
            }
            // Receipts to ack that no claim carried wait their linger for one. (Acked only
            // when nothing was claimed: a failure then loses no delivery.)
            self.ack_leftover_receipts(Some(Instant::now())).await?;
            let now = Instant::now();
            let mut sleep = match deadline {
                Some(deadline) if now >= deadline && self.ahead.is_empty() => return Ok(Vec::new()),
                Some(deadline) => Some(deadline.saturating_duration_since(now)),
                None => None,
            };
            if let Some(by) = self.receipts.as_ref().and_then(ReceiptAcks::next_flush) {
                let by = by.saturating_duration_since(now);
                sleep = sooner(sleep, by);
            }
            let lead = self.lead.get();
            for next in self.lanes.iter().filter_map(|l| l.next_claim_in(now, lead)) {
                sleep = sooner(sleep, next);
            }
            // A message taken ahead is handed over at its due time.
            if let Some(at) = self.ahead.next_due() {
                let by = at.saturating_duration_since(now);
                sleep = sooner(sleep, by);
            }
            if sleep.is_some_and(|s| s.is_zero()) {
                continue;
            }
            let mut woken = Vec::with_capacity(self.lanes.len());
            for lane in &mut self.lanes {
                // One woken already is waiting out the spacing (the timer above).
                if lane.woken() && !lane.subscription.is_lost() {
                    continue;
                }
                let subscription = lane.subscribed().await?;
                let seen = lane.seen;
                woken.push(Box::pin(
                    async move { subscription.woken_since(seen).await },
                ));
            }
            let any_woken = std::future::poll_fn(|cx| {
                for w in &mut woken {
                    if w.as_mut().poll(cx).is_ready() {
                        return std::task::Poll::Ready(());
                    }
                }
                std::task::Poll::Pending
            });
            let timer = async {
                match sleep {
                    Some(sleep) => sleep_precisely(sleep).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = any_woken => {}
                () = timer => {}
                () = &mut stop => return Ok(Vec::new()),
            }
        }
    }

    /// Claims up to `options.max` from the queues that may have something due (or from all,
    /// `everywhere`), in the set's order, until `max` are taken. A failed claim after others took messages returns those: nothing
    /// claimed goes unreturned.
    async fn claim_round(
        &mut self,
        options: &ReceiveOptions,
        everywhere: bool,
    ) -> Result<Vec<(usize, Delivery)>> {
        let now = Instant::now();
        let lead = self.lead.get();
        let eligible: Vec<bool> = self
            .lanes
            .iter()
            .map(|l| everywhere || l.owes_claim(now, lead))
            .collect();
        let mut taken = Vec::new();
        for i in self.picker.order(&eligible) {
            // What was taken ahead counts against `max` as well.
            let wanted = options.max.saturating_sub(taken.len() + self.ahead.len());
            if wanted == 0 {
                break;
            }
            let lane_options = ReceiveOptions {
                max: wanted,
                ..*options
            };
            // When to claim is when_to_claim.rs's to say.
            let news = self.lanes[i].news.clone();
            let _turn = match !everywhere && self.lanes[i].takes_turn() {
                true => Some(news.turn().await),
                false => None,
            };
            if !everywhere && !self.lanes[i].still_owed(Instant::now(), lead) {
                continue;
            }
            let sent = Instant::now();
            news.sending(sent);
            let started = spans::on().then(SystemTime::now);
            let acks = self.carried_acks(i);
            let ack_span = (!acks.is_empty()).then(|| {
                let traceparents = acks.iter().map(Held::traceparent);
                OpSpan::settle("ack", self.lanes[i].queue.name().as_str(), traceparents)
            });
            let claim = self.lanes[i].claim(&lane_options, &acks).await;
            if let Some(span) = ack_span {
                span.end(&claim);
            }
            let claim = match claim {
                Ok(claim) => claim,
                Err(e) => {
                    self.put_back(i, acks);
                    if taken.is_empty() {
                        return Err(e);
                    }
                    tracing::warn!(queue = %self.lanes[i].queue.name(), error = %e, "claim failed; returning what the other partitions gave");
                    return Ok(taken);
                }
            };
            for (ack, acked) in acks.iter().zip(&claim.acked) {
                match ack {
                    CarriedAck::Delivery(d) if !*acked => {
                        tracing::warn!(queue = %d.queue, id = %d.id, "could not ack delivery: its lease was lost; it will be delivered again");
                    }
                    CarriedAck::Receipt(position, _) => {
                        if let Some(receipts) = &mut self.receipts {
                            receipts.record(*position, *acked);
                        }
                    }
                    CarriedAck::Delivery(_) => {}
                }
            }
            let replied = Instant::now();
            self.lead.observe(replied - sent);
            self.dead_lettered.extend(claim.dead_lettered);
            let lane = &mut self.lanes[i];
            // A claim that took messages says when to claim again too (0: at once).
            lane.quiet_since = replied;
            lane.quiet = match claim.next_event {
                Some(next) if next.is_zero() => Quiet::Now,
                Some(next) => Quiet::Until(replied + next.min(RECHECK_AFTER)),
                None => Quiet::Idle,
            };
            lane.news_seen = news.report(lane.seen, lane.push, lane.quiet);
            if let Some(started) = started.filter(|_| !claim.deliveries.is_empty()) {
                spans::record_receive(lane.queue.name().as_str(), started, &claim.deliveries);
            }
            let group = lane.group;
            for (d, due_in) in claim.deliveries.into_iter().zip(claim.due_in) {
                match due_in.is_zero() {
                    true => taken.push((group, d)),
                    false => self.ahead.hold(replied, due_in, group, d),
                }
            }
        }
        Ok(taken)
    }

    /// The acks lane `i`'s next claim carries: its worker's, and the receipts of its
    /// partition this receive acks (a consumer with receipts has one queue).
    fn carried_acks(&mut self, i: usize) -> Vec<CarriedAck> {
        let lane = &self.lanes[i];
        let mut acks: Vec<CarriedAck> = self
            .carry
            .as_ref()
            .map(|c| c.take_for(lane.queue.name(), &lane.keys))
            .unwrap_or_default()
            .into_iter()
            .map(CarriedAck::Delivery)
            .collect();
        if let Some(receipts) = &mut self.receipts {
            acks.extend(receipts.take_for(lane.partition));
        }
        acks
    }

    /// The acks of lane `i`'s claim that failed: each waits again where it came from.
    fn put_back(&mut self, i: usize, acks: Vec<CarriedAck>) {
        let (deliveries, receipts) = receipt_acks::split(acks);
        if let Some(carry) = &self.carry {
            carry.put_back(deliveries, &self.lanes[i].keys);
        }
        if let Some(waiting) = &mut self.receipts {
            waiting.put_back(self.lanes[i].partition, receipts);
        }
    }

    /// Acks on their own the receipts no claim of this receive carried: all of them, or
    /// with `now`, only if they waited their linger by then.
    async fn ack_leftover_receipts(&mut self, now: Option<Instant>) -> Result<()> {
        let Some(receipts) = &mut self.receipts else {
            return Ok(());
        };
        if let (Some(now), Some(by)) = (now, receipts.next_flush()) {
            if now < by {
                return Ok(());
            }
        }
        let rest = receipts.take_rest();
        if rest.is_empty() {
            return Ok(());
        }
        let Some(lane) = self.lanes.first() else {
            return Ok(());
        };
        let held: Vec<Receipt> = rest.iter().map(|(_, r)| r.clone()).collect();
        let acked = settle::ack(&lane.queue, &held).await?;
        for ((position, _), acked) in rest.iter().zip(acked) {
            receipts.record(*position, acked);
        }
        Ok(())
    }
}

impl Drop for Consumer {
    /// Releases in the background what was taken ahead and not handed over: otherwise it
    /// would come back only when its lease ends, late and with an attempt counted.
    fn drop(&mut self) {
        if self.ahead.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let left = self.ahead.take_all();
        let queues = self.by_queue(left);
        runtime.spawn(async move {
            if let Err(e) = release_all(queues).await {
                tracing::warn!(error = %e, "releasing what a dropped consumer took ahead failed; it returns after its lease");
            }
        });
    }
}

/// The wait `sleep` (`None`: without end) cut to `by` if that is sooner.
fn sooner(sleep: Option<Duration>, by: Duration) -> Option<Duration> {
    Some(sleep.map_or(by, |s| s.min(by)))
}

/// Releases `queues`' deliveries (each list of one queue); returns how many were released.
async fn release_all(queues: Vec<(Arc<QueueCore>, Vec<Delivery>)>) -> Result<usize> {
    let mut released = 0;
    for (queue, held) in queues {
        let outcomes = settle::release(&queue, &held).await?;
        released += outcomes.into_iter().filter(|r| *r).count();
    }
    Ok(released)
}

/// The longest receipts given to a receive wait for a claim to go with: the one that takes
/// the next message, for a client that acks as it goes on (as a worker's acks wait,
/// `WorkerBuilder::ack_linger`).
const RECEIPT_LINGER: Duration = Duration::from_millis(20);
