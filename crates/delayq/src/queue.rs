//! [`Queue`], the facade: one handle that hands out everything a queue offers. Each call
//! goes to the module that owns it (`send.rs`, `by_id.rs`, `settle.rs`, `control.rs`,
//! `stats.rs`, `browse.rs`, `history.rs`, `push_target.rs`, and the handles `consumer.rs`,
//! `dead_letters.rs`, `schedules.rs`), all built on the queue core (`queue_core.rs`).
//!
//! On a queue of one partition every call about messages is one script call (one round
//! trip), atomic on the Redis side. On a queue of several partitions (`partitions.rs`) a
//! message's partition follows from its id, so a call about one message is still one
//! script call; batches are split by partition, one call each, atomic per partition; counts
//! add up over the partitions.

use std::sync::Arc;
use std::time::Duration;

use crate::consume::choice::Order;
use crate::consume::consumer::Consumer;
use crate::handles::browse::{self, Cursor, Page};
use crate::handles::by_id;
use crate::handles::control;
use crate::handles::dead_letters::DeadLetters;
use crate::handles::event_lookback::Timeline;
use crate::handles::events::EventReader;
use crate::handles::groups::Groups;
use crate::handles::history::{self, Minute};
use crate::handles::push_target;
use crate::handles::queue_core::QueueCore;
use crate::handles::schedules::Schedules;
use crate::handles::send;
use crate::handles::settle;
use crate::handles::stats;
use crate::handles::upgrade::{self, QueueFormat};
use crate::values::delivery::Delivery;
use crate::values::error::{Error, Result};
use crate::values::event::{Event, EventFilter, EventStart};
use crate::values::message::{Amend, CancelOutcome, MessageInfo, NackOutcome, Next, RateLimit};
use crate::values::message::{Sent, Stats};
use crate::values::names::QueueName;
use crate::values::options::{Message, Schedule, SendOptions};
use crate::values::receipt::Receipt;
use crate::values::settings::Setting;
use crate::values::state::State;

/// A handle on one queue. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Queue {
    core: Arc<QueueCore>,
}

impl Queue {
    pub(crate) fn new(core: QueueCore) -> Self {
        Queue {
            core: Arc::new(core),
        }
    }

    /// What every handle on this queue stands on.
    pub(crate) fn core(&self) -> &Arc<QueueCore> {
        &self.core
    }

    /// The queue's name.
    pub fn name(&self) -> &QueueName {
        self.core.name()
    }

    /// How many partitions the queue has (fixed when it is first used: see
    /// [`DelayQ::create_queue`](crate::DelayQ::create_queue)); 1 for a queue not used yet.
    pub async fn partitions(&self) -> Result<u16> {
        Ok(self.core.known_layout().await?.count() as u16)
    }

    // Producing.

    /// Sends one message.
    pub async fn send(&self, payload: impl AsRef<[u8]>, options: &SendOptions) -> Result<Sent> {
        send::send(&self.core, payload.as_ref(), options).await
    }

    /// Sends up to [`MAX_BATCH`](crate::MAX_BATCH) messages at once. If any message is
    /// invalid, nothing is written. On a queue of one partition the batch is atomic: it
    /// becomes visible whole. On a queue of several it is split by partition, one call each
    /// (run together), each atomic; if one fails the others may have landed, so retry a
    /// failed batch with caller ids, whose duplicates are recognised. One round trip, or two
    /// for a batch without caller ids (which is then several times cheaper for Redis).
    /// Results are in input order.
    pub async fn send_batch(&self, messages: &[Message]) -> Result<Vec<Sent>> {
        send::send_batch(&self.core, messages).await
    }

    /// Removes a delayed or ready message. An in-flight or dead message is left alone and
    /// reported as such.
    pub async fn cancel(&self, id: &str) -> Result<CancelOutcome> {
        by_id::cancel(&self.core, id).await
    }

    /// Moves a delayed or ready message to a new due time, keeping its id. Returns the new due
    /// time (ms since the Unix epoch, server clock). An in-flight or dead message gives
    /// [`Error::WrongState`](crate::Error::WrongState); an unknown id
    /// [`Error::NotFound`](crate::Error::NotFound). A due time further out than the queue's
    /// max delay, or at or after the message's deadline, is refused as a send's would be
    /// (`Error::Invalid(InvalidInput::Schedule)`), and the message stays where it was.
    pub async fn reschedule(&self, id: &str, schedule: Schedule) -> Result<u64> {
        by_id::reschedule(&self.core, id, schedule).await
    }

    /// What is known of a message, or `None` if there is no such message.
    pub async fn get(&self, id: &str) -> Result<Option<MessageInfo>> {
        by_id::get(&self.core, id).await
    }

    // Consuming and settling.

    /// A consumer of this queue (of all its partitions). Consumers are cheap: those made
    /// from one [`DelayQ`](crate::DelayQ) share one connection for wake-ups.
    pub async fn consumer(&self) -> Result<Consumer> {
        Consumer::new(vec![(self.core.clone(), 1)], Order::Strict, false, true).await
    }

    /// Completes a delivery: the message is gone for good. A holder whose lease has passed
    /// gets [`Error::LeaseLost`](crate::Error::LeaseLost) and changes nothing.
    pub async fn ack(&self, delivery: &Delivery) -> Result<()> {
        let acked = settle::ack(&self.core, std::slice::from_ref(delivery)).await?;
        settle::lease_result(delivery, acked.first().copied().unwrap_or(false))
    }

    /// Completes many deliveries in one round trip; `true` per delivery that was acked,
    /// `false` where its lease was lost.
    pub async fn ack_many(&self, deliveries: &[Delivery]) -> Result<Vec<bool>> {
        settle::ack(&self.core, deliveries).await
    }

    /// [`ack_many`](Self::ack_many) by receipts.
    pub async fn ack_receipts(&self, receipts: &[Receipt]) -> Result<Vec<bool>> {
        settle::ack(&self.core, receipts).await
    }

    /// Reports a failed delivery. The next attempt is scheduled after `retry_after`, or by
    /// the message's backoff policy when `None`; after the last attempt the message becomes
    /// a dead letter with `error` as its last error.
    pub async fn nack(
        &self,
        delivery: &Delivery,
        error: &str,
        retry_after: Option<Duration>,
    ) -> Result<NackOutcome> {
        let next = retry_after.map_or(Next::Backoff, Next::After);
        settle::fail(&self.core, delivery, error, next, &Amend::default()).await
    }

    /// [`nack`](Self::nack) by receipt.
    pub async fn nack_receipt(
        &self,
        receipt: &Receipt,
        error: &str,
        retry_after: Option<Duration>,
    ) -> Result<NackOutcome> {
        let next = retry_after.map_or(Next::Backoff, Next::After);
        settle::fail(&self.core, receipt, error, next, &Amend::default()).await
    }

    /// Reports a failed delivery and what should come next: another attempt by the backoff
    /// or after a given time (a dead letter after the last attempt either way), or a dead
    /// letter now.
    pub async fn fail(&self, delivery: &Delivery, error: &str, next: Next) -> Result<NackOutcome> {
        settle::fail(&self.core, delivery, error, next, &Amend::default()).await
    }

    /// [`fail`](Self::fail), changing the message for the attempts that follow (a new
    /// payload, more or fewer attempts) in the same atomic step.
    pub async fn fail_amended(
        &self,
        delivery: &Delivery,
        error: &str,
        next: Next,
        amend: &Amend,
    ) -> Result<NackOutcome> {
        settle::fail(&self.core, delivery, error, next, amend).await
    }

    /// [`fail_amended`](Self::fail_amended) by receipt.
    pub async fn fail_receipt(
        &self,
        receipt: &Receipt,
        error: &str,
        next: Next,
        amend: &Amend,
    ) -> Result<NackOutcome> {
        settle::fail(&self.core, receipt, error, next, amend).await
    }

    /// Hands deliveries back unprocessed: ready again at once, without counting the attempt
    /// (a worker shutting down uses this). `true` per delivery released, `false` where its
    /// lease was lost.
    pub async fn release(&self, deliveries: &[Delivery]) -> Result<Vec<bool>> {
        settle::release(&self.core, deliveries).await
    }

    /// [`release`](Self::release) by receipts.
    pub async fn release_receipts(&self, receipts: &[Receipt]) -> Result<Vec<bool>> {
        settle::release(&self.core, receipts).await
    }

    /// Extends a delivery's lease to `lease` from now; returns the new deadline (ms since the
    /// Unix epoch). A holder whose lease has passed gets
    /// [`Error::LeaseLost`](crate::Error::LeaseLost).
    pub async fn extend(&self, delivery: &mut Delivery, lease: Duration) -> Result<u64> {
        let deadlines = self
            .extend_many(std::slice::from_mut(delivery), lease)
            .await?;
        match deadlines.first() {
            Some(Some(deadline)) => Ok(*deadline),
            _ => Err(Error::LeaseLost {
                id: delivery.id.clone(),
            }),
        }
    }

    /// Extends many leases in one round trip and updates each delivery's deadline; `None`
    /// per delivery whose lease was lost.
    pub async fn extend_many(
        &self,
        deliveries: &mut [Delivery],
        lease: Duration,
    ) -> Result<Vec<Option<u64>>> {
        settle::extend_many(&self.core, deliveries, lease).await
    }

    /// [`extend_many`](Self::extend_many) by receipts: the new deadline (ms since the Unix
    /// epoch) per receipt, `None` where the lease was lost.
    pub async fn extend_receipts(
        &self,
        receipts: &[Receipt],
        lease: Duration,
    ) -> Result<Vec<Option<u64>>> {
        settle::extend(&self.core, receipts, lease).await
    }

    // Settings.

    /// Pauses the queue: no consumer (library, HTTP) is given a message until
    /// [`resume`](Self::resume), starting with its next claim. Sends are still accepted, and
    /// messages already in flight are settled as usual. The state lives in Redis, so it holds
    /// for every client and across restarts, and [`stats`](Self::stats) shows it. Pausing a
    /// paused queue does nothing. Like a send, it fixes the partition count of a queue not
    /// yet created (one). Each partition is paused by a call of its own; if one fails, pause
    /// again.
    pub async fn pause(&self) -> Result<()> {
        control::set_paused(&self.core, true).await
    }

    /// Resumes a paused queue: waiting consumers are woken and claim what is due at once.
    /// Resuming a queue that is not paused does nothing.
    pub async fn resume(&self) -> Result<()> {
        control::set_paused(&self.core, false).await
    }

    /// Changes the queue's settings ([`Setting`]), all of them or, if one is refused, none.
    /// Each partition takes them in one call; if one of those fails, configure again.
    pub async fn configure(&self, settings: &[Setting]) -> Result<()> {
        control::configure(&self.core, settings).await
    }

    /// [`configure`](Self::configure) with [`Setting::IdempotencyWindow`].
    pub async fn set_idempotency_window(&self, window: Duration) -> Result<()> {
        self.configure(&[Setting::IdempotencyWindow(window)]).await
    }

    /// [`configure`](Self::configure) with [`Setting::RateLimit`].
    pub async fn set_rate_limit(&self, limit: Option<RateLimit>) -> Result<()> {
        self.configure(&[Setting::RateLimit(limit)]).await
    }

    // Looking at the queue.

    /// Deletes the queue: its messages (with `force`; without it, a queue that holds any is
    /// refused with [`Error::NotEmpty`] and nothing of its messages is touched), settings,
    /// schedules, events, history and final records, in batches of a bounded size, and takes
    /// it out of [`DelayQ::queues`](crate::DelayQ::queues). Its data format stays recorded,
    /// so a process that used the queue before goes on writing what the data says; a send
    /// afterwards starts the queue again, with default settings. Stop its producers and
    /// consumers first: see [`Deleted::raced`](crate::Deleted::raced).
    pub async fn delete(&self, force: bool) -> Result<crate::handles::queue_delete::Deleted> {
        crate::handles::queue_delete::delete(&self.core, force).await
    }

    /// Counts per state and the lag of the oldest ready message: one atomic read per
    /// partition (all at once), added up.
    pub async fn stats(&self) -> Result<Stats> {
        stats::stats(&self.core).await
    }

    /// Seals what the queue stores (pending messages, dead letters, schedules) again with
    /// the newest key of [`Config::keys`](crate::Config::keys), online, in bounded steps of
    /// [`RESEAL_BATCH`](crate::RESEAL_BATCH) records: after a new key was added, so that the
    /// old one can go; after [`Setting::Encryption`](crate::Setting::Encryption) was turned
    /// on, so that what was stored in clear is sealed too. A message that moves meanwhile,
    /// and one in flight, is left for another run ([`Resealed`](crate::Resealed) counts
    /// them). Without keys: [`Error::NoKey`](crate::Error::NoKey).
    pub async fn rotate_keys(&self) -> Result<crate::handles::reseal::Resealed> {
        crate::handles::reseal::rotate(&self.core).await
    }

    /// A page of the messages in `state`, in order (delayed and ready by due time, in flight
    /// by lease deadline, dead by time of death): up to `limit` (1 to 1000) after `after`.
    /// A page is read per partition, so it is not one snapshot: a message that changes state
    /// meanwhile may be missed or seen twice.
    pub async fn list(&self, state: State, after: Option<&Cursor>, limit: usize) -> Result<Page> {
        browse::list(&self.core, state, after, limit).await
    }

    /// One step of a search of `state` for messages whose payload or id contains `needle`:
    /// looks at up to `budget` (1 to 1000) messages of each partition after `after`, and
    /// returns those that match. A whole search is steps until [`Page::next`] is `None`,
    /// so it can show progress ([`Page::scanned`]) and be stopped between steps.
    pub async fn search(
        &self,
        state: State,
        needle: &[u8],
        after: Option<&Cursor>,
        budget: usize,
    ) -> Result<Page> {
        browse::search(&self.core, state, needle, after, budget).await
    }

    /// The last `minutes` (1 to [`MAX_HISTORY_MINUTES`](crate::MAX_HISTORY_MINUTES))
    /// minutes of the queue's history, by the Redis server's clock, oldest first; the last is
    /// the current minute so far. All partitions added up. Minutes with nothing in them are
    /// there, with zeros.
    pub async fn history(&self, minutes: usize) -> Result<Vec<Minute>> {
        history::history(&self.core, minutes).await
    }

    /// Adds push deliveries' answers by class (1xx to 5xx, then no answer) to the current
    /// minute of the queue's history: a pushing server's tally of the last second or so.
    pub async fn add_push_responses(&self, counts: &[u64; 6]) -> Result<()> {
        history::add_push_responses(&self.core, counts).await
    }

    /// The data format of each of the queue's partitions ([`DATA_FORMAT`](crate::DATA_FORMAT)
    /// is the newest this delayq reads), and so the progress of an upgrade.
    pub async fn data_format(&self) -> Result<QueueFormat> {
        upgrade::read(&self.core).await
    }

    /// Upgrades the queue's data to [`DATA_FORMAT`](crate::DATA_FORMAT). Nothing is rewritten
    /// (each format reads its predecessor's records): each partition is stamped, one atomic
    /// step each, while deliveries go on; run it again after a crash to finish. Refused
    /// ([`Error::OlderProcesses`]) while a process that reads only older formats is running,
    /// or was less than a lease ago.
    pub async fn upgrade_format(&self) -> Result<QueueFormat> {
        upgrade::upgrade(&self.core).await
    }

    /// A reader of the queue's events from `start`, those that match `filter`: one per
    /// change of a message's state, recorded while the queue records them
    /// ([`Setting::Events`]). See [`EventReader`].
    pub async fn events(&self, start: EventStart, filter: EventFilter) -> Result<EventReader> {
        EventReader::open(self.core.clone(), start, filter).await
    }

    /// The queue's latest `max` events (1 to 1000), newest first: what just happened.
    pub async fn latest_events(&self, max: usize) -> Result<Vec<Event>> {
        crate::handles::event_lookback::latest(&self.core, max).await
    }

    /// The events of message `id` in the order they happened, among the latest
    /// [`TIMELINE_SCAN`](crate::TIMELINE_SCAN) of its partition.
    pub async fn timeline(&self, id: &str) -> Result<Timeline> {
        crate::handles::event_lookback::timeline(&self.core, id).await
    }

    /// The dead letters of this queue.
    pub fn dead_letters(&self) -> DeadLetters<'_> {
        DeadLetters::new(&self.core)
    }

    /// The groups of this queue ([`SendOptions::group`](crate::SendOptions::group)): list,
    /// look at one, pause, resume, or give one its own limit or weight.
    pub fn groups(&self) -> Groups<'_> {
        Groups::new(&self.core)
    }

    /// The recurring schedules of this queue.
    pub fn schedules(&self) -> Schedules<'_> {
        Schedules::new(&self.core)
    }

    // The push target (`push_target.rs`).

    /// The queue's push target, as it was stored.
    pub async fn push_target(&self) -> Result<Option<String>> {
        push_target::get(&self.core).await
    }

    /// Stores `target` as the queue's push target (replacing any) and turns push delivery on
    /// for every partition. The queue counts as used from here (its partition count is
    /// recorded, 1 unless it was created with more).
    pub async fn set_push_target(&self, target: &str) -> Result<()> {
        push_target::set(&self.core, target).await
    }

    /// Removes the queue's push target and turns push delivery off for every partition;
    /// `false` (and nothing written) if it had none.
    pub async fn remove_push_target(&self) -> Result<bool> {
        push_target::remove(&self.core).await
    }

    /// Makes every partition's push-delivery flag say whether the queue has a push target,
    /// and returns whether it has: the repair after a change that failed part-way (or a state
    /// an older version left). Cheap when nothing is off: one script call per partition,
    /// none of which writes.
    pub async fn sync_push_delivery(&self) -> Result<bool> {
        push_target::sync(&self.core).await
    }
}
