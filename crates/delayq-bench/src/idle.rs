//! `delayq-bench idle`: what consumers waiting on empty queues cost Redis (issue 33: idle
//! stays free). C consumers (1,000 by default), each long-polling its own empty queue
//! through the library, for S seconds (60); then one message proves they were listening.
//!
//! Reported: Redis CPU over the window as a share of one core (`INFO cpu` of the server),
//! the commands it ran per second, and by command (`INFO commandstats`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use delayq::{DelayQ, ReceiveOptions, SendOptions};
use serde_json::json;

use crate::driver::server::BenchServer;
use crate::error::Result;

/// The idle run's options.
#[derive(clap::Args)]
pub struct IdleArgs {
    /// Consumers, each on a queue of its own.
    #[arg(long, default_value_t = 1000)]
    consumers: usize,
    /// Seconds measured.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Where the report goes (`idle.json`).
    #[arg(long, default_value = "target/bench-results")]
    out: PathBuf,
}

/// How long one long-poll waits (the server's default longest).
const WAIT: Duration = Duration::from_secs(30);

pub async fn run(args: IdleArgs) -> Result<()> {
    if args.consumers == 0 || args.seconds == 0 {
        return Err("--consumers and --seconds are at least 1".into());
    }
    let server = BenchServer::start(&[])?;
    let dq = DelayQ::connect(&format!("redis://127.0.0.1:{}/", server.port())).await?;
    let delivered = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..args.consumers {
        let queue = dq.queue(&format!("idle-{i}"))?;
        let mut consumer = queue.consumer().await?;
        let settle = queue.clone();
        let delivered = delivered.clone();
        tasks.spawn(async move {
            let options = ReceiveOptions {
                max: 1,
                lease: Duration::from_secs(30),
                wait: WAIT,
            };
            loop {
                let got = consumer.receive(&options).await?;
                for d in got {
                    delivered.fetch_add(1, Ordering::Relaxed);
                    settle.ack(&d).await?;
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), delayq::Error>(())
        });
    }
    // Every consumer has made its first claim and waits.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = server.cpu()?;
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    let after = server.cpu()?;
    let window_s = started.elapsed().as_secs_f64();
    // They were listening: one message, to the last queue, is taken at once.
    let last = dq.queue(&format!("idle-{}", args.consumers - 1))?;
    last.send(b"wake".to_vec(), &SendOptions::new()).await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while delivered.load(Ordering::Relaxed) == 0 {
        if Instant::now() > deadline {
            return Err("no consumer took the message sent after the window".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tasks.abort_all();

    let cpu_share = (after.process_s - before.process_s) / window_s;
    let mut by_command: Vec<(String, f64)> = after
        .calls_since(&before)
        .into_iter()
        .filter(|(_, ran)| *ran > 0)
        .map(|(name, ran)| (name, ran as f64 / window_s))
        .collect();
    by_command.sort_by(|a, b| b.1.total_cmp(&a.1));
    let calls_per_s: f64 = by_command.iter().map(|(_, n)| n).sum();
    println!(
        "{} consumers on empty queues for {window_s:.1} s: Redis {:.3} % of a core, {calls_per_s:.1} commands/s ({})",
        args.consumers,
        cpu_share * 100.0,
        by_command
            .iter()
            .take(6)
            .map(|(name, n)| format!("{name} {n:.1}/s"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    std::fs::create_dir_all(&args.out)?;
    let report = json!({
        "consumers": args.consumers,
        "window_s": window_s,
        "redis_core_share": cpu_share,
        "commands_per_s": calls_per_s,
        "commands_per_s_by_command": by_command,
    });
    std::fs::write(
        args.out.join("idle.json"),
        serde_json::to_vec_pretty(&report)?,
    )?;
    Ok(())
}
