//! Mark an order "reminder sent" when its reminder is acked, from the queue's events rather
//! than from inside the worker: the order service follows the `reminders` queue's event
//! stream, and each `acked` event of a `remind-<order>` message marks that order. The
//! follower keeps its cursor, so when it restarts it goes on after the last event it
//! handled: orders acked while it was down are marked too, none twice.
//!
//! Run: `cargo run --example order_reminder_events` (set `DELAYQ_REDIS_URL` to use your
//! Redis).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use delayq::worker::WorkerBuilder;
use delayq::{
    DelayQ, Delivery, EventCursor, EventFilter, EventKind, EventStart, Queue, SendOptions, Setting,
};

/// The order service's table: order id -> status.
type Orders = BTreeMap<String, &'static str>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis();
    let dq = DelayQ::connect(&url).await?;
    let reminders = dq.queue("reminders")?;
    // Once, when the queue is set up: keep about 100,000 entries per partition.
    reminders
        .configure(&[Setting::Events(Some(100_000))])
        .await?;

    let mut orders = Orders::new();
    for order in ["A-1", "A-2", "A-3", "A-4"] {
        orders.insert(order.to_owned(), "placed");
        reminders
            .send(
                format!("remind the buyer of {order}"),
                &SendOptions::new()
                    .id(format!("remind-{order}"))
                    .delay(Duration::from_millis(200)),
            )
            .await?;
    }

    // The worker that sends the reminders (an e-mail, say); here it just acks.
    let worker = WorkerBuilder::new(reminders.clone()).build(|d: Delivery| async move {
        println!("reminding: {}", String::from_utf8_lossy(&d.payload));
        Ok::<(), std::convert::Infallible>(())
    })?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async {
        let _ = stopped.await;
    }));

    // The order service follows the acked events: two orders, then it "restarts" (a new
    // reader from its saved cursor), and picks up the rest.
    let saved = follow(&reminders, EventStart::Oldest, &mut orders, 2).await?;
    println!("order service restarts after event {saved}");
    follow(&reminders, EventStart::After(saved), &mut orders, 2).await?;

    let _ = stop.send(());
    running.await??;
    for (order, status) in &orders {
        println!("{order}: {status}");
    }
    if orders.values().any(|s| *s != "reminder sent") {
        return Err(format!("every order should be marked: {orders:?}").into());
    }
    Ok(())
}

/// Marks the orders of the next `count` acked reminders, from `start`; returns the cursor to
/// save (here: the one after the last event handled).
async fn follow(
    queue: &Queue,
    start: EventStart,
    orders: &mut Orders,
    count: usize,
) -> Result<EventCursor, Box<dyn std::error::Error>> {
    let mut events = queue
        .events(start, EventFilter::new().kind(EventKind::Acked))
        .await?;
    let mut marked = 0;
    while marked < count {
        let got = events
            .next(count - marked, Some(Duration::from_secs(10)))
            .await?;
        if got.is_empty() {
            return Err("no acked reminder within 10 s".into());
        }
        for event in got {
            if let Some(order) = event.id.strip_prefix("remind-") {
                if let Some(status) = orders.get_mut(order) {
                    // Idempotent: an event seen twice (after a crash before the cursor was
                    // saved) marks the order again, to the same status.
                    *status = "reminder sent";
                    marked += 1;
                    println!("{order}: reminder sent (acked at {} ms)", event.at_ms);
                }
            }
        }
    }
    Ok(events.cursor())
}
