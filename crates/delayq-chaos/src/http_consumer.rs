//! An HTTP consumer process: receives over the API, handles, then acks or nacks, recording
//! its hold on each delivery and what became of each ack. It keeps the rule every HTTP
//! consumer must keep: it works on a delivery only while its lease surely holds, judged from
//! when the receive (or the last extend) was *sent*, and extends the lease of slow work.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use crate::history::{now_us, Event, Outcome, Payload, Recorder};
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
    let stop = crate::sigterm();
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
        let sent_at = Instant::now();
        let body = json!({ "receipts": [receipt], "lease": plan::LEASE.as_millis() as u64 });
        match http.post("/extend", &body).await {
            Ok(answer) if answer["results"][0]["ok"] == json!(true) => {
                expires = sent_at + plan::LEASE;
            }
            Ok(_) => {
                drop(hold);
                record(&recorder, id, receipt, "extend refused: lease lost");
                return Ok(());
            }
            // Unreachable: keep working while the lease we know of lasts.
            Err(_) => {}
        }
    }
    hold.finish(Outcome::Ok);
    let body = json!({ "receipts": [receipt] });
    settle(&http, &recorder, id, receipt, "/ack", &body, expires).await;
    Ok(())
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
