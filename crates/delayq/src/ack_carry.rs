//! Acks that ride on the next claim. A worker's handler that finished leaves its ack here
//! (the worker's settler, `worker/settle.rs`), and the worker's consumer sends it with its next
//! claim on the same partition: `claim.lua` acks first, then claims, in one call. For a worker
//! that goes on, a message then costs Redis two calls (its send and the claim that takes it)
//! instead of three.
//!
//! An ack waits here no longer than the worker's *linger* (and never near its lease's end):
//! what no claim took by then, the settler acks on its own, as it does everything on
//! shutdown. A process that dies meanwhile loses the ack, not the message: it is delivered
//! again after its lease, as it would be had the process died just before acking. Acks the
//! claim could not carry (the call failed) come back here, due at once.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::delivery::Delivery;
use crate::keys::Keys;
use crate::names::QueueName;
use crate::options::MAX_BATCH;

/// The acks a worker's handlers left, shared by its settlers (one per queue) and its
/// consumer.
#[derive(Default)]
pub(crate) struct AckCarry {
    held: Mutex<Vec<Carried>>,
    /// One per queue, told when an ack of that queue came back due at once.
    returned: Mutex<Vec<(QueueName, Arc<Notify>)>>,
}

/// One ack waiting for a claim.
struct Carried {
    delivery: Delivery,
    /// The partition that holds the message (its claims may carry the ack).
    partition: Arc<Keys>,
    /// When the settler acks it, if no claim took it first.
    flush_by: Instant,
}

impl AckCarry {
    fn held(&self) -> MutexGuard<'_, Vec<Carried>> {
        // A poisoned lock only means a panic elsewhere while holding it; the list is still
        // consistent (every operation on it is a push, a drain or a read).
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
    pub(crate) fn hold(&self, delivery: Delivery, partition: Arc<Keys>, flush_by: Instant) {
        self.held().push(Carried {
            delivery,
            partition,
            flush_by,
        });
    }

    /// The acks a claim on `partition` of `queue` carries: up to a batch.
    pub(crate) fn take_for(&self, queue: &QueueName, partition: &Keys) -> Vec<Delivery> {
        self.take(|c| c.delivery.queue == *queue && c.partition.pending() == partition.pending())
            .into_iter()
            .map(|c| c.delivery)
            .collect()
    }

    /// Acks of `queue` due to be flushed by `now` (all of them with `all`): up to a batch.
    pub(crate) fn take_due(&self, queue: &QueueName, now: Instant, all: bool) -> Vec<Delivery> {
        self.take(|c| c.delivery.queue == *queue && (all || c.flush_by <= now))
            .into_iter()
            .map(|c| c.delivery)
            .collect()
    }

    /// When the next ack of `queue` is due to be flushed.
    pub(crate) fn next_flush(&self, queue: &QueueName) -> Option<Instant> {
        self.held()
            .iter()
            .filter(|c| c.delivery.queue == *queue)
            .map(|c| c.flush_by)
            .min()
    }

    /// Acks of `partition` that a claim took but could not deliver (its call failed): due
    /// at once.
    pub(crate) fn put_back(&self, deliveries: Vec<Delivery>, partition: &Arc<Keys>) {
        let Some(queue) = deliveries.first().map(|d| d.queue.clone()) else {
            return;
        };
        let flush_by = Instant::now();
        self.held()
            .extend(deliveries.into_iter().map(|delivery| Carried {
                delivery,
                partition: partition.clone(),
                flush_by,
            }));
        // notify_one keeps the news for a settler that is not waiting yet.
        self.returns_of(&queue).notify_one();
    }

    fn take(&self, wanted: impl Fn(&Carried) -> bool) -> Vec<Carried> {
        let mut held = self.held();
        let mut taken = Vec::new();
        let mut i = 0;
        while i < held.len() && taken.len() < MAX_BATCH {
            if wanted(&held[i]) {
                taken.push(held.swap_remove(i));
            } else {
                i += 1;
            }
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use redis_fixture::RedisServer;
    use tokio::time::Instant;

    use super::AckCarry;
    use crate::options::ReceiveOptions;
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
            acks.hold(d.clone(), partition, later);
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
            acks.hold(d, partition, later);
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
