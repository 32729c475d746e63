//! Close orders that are still unpaid a while after they were placed, and return their stock.
//!
//! Shows: a message delivered on time, one cancelled because the order was paid, a failed
//! attempt retried by backoff, and a message that keeps failing landing in the dead letters.
//! (The "15 minutes" of a real shop are 2 seconds here.)
//!
//! Run: `cargo run --example close_unpaid_orders` (set `DELAYQ_REDIS_URL` to use your Redis).

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use delayq::worker::WorkerBuilder;
use delayq::{Backoff, DelayQ, Delivery, SendOptions};

const PAYMENT_WINDOW: Duration = Duration::from_secs(2);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis();
    let dq = DelayQ::connect(&url).await?;
    let orders = dq.queue("close-unpaid-orders")?;

    // Placing an order schedules its closing; the order number is the message id, so placing
    // it twice (a retried HTTP request) schedules nothing new.
    let backoff = Backoff::fixed(Duration::from_millis(500));
    for order in [1001, 1002, 1003, 1004] {
        let options = SendOptions::new()
            .delay(PAYMENT_WINDOW)
            .id(format!("order-{order}"))
            .max_attempts(2)
            .backoff(backoff);
        let sent = orders.send(order.to_string(), &options).await?;
        println!(
            "order {order}: close scheduled as {} (due {:?})",
            sent.id, sent.due_ms
        );
    }
    let again = orders
        .send(
            "1001",
            &SendOptions::new().delay(PAYMENT_WINDOW).id("order-1001"),
        )
        .await?;
    println!("order 1001 placed again: duplicate = {}", again.duplicate);

    // Order 1002 is paid in time: its closing is cancelled.
    println!("order 1002 paid: {:?}", orders.cancel("order-1002").await?);

    let stock_service_calls = Arc::new(AtomicU32::new(0));
    let calls = stock_service_calls.clone();
    let worker = WorkerBuilder::new(orders.clone())
        .concurrency(4)
        .lease(Duration::from_secs(5))
        .build(move |delivery: Delivery| {
            let calls = calls.clone();
            async move { close_order(&delivery, &calls) }
        })?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async {
        let _ = stopped.await;
    }));

    // Done when nothing is pending or in flight any more.
    loop {
        let stats = orders.stats().await?;
        if stats.delayed + stats.ready + stats.in_flight == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(());
    println!("worker stopped: {:?}", running.await??);

    for dead in orders.dead_letters().list(0, 10).await? {
        println!(
            "dead letter {} after {} attempts: {}",
            dead.id,
            dead.attempts,
            dead.last_error.unwrap_or_default()
        );
    }
    orders.dead_letters().purge_all().await?;
    Ok(())
}

/// Closes one order. The stock service is down for the first call about order 1003, and
/// always for order 1004.
fn close_order(delivery: &Delivery, calls: &AtomicU32) -> Result<(), String> {
    let late = now_ms() as i64 - delivery.due_ms as i64;
    let order = String::from_utf8_lossy(&delivery.payload).into_owned();
    println!(
        "closing order {order} (attempt {}, {late} ms after its due time)",
        delivery.attempt
    );
    let call = calls.fetch_add(1, Ordering::SeqCst);
    match order.as_str() {
        "1003" if delivery.attempt == 1 => Err(format!("stock service unavailable (call {call})")),
        "1004" => Err("stock service rejected the return".to_owned()),
        _ => {
            println!("order {order} closed, stock returned");
            Ok(())
        }
    }
}

/// This host's clock in ms, to show how late a delivery was.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
