//! Acks that ride on the next claim. A worker's handler that finished leaves its ack here
//! (the worker's settler, `worker/settle.rs`), and the worker's consumer sends it with its next
//! claim on the same partition: `claim.lua` acks first, then claims, in one call. For a worker
//! that goes on, a message then costs Redis two calls (its send and the claim that takes it)
//! instead of three.
//!
//! An ack waits here no longer than the worker's *linger* (and never near its lease's end):
//! what no claim took by then, the settler acks on its own, as it does everything on
//! shutdown, and whenever more than a claim carries are waiting (a busy worker's batches).
//! A process that dies meanwhile loses the ack, not the message: it is delivered again
//! after its lease, as it would be had the process died just before acking. Acks the claim
//! could not carry (the call failed) come back here, due at once.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::store::keys::Keys;
use crate::values::delivery::Delivery;
use crate::values::names::QueueName;

/// Most acks one claim carries; a settler with more waiting acks them at once. Carrying
/// saves a call's fixed cost, which matters for small claims; a big batch of acks is
/// better sent beside the claims, so that Redis works on it while the worker starts the
/// handlers of the last claim (a worker of 1,000 handlers lost a third of its throughput
/// when its claims carried batches of up to 1,000 acks).
pub(crate) const CARRY_MOST: usize = 64;

/// The acks a worker's handlers left, shared by its settlers (one per queue) and its
/// consumer.
#[derive(Default)]
pub(crate) struct AckCarry {
    /// Per partition of each queue, its acks in the order they came: a claim takes the
    /// oldest, a settler flushes from the front.
    held: Mutex<Vec<Partition>>,
    /// One per queue, told when an ack of that queue came back due at once.
    returned: Mutex<Vec<(QueueName, Arc<Notify>)>>,
}

/// The acks waiting for a claim on one partition.
struct Partition {
    queue: QueueName,
    keys: Arc<Keys>,
    /// Each with when the settler acks it, if no claim took it first. Nearly in that
    /// order: one whose lease ends early may be due before those ahead of it, and is then
    /// flushed with them, still well within its lease.
    acks: VecDeque<(Delivery, Instant)>,
}

impl Partition {
    fn is(&self, queue: &QueueName, keys: &Keys) -> bool {
        self.queue == *queue && self.keys.pending() == keys.pending()
    }
}

impl AckCarry {
    fn held(&self) -> MutexGuard<'_, Vec<Partition>> {
        // A poisoned lock only means a panic elsewhere while holding it; the lists are
        // still consistent (every operation on them is a push or a pop).
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What tells `queue`'s settler that acks came back to be flushed at once.
    pub(crate) fn returns_of(&self, queue: &QueueName) -> Arc<Notify> {
        let mut returned = self.returned.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, notify)) = returned.iter().find(|(q, _)| q == queue) {
            return notify.clone();
        }
        let notify = Arc::new(Notify::new());
        returned.push((queue.clone(), notify.clone()));
        notify
    }

    /// Leaves the ack of `delivery`, held in `partition`, for a claim to carry until
    /// `flush_by`.
    pub(crate) fn hold(&self, delivery: Delivery, partition: &Arc<Keys>, flush_by: Instant) {
        let mut held = self.held();
        slot(&mut held, &delivery.queue, partition)
            .acks
            .push_back((delivery, flush_by));
    }

    /// How many acks of `queue` wait.
    pub(crate) fn waiting(&self, queue: &QueueName) -> usize {
        self.held()
            .iter()
            .filter(|p| p.queue == *queue)
            .map(|p| p.acks.len())
            .sum()
    }

    /// The acks a claim on `partition` of `queue` carries: the oldest, up to
    /// [`CARRY_MOST`].
    pub(crate) fn take_for(&self, queue: &QueueName, partition: &Keys) -> Vec<Delivery> {
        let mut held = self.held();
        let Some(p) = held.iter_mut().find(|p| p.is(queue, partition)) else {
            return Vec::new();
        };
        let n = p.acks.len().min(CARRY_MOST);
        p.acks.drain(..n).map(|(d, _)| d).collect()
    }

    /// Acks of `queue` due to be flushed by `now` (all of them with `all`), of every
    /// partition.
    pub(crate) fn take_due(&self, queue: &QueueName, now: Instant, all: bool) -> Vec<Delivery> {
        let mut due = Vec::new();
        for p in self.held().iter_mut().filter(|p| p.queue == *queue) {
            let n = p
                .acks
                .iter()
                .take_while(|(_, flush_by)| all || *flush_by <= now)
                .count();
            due.extend(p.acks.drain(..n).map(|(d, _)| d));
        }
        due
    }

    /// When the next ack of `queue` is due to be flushed.
    pub(crate) fn next_flush(&self, queue: &QueueName) -> Option<Instant> {
        self.held()
            .iter()
            .filter(|p| p.queue == *queue)
            .filter_map(|p| p.acks.front().map(|(_, flush_by)| *flush_by))
            .min()
    }

    /// Acks of `partition` that a claim took but could not deliver (its call failed): due
    /// at once.
    pub(crate) fn put_back(&self, deliveries: Vec<Delivery>, partition: &Arc<Keys>) {
        let Some(queue) = deliveries.first().map(|d| d.queue.clone()) else {
            return;
        };
        let flush_by = Instant::now();
        {
            let mut held = self.held();
            let acks = &mut slot(&mut held, &queue, partition).acks;
            // At the front, in their order: the oldest go first.
            for d in deliveries.into_iter().rev() {
                acks.push_front((d, flush_by));
            }
        }
        // notify_one keeps the news for a settler that is not waiting yet.
        self.returns_of(&queue).notify_one();
    }
}

/// The acks of `partition` of `queue`, made empty if it has none yet.
fn slot<'a>(
    held: &'a mut Vec<Partition>,
    queue: &QueueName,
    partition: &Arc<Keys>,
) -> &'a mut Partition {
    let i = match held.iter().position(|p| p.is(queue, partition)) {
        Some(i) => i,
        None => {
            held.push(Partition {
                queue: queue.clone(),
                keys: partition.clone(),
                acks: VecDeque::new(),
            });
            held.len() - 1
        }
    };
    &mut held[i]
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use redis_fixture::RedisServer;
    use tokio::time::Instant;

    use super::AckCarry;
    use crate::values::options::ReceiveOptions;
    use crate::{DelayQ, Delivery, Queue, SendOptions};

    #[tokio::test]
    async fn a_claim_acks_only_what_its_holder_still_holds() {
        let server = RedisServer::start();
        let dq = DelayQ::connect(&server.url()).await.expect("connect");
        let q = dq.queue("carry").expect("queue");
        for i in 0..3 {
            q.send(format!("m{i}").as_bytes(), &SendOptions::new())
                .await
                .expect("send");
        }
        let options = ReceiveOptions {
            max: 2,
            lease: Duration::from_secs(60),
            wait: Duration::ZERO,
        };
        let held = q
            .consumer()
            .await
            .expect("consumer")
            .receive(&options)
            .await
            .expect("receive");
        assert_eq!(held.len(), 2);
        let (live, mut stale) = (held[0].clone(), held[1].clone());
        // A holder whose message was handed out again holds another token.
        stale.token += 1;
        let layout = q.core().known_layout().await.expect("layout");
        let acks = Arc::new(AckCarry::default());
        let later = Instant::now() + Duration::from_secs(60);
        for d in [&live, &stale] {
            let partition = layout.part(layout.for_seq(d.seq)).clone();
            acks.hold(d.clone(), &partition, later);
        }
        let mut consumer = q.consumer().await.expect("consumer");
        consumer.carry_acks(acks.clone());
        let next = consumer.receive(&options).await.expect("receive");
        assert_eq!(next.len(), 1, "the third message is claimed");
        assert!(q.get(&live.id).await.expect("get").is_none(), "acked");
        assert!(
            q.get(&stale.id).await.expect("get").is_some(),
            "a stale token acks nothing"
        );
        assert!(
            acks.take_due(q.name(), later, true).is_empty(),
            "both were carried"
        );
    }

    async fn claim_one(q: &Queue) -> Delivery {
        let options = ReceiveOptions {
            max: 1,
            lease: Duration::from_secs(60),
            wait: Duration::ZERO,
        };
        let mut consumer = q.consumer().await.expect("consumer");
        let mut claimed = consumer.receive(&options).await.expect("receive");
        claimed.pop().expect("one message")
    }

    #[tokio::test]
    async fn acks_a_claim_could_not_carry_are_due_at_once() {
        let server = RedisServer::start();
        let dq = DelayQ::connect(&server.url()).await.expect("connect");
        let (a, b) = (dq.queue("a").expect("a"), dq.queue("b").expect("b"));
        for q in [&a, &b] {
            q.send(b"m".as_slice(), &SendOptions::new())
                .await
                .expect("send");
        }
        let acks = AckCarry::default();
        let later = Instant::now() + Duration::from_secs(60);
        let mut partition_a = None;
        for q in [&a, &b] {
            let d = claim_one(q).await;
            let layout = q.core().known_layout().await.expect("layout");
            let partition = layout.part(layout.for_seq(d.seq)).clone();
            if q.name() == a.name() {
                partition_a = Some(partition.clone());
            }
            acks.hold(d, &partition, later);
        }
        let partition_a = partition_a.expect("a's partition");
        assert!(acks.take_due(a.name(), Instant::now(), false).is_empty());
        let taken = acks.take_for(a.name(), &partition_a);
        assert_eq!(taken.len(), 1, "only a's");
        let returned = acks.returns_of(a.name());
        acks.put_back(taken, &partition_a);
        // The settler of a is told, even though it was not waiting yet.
        tokio::time::timeout(Duration::from_secs(5), returned.notified())
            .await
            .expect("told");
        assert_eq!(acks.take_due(a.name(), Instant::now(), false).len(), 1);
        assert_eq!(acks.next_flush(b.name()), Some(later));
    }
}
