//! The consumer agent of `--via push`: an HTTP receiver on a free loopback port that
//! `delayq serve` pushes the bench queue's due messages to.
//!
//! On `start` it binds the receiver, points the queue's push target at it, and waits until a
//! warm-up message has come through: servers read push targets about once a second, so without
//! this the first W3 messages would be measured against a pusher that is not running yet.
//! Each push is "handled" like a pulled delivery: the clock first, then `(seq, due_ms)` from
//! the payload (the request body), logged in the same records, and 200 at once, which acks it.
//! The producer sends as over HTTP, a JSON string per payload, and the server pushes a JSON
//! payload as its JSON text: the body is decoded back to the string, as the HTTP pull
//! consumer's JSON decoding does, which gives the producer's 100 bytes unchanged.
//! The `delayq-due-ms` header, the server's own due time, is only compared with the payload's
//! and the spread logged, so lateness means the same in every mode.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Notify};

use super::http::HttpQueue;
use super::log::{report_progress_until_stop, Log};
use super::wire::{emit, Commands};
use crate::clock::now_ms;
use crate::error::Result;
use crate::protocol::Event;

/// Requests the server may have in flight to the receiver. W1 brings 20k due a second, and
/// with server, receiver and Redis sharing two cores a request takes 10-25 ms from claim to
/// ack, so 256 capped push at 12-17k/s (Little's law); 512 leaves room.
const CONCURRENCY: usize = 512;
/// Where pushes go on the receiver.
const PATH: &str = "/push";
/// The warm-up message's payload: not one of the workload's, never recorded.
const WARM_UP: &[u8] = b"delayq-bench push warm-up";
/// How long the warm-up may take to come through (a target refresh is about 1 s).
const WARM_UP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the receiver may take to close its connections on `stop`.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// The `ready` config of a push consumer.
pub(super) fn config() -> Value {
    json!({
        "runtime": "delayq serve push delivery to an axum HTTP/1.1 receiver on 127.0.0.1 that answers 200 at once",
        "push_concurrency": CONCURRENCY,
        "push_timeout": "10s",
        "server_batch_size": "min(concurrency, 100), delayq serve's choice",
        "queue": crate::workload::QUEUE_NAME,
    })
}

/// What the receiver's handler shares.
struct Receiver {
    log: Arc<Log>,
    warmed_up: Notify,
    headers: Mutex<HeaderCheck>,
}

/// The pushes' own headers next to the payload: `delayq-due-ms` − payload due time (ms),
/// and redeliveries by `delayq-attempt`.
#[derive(Debug, Default)]
struct HeaderCheck {
    compared: u64,
    min_due_diff_ms: Option<f64>,
    max_due_diff_ms: Option<f64>,
    missing_due: u64,
    attempts_above_1: u64,
}

impl HeaderCheck {
    fn add(&mut self, headers: &HeaderMap, payload_due_ms: f64) {
        let number = |name: &str| headers.get(name)?.to_str().ok()?.parse::<f64>().ok();
        match number("delayq-due-ms") {
            Some(due) => {
                let diff = due - payload_due_ms;
                self.compared += 1;
                self.min_due_diff_ms = Some(self.min_due_diff_ms.map_or(diff, |m| m.min(diff)));
                self.max_due_diff_ms = Some(self.max_due_diff_ms.map_or(diff, |m| m.max(diff)));
            }
            None => self.missing_due += 1,
        }
        if number("delayq-attempt").is_some_and(|a| a > 1.0) {
            self.attempts_above_1 += 1;
        }
    }
}

/// One push: the clock first, then log it and answer 200.
async fn receive(
    State(receiver): State<Arc<Receiver>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let start_ms = now_ms();
    let payload = payload(&headers, &body);
    if *payload == *WARM_UP {
        receiver.warmed_up.notify_one();
        return StatusCode::OK;
    }
    if let Some((_, due_ms)) = receiver.log.record(start_ms, &payload) {
        // A poisoned lock only means another handler panicked mid-update; the counts stand.
        receiver
            .headers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(&headers, due_ms);
    }
    // Even a payload that is not ours is taken (and counted as bad): a refusal would only
    // make the server retry it.
    StatusCode::OK
}

/// The payload of a push: a JSON string body decoded, any other body as it is (a payload that
/// is not ours then counts as bad).
fn payload<'a>(headers: &HeaderMap, body: &'a [u8]) -> Cow<'a, [u8]> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    match json
        .then(|| serde_json::from_slice::<String>(body).ok())
        .flatten()
    {
        Some(text) => Cow::Owned(text.into_bytes()),
        None => Cow::Borrowed(body),
    }
}

/// Receives pushes until `stop` (or the end of stdin), then closes the receiver; the server
/// retries whatever it pushes after that, and is killed by the driver anyway.
pub(super) async fn consume(
    http: HttpQueue,
    log: &Arc<Log>,
    commands: &mut Commands,
) -> Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| format!("cannot bind the push receiver: {e}"))?;
    let url = format!("http://{}{PATH}", listener.local_addr()?);
    let receiver = Arc::new(Receiver {
        log: log.clone(),
        warmed_up: Notify::new(),
        headers: Mutex::default(),
    });
    let app = Router::new()
        .route(PATH, post(receive))
        .with_state(receiver.clone());
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let mut server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                // A dropped sender also means stop.
                let _ = stop_rx.await;
            })
            .await
    });

    let target = http.set_push_target(&url, CONCURRENCY).await?;
    tracing::info!(%url, %target, "push target set");
    http.send(WARM_UP, None).await?;
    tokio::time::timeout(WARM_UP_TIMEOUT, receiver.warmed_up.notified())
        .await
        .map_err(|_| format!("the warm-up push did not arrive within {WARM_UP_TIMEOUT:?}"))?;
    emit(&Event::Started { t_ms: now_ms() })?;

    report_progress_until_stop(log, commands).await?;
    let _ = stop_tx.send(());
    match tokio::time::timeout(SHUTDOWN_TIMEOUT, &mut server).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => return Err(format!("push receiver failed: {e}").into()),
        Ok(Err(e)) => return Err(format!("push receiver task failed: {e}").into()),
        // Everything received is logged already; only the connections are left behind.
        Err(_) => {
            tracing::warn!("push receiver still had connections after {SHUTDOWN_TIMEOUT:?}");
            server.abort();
        }
    }
    let check = receiver.headers.lock().unwrap_or_else(|p| p.into_inner());
    tracing::info!(headers = ?*check, "push receiver stopped");
    Ok(())
}
