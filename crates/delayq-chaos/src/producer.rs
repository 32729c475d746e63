//! A producer process: sends its share of the run's messages at a steady rate, through the
//! library or the HTTP API, single and in batches, with and without caller ids, and records
//! each send once it is acknowledged. A send that fails because Redis or the server is
//! unreachable is retried as it was (same caller id, same payload) until it is acknowledged.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use delayq::{DelayQ, Message, PayloadKind, Queue, SendOptions};
use rand::Rng;
use serde_json::{json, Value};

use crate::history::{now_us, Event, Payload, Recorder};
use crate::http::HttpQueue;
use crate::plan;

/// Longest a producer keeps retrying one send before it gives up (and fails the run).
const GIVE_UP: Duration = Duration::from_secs(120);

/// Settings of one producer process.
#[derive(clap::Args, Debug)]
pub struct ProduceArgs {
    /// `library` or `http`.
    #[arg(long)]
    via: String,
    /// A Redis URL (library) or the server's base URL (http).
    #[arg(long)]
    target: String,
    /// First message number.
    #[arg(long)]
    from: u64,
    /// One past the last message number.
    #[arg(long)]
    to: u64,
    /// Messages per second.
    #[arg(long)]
    rate: f64,
    /// Longest delay, in ms; each message's is uniform from 0 to this.
    #[arg(long)]
    max_delay_ms: u64,
    /// History file.
    #[arg(long)]
    out: PathBuf,
}

/// One message about to be sent.
struct Item {
    n: u64,
    payload: Payload,
    caller_id: Option<String>,
    /// Absolute due time (ms) or a delay (ms).
    deliver_at_ms: Option<u64>,
    delay_ms: u64,
}

/// What a send reported: the message id and whether it existed already.
type Acked = Vec<(String, bool)>;

enum Sender {
    Library(Box<Queue>),
    Http(HttpQueue),
}

/// Runs the producer to the end of its share.
pub async fn run(args: ProduceArgs) -> Result<(), String> {
    let recorder = Recorder::create(&args.out).map_err(|e| format!("{:?}: {e}", args.out))?;
    let sender = match args.via.as_str() {
        "library" => {
            let dq = connect(&args.target).await?;
            Sender::Library(Box::new(dq.queue(plan::QUEUE).map_err(|e| e.to_string())?))
        }
        "http" => Sender::Http(HttpQueue::new(&args.target)?),
        other => return Err(format!("--via is library or http, not {other}")),
    };
    let started = Instant::now();
    let mut n = args.from;
    while n < args.to {
        let group_end = (n - n % plan::GROUP + plan::GROUP).min(args.to);
        let due_to_send = Duration::from_secs_f64((n - args.from) as f64 / args.rate);
        tokio::time::sleep_until((started + due_to_send).into()).await;
        let items: Vec<Item> = (n..group_end).map(|n| item(n, args.max_delay_ms)).collect();
        if plan::is_batch(n / plan::GROUP) {
            let acked = retrying(|| sender.send(&items, true)).await?;
            record(&recorder, &items, &acked, &args.via, true);
        } else {
            for one in items.chunks(1) {
                let acked = retrying(|| sender.send(one, false)).await?;
                record(&recorder, one, &acked, &args.via, false);
            }
        }
        n = group_end;
    }
    Ok(())
}

/// Connects to Redis, waiting while it is down (the controller may have just killed it).
pub async fn connect(url: &str) -> Result<DelayQ, String> {
    let config = delayq::Config::default().response_timeout(Duration::from_secs(1));
    let give_up = Instant::now() + GIVE_UP;
    loop {
        match DelayQ::connect_with(url, config.clone()).await {
            Ok(dq) => return Ok(dq),
            Err(e) if e.is_retryable() && Instant::now() < give_up => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(format!("cannot connect to {url}: {e}")),
        }
    }
}

fn item(n: u64, max_delay_ms: u64) -> Item {
    let delay_ms = rand::rng().random_range(0..=max_delay_ms);
    let now = now_us();
    let (deliver_at_ms, nb) = if plan::uses_deliver_at(n) {
        let at = now / 1000 + delay_ms;
        (Some(at), at * 1000)
    } else {
        (None, now + delay_ms * 1000)
    };
    Item {
        n,
        payload: Payload { n, nb },
        caller_id: plan::caller_id(n),
        deliver_at_ms,
        delay_ms,
    }
}

fn record(recorder: &Recorder, items: &[Item], acked: &Acked, via: &str, batch: bool) {
    for (item, (id, duplicate)) in items.iter().zip(acked) {
        recorder.record(&Event::Sent {
            n: item.n,
            id: id.clone(),
            nb_us: item.payload.nb,
            at_us: now_us(),
            via: via.to_owned(),
            batch,
            caller_id: item.caller_id.is_some(),
            duplicate: *duplicate,
        });
    }
}

/// Calls `send` until it succeeds, retrying what is worth retrying for up to [`GIVE_UP`].
async fn retrying<F, Fut>(send: F) -> Result<Acked, String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Acked, (bool, String)>>,
{
    let give_up = Instant::now() + GIVE_UP;
    let mut pause = Duration::from_millis(50);
    loop {
        match send().await {
            Ok(acked) => return Ok(acked),
            Err((true, _)) if Instant::now() < give_up => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            Err((_, why)) => return Err(format!("send failed for good: {why}")),
        }
    }
}

impl Sender {
    /// Sends `items` (as one batch when `batch`); on failure, whether to retry and why.
    async fn send(&self, items: &[Item], batch: bool) -> Result<Acked, (bool, String)> {
        match self {
            Sender::Library(queue) => {
                let result = if batch {
                    let messages: Vec<Message> = items
                        .iter()
                        .map(|i| Message::new(i.payload.to_json(), options(i)))
                        .collect();
                    queue.send_batch(&messages).await
                } else {
                    let i = &items[0];
                    queue
                        .send(i.payload.to_json(), &options(i))
                        .await
                        .map(|s| vec![s])
                };
                result
                    .map(|sent| sent.into_iter().map(|s| (s.id, s.duplicate)).collect())
                    .map_err(|e| (e.is_retryable(), e.to_string()))
            }
            Sender::Http(http) => {
                let answer = if batch {
                    let messages: Vec<Value> = items.iter().map(body).collect();
                    http.post("/batch", &json!({ "messages": messages })).await
                } else {
                    http.post("/messages", &body(&items[0]))
                        .await
                        .map(|one| json!({ "results": [one] }))
                };
                let answer = answer.map_err(|e| (e.retryable, e.message))?;
                let results = answer["results"].as_array().cloned().unwrap_or_default();
                if results.len() != items.len() {
                    return Err((
                        false,
                        format!("{} results for {} sends", results.len(), items.len()),
                    ));
                }
                results
                    .iter()
                    .map(|r| match r["id"].as_str() {
                        Some(id) => Ok((id.to_owned(), r["duplicate"].as_bool() == Some(true))),
                        None => Err((false, format!("a send answer without an id: {r}"))),
                    })
                    .collect()
            }
        }
    }
}

fn options(item: &Item) -> SendOptions {
    let mut options = SendOptions::new()
        .max_attempts(plan::MAX_ATTEMPTS)
        .backoff(plan::backoff())
        // JSON, so that HTTP consumers see the same payload as library ones.
        .kind(PayloadKind::Json);
    options = match item.deliver_at_ms {
        Some(at) => options.deliver_at(at),
        None => options.delay(Duration::from_millis(item.delay_ms)),
    };
    if let Some(id) = &item.caller_id {
        options = options.id(id.clone());
    }
    options
}

fn body(item: &Item) -> Value {
    let mut body = json!({
        "payload": { "n": item.payload.n, "nb": item.payload.nb },
        "max_attempts": plan::MAX_ATTEMPTS,
        "backoff": { "exponential": { "base": 100, "cap": 2000, "jitter_percent": 20 } },
    });
    match item.deliver_at_ms {
        Some(at) => body["deliver_at"] = json!(at),
        None => body["delay"] = json!(item.delay_ms),
    }
    if let Some(id) = &item.caller_id {
        body["id"] = json!(id);
    }
    body
}
