//! The acks a claim carries: a worker's finished deliveries (`ack_carry.rs`), and the
//! receipts a receive was given to ack on its way ([`Consumer::ack_then_receive_until`],
//! how an HTTP client acks what it finished with its next receive).
//!
//! A receive's receipts of a partition it claims from ride on that claim, one script call
//! for both (`claim.lua` acks first). Those no claim takes wait a short linger for one (the
//! claim that takes the next message, when it comes due soon), and are then acked on their
//! own; so are all that are left when the receive ends. None waits for a long poll.
//!
//! [`Consumer::ack_then_receive_until`]: crate::Consumer::ack_then_receive_until

use tokio::time::Instant;

use crate::values::delivery::Delivery;
use crate::values::receipt::{Held, Receipt};

/// One ack a claim carries.
pub(crate) enum CarriedAck {
    /// A delivery whose handler finished (a worker's).
    Delivery(Delivery),
    /// A receipt given to the receive, with its position among them.
    Receipt(usize, Receipt),
}

impl CarriedAck {
    fn held(&self) -> &dyn Held {
        match self {
            CarriedAck::Delivery(d) => d,
            CarriedAck::Receipt(_, r) => r,
        }
    }
}

impl Held for CarriedAck {
    fn lease_member(&self) -> [u8; 12] {
        self.held().lease_member()
    }

    fn id(&self) -> &str {
        self.held().id()
    }

    fn explicit_id(&self) -> bool {
        self.held().explicit_id()
    }

    fn sealed(&self) -> bool {
        self.held().sealed()
    }

    fn traceparent(&self) -> Option<&str> {
        self.held().traceparent()
    }
}

/// `acks` split into the deliveries and the receipts (with their positions).
pub(crate) fn split(acks: Vec<CarriedAck>) -> (Vec<Delivery>, Vec<(usize, Receipt)>) {
    let mut deliveries = Vec::new();
    let mut receipts = Vec::new();
    for ack in acks {
        match ack {
            CarriedAck::Delivery(d) => deliveries.push(d),
            CarriedAck::Receipt(i, r) => receipts.push((i, r)),
        }
    }
    (deliveries, receipts)
}

/// The receipts one receive acks, each with its partition until an ack takes it, and
/// whether each was acked.
pub(crate) struct ReceiptAcks {
    waiting: Vec<(usize, usize, Receipt)>,
    acked: Vec<bool>,
    flush_by: Instant,
}

impl ReceiptAcks {
    /// `receipts` to ack, each in the partition `partition_of` names, on their own from
    /// `flush_by` if no claim took them.
    pub(crate) fn new(
        receipts: &[Receipt],
        flush_by: Instant,
        partition_of: impl Fn(&Receipt) -> usize,
    ) -> Self {
        ReceiptAcks {
            flush_by,
            waiting: receipts
                .iter()
                .enumerate()
                .map(|(i, r)| (i, partition_of(r), r.clone()))
                .collect(),
            acked: vec![false; receipts.len()],
        }
    }

    /// When the receipts no claim took are acked on their own; `None` once none waits.
    pub(crate) fn next_flush(&self) -> Option<Instant> {
        (!self.waiting.is_empty()).then_some(self.flush_by)
    }

    /// Takes the waiting receipts of `partition`, for its claim to carry.
    pub(crate) fn take_for(&mut self, partition: usize) -> Vec<CarriedAck> {
        let (taken, left): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|(_, p, _)| *p == partition);
        self.waiting = left;
        taken
            .into_iter()
            .map(|(i, _, r)| CarriedAck::Receipt(i, r))
            .collect()
    }

    /// Takes every receipt still waiting, with its position.
    pub(crate) fn take_rest(&mut self) -> Vec<(usize, Receipt)> {
        std::mem::take(&mut self.waiting)
            .into_iter()
            .map(|(i, _, r)| (i, r))
            .collect()
    }

    /// Receipts of `partition` whose claim failed: they wait again.
    pub(crate) fn put_back(&mut self, partition: usize, acks: Vec<(usize, Receipt)>) {
        self.waiting
            .extend(acks.into_iter().map(|(i, r)| (i, partition, r)));
    }

    /// Notes whether the receipt at `position` was acked.
    pub(crate) fn record(&mut self, position: usize, acked: bool) {
        if let Some(slot) = self.acked.get_mut(position) {
            *slot = acked;
        }
    }

    /// Per receipt, in the order given, whether it was acked.
    pub(crate) fn results(self) -> Vec<bool> {
        self.acked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt(seq: u8, token: u64) -> Receipt {
        Receipt {
            id: format!("m{seq}"),
            seq: [0, 0, 0, 0, 0, seq],
            token,
            explicit_id: false,
            sealed: false,
        }
    }

    #[test]
    fn each_partition_takes_its_own_and_results_keep_the_order_given() {
        let receipts: Vec<Receipt> = (0..5).map(|i| receipt(i, 7)).collect();
        let mut acks = ReceiptAcks::new(&receipts, Instant::now(), |r| usize::from(r.seq[5] % 2));
        let odd = acks.take_for(1);
        let positions: Vec<usize> = odd
            .iter()
            .map(|a| match a {
                CarriedAck::Receipt(i, _) => *i,
                CarriedAck::Delivery(_) => usize::MAX,
            })
            .collect();
        assert_eq!(positions, [1, 3]);
        assert_eq!(odd[0].id(), "m1");
        acks.record(1, true);
        acks.record(3, false);
        // A failed claim's receipts wait again, and go with the rest.
        let (deliveries, even) = split(acks.take_for(0));
        assert!(deliveries.is_empty());
        assert_eq!(even.len(), 3);
        acks.put_back(0, even);
        let rest: Vec<usize> = acks.take_rest().into_iter().map(|(i, _)| i).collect();
        assert_eq!(rest, [0, 2, 4]);
        assert!(acks.take_rest().is_empty());
        acks.record(4, true);
        assert_eq!(acks.results(), [false, true, false, false, true]);
    }
}
