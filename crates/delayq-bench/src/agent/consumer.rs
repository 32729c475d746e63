//! The consumer agent: on `start`, runs delayq's worker runtime with an "ack immediately"
//! handler that logs `(seq, due_ms, start_ms)` per invocation; on `stop`, shuts the worker
//! down gracefully, writes the deliveries file and reports `stopped`. Over HTTP it long-polls
//! instead, and with `--via push` it is the receiver `delayq serve` pushes to (`push.rs`).

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use delayq::worker::WorkerBuilder;
use delayq::{Delivery, Queue, QueueSet};
use serde_json::json;
use tokio::sync::oneshot;

use super::http::HttpQueue;
use super::log::{report_progress_until_stop, write_deliveries, Log, PROGRESS_EVERY};
use super::push;
use super::target::Target;
use super::wire::{emit, Commands, VERSION};
use crate::clock::now_ms;
use crate::error::Result;
use crate::protocol::{Command, Event};

/// Handlers at once: enough that claims, handler tasks and acks overlap for an I/O-light
/// handler on a small machine (64/64, 256/128, 1000/250, 1000/500 and 2000/500 were tried;
/// 1000/500 was best on W1, W2a and W2b together).
const CONCURRENCY: usize = 1000;
/// Messages per claim.
const BATCH_SIZE: usize = 500;
/// The worker's default lease; handlers here take microseconds, so it never matters.
const LEASE: Duration = Duration::from_secs(30);

/// Runs the consumer agent.
pub(super) async fn run(
    queue: Target,
    n: u64,
    file: PathBuf,
    mut commands: Commands,
) -> Result<()> {
    let config = match &queue {
        Target::Library(qs) if qs.len() > 1 => json!({
            "runtime": "delayq::worker over a weighted QueueSet (WorkerBuilder::serving)",
            "concurrency": CONCURRENCY,
            "batch_size": BATCH_SIZE,
            "lease_s": LEASE.as_secs(),
            "queues": qs.iter().map(|q| q.name().to_string()).collect::<Vec<_>>(),
            "weights": crate::workload::W3Q_WEIGHTS,
        }),
        Target::Library(_) => json!({
            "runtime": "delayq::worker (WorkerBuilder::run)",
            "concurrency": CONCURRENCY,
            "batch_size": BATCH_SIZE,
            "lease_s": LEASE.as_secs(),
            "ack": "handler returns Ok; the worker's next claim carries the acks of finished handlers (ack linger 20 ms, the default); those no claim takes in time are acked in batches",
            "queue": crate::workload::QUEUE_NAME,
        }),
        Target::Http(_) => json!({
            "runtime": "HTTP long-poll loops (POST receive, carrying the acks of the loop's last batch)",
            "pollers": HTTP_POLLERS,
            "batch_size": BATCH_SIZE,
            "lease_s": LEASE.as_secs(),
            "queue": crate::workload::QUEUE_NAME,
        }),
        Target::Push(_) => push::config(),
    };
    emit(&Event::Ready {
        system: "delayq".into(),
        version: VERSION.into(),
        config,
    })?;
    let log = Arc::new(Log::with_capacity(n as usize));
    if commands.wait_for(&[Command::Start, Command::Stop]).await == Some(Command::Start) {
        match queue {
            Target::Library(qs) => consume(qs, &log, &mut commands).await?,
            Target::Http(h) => consume_http(h, &log, &mut commands).await?,
            Target::Push(h) => push::consume(h, &log, &mut commands).await?,
        }
    }
    let records = log.take();
    write_deliveries(&file, &records)?;
    let bad_payloads = log.bad_payloads();
    emit(&Event::Stopped {
        total: records.len() as u64 + bad_payloads,
        t_ms: now_ms(),
        bad_payloads,
    })?;
    Ok(())
}

/// Consumes until `stop` (or the end of stdin), then stops the worker gracefully: no new
/// claims, running handlers finish and are acked.
async fn consume(queues: Vec<Queue>, log: &Arc<Log>, commands: &mut Commands) -> Result<()> {
    let handler_log = log.clone();
    let set = if queues.len() == 1 {
        QueueSet::strict(queues)?
    } else {
        QueueSet::weighted(queues.into_iter().zip(crate::workload::W3Q_WEIGHTS))?
    };
    let worker = WorkerBuilder::serving(set)
        .concurrency(CONCURRENCY)
        .batch_size(BATCH_SIZE)
        .lease(LEASE)
        .build(move |delivery: Delivery| {
            let log = handler_log.clone();
            async move {
                // "Ack immediately": the clock first, then parse and log, nothing else.
                log.record(now_ms(), &delivery.payload);
                Ok::<(), Infallible>(())
            }
        })?;
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let mut running = tokio::spawn(worker.run(async {
        // A dropped sender also means stop.
        let _ = stop_rx.await;
    }));
    emit(&Event::Started { t_ms: now_ms() })?;

    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => emit(&Event::Progress {
                total: log.total(),
                t_ms: now_ms(),
            })?,
            cmd = commands.next() => match cmd {
                Some(Command::Stop) | None => break,
                Some(other) => tracing::warn!("ignoring {other:?} while consuming"),
            },
            ended = &mut running => {
                // The worker only returns on shutdown; anything else is fatal.
                return Err(match ended {
                    Ok(Ok(reason)) => format!("worker stopped unasked: {reason:?}").into(),
                    Ok(Err(e)) => format!("worker failed: {e}").into(),
                    Err(e) => format!("worker task failed: {e}").into(),
                });
            }
        }
    }
    let _ = stop_tx.send(());
    let reason = running
        .await
        .map_err(|e| format!("worker task failed: {e}"))??;
    tracing::info!(?reason, total = log.total(), "worker stopped");
    Ok(())
}

/// HTTP consumers: long-poll loops in flight at once, so that one loop's handling overlaps
/// another's receive.
const HTTP_POLLERS: usize = 4;
/// How long one long-poll waits.
const HTTP_WAIT: Duration = Duration::from_secs(1);

/// Consumes over HTTP until `stop`: each loop receives up to a batch, logs each delivery as
/// "handled" when it is read, and acks the batch with its next receive (`"acks"`); the
/// last batch's acks go on their own.
async fn consume_http(http: HttpQueue, log: &Arc<Log>, commands: &mut Commands) -> Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..HTTP_POLLERS {
        let (http, log, mut stop) = (http.clone(), log.clone(), stop_rx.clone());
        loops.spawn(async move {
            let mut receipts = Vec::new();
            while !*stop.borrow() {
                let acks = std::mem::take(&mut receipts);
                let got = tokio::select! {
                    got = http.receive(BATCH_SIZE, HTTP_WAIT, acks) => got?,
                    _ = stop.changed() => break,
                };
                receipts.reserve(got.len());
                for d in got {
                    log.record(now_ms(), &d.payload);
                    receipts.push(d.receipt);
                }
            }
            if !receipts.is_empty() {
                http.ack(receipts).await?;
            }
            Ok::<(), crate::error::BoxError>(())
        });
    }
    emit(&Event::Started { t_ms: now_ms() })?;
    report_progress_until_stop(log, commands).await?;
    let _ = stop_tx.send(true);
    while let Some(ended) = loops.join_next().await {
        ended.map_err(|e| format!("poll loop failed: {e}"))??;
    }
    Ok(())
}
