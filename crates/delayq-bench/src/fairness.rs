//! `delayq-bench fairness`: W5 of `shared/bench/WORKLOADS.md`, fairness across groups
//! (tenants), in one process against a fresh redis-server per run, with the consumer of the
//! other workloads (the worker runtime, 1000 handlers, claims of 500, ack at once).
//!
//! * A heavy tenant's backlog (1,000,000 × scale messages of 100 B in group `heavy`) is sent
//!   in batches before the worker starts; 1 s after it starts, 1,000 light tenants
//!   (`light-0000` ...) send 10 messages each at a steady 2,000 msg/s while it drains.
//! * Runs: `groups` (no limit), `ordered` (group concurrency 1 for the light tenants, the
//!   heavy one's own limit 1000, so that its backlog still drains), and `plain` (no groups at
//!   all: the contrast, where a light message waits for the backlog ahead of it).
//! * Reported: the light messages' wait (handler start − send) p50/p99/max; the heavy
//!   tenant's delivery rate while light traffic flows; light messages handled after the
//!   heavy backlog was empty; in `ordered`, light messages out of their group's order and
//!   times a light group had two handlers at once (both must be 0).
//! * Cost: W2a (100,000 × scale messages sent, then consumed) with every message in one of
//!   10,000 groups, against the same without groups, in alternating pairs.

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq::worker::WorkerBuilder;
use delayq::{DelayQ, Delivery, GroupSettings, Message, Queue, SendOptions, Setting};
use serde_json::{json, Value};

use crate::driver::server::BenchServer;
use crate::error::Result;
use crate::workload::{BATCH_SIZE, PAYLOAD_LEN};

const CONCURRENCY: usize = 1000;
const CLAIM: usize = 500;
const LIGHT_GROUPS: usize = 1000;
const LIGHT_EACH: usize = 10;
const LIGHT_RATE: u64 = 2000;
const COST_GROUPS: u64 = 10_000;

/// The fairness run's options.
#[derive(clap::Args)]
pub struct FairnessArgs {
    /// Multiplies the heavy backlog and the cost runs' N (not the light tenants).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Alternating pairs of the cost run.
    #[arg(long, default_value_t = 3)]
    pairs: usize,
    /// Only the cost runs (W2a with and without groups), not the fairness runs.
    #[arg(long)]
    cost_only: bool,
    /// Instead: Redis memory per group, from 100,000 × scale pending messages each in a
    /// group of its own, against as many without groups.
    #[arg(long)]
    memory: bool,
    /// Where the report goes (`fairness.json`).
    #[arg(long, default_value = "target/bench-results")]
    out: PathBuf,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Groups,
    Ordered,
    Plain,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Groups => "groups",
            Mode::Ordered => "ordered",
            Mode::Plain => "plain",
        }
    }
}

pub async fn run(args: FairnessArgs) -> Result<()> {
    if args.memory {
        let n = ((100_000.0 * args.scale).round() as u64).max(1000);
        for (what, delay) in [("due in an hour", 3600), ("ready", 0)] {
            let plain = memory_per_message(n, false, delay).await?;
            let grouped = memory_per_message(n, true, delay).await?;
            println!(
                "{n} messages of 100 B {what}: {plain:.0} B each without groups, {grouped:.0} B each in a group of its own ({:.0} B more)",
                grouped - plain
            );
        }
        return Ok(());
    }
    let heavy = ((1_000_000.0 * args.scale).round() as u64).max(1000);
    let mut runs = Vec::new();
    let modes: &[Mode] = if args.cost_only {
        &[]
    } else {
        &[Mode::Groups, Mode::Ordered, Mode::Plain]
    };
    for &mode in modes {
        let report = fairness_run(mode, heavy).await?;
        println!("{}", summary_line(&report));
        // Ordered groups must never be served out of order or two at once.
        if mode == Mode::Ordered && (report["out_of_order"] != 0 || report["two_at_once"] != 0) {
            return Err(format!("ordered groups broken: {}", summary_line(&report)).into());
        }
        runs.push(report);
    }
    let n = ((100_000.0 * args.scale).round() as u64).max(1000);
    let mut cost = Vec::new();
    for pair in 0..args.pairs {
        let order = if pair % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for grouped in order {
            let (rate, redis_us) = cost_run(n, grouped).await?;
            println!(
                "cost {}: W2a e2e {:.0} msgs/s, Redis {:.2} µs/msg",
                if grouped { "grouped" } else { "plain" },
                rate,
                redis_us
            );
            cost.push(
                json!({ "grouped": grouped, "e2e_per_s": rate, "redis_us_per_msg": redis_us }),
            );
        }
    }
    let report = json!({ "heavy": heavy, "runs": runs, "cost": cost });
    std::fs::create_dir_all(&args.out)?;
    let path = args.out.join("fairness.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
    println!("report: {}", path.display());
    Ok(())
}

/// A payload of exactly PAYLOAD_LEN bytes that starts with `text`.
fn payload(text: &str) -> Vec<u8> {
    let mut p = text.as_bytes().to_vec();
    p.resize(PAYLOAD_LEN, b' ');
    p
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// What the handlers saw.
#[derive(Default)]
struct Seen {
    /// Per light message: (group index, its number in the group, wait µs, handled at µs).
    light: Vec<(usize, usize, u64, u64)>,
    /// Handling times of heavy messages (µs).
    heavy: Vec<u64>,
    /// Per light group: handlers running now, and the last number started.
    running: HashMap<usize, (u32, Option<usize>)>,
    two_at_once: u64,
    out_of_order: u64,
}

async fn connect(server: &BenchServer) -> Result<DelayQ> {
    Ok(DelayQ::connect(&format!("redis://127.0.0.1:{}/", server.port())).await?)
}

async fn fairness_run(mode: Mode, heavy: u64) -> Result<Value> {
    let server = BenchServer::start(&[])?;
    let dq = connect(&server).await?;
    let q = dq.queue("w5")?;
    if mode == Mode::Ordered {
        q.configure(&[Setting::GroupConcurrency(Some(1))]).await?;
    }
    let group = |name: &str| match mode {
        Mode::Plain => SendOptions::new(),
        _ => SendOptions::new().group(name),
    };
    let sent_at = Instant::now();
    let mut seq = 0;
    while seq < heavy {
        let batch: Vec<Message> = (seq..(seq + BATCH_SIZE as u64).min(heavy))
            .map(|i| Message::new(payload(&format!("H {i}")), group("heavy")))
            .collect();
        seq += batch.len() as u64;
        q.send_batch(&batch).await?;
    }
    let enqueue_s = sent_at.elapsed().as_secs_f64();
    if mode == Mode::Ordered {
        let own = GroupSettings {
            concurrency: Some(Some(CONCURRENCY as u32)),
            ..GroupSettings::default()
        };
        q.groups().configure("heavy", own).await?;
    }

    let seen = Arc::new(Mutex::new(Seen::default()));
    let handler_seen = seen.clone();
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(CONCURRENCY)
        .batch_size(CLAIM)
        .lease(Duration::from_secs(30))
        .build(move |d: Delivery| {
            let seen = handler_seen.clone();
            async move {
                handle(&seen, &d);
                Ok::<(), Infallible>(())
            }
        })?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async {
        let _ = stop_rx.await;
    }));
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The light tenants: message i of the whole light load at start + i / LIGHT_RATE, in
    // group i % LIGHT_GROUPS, so each group's messages are spread over the 5 s.
    let light_total = LIGHT_GROUPS * LIGHT_EACH;
    let light_start = Instant::now();
    let light_from_us = now_us();
    // Each send in a task of its own, so that a slow answer never holds up the next: the
    // light tenants send at their rate however busy Redis is.
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..light_total {
        let at = light_start + Duration::from_micros(i as u64 * 1_000_000 / LIGHT_RATE);
        tokio::time::sleep_until(at.into()).await;
        let (g, k) = (i % LIGHT_GROUPS, i / LIGHT_GROUPS);
        let (q, options) = (q.clone(), group(&format!("light-{g:04}")));
        sends.spawn(async move {
            let text = format!("L {g} {k} {}", now_us());
            q.send(&payload(&text), &options).await.map(|_| ())
        });
    }
    while let Some(sent) = sends.join_next().await {
        sent.map_err(|e| e.to_string())??;
    }
    let light_sent_us = now_us();
    // Until every light message is handled, and (but in `ordered`, where the heavy
    // tenant's own limit makes draining it a separate matter) the heavy backlog too.
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let (light, heavy_done) = {
            let s = seen.lock().map_err(|_| "poisoned")?;
            (s.light.len(), s.heavy.len() as u64)
        };
        if light >= light_total && (mode == Mode::Ordered || heavy_done >= heavy) {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{}: light {light} of {light_total}, heavy {heavy_done} of {heavy} after 600 s",
                mode.name()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop_tx.send(());
    let _ = running.await;

    let s = seen.lock().map_err(|_| "poisoned")?;
    let mut waits: Vec<u64> = s.light.iter().map(|l| l.2).collect();
    waits.sort_unstable();
    let pct =
        |p: f64| waits[((waits.len() as f64 * p) as usize).min(waits.len() - 1)] as f64 / 1000.0;
    let heavy_last = s.heavy.iter().copied().max().unwrap_or(0);
    let light_last_us = s.light.iter().map(|l| l.3).max().unwrap_or(light_sent_us);
    let heavy_during = s
        .heavy
        .iter()
        .filter(|t| **t >= light_from_us && **t <= light_last_us)
        .count() as f64;
    let light_span_s = (light_last_us - light_from_us).max(1) as f64 / 1e6;
    Ok(json!({
        "mode": mode.name(),
        "heavy_enqueue_s": enqueue_s,
        "light_wait_ms": { "p50": pct(0.50), "p99": pct(0.99), "max": pct(1.0) },
        "heavy_per_s_during_light": heavy_during / light_span_s,
        "heavy_handled": s.heavy.len(),
        "light_after_heavy_empty": s.light.iter().filter(|l| l.3 > heavy_last).count(),
        "light_send_s": (light_sent_us - light_from_us) as f64 / 1e6,
        "out_of_order": s.out_of_order,
        "two_at_once": s.two_at_once,
    }))
}

/// Records a delivery, and ends its handler's run (the handler does nothing else).
fn handle(seen: &Mutex<Seen>, d: &Delivery) {
    let at = now_us();
    let text = String::from_utf8_lossy(&d.payload);
    let mut words = text.split_whitespace();
    let Ok(mut s) = seen.lock() else { return };
    match words.next() {
        Some("H") => s.heavy.push(at),
        Some("L") => {
            let mut num = || {
                words
                    .next()
                    .and_then(|w| w.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            let (g, k, sent) = (num() as usize, num() as usize, num());
            let entry = s.running.entry(g).or_insert((0, None));
            entry.0 += 1;
            let two = entry.0 > 1;
            let out_of_order =
                entry.1.is_some_and(|last| k != last + 1) || (entry.1.is_none() && k != 0);
            entry.1 = Some(k);
            entry.0 -= 1;
            s.two_at_once += u64::from(two);
            s.out_of_order += u64::from(out_of_order && d.attempt == 1);
            s.light.push((g, k, at.saturating_sub(sent), at));
        }
        _ => {}
    }
}

fn summary_line(r: &Value) -> String {
    format!(
        "W5 {:<8} light wait p50 {:>8.1} ms  p99 {:>8.1} ms  max {:>8.1} ms  heavy {:>7.0}/s during light  light after heavy empty {}  out of order {}  two at once {}",
        r["mode"].as_str().unwrap_or(""),
        r["light_wait_ms"]["p50"].as_f64().unwrap_or(0.0),
        r["light_wait_ms"]["p99"].as_f64().unwrap_or(0.0),
        r["light_wait_ms"]["max"].as_f64().unwrap_or(0.0),
        r["heavy_per_s_during_light"].as_f64().unwrap_or(0.0),
        r["light_after_heavy_empty"],
        r["out_of_order"],
        r["two_at_once"],
    )
}

/// W2a with every message in one of COST_GROUPS groups (or none): all sent, then consumed;
/// the end-to-end rate and Redis's CPU per message.
async fn cost_run(n: u64, grouped: bool) -> Result<(f64, f64)> {
    let server = BenchServer::start(&[])?;
    let dq = connect(&server).await?;
    let q: Queue = dq.queue("w2a")?;
    let cpu_before = server.cpu()?;
    let start = Instant::now();
    let mut seq = 0;
    while seq < n {
        let batch: Vec<Message> = (seq..(seq + BATCH_SIZE as u64).min(n))
            .map(|i| {
                let options = if grouped {
                    SendOptions::new().group(format!("g{}", i % COST_GROUPS))
                } else {
                    SendOptions::new()
                };
                Message::new(payload(&format!("H {i}")), options)
            })
            .collect();
        seq += batch.len() as u64;
        q.send_batch(&batch).await?;
    }
    let cpu_sent = server.cpu()?.process_s;
    if std::env::var_os("DELAYQ_BENCH_COMMANDS").is_some() {
        eprintln!(
            "  sending: Redis {:.2} µs/msg",
            (cpu_sent - cpu_before.process_s) * 1e6 / n as f64
        );
    }
    let handled = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = handled.clone();
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(CONCURRENCY)
        .batch_size(CLAIM)
        .build(move |_d: Delivery| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok::<(), Infallible>(())
            }
        })?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async {
        let _ = stop_rx.await;
    }));
    let deadline = Instant::now() + Duration::from_secs(300);
    while handled.load(std::sync::atomic::Ordering::Relaxed) < n {
        if Instant::now() > deadline {
            return Err("the cost run did not drain in 300 s".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let _ = stop_tx.send(());
    let _ = running.await;
    let cpu = server.cpu()?.process_s - cpu_before.process_s;
    if std::env::var_os("DELAYQ_BENCH_COMMANDS").is_some() {
        // Where Redis spent its time, per message: the commands (scripts count as one).
        let mut stats = server.command_stats()?;
        stats.sort_by_key(|(_, _, usec)| std::cmp::Reverse(*usec));
        for (name, calls, usec) in stats.iter().take(6) {
            eprintln!(
                "  {name}: {:.3} calls/msg, {:.2} µs/msg",
                *calls as f64 / n as f64,
                *usec as f64 / n as f64
            );
        }
    }
    Ok((n as f64 / elapsed, cpu * 1e6 / n as f64))
}

/// `used_memory` per pending message (sent in batches, due after `delay_s`; no consumer):
/// each in a group of its own when `grouped`.
async fn memory_per_message(n: u64, grouped: bool, delay_s: u64) -> Result<f64> {
    let server = BenchServer::start(&[])?;
    let dq = connect(&server).await?;
    let q = dq.queue("memory")?;
    q.stats().await?;
    let before = server.memory()?.used_memory;
    let mut seq = 0;
    while seq < n {
        let batch: Vec<Message> = (seq..(seq + BATCH_SIZE as u64).min(n))
            .map(|i| {
                let options = SendOptions::new().delay(Duration::from_secs(delay_s));
                let options = if grouped {
                    options.group(format!("tenant-{i:06}"))
                } else {
                    options
                };
                Message::new(payload(&format!("H {i}")), options)
            })
            .collect();
        seq += batch.len() as u64;
        q.send_batch(&batch).await?;
    }
    let after = server.memory()?.used_memory;
    Ok((after - before) as f64 / n as f64)
}
