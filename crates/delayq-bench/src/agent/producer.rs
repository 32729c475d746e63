//! The producer agent: on `produce`, enqueues the workload's N messages exactly as
//! WORKLOADS.md specifies (bulk batches of 1000 with one `t_send` per batch, or W3's paced
//! single sends), then reports `produced` and waits for `exit`.

use std::time::Duration;

use delayq::{Message, SendOptions};
use serde_json::json;

use super::target::Target;
use super::wire::{emit, Commands, VERSION};
use crate::clock::now_ms;
use crate::error::Result;
use crate::protocol::{Command, Event, Produced};
use crate::workload::{payload, Workload, BATCH_SIZE, W3_DELAY_MS, W3_INTERVAL_MS};

/// Runs the producer agent.
pub(super) async fn run(
    queue: Target,
    workload: Workload,
    n: u64,
    mut commands: Commands,
) -> Result<()> {
    let (bulk_api, single_api) = match queue {
        Target::Library(_) => (
            "Queue::send_batch (generated ids: two MULTI round trips per batch, in sequence)",
            "Queue::send",
        ),
        Target::Http(_) | Target::Push(_) => (
            "POST /v1/queues/{q}/batch (JSON string payloads)",
            "POST /v1/queues/{q}/messages",
        ),
    };
    let config = if workload.bulk() {
        json!({
            "bulk_api": true,
            "api": bulk_api,
            "batch_size": BATCH_SIZE,
            "bulk_calls_in_flight": 1,
            "queue": crate::workload::QUEUE_NAME,
        })
    } else {
        json!({
            "bulk_api": false,
            "api": single_api,
            "pipelined": false,
            "pacing_ms": W3_INTERVAL_MS,
            "queue": crate::workload::QUEUE_NAME,
        })
    };
    emit(&Event::Ready {
        system: "delayq".into(),
        version: VERSION.into(),
        config,
    })?;
    match commands.wait_for(&[Command::Produce, Command::Exit]).await {
        Some(Command::Produce) => {}
        _ => return Ok(()),
    }

    let mut produced = if workload.bulk() {
        produce_bulk(&queue, workload, n).await?
    } else {
        produce_paced(&queue, n).await?
    };
    if workload == Workload::W4 {
        // Read after the last acknowledgement: the system's own count, as a sanity check.
        produced.pending_after = Some(match &queue {
            Target::Library(qs) => {
                let mut pending = 0;
                for q in qs {
                    let stats = q.stats().await?;
                    pending += stats.delayed + stats.ready;
                }
                pending
            }
            Target::Http(h) | Target::Push(h) => h.pending().await?,
        });
    }
    tracing::info!(?produced, "produced");
    emit(&Event::Produced(produced))?;
    commands.wait_for(&[Command::Exit]).await;
    Ok(())
}

/// Earliest and latest due time seen.
struct DueRange {
    min: f64,
    max: f64,
}

impl DueRange {
    fn new() -> Self {
        DueRange {
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }

    fn add(&mut self, due: f64) {
        self.min = self.min.min(due);
        self.max = self.max.max(due);
    }
}

/// W1, W2a, W2b, W4: batches of 1000 through `send_batch`, one call in flight at a time.
async fn produce_bulk(queue: &Target, workload: Workload, n: u64) -> Result<Produced> {
    let mut due_range = DueRange::new();
    let mut start_ms = None;
    let mut seq = 0;
    while seq < n {
        let end = (seq + BATCH_SIZE as u64).min(n);
        // One t_send per batch, read before the batch is built; every message uses it.
        let t_send = now_ms();
        start_ms.get_or_insert(t_send);
        let mut batch = Vec::with_capacity((end - seq) as usize);
        for s in seq..end {
            let delay = workload.delay_ms(s);
            let due = t_send + delay.unwrap_or(0) as f64;
            due_range.add(due);
            batch.push((payload(s, due)?, delay));
        }
        let len = batch.len();
        let sent = send_batch(queue, batch).await?;
        if sent != len {
            return Err(format!("send_batch of {len} messages acknowledged {sent}").into());
        }
        seq = end;
    }
    let end_ms = now_ms();
    Ok(Produced {
        start_ms: start_ms.unwrap_or(end_ms),
        end_ms,
        count: n,
        min_due_ms: due_range.min,
        max_due_ms: due_range.max,
        pending_after: None,
    })
}

/// W3: one `send` per message at `T0 + seq × 5 ms`; a late send goes at once, without
/// catching up in bursts beyond that. With several queues (W3q), message `seq` goes to
/// queue `seq % queues`.
async fn produce_paced(queue: &Target, n: u64) -> Result<Produced> {
    let mut due_range = DueRange::new();
    let t0 = tokio::time::Instant::now();
    let start_ms = now_ms();
    let options = SendOptions::new().delay(Duration::from_millis(W3_DELAY_MS));
    for seq in 0..n {
        // Completes at once if the instant has already passed.
        tokio::time::sleep_until(t0 + Duration::from_millis(seq * W3_INTERVAL_MS)).await;
        let t_send = now_ms();
        let due = t_send + W3_DELAY_MS as f64;
        due_range.add(due);
        match queue {
            Target::Library(qs) => {
                let q = &qs[(seq % qs.len() as u64) as usize];
                drop(q.send(payload(seq, due)?, &options).await?)
            }
            Target::Http(h) | Target::Push(h) => {
                h.send(&payload(seq, due)?, Some(W3_DELAY_MS)).await?
            }
        }
    }
    let end_ms = now_ms();
    Ok(Produced {
        start_ms,
        end_ms,
        count: n,
        min_due_ms: due_range.min,
        max_due_ms: due_range.max,
        pending_after: None,
    })
}

/// One batch of `(payload, delay ms)`, with the immediate path (delay omitted) where there
/// is no delay; the number acknowledged.
async fn send_batch(queue: &Target, batch: Vec<(Vec<u8>, Option<u64>)>) -> Result<usize> {
    match queue {
        Target::Library(qs) => {
            let q = qs.first().ok_or("no queue")?;
            let messages: Vec<Message> = batch
                .into_iter()
                .map(|(p, delay)| {
                    let options = match delay {
                        Some(ms) => SendOptions::new().delay(Duration::from_millis(ms)),
                        None => SendOptions::new(),
                    };
                    Message::new(p, options)
                })
                .collect();
            Ok(q.send_batch(&messages).await?.len())
        }
        Target::Http(h) | Target::Push(h) => h.send_batch(&batch).await,
    }
}
