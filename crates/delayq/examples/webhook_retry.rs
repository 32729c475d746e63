//! Retry a failed webhook with growing delays: "in 30 s, then 2 min, then 10 min", scaled
//! down here to 300 ms, 1.2 s, 4.8 s (an exponential backoff with factor 4).
//!
//! Uses the low-level consumer API (receive, ack, nack) instead of the worker runtime, and
//! honours a receiver's `Retry-After` by nacking with an explicit delay.
//!
//! Run: `cargo run --example webhook_retry` (set `DELAYQ_REDIS_URL` to use your Redis).

mod support;

use std::time::Duration;

use delayq::{Backoff, DelayQ, NackOutcome, ReceiveOptions, SendOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis();
    let dq = DelayQ::connect(&url).await?;
    let hooks = dq.queue("webhooks")?;

    let backoff =
        Backoff::exponential(Duration::from_millis(300), Duration::from_secs(5)).with_factor(4);
    let options = SendOptions::new().max_attempts(4).backoff(backoff);
    let sent = hooks
        .send(r#"{"event":"order.paid","order":1001}"#, &options)
        .await?;
    println!("webhook queued as {}", sent.id);

    let mut consumer = hooks.consumer().await?;
    let receive = ReceiveOptions {
        max: 1,
        lease: Duration::from_secs(10),
        wait: Duration::from_secs(10),
    };
    let mut last_due = None;
    loop {
        let Some(delivery) = consumer.receive(&receive).await?.pop() else {
            return Err("no delivery within 10 s".into());
        };
        if let Some(previous) = last_due {
            println!(
                "  retried {} ms after the previous attempt",
                delivery.due_ms - previous
            );
        }
        last_due = Some(delivery.due_ms);
        match post_webhook(delivery.attempt) {
            Ok(()) => {
                hooks.ack(&delivery).await?;
                println!("attempt {}: delivered, acked", delivery.attempt);
                break;
            }
            Err(Failure::Status(status)) => {
                let outcome = hooks
                    .nack(&delivery, &format!("HTTP {status}"), None)
                    .await?;
                println!("attempt {}: HTTP {status}, {outcome:?}", delivery.attempt);
                if outcome == NackOutcome::Dead {
                    break;
                }
            }
            Err(Failure::RetryAfter(after)) => {
                hooks.nack(&delivery, "HTTP 429", Some(after)).await?;
                println!(
                    "attempt {}: HTTP 429, receiver asked to retry after {after:?}",
                    delivery.attempt
                );
            }
        }
    }
    println!("final stats: {:?}", hooks.stats().await?);
    Ok(())
}

enum Failure {
    Status(u16),
    RetryAfter(Duration),
}

/// A receiver that is down twice, then rate-limits once, then accepts.
fn post_webhook(attempt: u32) -> Result<(), Failure> {
    match attempt {
        1 | 2 => Err(Failure::Status(503)),
        3 => Err(Failure::RetryAfter(Duration::from_millis(200))),
        _ => Ok(()),
    }
}
