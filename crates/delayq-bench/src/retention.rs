//! `delayq-bench retention`: what completed retention costs. N messages (100,000 by
//! default, 100 B payloads, in batches) are sent, claimed and acked on a queue that retains
//! and on one that does not, each against a fresh redis-server; reported: Redis memory per
//! retained final record (the difference of `used_memory` after the acks, over N), and the
//! end-to-end rate and Redis CPU per message of each.

use std::time::{Duration, Instant};

use delayq::{DelayQ, Message, ReceiveOptions, Retention, SendOptions, Setting};

use crate::driver::server::BenchServer;
use crate::error::Result;
use crate::workload::{BATCH_SIZE, PAYLOAD_LEN};

/// The retention run's options.
#[derive(clap::Args)]
pub struct RetentionArgs {
    /// Messages sent and acked per run.
    #[arg(long, default_value_t = 100_000)]
    messages: u64,
    /// With caller ids (`order-0000001` ...) rather than generated ones.
    #[arg(long)]
    caller_ids: bool,
}

pub async fn run(args: RetentionArgs) -> Result<()> {
    if args.messages == 0 {
        return Err("--messages is at least 1".into());
    }
    println!(
        "{:<10} {:>10} {:>14} {:>14} {:>10}",
        "retention", "msgs/s", "Redis µs/msg", "used_memory", "records"
    );
    let mut memory = [0u64; 2];
    for (i, retains) in [false, true].into_iter().enumerate() {
        let (rate, cpu_us, used, records) = one_run(&args, retains).await?;
        memory[i] = used;
        println!(
            "{:<10} {rate:>10.0} {cpu_us:>14.2} {used:>14} {records:>10}",
            if retains { "on" } else { "off" }
        );
    }
    let per_record = memory[1].saturating_sub(memory[0]) as f64 / args.messages as f64;
    println!("Redis memory per retained final record: {per_record:.0} bytes");
    Ok(())
}

/// One run: (messages per second end to end, Redis µs per message, used_memory after the
/// acks, final records kept).
async fn one_run(args: &RetentionArgs, retains: bool) -> Result<(f64, f64, u64, u64)> {
    let server = BenchServer::start(&[])?;
    let dq = DelayQ::connect(&format!("redis://127.0.0.1:{}/", server.port())).await?;
    let q = dq.queue("retention")?;
    if retains {
        let keep = Retention {
            keep_for: Duration::from_secs(3600),
            max: u32::try_from(args.messages).unwrap_or(u32::MAX),
        };
        q.configure(&[Setting::RetainCompleted(Some(keep))]).await?;
    }
    let cpu_before = server.cpu()?.process_s;
    let start = Instant::now();
    let payload = vec![b'x'; PAYLOAD_LEN];
    let mut next = 0;
    while next < args.messages {
        let end = (next + BATCH_SIZE as u64).min(args.messages);
        let batch: Vec<Message> = (next..end)
            .map(|i| {
                let options = if args.caller_ids {
                    SendOptions::new().id(format!("order-{i:07}"))
                } else {
                    SendOptions::new()
                };
                Message::new(payload.clone(), options)
            })
            .collect();
        q.send_batch(&batch).await?;
        next = end;
    }
    let mut consumer = q.consumer().await?;
    let receive = ReceiveOptions {
        max: 500,
        lease: Duration::from_secs(60),
        wait: Duration::from_secs(1),
    };
    let mut acked = 0;
    while acked < args.messages {
        let got = consumer.receive(&receive).await?;
        if got.is_empty() {
            return Err(format!("only {acked} of {} delivered", args.messages).into());
        }
        q.ack_many(&got).await?;
        acked += got.len() as u64;
    }
    let rate = args.messages as f64 / start.elapsed().as_secs_f64();
    let cpu_us = (server.cpu()?.process_s - cpu_before) * 1e6 / args.messages as f64;
    let stats = q.stats().await?;
    Ok((rate, cpu_us, server.memory()?.used_memory, stats.completed))
}
