//! Failure callbacks: when a message of a queue whose push target has a `failure_callback`
//! becomes a dead letter, one signed POST of it and its error history to that URL, from
//! whichever server found the death: its push worker (a dead status, the last attempt
//! failed, a refused URL) or any claim that found the message's lease run out on its last
//! attempt, a pull consumer's included.
//!
//! Bounded, and in memory: reports wait in a queue of at most [`BACKLOG`], and
//! [`CONCURRENCY`] senders per server work through it. A report that finds the queue full is
//! dropped, counted (`delayq_push_callbacks_total{outcome="dropped"}`) and logged; so are the
//! reports still waiting when the server stops. The dead letter itself is in Redis whatever
//! happens: a callback is a notice, not the record. Each callback's URL is checked against
//! the server's address policy when it is called (a target set through the CLI was never
//! checked, and an IP literal never reaches the resolver's check).

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq::{DeadLettered, DelayQ, QueueName, State};
use serde_json::json;
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinSet;

use super::address::check_url;
use super::clients::Clients;
use super::{signature, target};

/// Most reports waiting to be sent, per server: at most about 1 KiB each (a queue name, an
/// id, an error cut to [`ERROR_BYTES`]), so about 10 MiB in all.
pub const BACKLOG: usize = 10_000;

/// Callbacks being sent at once, per server (each holds its body: the message's payload).
pub const CONCURRENCY: usize = 8;

/// Most bytes of a death's error kept in a waiting report.
const ERROR_BYTES: usize = 512;

/// The pauses before a callback's second and third tries.
const RETRIES: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(5)];

/// How long one try may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where deaths are reported. Cheap to clone.
#[derive(Clone)]
pub struct Callbacks {
    reports: mpsc::Sender<Report>,
    /// The queues whose target has a callback (the push runtime keeps it current): a death
    /// elsewhere is not queued at all.
    watched: Arc<RwLock<HashSet<QueueName>>>,
    dropped: Arc<AtomicU64>,
}

/// A death to call back.
struct Report {
    queue: QueueName,
    id: String,
    error: String,
}

/// What became of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reported {
    /// Waiting to be sent.
    Queued,
    /// The queue of reports was full: dropped (counted and logged).
    Dropped,
    /// Its queue has no callback.
    NoCallback,
}

/// The waiting reports, for [`Backlog::serve`].
pub struct Backlog(mpsc::Receiver<Report>);

/// A queue of at most `capacity` reports: where they go in, and where they come out.
pub fn channel(capacity: usize) -> (Callbacks, Backlog) {
    let (reports, waiting) = mpsc::channel(capacity);
    let callbacks = Callbacks {
        reports,
        watched: Arc::default(),
        dropped: Arc::default(),
    };
    (callbacks, Backlog(waiting))
}

impl Callbacks {
    /// From now on, the queues whose target has a failure callback are `queues`.
    pub fn watch(&self, queues: HashSet<QueueName>) {
        *self.watched.write().unwrap_or_else(|p| p.into_inner()) = queues;
    }

    /// Queues the callback of `dead`, if its queue has one. Never waits.
    pub fn report(&self, dead: &DeadLettered) -> Reported {
        self.report_death(&dead.queue, &dead.id, &dead.error)
    }

    fn report_death(&self, queue: &QueueName, id: &str, error: &str) -> Reported {
        let watched = self.watched.read().unwrap_or_else(|p| p.into_inner());
        if !watched.contains(queue) {
            return Reported::NoCallback;
        }
        drop(watched);
        let mut error = error.to_owned();
        if error.len() > ERROR_BYTES {
            let mut cut = ERROR_BYTES;
            while !error.is_char_boundary(cut) {
                cut -= 1;
            }
            error.truncate(cut);
        }
        let report = Report {
            queue: queue.clone(),
            id: id.to_owned(),
            error,
        };
        match self.reports.try_send(report) {
            Ok(()) => Reported::Queued,
            Err(_) => {
                counter(queue.as_str(), "dropped").increment(1);
                let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                // The first, then one line per thousand: a flood of deaths must not flood
                // the log too.
                if n == 1 || n.is_multiple_of(1000) {
                    tracing::warn!(queue = %queue, id = %id, dropped = n, "failure callbacks: {BACKLOG} waiting already; this one is dropped (the dead letter is kept)");
                }
                Reported::Dropped
            }
        }
    }
}

impl Backlog {
    /// Sends the reports, `concurrency` at a time, until `stop` completes; then drops those
    /// still waiting or being sent (logged).
    pub async fn serve(
        self,
        dq: DelayQ,
        clients: Clients,
        concurrency: usize,
        stop: impl Future<Output = ()>,
    ) {
        let waiting = Arc::new(Mutex::new(self.0));
        let mut senders = JoinSet::new();
        for _ in 0..concurrency {
            let (waiting, dq, clients) = (waiting.clone(), dq.clone(), clients.clone());
            senders.spawn(async move {
                loop {
                    let next = waiting.lock().await.recv().await;
                    let Some(report) = next else { return };
                    send(&dq, &clients, &report).await;
                }
            });
        }
        stop.await;
        senders.shutdown().await;
        let left = waiting.lock().await.len();
        if left > 0 {
            tracing::warn!(
                left,
                "failure callbacks not sent before shutdown (the dead letters are kept)"
            );
        }
    }
}

fn counter(queue: &str, outcome: &'static str) -> metrics::Counter {
    metrics::counter!("delayq_push_callbacks_total", "queue" => queue.to_owned(), "outcome" => outcome)
}

/// Calls back one death: the queue's target and callback as they are now, the address
/// checked, a signed POST of the dead letter and its error history, tried up to three times.
async fn send(dq: &DelayQ, clients: &Clients, report: &Report) {
    let Ok(queue) = dq.queue(report.queue.as_str()) else {
        return;
    };
    let target = match target::load(dq, &queue).await {
        Ok(Some(target)) => target,
        Ok(None) => return,
        Err(e) => {
            counter(queue.name().as_str(), "failed").increment(1);
            tracing::warn!(queue = %queue.name(), id = %report.id, "failure callback: cannot read the target: {e}");
            return;
        }
    };
    let Some(url) = target.failure_callback.as_deref() else {
        return;
    };
    let refused = match reqwest::Url::parse(url) {
        // Bounded like a try: a resolver that hangs must not hold a sender for ever.
        Ok(parsed) => {
            match tokio::time::timeout(TIMEOUT, check_url(clients.policy(), &parsed)).await {
                Ok(checked) => checked.err().map(|r| r.detailed()),
                Err(_) => Some(format!(
                    "resolving {} took over {TIMEOUT:?}",
                    crate::redact::origin(&parsed)
                )),
            }
        }
        Err(e) => Some(format!("it is not a URL: {e}")),
    };
    if let Some(why) = refused {
        counter(queue.name().as_str(), "refused").increment(1);
        tracing::warn!(queue = %queue.name(), id = %report.id, "failure callback not sent: {why}");
        return;
    }
    let info = match queue.get(&report.id).await {
        Ok(Some(info)) if info.state == State::Dead => info,
        // Requeued or purged meanwhile: nothing to report.
        _ => return,
    };
    let payload = crate::shapes::PayloadOut::new(info.payload.clone(), info.kind);
    let body = json!({
        "queue": report.queue.as_str(),
        "id": report.id,
        "error": report.error,
        "attempts": info.attempts,
        "errors": info.errors.iter().map(|e| json!({
            "attempt": e.attempt, "at_ms": e.at_ms, "error": e.error,
        })).collect::<Vec<_>>(),
        "message": payload,
    })
    .to_string()
    .into_bytes();
    let signed = signature::Signed {
        queue: report.queue.as_str(),
        id: &report.id,
        attempt: 0,
        body: &body,
    };
    let client = clients.for_target(&target);
    for pause in std::iter::once(Duration::ZERO).chain(RETRIES) {
        tokio::time::sleep(pause).await;
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let sent = client
            .post(url)
            .header("content-type", "application/json")
            .header("delayq-queue", report.queue.as_str())
            .header("delayq-message-id", &report.id)
            .header("delayq-attempt", "0")
            .header(
                signature::HEADER,
                signature::sign(&target.signing_keys, secs, &signed),
            )
            .timeout(TIMEOUT)
            .body(body.clone())
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => {
                counter(queue.name().as_str(), "sent").increment(1);
                return;
            }
            Ok(r) => {
                tracing::warn!(id = %report.id, status = %r.status(), "failure callback refused")
            }
            Err(e) => {
                let why = match reqwest::Url::parse(url) {
                    Ok(parsed) => crate::redact::request_error("no answer", &parsed, &e),
                    Err(_) => "no answer".to_owned(),
                };
                tracing::warn!(id = %report.id, "failure callback failed: {why}")
            }
        }
    }
    counter(queue.name().as_str(), "failed").increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(callbacks: &Callbacks, queue: &str, id: &str) -> Reported {
        callbacks.report_death(&QueueName::new(queue).expect("name"), id, "boom")
    }

    #[test]
    fn reports_beyond_the_backlog_are_dropped_at_once_and_others_are_not_queued() {
        let (callbacks, backlog) = channel(2);
        callbacks.watch(HashSet::from([QueueName::new("hooks").expect("name")]));
        let outcomes: Vec<Reported> = (0..5)
            .map(|i| report(&callbacks, "hooks", &format!("m{i}")))
            .collect();
        assert_eq!(
            outcomes,
            [
                Reported::Queued,
                Reported::Queued,
                Reported::Dropped,
                Reported::Dropped,
                Reported::Dropped
            ]
        );
        assert_eq!(report(&callbacks, "pulled", "x"), Reported::NoCallback);
        assert_eq!(callbacks.dropped.load(Ordering::Relaxed), 3);
        assert_eq!(backlog.0.len(), 2);
    }
}
