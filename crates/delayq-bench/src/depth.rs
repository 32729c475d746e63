//! `delayq-bench depth`: W6, delayq with 10 million messages scheduled (issue 30).
//!
//! One fresh redis-server (the WORKLOADS.md arguments), then in order:
//! 1. **W3 on an empty queue**, as the baseline: 2,000 single sends at 200 msg/s, 500 ms
//!    delay, consumed by the worker runtime in this process (1000 handlers, claims of 500).
//! 2. **The fill**: 10,000,000 × scale messages of 100 B, batches of 1000 (one call in
//!    flight), each due at a random point of the hour that starts 5 minutes after the fill
//!    begins (`FILL_OFFSET_MS` + WORKLOADS.md's `lowbias32(seq)` mod 1 h), so that none comes
//!    due while this runs and each lands at a random place in the queue. Reported: the rate
//!    of the first and of the last tenth of the fill (empty queue, full queue), and
//!    `used_memory` per pending message.
//! 3. **W3 again, on top of them**, the same code as the baseline.
//! 4. **What an operator waits for at that depth**, through `delayq serve` on the same
//!    Redis: the stats call, the dashboard's overview, the queue page (its first page of
//!    pending messages) and a page of the browse API, each timed over `READS` requests.
//! 5. **A restart**: `BGSAVE` (what the embedded server's AOF holds after a rewrite, an RDB
//!    preamble; with `--aof`, Redis runs with the embedded server's AOF settings throughout
//!    and loads its AOF instead), SIGKILL, start again on the same directory, and the time
//!    until Redis has loaded every message and answers; the count is checked afterwards.
//!
//! The in-process consumer makes W3's figures comparable between steps 1 and 3, not with the
//! agents' W3 of `run`.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq::worker::WorkerBuilder;
use delayq::{DelayQ, Delivery, Message, Queue, SendOptions};
use serde_json::{json, Value};

use crate::clock::now_ms;
use crate::driver::server::BenchServer;
use crate::error::Result;
use crate::metrics::{lateness, rate, DeliveryRecord, Lateness};
use crate::workload::{
    lowbias32, parse_payload, payload, BATCH_SIZE, QUEUE_NAME, W3_DELAY_MS, W3_INTERVAL_MS,
};

/// Messages scheduled at scale 1.
const BASE_FILL: u64 = 10_000_000;
/// The fill's due times start this long after it does.
const FILL_OFFSET_MS: u64 = 300_000;
/// ... and spread over this long.
const FILL_SPREAD_MS: u32 = 3_600_000;
/// W3's messages per run.
const W3_N: u64 = 2_000;
/// Timed requests per operator read.
const READS: usize = 20;

/// The depth run's options.
#[derive(clap::Args)]
pub struct DepthArgs {
    /// Multiplies the 10,000,000 messages of the fill.
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// The `delayq` binary for the operator's reads (default: beside this one).
    #[arg(long)]
    delayq_bin: Option<PathBuf>,
    /// How the fill's due times fall: `random` (each at a random point of the hour, so each
    /// lands at a random place in the queue: the worst case) or `ascending` (each later than
    /// the one before, as a fixed delay gives: every one lands at the queue's end).
    #[arg(long, default_value = "random")]
    order: FillOrder,
    /// Run Redis as `delayq serve`'s embedded one does (`appendonly yes`, `appendfsync
    /// everysec`), so that the fill pays for the AOF and the restart loads it, instead of
    /// WORKLOADS.md's `appendonly no` and a `BGSAVE` before the restart.
    #[arg(long)]
    aof: bool,
    /// Where the report goes (`W6-<order>[-aof].json`).
    #[arg(long, default_value = "target/bench-results")]
    out: PathBuf,
}

/// How the fill's due times fall.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum FillOrder {
    Random,
    Ascending,
}

impl FillOrder {
    fn name(self) -> &'static str {
        match self {
            FillOrder::Random => "random",
            FillOrder::Ascending => "ascending",
        }
    }

    /// The delay of fill message `seq` of `n`, sent `elapsed_ms` after the fill began.
    fn delay_ms(self, seq: u64, n: u64, elapsed_ms: u64) -> u64 {
        let at = match self {
            FillOrder::Random => u64::from(lowbias32(seq as u32) % FILL_SPREAD_MS),
            FillOrder::Ascending => seq * u64::from(FILL_SPREAD_MS) / n,
        };
        (FILL_OFFSET_MS + at).saturating_sub(elapsed_ms).max(1)
    }
}

pub async fn run(args: DepthArgs) -> Result<()> {
    let n = ((BASE_FILL as f64 * args.scale).round() as u64).max(10_000);
    let delayq_bin = crate::driver::delayq_bin(args.delayq_bin)?;
    let persistence: Vec<String> = if args.aof {
        ["--appendonly", "yes", "--appendfsync", "everysec"]
            .map(String::from)
            .to_vec()
    } else {
        Vec::new()
    };
    let mut server = BenchServer::start(&persistence)?;
    let dq = DelayQ::connect(&format!("redis://127.0.0.1:{}/", server.port())).await?;
    let q = dq.queue(QUEUE_NAME)?;

    let w3_empty = w3(&q, n).await?;
    println!("W3 on an empty queue: {}", lateness_line(&w3_empty));

    let before = server.memory()?;
    let cpu_before = server.cpu()?;
    let fill = fill(&q, n, args.order).await?;
    let redis_us_per_msg = (server.cpu()?.process_s - cpu_before.process_s) * 1e6 / n as f64;
    let after = server.memory()?;
    let bytes_per_msg = (after.used_memory as f64 - before.used_memory as f64) / n as f64;
    println!(
        "fill of {n} ({}): {:.0} msgs/s in all; first tenth {:.0}/s, last tenth {:.0}/s ({:.2} of the first); Redis {redis_us_per_msg:.2} µs/msg; {bytes_per_msg:.1} B per pending message",
        args.order.name(),
        fill.all, fill.first_tenth, fill.last_tenth, fill.last_tenth / fill.first_tenth
    );

    // Redis forks to rewrite its AOF (with --aof) as the data grows: a fork of a big process
    // stalls it, and the child's copying competes for the cores. Whether one overlapped W3.
    let forks = |s: &BenchServer| s.info_number("stats", "total_forks");
    let rewriting = |s: &BenchServer| s.info_number("persistence", "aof_rewrite_in_progress");
    let (forks_before, rewriting_at_start) = (forks(&server)?, rewriting(&server)? == 1);
    let w3_deep = w3(&q, n).await?;
    let forks_during = forks(&server)? - forks_before;
    let latest_fork_us = server.info_number("stats", "latest_fork_usec")?;
    println!(
        "W3 with {n} pending: {}; AOF rewrite running at its start: {rewriting_at_start}, forks during it: {forks_during}, latest fork {:.1} ms",
        lateness_line(&w3_deep),
        latest_fork_us as f64 / 1000.0
    );

    // With the AOF: W3 once more after the rewrite is done, to tell its cost from the depth's.
    let w3_after_rewrite = if args.aof {
        let deadline = Instant::now() + Duration::from_secs(600);
        while rewriting(&server)? == 1
            || server.info_number("persistence", "aof_rewrite_scheduled")? == 1
        {
            if Instant::now() > deadline {
                return Err("the AOF rewrite still runs after 600 s".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let late = w3(&q, n + W3_N).await?;
        println!(
            "W3 with {n} pending, no rewrite running: {}",
            lateness_line(&late)
        );
        Some(late)
    } else {
        None
    };

    let stats_started = Instant::now();
    let stats = q.stats().await?;
    let library_stats_ms = stats_started.elapsed().as_secs_f64() * 1000.0;
    let pending = stats.delayed + stats.ready;
    if pending < n {
        return Err(format!("{pending} pending after the fill of {n}").into());
    }
    let reads = operator_reads(&delayq_bin, &server, &args.out).await?;
    println!("library stats: {library_stats_ms:.1} ms; over HTTP ({READS} each, median / max ms):");
    for (what, (median, max)) in &reads {
        println!("  {what}: {median:.1} / {max:.1}");
    }

    drop(dq);
    // With the AOF, Redis loads what it wrote as it went (a rewrite's RDB preamble and the
    // commands after it); without, what a BGSAVE wrote now.
    if !args.aof {
        server.save()?;
    }
    let load = server.restart()?;
    let dq = DelayQ::connect(&format!("redis://127.0.0.1:{}/", server.port())).await?;
    let after_restart = dq.queue(QUEUE_NAME)?.stats().await?;
    let pending_after = after_restart.delayed + after_restart.ready;
    println!(
        "restart: {:.1} s until {pending_after} pending messages were loaded and Redis answered",
        load.as_secs_f64()
    );
    if pending_after != pending {
        return Err(format!("{pending} pending before the restart, {pending_after} after").into());
    }

    let report = json!({
        "workload": "W6",
        "n": n,
        "fill": {
            "order": args.order.name(),
            "redis_us_per_msg": redis_us_per_msg,
            "msgs_per_s": fill.all,
            "first_tenth_msgs_per_s": fill.first_tenth,
            "last_tenth_msgs_per_s": fill.last_tenth,
            "last_over_first": fill.last_tenth / fill.first_tenth,
        },
        "bytes_per_pending_msg": bytes_per_msg,
        "used_memory_after_fill": after.used_memory,
        "w3_empty": w3_empty,
        "w3_deep": w3_deep,
        "w3_deep_during_rewrite": rewriting_at_start,
        "w3_deep_after_rewrite": w3_after_rewrite,
        "w3_deep_forks": forks_during,
        "latest_fork_us": latest_fork_us,
        "library_stats_ms": library_stats_ms,
        "http_reads_ms": reads.iter().map(|(what, (median, max))| {
            (what.to_string(), json!({ "median": median, "max": max }))
        }).collect::<serde_json::Map<String, Value>>(),
        "restart_load_s": load.as_secs_f64(),
        "restart_from": if args.aof { "aof" } else { "rdb" },
        "pending": pending,
        "redis_args": server.args(),
    });
    std::fs::create_dir_all(&args.out)?;
    let aof = if args.aof { "-aof" } else { "" };
    let path = args.out.join(format!("W6-{}{aof}.json", args.order.name()));
    std::fs::write(&path, serde_json::to_string_pretty(&report)? + "\n")
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

/// The fill's rates, msgs/s.
struct FillRates {
    all: f64,
    first_tenth: f64,
    last_tenth: f64,
}

async fn fill(q: &Queue, n: u64, order: FillOrder) -> Result<FillRates> {
    let tenth = n / 10;
    let started = Instant::now();
    let mut first_tenth_s = 0.0;
    let mut last_tenth_from = None;
    let mut seq = 0;
    while seq < n {
        if seq >= n - tenth && last_tenth_from.is_none() {
            last_tenth_from = Some((seq, Instant::now()));
        }
        let end = (seq + BATCH_SIZE as u64).min(n);
        let t_send = now_ms();
        let elapsed_ms = started.elapsed().as_millis() as u64;
        let mut batch = Vec::with_capacity((end - seq) as usize);
        for s in seq..end {
            let delay = order.delay_ms(s, n, elapsed_ms);
            let options = SendOptions::new().delay(Duration::from_millis(delay));
            batch.push(Message::new(payload(s, t_send + delay as f64)?, options));
        }
        let sent = q.send_batch(&batch).await?.len();
        if sent != batch.len() {
            return Err(format!("send_batch of {} acknowledged {sent}", batch.len()).into());
        }
        seq = end;
        if first_tenth_s == 0.0 && seq >= tenth {
            first_tenth_s = started.elapsed().as_secs_f64();
        }
    }
    let all_s = started.elapsed().as_secs_f64();
    let (last_from_seq, last_from) = last_tenth_from.ok_or("the fill had no last tenth")?;
    Ok(FillRates {
        all: n as f64 / all_s,
        first_tenth: rate(tenth, first_tenth_s).unwrap_or(0.0),
        last_tenth: rate(n - last_from_seq, last_from.elapsed().as_secs_f64()).unwrap_or(0.0),
    })
}

/// W3 through this process's worker: its messages are numbered from `first_seq` on, so they
/// are told apart from the fill's (which are never due while this runs).
async fn w3(q: &Queue, first_seq: u64) -> Result<Lateness> {
    let seen: Arc<Mutex<Vec<DeliveryRecord>>> = Arc::default();
    let handler_seen = seen.clone();
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(1000)
        .batch_size(500)
        .lease(Duration::from_secs(30))
        .build(move |d: Delivery| {
            let seen = handler_seen.clone();
            async move {
                record(&seen, &d, first_seq);
                Ok::<(), Infallible>(())
            }
        })?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async {
        let _ = stop_rx.await;
    }));
    let options = SendOptions::new().delay(Duration::from_millis(W3_DELAY_MS));
    let t0 = tokio::time::Instant::now();
    for i in 0..W3_N {
        tokio::time::sleep_until(t0 + Duration::from_millis(i * W3_INTERVAL_MS)).await;
        let due = now_ms() + W3_DELAY_MS as f64;
        drop(q.send(payload(first_seq + i, due)?, &options).await?);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.lock().map_err(|_| "poisoned")?.len() < W3_N as usize {
        if Instant::now() > deadline {
            return Err("W3: not every message handled 30 s after the last send".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop_tx.send(());
    running.await.map_err(|e| e.to_string())??;
    let seen = seen.lock().map_err(|_| "poisoned")?;
    let distinct: std::collections::HashSet<u64> = seen.iter().map(|d| d.seq).collect();
    if distinct.len() != W3_N as usize {
        return Err(format!(
            "W3: {} deliveries of {} distinct messages, of {W3_N} sent",
            seen.len(),
            distinct.len()
        )
        .into());
    }
    Ok(lateness(&seen))
}

fn record(seen: &Mutex<Vec<DeliveryRecord>>, d: &Delivery, first_seq: u64) {
    let start_ms = now_ms();
    let Some((seq, due_ms)) = parse_payload(&d.payload) else {
        return;
    };
    if seq >= first_seq {
        if let Ok(mut seen) = seen.lock() {
            seen.push(DeliveryRecord {
                seq,
                due_ms,
                start_ms,
            });
        }
    }
}

fn lateness_line(l: &Lateness) -> String {
    let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.2}"));
    format!(
        "lateness p50 {} / p99 {} / max {} ms, {} early, {} delivered",
        ms(l.p50_ms),
        ms(l.p99_ms),
        ms(l.max_ms),
        l.early_count,
        l.count
    )
}

/// Median and max ms of `READS` GETs of each page an operator opens, through `delayq
/// serve` on `server` (no tokens: loopback).
async fn operator_reads(
    bin: &std::path::Path,
    server: &BenchServer,
    out: &std::path::Path,
) -> Result<Vec<(&'static str, (f64, f64))>> {
    std::fs::create_dir_all(out)?;
    let log = out.join("W6-serve.log");
    let http = crate::driver::http_server::HttpServer::start(bin, server.port(), &[], &log)?;
    let base = format!("http://127.0.0.1:{}", http.port());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let pages: [(&str, String); 4] = [
        (
            "stats (GET /v1/queues/bench)",
            format!("/v1/queues/{QUEUE_NAME}"),
        ),
        ("dashboard overview (/ui)", "/ui".into()),
        (
            "queue page, pending (/ui/queues/bench?state=delayed)",
            format!("/ui/queues/{QUEUE_NAME}?state=delayed"),
        ),
        (
            "browse API, 50 pending",
            format!("/v1/queues/{QUEUE_NAME}/messages?state=delayed&limit=50"),
        ),
    ];
    let mut results = Vec::new();
    for (what, path) in pages {
        let mut times = Vec::with_capacity(READS);
        for _ in 0..READS {
            let started = Instant::now();
            let resp = client
                .get(format!("{base}{path}"))
                .send()
                .await
                .map_err(|e| format!("GET {path}: {e}"))?;
            let status = resp.status();
            let body = resp.bytes().await.map_err(|e| format!("GET {path}: {e}"))?;
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            if !status.is_success() {
                return Err(
                    format!("GET {path}: {status} {}", String::from_utf8_lossy(&body)).into(),
                );
            }
        }
        times.sort_by(f64::total_cmp);
        results.push((what, (times[times.len() / 2], times[times.len() - 1])));
    }
    Ok(results)
}
