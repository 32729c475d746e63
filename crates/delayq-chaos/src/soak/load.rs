//! The soak run's load: a producer that sends at a steady rate through the library and the
//! HTTP API, and the two kinds of consumer (a library worker, an HTTP consumer) that ack
//! everything and write how late each 10-second window of deliveries was.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq::worker::WorkerBuilder;
use delayq::{Message, SendOptions};
use rand::Rng;
use serde_json::{json, Value};

use crate::history::Recorder;
use crate::http::HttpQueue;
use crate::plan::QUEUE;

/// How often a consumer writes its lateness window.
pub const WINDOW: Duration = Duration::from_secs(10);

/// Settings of the soak producer.
#[derive(clap::Args, Debug)]
pub struct ProduceArgs {
    #[arg(long)]
    redis_url: String,
    /// The server's base URL.
    #[arg(long)]
    server: String,
    /// Messages per second, all paths together.
    #[arg(long)]
    rate: u64,
    /// Delays are uniform in 0..=this.
    #[arg(long)]
    max_delay_ms: u64,
    /// How long to send.
    #[arg(long)]
    seconds: u64,
    /// Where the sent counts go (one line per second).
    #[arg(long)]
    out: PathBuf,
}

/// Sends every 10 ms a hundredth of the rate: 40 % as one library batch, 40 % as one HTTP
/// batch, 20 % as single HTTP sends.
pub async fn produce(args: ProduceArgs) -> Result<(), String> {
    let out = Recorder::create(&args.out).map_err(|e| format!("{:?}: {e}", args.out))?;
    let dq = crate::producer::connect(&args.redis_url).await?;
    let queue = dq.queue(QUEUE).map_err(|e| e.to_string())?;
    let http = HttpQueue::new(&args.server)?;
    let per_tick = (args.rate / 100).max(5);
    let (library_n, batch_n) = (per_tick * 2 / 5, per_tick * 2 / 5);
    let single_n = per_tick - library_n - batch_n;
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let end = tokio::time::Instant::now() + Duration::from_secs(args.seconds);
    let (mut sent, mut second) = (0u64, now_ms() / 1000.0);
    let delay = |max: u64| rand::rng().random_range(0..=max);
    while tokio::time::Instant::now() < end {
        tick.tick().await;
        let batch: Vec<Message> = (0..library_n)
            .map(|_| {
                let options =
                    SendOptions::new().delay(Duration::from_millis(delay(args.max_delay_ms)));
                Message::new(vec![b'x'; 100], options)
            })
            .collect();
        let library = queue.send_batch(&batch);
        let messages: Vec<Value> = (0..batch_n)
            .map(|_| json!({ "payload": "x".repeat(100), "delay": delay(args.max_delay_ms) }))
            .collect();
        let batch_body = json!({ "messages": messages });
        let http_batch = http.post("/batch", &batch_body);
        let singles = (0..single_n).map(|_| {
            let body = json!({ "payload": "x".repeat(100), "delay": delay(args.max_delay_ms) });
            let http = http.clone();
            async move { http.post("/messages", &body).await }
        });
        let mut singles: tokio::task::JoinSet<_> = singles.collect();
        let (library, http_batch) = tokio::join!(library, http_batch);
        library.map_err(|e| format!("library batch: {e}"))?;
        http_batch.map_err(|e| format!("HTTP batch: {}", e.message))?;
        while let Some(single) = singles.join_next().await {
            single
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("HTTP send: {}", e.message))?;
        }
        sent += per_tick;
        let now = now_ms() / 1000.0;
        if now - second >= 1.0 {
            out.record(&json!({ "t": now, "sent": sent }));
            second = now;
        }
    }
    Ok(())
}

/// Settings of a soak consumer.
#[derive(clap::Args, Debug)]
pub struct ConsumeArgs {
    /// Redis URL (library worker) or the server's base URL (HTTP consumer).
    #[arg(long)]
    target: String,
    /// Where the lateness windows go.
    #[arg(long)]
    out: PathBuf,
}

/// A library worker that acks everything, until SIGTERM.
pub async fn work(args: ConsumeArgs) -> Result<(), String> {
    let late = Lateness::start(&args.out)?;
    let dq = crate::producer::connect(&args.target).await?;
    let queue = dq.queue(QUEUE).map_err(|e| e.to_string())?;
    let worker = WorkerBuilder::new(queue)
        .concurrency(200)
        .batch_size(100)
        .build(move |delivery| {
            late.note(delivery.due_ms);
            async { Ok::<(), String>(()) }
        })
        .map_err(|e| e.to_string())?;
    worker
        .run(crate::shutdown::sigterm())
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// An HTTP consumer (two long-poll loops) that acks everything, until SIGTERM.
pub async fn consume(args: ConsumeArgs) -> Result<(), String> {
    let late = Lateness::start(&args.out)?;
    let http = HttpQueue::new(&args.target)?;
    let loops: tokio::task::JoinSet<Result<(), String>> = (0..2)
        .map(|_| consume_loop(http.clone(), late.clone()))
        .collect();
    crate::shutdown::sigterm().await;
    drop(loops);
    Ok(())
}

async fn consume_loop(http: HttpQueue, late: Lateness) -> Result<(), String> {
    loop {
        let body = json!({ "max": 100, "lease": 30_000, "wait": 5_000 });
        let answer = match http.post("/receive", &body).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!("receive: {}", e.message);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let deliveries = answer["deliveries"].as_array().cloned().unwrap_or_default();
        let mut receipts = Vec::with_capacity(deliveries.len());
        for d in &deliveries {
            late.note(d["due_ms"].as_u64().unwrap_or(0));
            receipts.push(d["receipt"].clone());
        }
        if !receipts.is_empty() {
            if let Err(e) = http.post("/ack", &json!({ "receipts": receipts })).await {
                tracing::warn!("ack: {}", e.message);
            }
        }
    }
}

/// Lateness of deliveries (handler start minus due time, ms), written as one line per window:
/// count, p50, p99 and max.
#[derive(Clone)]
struct Lateness(Arc<Mutex<Vec<f64>>>);

impl Lateness {
    fn start(path: &std::path::Path) -> Result<Lateness, String> {
        let out = Recorder::create(path).map_err(|e| format!("{path:?}: {e}"))?;
        let late = Lateness(Arc::default());
        let window = late.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(WINDOW);
            tick.tick().await;
            loop {
                tick.tick().await;
                let mut values = std::mem::take(&mut *window.lock());
                values.sort_by(f64::total_cmp);
                let at = |q: f64| {
                    values
                        .get(((values.len() as f64 - 1.0) * q) as usize)
                        .copied()
                };
                out.record(&json!({
                    "t": now_ms() / 1000.0,
                    "n": values.len(),
                    "p50_ms": at(0.5),
                    "p99_ms": at(0.99),
                    "max_ms": values.last(),
                }));
            }
        });
        Ok(late)
    }

    fn note(&self, due_ms: u64) {
        self.lock().push(now_ms() - due_ms as f64);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<f64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Wall clock in ms (the consumers' and Redis's clock are the same machine's).
pub fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}
