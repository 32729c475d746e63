//! An HTTP consumer process: receives over the API, handles, then acks or nacks, recording
//! its hold on each delivery and what became of each ack. It keeps the rule every HTTP
//! consumer must keep: it works on a delivery only while its lease surely holds, judged from
//! when the receive (or the last extend) was *sent*, and extends the lease of slow work.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use crate::history::{now_us, Event, Outcome, Payload, Recorder, REDIRECTED};
use crate::holding::{Holding, Started};
use crate::http::HttpQueue;
use crate::plan;

/// Settings of one HTTP consumer process.
#[derive(clap::Args, Debug)]
pub struct ConsumeArgs {
    /// The server's base URL.
    #[arg(long)]
    server: String,
    /// History file.
    #[arg(long)]
    out: PathBuf,
    /// Most deliveries per receive (all handled at once).
    #[arg(long, default_value_t = 8)]
    max: usize,
}

/// Receives and handles until SIGTERM, then finishes what it holds.
pub async fn run(args: ConsumeArgs) -> Result<(), String> {
    let recorder =
        Arc::new(Recorder::create(&args.out).map_err(|e| format!("{:?}: {e}", args.out))?);
    let http = HttpQueue::new(&args.server)?;
    let stop = crate::shutdown::sigterm();
    tokio::pin!(stop);
    let lease_ms = plan::LEASE.as_millis() as u64;
    loop {
        let sent_at = Instant::now();
        let body = json!({ "max": args.max, "lease": lease_ms, "wait": 5000 });
        let answer = tokio::select! {
            _ = &mut stop => return Ok(()),
            answer = http.post("/receive", &body) => answer,
        };
        let deliveries = match answer {
            Ok(answer) => answer["deliveries"].as_array().cloned().unwrap_or_default(),
            Err(e) if e.retryable => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) if e.redirected() => {
                recorder.record(&Event::Settle {
                    pid: std::process::id(),
                    id: None,
                    token: None,
                    result: format!("/receive {REDIRECTED}: {}", e.message),
                    at_us: now_us(),
                });
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => return Err(e.message),
        };
        let expires = sent_at + plan::LEASE;
        let tasks: Vec<_> = deliveries
            .into_iter()
            .map(|d| tokio::spawn(handle(http.clone(), recorder.clone(), d, expires)))
            .collect();
        for task in tasks {
            task.await.map_err(|e| format!("handler task: {e}"))??;
        }
    }
}

async fn handle(
    http: HttpQueue,
    recorder: Arc<Recorder>,
    delivery: Value,
    mut expires: Instant,
) -> Result<(), String> {
    let (Some(receipt), Some(id)) = (delivery["receipt"].as_str(), delivery["id"].as_str()) else {
        return Err(format!("a delivery without receipt or id: {delivery}"));
    };
    let Ok(payload) = serde_json::from_value::<Payload>(delivery["payload"].clone()) else {
        return Err(format!("not a payload of this run: {delivery}"));
    };
    if Instant::now() >= expires {
        // Its lease may be gone already: leave it to Redis.
        return Ok(());
    }
    let hold = Holding::start(
        recorder.clone(),
        Started {
            id,
            // The receipt's text starts with the lease token.
            token: receipt.chars().take(12).collect(),
            attempt: delivery["attempt"].as_u64().unwrap_or(0) as u32,
            due_ms: delivery["due_ms"].as_u64().unwrap_or(0),
            payload,
            seq: crate::holding::seq_of_receipt(receipt),
            lease_deadline_ms: delivery["lease_deadline_ms"].as_u64().unwrap_or(0),
        },
    );
    let attempt = delivery["attempt"].as_u64().unwrap_or(0) as u32;
    if plan::fails(payload.n, attempt) {
        hold.finish(Outcome::Failed);
        let body = json!({ "receipt": receipt, "error": "failing on purpose" });
        settle(&http, &recorder, id, receipt, "/nack", &body, expires).await;
        return Ok(());
    }
    let done_at = Instant::now() + plan::work_time(payload.n);
    loop {
        let tick = (Instant::now() + plan::LEASE / 3).min(done_at);
        if tick >= expires {
            // The lease would pass before the next renewal: stop holding now.
            tokio::time::sleep_until(expires).await;
            drop(hold);
            return Ok(());
        }
        tokio::time::sleep_until(tick).await;
        if tick == done_at {
            break;
        }
        let body = json!({ "receipts": [receipt], "lease": plan::LEASE.as_millis() as u64 });
        match extend_within_lease(http.post("/extend", &body), expires).await {
            Renewal::Renewed(new_expiry) => expires = new_expiry,
            Renewal::Refused => {
                drop(hold);
                record(&recorder, id, receipt, "extend refused: lease lost");
                return Ok(());
            }
            Renewal::LeasePassed => {
                drop(hold);
                record(&recorder, id, receipt, "extend unanswered: lease passed");
                return Ok(());
            }
            // Unreachable: keep working while the lease we know of lasts.
            Renewal::Failed => {}
        }
    }
    hold.finish(Outcome::Ok);
    let body = json!({ "receipts": [receipt] });
    settle(&http, &recorder, id, receipt, "/ack", &body, expires).await;
    Ok(())
}

/// What came of one extend call.
#[derive(Debug, PartialEq, Eq)]
enum Renewal {
    /// Renewed: the lease now surely lasts until this instant.
    Renewed(Instant),
    /// The server says the lease is lost.
    Refused,
    /// The lease we knew of passed before the server answered: stop work now.
    LeasePassed,
    /// The server or Redis was unreachable, and the lease still lasts.
    Failed,
}

/// Sends an extend but waits for its answer only while the current lease lasts: an answer
/// can take as long as the server's Redis timeout (a half-open connection), and work that
/// goes on past the lease while it waits may overlap the next holder's.
async fn extend_within_lease(
    call: impl std::future::Future<Output = Result<Value, crate::http::CallError>>,
    expires: Instant,
) -> Renewal {
    let sent_at = Instant::now();
    tokio::select! {
        answer = call => match answer {
            Ok(answer) if answer["results"][0]["ok"] == json!(true) => {
                Renewal::Renewed(sent_at + plan::LEASE)
            }
            Ok(_) => Renewal::Refused,
            Err(_) if Instant::now() >= expires => Renewal::LeasePassed,
            Err(_) => Renewal::Failed,
        },
        () = tokio::time::sleep_until(expires) => Renewal::LeasePassed,
    }
}

/// Acks or nacks, retrying while the server or Redis is unreachable and the lease lasts,
/// and records what came of it.
async fn settle(
    http: &HttpQueue,
    recorder: &Recorder,
    id: &str,
    receipt: &str,
    path: &str,
    body: &Value,
    expires: Instant,
) {
    let result = loop {
        match http.post(path, body).await {
            Ok(answer) => {
                let ok = path == "/nack" || answer["results"][0]["ok"] == json!(true);
                break if ok { "settled" } else { "refused: lease lost" }.to_owned();
            }
            Err(e) if e.status == Some(409) => break "refused: lease lost".to_owned(),
            Err(e) if e.retryable && Instant::now() < expires => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => break format!("not settled: {}", e.message),
        }
    };
    record(recorder, id, receipt, &format!("{path} {result}"));
}

fn record(recorder: &Recorder, id: &str, receipt: &str, result: &str) {
    recorder.record(&Event::Settle {
        pid: std::process::id(),
        id: Some(id.to_owned()),
        token: Some(receipt.chars().take(12).collect()),
        result: result.to_owned(),
        at_us: now_us(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::CallError;

    /// Found by a short chaos run: an extend sent just as the server's Redis connection went
    /// half-open was answered only after the Redis timeout (2 s), and the consumer held the
    /// message until then, past its lease, while another consumer had reclaimed it.
    #[tokio::test(start_paused = true)]
    async fn an_extend_answered_after_the_lease_ends_the_hold_at_the_lease() {
        let expires = Instant::now() + Duration::from_millis(1300);
        let slow_ok = async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            Ok(json!({ "results": [{ "ok": true }] }))
        };
        assert_eq!(
            extend_within_lease(slow_ok, expires).await,
            Renewal::LeasePassed
        );
        assert_eq!(Instant::now(), expires);
    }

    #[tokio::test(start_paused = true)]
    async fn a_prompt_extend_renews_from_when_it_was_sent() {
        let start = Instant::now();
        let expires = start + Duration::from_millis(1300);
        let ok = async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(json!({ "results": [{ "ok": true }] }))
        };
        assert_eq!(
            extend_within_lease(ok, expires).await,
            Renewal::Renewed(start + plan::LEASE)
        );
        let refused = async { Ok(json!({ "results": [{ "ok": false }] })) };
        assert_eq!(
            extend_within_lease(refused, expires).await,
            Renewal::Refused
        );
        let unreachable = async {
            Err(CallError {
                retryable: true,
                status: Some(503),
                message: "unavailable".into(),
            })
        };
        assert_eq!(
            extend_within_lease(unreachable, expires).await,
            Renewal::Failed
        );
    }
}
