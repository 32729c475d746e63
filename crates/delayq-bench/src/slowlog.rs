//! `delayq-bench slowlog`: how long Redis is blocked by each operation on a big queue.
//!
//! A queue is filled with a million delayed messages and a million dead letters; then each
//! operation runs alone, with Redis's SLOWLOG recording every command (threshold 0). SLOWLOG
//! measures the time Redis spent executing a command, during which it serves nobody else:
//! the figure that matters is the longest single call of each operation, not the operation's
//! total, because operations that touch many messages (requeue all, purge all) are split into
//! calls of at most 1,000 messages each.

use std::time::{Duration, Instant};

use delayq::worker::WorkerBuilder;
use delayq::{DelayQ, Message, Queue, ReceiveOptions, Schedule, SendOptions};
use redis_fixture::{RedisServer, Reply};

/// Settings of the measurement.
#[derive(clap::Args, Debug)]
pub struct SlowlogArgs {
    /// Delayed messages, and dead letters, in the queue.
    #[arg(long, default_value_t = 1_000_000)]
    messages: usize,
}

/// Runs the measurement and prints its table.
/// What SLOWLOG saw of one operation.
struct Measured {
    operation: String,
    calls: usize,
    longest_us: i64,
    longest_command: String,
    total_us: i64,
}

pub async fn run(args: SlowlogArgs) -> Result<(), String> {
    let n = args.messages;
    let server = RedisServer::start();
    server.cli(&["CONFIG", "SET", "slowlog-max-len", "100000"]);
    let dq = DelayQ::connect(&server.url()).await.map_err(text)?;
    let q = dq.queue("big").map_err(text)?;

    let started = Instant::now();
    fill(&q, n, SendOptions::new().delay(Duration::from_secs(3600))).await?;
    fill(&q, n, SendOptions::new().max_attempts(1)).await?;
    fail_every_ready(&q, n as u64).await?;
    eprintln!(
        "filled: {n} delayed, {n} dead letters in {:.0?}; used_memory {}",
        started.elapsed(),
        used_memory(&server)
    );

    let mut table = Vec::new();
    let last_dead = q
        .dead_letters()
        .list(n as u64 - 1, 1)
        .await
        .map_err(text)?
        .pop()
        .ok_or("no dead letters")?;
    let pending_id = q
        .send(b"x", &SendOptions::new().delay(Duration::from_secs(7200)))
        .await
        .map_err(text)?
        .id;

    table.push(measure(&server, "stats", || async { q.stats().await.map(drop) }).await?);
    table.push(
        measure(&server, "list queues (SCAN, 1,000 keys a call)", || async {
            dq.queues().await.map(drop)
        })
        .await?,
    );
    table.push(
        measure(&server, "dead letters: first page of 1,000", || async {
            q.dead_letters().list(0, 1000).await.map(drop)
        })
        .await?,
    );
    table.push(
        measure(&server, "dead letters: last page of 1,000", || async {
            q.dead_letters().list(n as u64 - 1000, 1000).await.map(drop)
        })
        .await?,
    );
    table.push(
        measure(&server, "get one (pending)", || async {
            q.get(&pending_id).await.map(drop)
        })
        .await?,
    );
    table.push(
        measure(&server, "reschedule one", || async {
            q.reschedule(&pending_id, Schedule::After(Duration::from_secs(60)))
                .await
                .map(drop)
        })
        .await?,
    );
    table.push(
        measure(&server, "cancel one", || async {
            q.cancel(&pending_id).await.map(drop)
        })
        .await?,
    );
    table.push(
        measure(&server, "requeue one dead letter", || async {
            q.dead_letters().requeue(&last_dead.id).await.map(drop)
        })
        .await?,
    );
    table.push(
        measure(&server, "send a batch of 1,000", || async {
            let batch: Vec<Message> = (0..1000)
                .map(|_| Message::new(vec![b'x'; 100], SendOptions::new()))
                .collect();
            q.send_batch(&batch).await.map(drop)
        })
        .await?,
    );
    table.push(
        measure(&server, "receive 1,000 and ack them", || async {
            let mut consumer = q.consumer().await?;
            let options = ReceiveOptions {
                max: 1000,
                lease: Duration::from_secs(30),
                wait: Duration::ZERO,
            };
            let got = consumer.receive(&options).await?;
            q.ack_many(&got).await.map(drop)
        })
        .await?,
    );
    table.push(
        measure(&server, "requeue all dead letters", || async {
            q.dead_letters().requeue_all().await.map(drop)
        })
        .await?,
    );
    table.push(
        measure(&server, "stats (2,000,000 pending)", || async {
            q.stats().await.map(drop)
        })
        .await?,
    );
    // The requeued messages are ready now, with one attempt each: dead letters again.
    fail_every_ready(&q, n as u64).await?;
    table.push(
        measure(&server, "purge all dead letters", || async {
            q.dead_letters().purge_all().await.map(drop)
        })
        .await?,
    );

    println!("queue of {n} delayed messages and {n} dead letters (100-byte payloads)\n");
    println!("| operation | Redis calls | longest call | its command | all calls |");
    println!("|---|---:|---:|---|---:|");
    for m in table {
        println!(
            "| {} | {} | {:.2} ms | {} | {:.1} ms |",
            m.operation,
            m.calls,
            m.longest_us as f64 / 1000.0,
            m.longest_command,
            m.total_us as f64 / 1000.0
        );
    }
    Ok(())
}

/// Sends `n` messages of 100 bytes in batches of 1,000.
async fn fill(q: &Queue, n: usize, options: SendOptions) -> Result<(), String> {
    let mut left = n;
    while left > 0 {
        let size = left.min(1000);
        let batch: Vec<Message> = (0..size)
            .map(|_| Message::new(vec![b'x'; 100], options.clone()))
            .collect();
        q.send_batch(&batch).await.map_err(text)?;
        left -= size;
    }
    Ok(())
}

/// Runs a worker whose handler fails every message, until `dead` messages are dead letters.
async fn fail_every_ready(q: &Queue, dead: u64) -> Result<(), String> {
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(2000)
        .batch_size(1000)
        .build(|_| async { Err::<(), _>("failing on purpose") })
        .map_err(text)?;
    let q = q.clone();
    let done = async move {
        loop {
            match q.dead_letters().count().await {
                Ok(count) if count >= dead => return,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    };
    let limit = Duration::from_secs(600);
    tokio::time::timeout(limit, worker.run(done))
        .await
        .map_err(|_| format!("not all dead after {limit:?}"))?
        .map_err(text)?;
    Ok(())
}

/// Top-level commands that carry delayq's work: its scripts, its transactions, SCAN. Commands
/// that scripts and transactions run inside are part of those and not counted again. (A
/// script's first use on a Redis also loads it, SCRIPT LOAD, about 0.4 ms, once.)
const TOP_LEVEL: [&str; 4] = ["evalsha", "eval", "exec", "scan"];

/// Slowlog threshold: low enough that every call that matters is logged, high enough that the
/// commands a script runs inside are not (each logged one would add its logging to the
/// script's own time).
const THRESHOLD_US: &str = "100";

/// Runs `operation` and reads what Redis recorded of it: its longest call from SLOWLOG, its
/// calls and their time from the command statistics.
async fn measure<F, Fut>(server: &RedisServer, name: &str, operation: F) -> Result<Measured, String>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = delayq::Result<()>>,
{
    let before = command_stats(server);
    server.cli(&["CONFIG", "SET", "slowlog-log-slower-than", THRESHOLD_US]);
    server.cli(&["SLOWLOG", "RESET"]);
    operation().await.map_err(|e| format!("{name}: {e}"))?;
    server.cli(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    let after = command_stats(server);
    let mut m = Measured {
        operation: name.to_owned(),
        calls: 0,
        longest_us: 0,
        longest_command: "(all under 0.1 ms)".into(),
        total_us: 0,
    };
    for command in TOP_LEVEL {
        let (calls0, us0) = before.get(command).copied().unwrap_or_default();
        let (calls1, us1) = after.get(command).copied().unwrap_or_default();
        m.calls += (calls1 - calls0) as usize;
        m.total_us += us1 - us0;
    }
    let Ok(Reply::Array(Some(entries))) = server.command(&["SLOWLOG", "GET", "-1"]) else {
        return Err("SLOWLOG GET failed".into());
    };
    for entry in entries {
        let Reply::Array(Some(fields)) = entry else {
            continue;
        };
        let (Some(Reply::Int(us)), Some(Reply::Array(Some(argv))), Some(Reply::Bulk(Some(peer)))) =
            (fields.get(2), fields.get(3), fields.get(4))
        else {
            continue;
        };
        // Commands run inside a script have no client address.
        if peer.as_slice() == b"?:0" {
            continue;
        }
        let command = match argv.first() {
            Some(Reply::Bulk(Some(c))) => String::from_utf8_lossy(c).to_uppercase(),
            _ => continue,
        };
        if ["SLOWLOG", "CONFIG", "INFO", "SCRIPT"].contains(&command.as_str()) {
            continue;
        }
        if *us > m.longest_us {
            m.longest_us = *us;
            m.longest_command = command;
        }
    }
    Ok(m)
}

/// `INFO commandstats`: per command, its calls and total µs so far.
fn command_stats(server: &RedisServer) -> std::collections::HashMap<String, (i64, i64)> {
    let mut out = std::collections::HashMap::new();
    for line in server.cli(&["INFO", "commandstats"]).lines() {
        let Some((name, rest)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let field = |key: &str| {
            rest.split(',')
                .find_map(|kv| kv.strip_prefix(key))
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0)
        };
        out.insert(name.to_owned(), (field("calls="), field("usec=")));
    }
    out
}

fn used_memory(server: &RedisServer) -> String {
    server
        .cli(&["INFO", "memory"])
        .lines()
        .find_map(|l| l.strip_prefix("used_memory_human:"))
        .unwrap_or("?")
        .trim()
        .to_owned()
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}
