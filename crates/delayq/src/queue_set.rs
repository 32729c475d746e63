//! Several queues served together: which queues, in what order (`choice.rs` has the rule),
//! by what weights; and the consumers of such a set.

use crate::consume::choice::Order;
use crate::consume::consumer::Consumer;
use crate::queue::Queue;
use crate::values::error::{InvalidInput, Result};

/// Most queues in one set.
pub const MAX_QUEUES_PER_SET: usize = 64;
/// Highest weight of a queue in a weighted set.
pub const MAX_QUEUE_WEIGHT: u32 = 1000;

/// Queues that one consumer or worker serves together (see the module docs).
#[derive(Clone)]
pub struct QueueSet {
    pub(crate) queues: Vec<(Queue, u32)>,
    pub(crate) order: Order,
    /// Its consumers claim for push delivery ([`QueueSet::pushing`]).
    pub(crate) push: bool,
}

impl QueueSet {
    /// `queues` in strict priority order, the first highest.
    pub fn strict(queues: impl IntoIterator<Item = Queue>) -> Result<Self> {
        Self::new(queues.into_iter().map(|q| (q, 1)).collect(), Order::Strict)
    }

    /// `queues` served in proportion to their weights (1 to [`MAX_QUEUE_WEIGHT`]).
    pub fn weighted(queues: impl IntoIterator<Item = (Queue, u32)>) -> Result<Self> {
        Self::new(queues.into_iter().collect(), Order::Weighted)
    }

    /// The same set, for push delivery: its consumers (and workers) take messages only from
    /// queues set to [`Setting::PushDelivery`](crate::Setting::PushDelivery), and ordinary
    /// consumers no longer get those. For the runtime that delivers by push (`delayq serve`),
    /// not for applications.
    pub fn pushing(mut self) -> Self {
        self.push = true;
        self
    }

    /// One queue on its own.
    pub fn single(queue: Queue) -> Self {
        QueueSet {
            queues: vec![(queue, 1)],
            order: Order::Strict,
            push: false,
        }
    }

    fn new(queues: Vec<(Queue, u32)>, order: Order) -> Result<Self> {
        let bad = |reason: String| Err(InvalidInput::Option(reason).into());
        if queues.is_empty() || queues.len() > MAX_QUEUES_PER_SET {
            return bad(format!(
                "a queue set holds 1 to {MAX_QUEUES_PER_SET} queues, not {}",
                queues.len()
            ));
        }
        for (i, (queue, weight)) in queues.iter().enumerate() {
            if !(1..=MAX_QUEUE_WEIGHT).contains(weight) {
                return bad(format!(
                    "queue {}: a weight is 1 to {MAX_QUEUE_WEIGHT}, not {weight}",
                    queue.name()
                ));
            }
            if queues[..i].iter().any(|(q, _)| q.name() == queue.name()) {
                return bad(format!("queue {} is in the set twice", queue.name()));
            }
        }
        Ok(QueueSet {
            queues,
            order,
            push: false,
        })
    }

    /// The queues, in the order given, with their weights (1 each in a strict set).
    pub fn queues(&self) -> impl Iterator<Item = (&Queue, u32)> {
        self.queues.iter().map(|(q, w)| (q, *w))
    }

    /// How the set chooses among its queues.
    pub fn order(&self) -> Order {
        self.order
    }

    /// A consumer of every queue in the set: each receive waits on all of them at once.
    pub async fn consumer(&self) -> Result<Consumer> {
        self.consumer_remembering(true).await
    }

    /// A consumer for a single receive (an HTTP request's, say). A consumer repeats a claim
    /// whose reply was lost on its next receive, from a record of each claim kept in Redis
    /// for the lease; this one has no next receive, so its claims keep no record. Messages
    /// of a claim whose reply it lost wait out their lease, as with any consumer dropped.
    /// Nor does it take messages ahead of their due time
    /// ([`Config::look_ahead`](crate::Config::look_ahead)): it could not hold them past its
    /// receive.
    pub async fn consumer_for_one_receive(&self) -> Result<Consumer> {
        self.consumer_remembering(false).await
    }

    async fn consumer_remembering(&self, remember_claims: bool) -> Result<Consumer> {
        let queues = self
            .queues
            .iter()
            .map(|(q, w)| (q.core().clone(), *w))
            .collect();
        Consumer::new(queues, self.order, self.push, remember_claims).await
    }
}
