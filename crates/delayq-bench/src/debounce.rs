//! `delayq-bench debounce`: upserts at volume. N ids (100,000 by default) are each sent U
//! times (10), in batches of BATCH_SIZE, round after round, with `on_duplicate` debounce
//! (and, for contrast, replace and keep: the idempotent send of today), each update a new
//! payload due an hour out, against a fresh redis-server per mode.
//!
//! Reported per mode: sends per second (all N × U), Redis CPU per send (`INFO cpu` of the
//! server), the pending count at the end (N for every mode: one message per id), whether a
//! sample of ids holds its last update (debounce and replace: the payload of round U; keep:
//! of round 1), and Redis memory per pending message.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use delayq::{DelayQ, Message, OnDuplicate, Queue, SendOptions};
use serde_json::{json, Value};

use crate::driver::server::BenchServer;
use crate::error::Result;
use crate::workload::BATCH_SIZE;

/// The debounce run's options.
#[derive(clap::Args)]
pub struct DebounceArgs {
    /// Distinct ids.
    #[arg(long, default_value_t = 100_000)]
    ids: u64,
    /// Sends of each id.
    #[arg(long, default_value_t = 10)]
    updates: u64,
    /// Where the report goes (`debounce.json`).
    #[arg(long, default_value = "target/bench-results")]
    out: PathBuf,
}

pub async fn run(args: DebounceArgs) -> Result<()> {
    if args.ids == 0 || args.updates == 0 {
        return Err("--ids and --updates are at least 1".into());
    }
    let modes = [
        ("debounce", debounce()),
        ("replace", OnDuplicate::Replace),
        ("keep", OnDuplicate::Keep),
    ];
    let mut results = Vec::new();
    println!(
        "{:<9} {:>10} {:>14} {:>9} {:>12} {:>11}",
        "mode", "sends/s", "Redis µs/send", "pending", "last kept", "B/message"
    );
    for (name, mode) in modes {
        let r = one_mode(&args, mode).await?;
        println!(
            "{name:<9} {:>10.0} {:>14.2} {:>9} {:>12} {:>11.0}",
            r["sends_per_s"].as_f64().unwrap_or(0.0),
            r["redis_us_per_send"].as_f64().unwrap_or(0.0),
            r["pending"],
            r["holds_expected_update"],
            r["bytes_per_message"].as_f64().unwrap_or(0.0),
        );
        results.push(json!({ "mode": name, "result": r }));
    }
    std::fs::create_dir_all(&args.out)?;
    let report = json!({ "ids": args.ids, "updates": args.updates, "runs": results });
    std::fs::write(
        args.out.join("debounce.json"),
        serde_json::to_vec_pretty(&report)?,
    )?;
    Ok(())
}

fn debounce() -> OnDuplicate {
    OnDuplicate::Debounce {
        max_wait: Duration::from_secs(7200),
    }
}

async fn one_mode(args: &DebounceArgs, mode: OnDuplicate) -> Result<Value> {
    let server = BenchServer::start(&[])?;
    let dq = DelayQ::connect(&format!("redis://127.0.0.1:{}/", server.port())).await?;
    let q: Queue = dq.queue("debounce")?;
    q.stats().await?;
    let memory_before = server.memory()?.used_memory;
    let cpu_before = server.cpu()?.process_s;
    let start = Instant::now();
    for round in 1..=args.updates {
        let mut next = 0;
        while next < args.ids {
            let end = (next + BATCH_SIZE as u64).min(args.ids);
            let batch: Vec<Message> = (next..end)
                .map(|i| {
                    let options = SendOptions::new()
                        .id(format!("doc-{i:07}"))
                        .delay(Duration::from_secs(3600))
                        .on_duplicate(mode);
                    Message::new(format!("update {round} of doc {i}"), options)
                })
                .collect();
            q.send_batch(&batch).await?;
            next = end;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = server.cpu()?.process_s - cpu_before;
    let sends = args.ids * args.updates;
    let stats = q.stats().await?;
    let pending = stats.delayed + stats.ready;
    let expected_round = if mode == OnDuplicate::Keep {
        1
    } else {
        args.updates
    };
    let mut holds = true;
    for i in (0..args.ids).step_by((args.ids / 100).max(1) as usize) {
        let info = q.get(&format!("doc-{i:07}")).await?;
        let want = format!("update {expected_round} of doc {i}");
        holds &= info.is_some_and(|m| m.payload == want.as_bytes());
    }
    let memory = server.memory()?.used_memory - memory_before;
    Ok(json!({
        "sends_per_s": sends as f64 / elapsed,
        "redis_us_per_send": cpu * 1e6 / sends as f64,
        "pending": pending,
        "holds_expected_update": holds,
        "bytes_per_message": memory as f64 / pending.max(1) as f64,
    }))
}
