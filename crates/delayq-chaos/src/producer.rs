//! A producer process: sends its share of the run's messages at a steady rate, through the
//! library or the HTTP API, single and in batches, with and without caller ids, and records
//! each send once it is acknowledged. A send that fails because Redis or the server is
//! unreachable is retried as it was (same caller id, same payload) until it is acknowledged.
//! On a Redis Cluster, library sends may wait for a replica (`--wait-replicas`); one that
//! did not reach it in time is retried the same way.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use delayq::{DelayQ, Message, PayloadKind, Queue, SendOptions};
use rand::Rng;
use serde_json::{json, Value};

use crate::history::{now_us, Event, Payload, Recorder, REDIRECTED};
use crate::http::HttpQueue;
use crate::plan;

/// Longest a producer keeps retrying one send before it gives up (and fails the run).
const GIVE_UP: Duration = Duration::from_secs(120);

/// How long a send with `--wait-replicas` waits for its replicas before it is retried.
const REPLICA_TIMEOUT: Duration = Duration::from_secs(2);

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
    /// `--target` (library) lists the node URLs of a Redis Cluster, comma-separated.
    #[arg(long)]
    cluster: bool,
    /// Library sends are acknowledged only once this many replicas have them (Redis `WAIT`,
    /// [`REPLICA_TIMEOUT`] at most; fewer is retried); 0 does not wait.
    #[arg(long, default_value_t = 0)]
    wait_replicas: u32,
    /// Sends with this priority (0-9; default: the queue's default, 5).
    #[arg(long)]
    priority: Option<u8>,
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
    group: Option<String>,
    /// Its deadline, unix ms ([`plan::expires`]).
    expires_at_ms: Option<u64>,
    priority: Option<u8>,
}

/// What a send reported: the message id and whether it existed already.
type Acked = Vec<(String, bool)>;

enum Sender {
    /// A queue handle, and the replicas each send waits for (0: none).
    Library(Box<Queue>, u32),
    Http(HttpQueue),
}

/// Runs the producer to the end of its share.
pub async fn run(args: ProduceArgs) -> Result<(), String> {
    let recorder = Recorder::create(&args.out).map_err(|e| format!("{:?}: {e}", args.out))?;
    let sender = match args.via.as_str() {
        "library" => {
            // A `WAIT` must not outlast the response timeout, or it ends as a timeout.
            let timeout = match args.wait_replicas {
                0 => Duration::from_secs(1),
                _ => REPLICA_TIMEOUT + Duration::from_secs(1),
            };
            let dq = connect_to(&args.target, args.cluster, timeout).await?;
            let queue = dq.queue(plan::QUEUE).map_err(|e| e.to_string())?;
            Sender::Library(Box::new(queue), args.wait_replicas)
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
        let mut items: Vec<Item> = (n..group_end)
            .map(|n| item(n, args.max_delay_ms, args.priority))
            .collect();
        if plan::is_batch(n / plan::GROUP) {
            let tries = send_refused_groups_without(&recorder, &sender, &mut items, true).await?;
            record(&recorder, &items, &tries, &args.via, true);
        } else {
            for one in items.chunks_mut(1) {
                let tries = send_refused_groups_without(&recorder, &sender, one, false).await?;
                record(&recorder, one, &tries, &args.via, false);
            }
        }
        n = group_end;
    }
    Ok(())
}

/// Connects to Redis, waiting while it is down (the controller may have just killed it).
pub async fn connect(url: &str) -> Result<DelayQ, String> {
    connect_to(url, false, Duration::from_secs(1)).await
}

/// Connects to the Redis at `url`, or with `cluster` to the Redis Cluster whose node URLs
/// `url` lists (comma-separated), with `response_timeout`; waits while it is down.
pub async fn connect_to(
    url: &str,
    cluster: bool,
    response_timeout: Duration,
) -> Result<DelayQ, String> {
    let config = delayq::Config::default()
        .response_timeout(response_timeout)
        .look_ahead(crate::plan::LOOK_AHEAD);
    let config = crate::sealing::config(config)?;
    let nodes: Vec<&str> = url.split(',').collect();
    let give_up = Instant::now() + GIVE_UP;
    loop {
        let connected = if cluster {
            DelayQ::connect_cluster(&nodes, config.clone()).await
        } else {
            DelayQ::connect_with(url, config.clone()).await
        };
        match connected {
            Ok(dq) => return Ok(dq),
            Err(e) if e.is_retryable() && Instant::now() < give_up => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(format!("cannot connect to {url}: {e}")),
        }
    }
}

/// Sends `items` until acknowledged ([`retrying`]); if the queue's data format does not
/// allow groups or deadlines yet (before the run's upgrade), sends them again without, which
/// then are not recorded either.
async fn send_refused_groups_without(
    recorder: &Recorder,
    sender: &Sender,
    items: &mut [Item],
    batch: bool,
) -> Result<Tries, String> {
    match retrying(recorder, || sender.send(items, batch)).await {
        Err(e) if e.contains("older_data_format") || e.contains("data in format") => {
            for item in items.iter_mut() {
                item.group = None;
                item.expires_at_ms = None;
            }
            retrying(recorder, || sender.send(items, batch)).await
        }
        other => other,
    }
}

fn item(n: u64, max_delay_ms: u64, priority: Option<u8>) -> Item {
    let delay_ms = rand::rng().random_range(0..=max_delay_ms);
    let now = now_us();
    let (deliver_at_ms, nb) = if plan::uses_deliver_at(n) {
        let at = now / 1000 + delay_ms;
        (Some(at), at * 1000)
    } else {
        (None, now + delay_ms * 1000)
    };
    let expires_at_ms = deliver_at_ms
        .filter(|_| plan::expires(n))
        .map(|at| at + plan::EXPIRY_WINDOW_MS);
    Item {
        n,
        payload: Payload { n, nb },
        caller_id: plan::caller_id(n),
        deliver_at_ms,
        delay_ms,
        group: plan::group(n),
        expires_at_ms,
        priority,
    }
}

fn record(recorder: &Recorder, items: &[Item], tries: &Tries, via: &str, batch: bool) {
    for (item, (id, duplicate)) in items.iter().zip(&tries.acked) {
        recorder.record(&Event::Sent {
            n: item.n,
            id: id.clone(),
            nb_us: item.payload.nb,
            at_us: now_us(),
            via: via.to_owned(),
            batch,
            caller_id: item.caller_id.is_some(),
            duplicate: *duplicate,
            first_try_us: tries.first_us,
            group: item.group.clone(),
            expires_ms: item.expires_at_ms,
        });
    }
}

/// A send that succeeded, and when its first try began.
struct Tries {
    acked: Acked,
    first_us: u64,
}

/// Calls `send` until it succeeds, retrying what is worth retrying for up to [`GIVE_UP`];
/// records each retry of a [`REDIRECTED`] call.
async fn retrying<F, Fut>(recorder: &Recorder, send: F) -> Result<Tries, String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Acked, (bool, String)>>,
{
    let give_up = Instant::now() + GIVE_UP;
    let mut pause = Duration::from_millis(50);
    let first_us = now_us();
    loop {
        match send().await {
            Ok(acked) => return Ok(Tries { acked, first_us }),
            Err((true, why)) if Instant::now() < give_up => {
                recorder.record(&Event::Refused {
                    pid: std::process::id(),
                    why: refusal(&why).to_owned(),
                    at_us: now_us(),
                });
                if why.contains(REDIRECTED) {
                    recorder.record(&Event::Settle {
                        pid: std::process::id(),
                        id: None,
                        token: None,
                        result: format!("send {why}"),
                        at_us: now_us(),
                    });
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            Err((_, why)) => return Err(format!("send failed for good: {why}")),
        }
    }
}

/// What kind of refusal `why` (a retried send's error) is, for the scenarios' counts.
fn refusal(why: &str) -> &'static str {
    if why.contains("OOM") || why.contains("redis_full") {
        "redis_full"
    } else if why.contains("MISCONF") {
        "misconf"
    } else if why.contains(REDIRECTED) {
        "redirected"
    } else if why.contains("replicas it asked for") {
        "not_replicated"
    } else {
        "unavailable"
    }
}

impl Sender {
    /// Sends `items` (as one batch when `batch`); on failure, whether to retry and why.
    async fn send(&self, items: &[Item], batch: bool) -> Result<Acked, (bool, String)> {
        match self {
            Sender::Library(queue, replicas) => {
                let result = if batch {
                    let messages: Vec<Message> = items
                        .iter()
                        .map(|i| Message::new(i.payload.to_json(), options(i, *replicas)))
                        .collect();
                    queue.send_batch(&messages).await
                } else {
                    let i = &items[0];
                    queue
                        .send(i.payload.to_json(), &options(i, *replicas))
                        .await
                        .map(|s| vec![s])
                };
                result
                    .map(|sent| sent.into_iter().map(|s| (s.id, s.duplicate)).collect())
                    .map_err(|e| match redirected(&e) {
                        true => (true, format!("{REDIRECTED}: {e}")),
                        // Refused at maxmemory: tried again once consumers drained it.
                        false => (e.is_retryable() || e.is_out_of_memory(), e.to_string()),
                    })
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
                let answer = answer.map_err(|e| match e.redirected() {
                    true => (true, format!("{REDIRECTED}: {}", e.message)),
                    false => (e.retryable, e.message),
                })?;
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

/// A call a Redis Cluster redirected (`MOVED`, `ASK`) more often than redis-rs follows,
/// while a master failed over: delayq does not call it retryable, though it is.
fn redirected(e: &delayq::Error) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    matches!(e, delayq::Error::Redis(r)
        if matches!(r.kind(), ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::Ask)))
        && !e.is_retryable()
}

fn options(item: &Item, replicas: u32) -> SendOptions {
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
    if let Some(group) = &item.group {
        options = options.group(group.clone());
    }
    if let Some(at) = item.expires_at_ms {
        options = options.expires_at(at);
    }
    if let Some(p) = item.priority {
        options = options.priority(p);
    }
    if replicas > 0 {
        options = options.replicas(replicas, REPLICA_TIMEOUT);
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
    if let Some(group) = &item.group {
        body["group"] = json!(group);
    }
    if let Some(at) = item.expires_at_ms {
        body["expires_at"] = json!(at);
    }
    if let Some(p) = item.priority {
        body["priority"] = json!(p);
    }
    body
}
