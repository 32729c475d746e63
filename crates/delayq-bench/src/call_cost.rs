//! `delayq-bench call-cost`: what one script call costs Redis, in instructions counted by
//! callgrind, which are the same run after run where the wall clock on a shared machine is
//! not. The Redis under test runs under `valgrind --tool=callgrind` (`bench/call_cost.sh`
//! starts this command so); each call is made N times and then 2N times on a warm queue,
//! the counters zeroed before and dumped after each (`callgrind_control`), and the
//! difference over N is one call's cost: what does not grow with the calls (the client's
//! own commands, a connection's setup) drops out.
//!
//! The calls: a send of one message (a W3 producer's), a claim that finds nothing, a
//! message's whole life one by one (send, claim, ack: W3's three calls) without a group and
//! with one, a send due in an hour (into a far-future bucket), an ack of a lease no
//! longer held, and per message a batch's life (100 sent in one call, claimed in one, acked
//! in one: W2's shape) on a partition of the newest data format and on one of format 5
//! (a lease per message, not per claim), and its send alone and its send and claim, whose
//! differences give what the claim and the ack of a batched message cost.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use delayq::{DelayQ, Queue, ReceiveOptions, SendOptions};

use crate::driver::server::BenchServer;
use crate::error::Result;

/// The call-cost run's options.
#[derive(clap::Args)]
pub struct CallCostArgs {
    /// N: each call is counted over N and over 2N calls.
    #[arg(long, default_value_t = 200)]
    calls: usize,
    /// As a client whose user may not call Functions: every script by `EVALSHA`, as on a
    /// server that refuses `FUNCTION LOAD`.
    #[arg(long)]
    evalsha: bool,
}

pub async fn run(args: CallCostArgs) -> Result<()> {
    if args.calls == 0 {
        return Err("--calls is at least 1".into());
    }
    // Few server ticks: the counts are of the calls, not of time passing.
    let server = BenchServer::start(&["--hz".into(), "1".into()])?;
    let pid = server
        .pid()
        .ok_or("the server under test has no process id")?;
    // Not under callgrind: there is nothing to count.
    callgrind_control(pid, &["--zero"])?;
    let url = if args.evalsha {
        server.ok(&[
            "ACL",
            "SETUSER",
            "evalsha-only",
            "on",
            ">call-cost-password",
            "~*",
            "&*",
            "+@all",
            "-function",
            "-fcall",
            "-fcall_ro",
        ])?;
        format!(
            "redis://evalsha-only:call-cost-password@127.0.0.1:{}/",
            server.port()
        )
    } else {
        format!("redis://127.0.0.1:{}/", server.port())
    };
    let dq = DelayQ::connect(&url).await?;
    let q = dq.queue("cost")?;
    let mut consumer = q.consumer().await?;
    // Grouped messages on a queue of their own: a partition that has had one claims by
    // the groups' rotation from then on.
    let grouped_q = dq.queue("cost-grouped")?;
    let mut grouped_consumer = grouped_q.consumer().await?;
    // A partition stamped format 5 before its first use: its claims lease per message.
    let format5_q = dq.queue("cost-format5")?;
    format5_q.send(b"x".to_vec(), &SendOptions::new()).await?;
    server.run(&["HSET", "dq:{cost-format5}:control", "format", "5"])?;
    let dq5 = DelayQ::connect(&url).await?;
    let format5_q = dq5.queue("cost-format5")?;
    let mut format5_consumer = format5_q.consumer().await?;
    let plain = SendOptions::new();
    // The groups' helpers at work.
    let grouped = SendOptions::new().group("tenant-1");
    // Warm: the library loaded, the queue's keys there, every path run once.
    for _ in 0..20 {
        one_message(&q, &mut consumer, &plain).await?;
        one_message(&grouped_q, &mut grouped_consumer, &grouped).await?;
    }
    drain(&mut format5_consumer, &format5_q).await?;
    // A batch's steps apart, each on a queue of its own: what they leave (pending, held)
    // stays there.
    let sends_q = dq.queue("cost-sends")?;
    let mut sends_consumer = sends_q.consumer().await?;
    let claims_q = dq.queue("cost-claims")?;
    let mut claims_consumer = claims_q.consumer().await?;
    for _ in 0..3 {
        a_batch(&q, &mut consumer, Upto::Ack).await?;
        a_batch(&format5_q, &mut format5_consumer, Upto::Ack).await?;
        a_batch(&claims_q, &mut claims_consumer, Upto::Claim).await?;
    }
    let stale = {
        q.send(b"x".to_vec(), &SendOptions::new()).await?;
        let options = ReceiveOptions {
            max: 1,
            lease: Duration::from_secs(60),
            wait: Duration::from_secs(5),
        };
        let got = consumer.receive(&options).await?;
        let d = got.into_iter().next().ok_or("no message to hold")?;
        q.ack(&d).await?;
        d
    };

    let nothing_due = ReceiveOptions {
        max: 1,
        lease: Duration::from_secs(30),
        wait: Duration::ZERO,
    };
    let mut rows = Vec::new();
    for name in [
        "send",
        "claim, nothing due",
        "send, claim, ack one",
        "the same, grouped",
        "send, due in an hour",
        "ack, not held",
        "a batch, per message",
        "the same, format 5",
        "a batch's send, per message",
        "a batch's send and claim",
    ] {
        let mut counted = Vec::new();
        for n in [args.calls, 2 * args.calls] {
            callgrind_control(pid, &["--zero"])?;
            for _ in 0..n {
                match name {
                    "send" => {
                        q.send(b"0123456789".to_vec(), &SendOptions::new()).await?;
                    }
                    "claim, nothing due" => {
                        consumer.receive(&nothing_due).await?;
                    }
                    "send, claim, ack one" => one_message(&q, &mut consumer, &plain).await?,
                    "the same, grouped" => {
                        one_message(&grouped_q, &mut grouped_consumer, &grouped).await?
                    }
                    "send, due in an hour" => {
                        let later = SendOptions::new().delay(Duration::from_secs(3600));
                        q.send(b"0123456789".to_vec(), &later).await?;
                    }
                    "ack, not held" => {
                        q.ack_many(std::slice::from_ref(&stale)).await?;
                    }
                    "a batch, per message" => a_batch(&q, &mut consumer, Upto::Ack).await?,
                    "the same, format 5" => {
                        a_batch(&format5_q, &mut format5_consumer, Upto::Ack).await?
                    }
                    "a batch's send, per message" => {
                        a_batch(&sends_q, &mut sends_consumer, Upto::Send).await?
                    }
                    _ => a_batch(&claims_q, &mut claims_consumer, Upto::Claim).await?,
                }
            }
            counted.push(dumped_instructions(pid)?);
        }
        let per = if name.starts_with("a batch") || name.ends_with("format 5") {
            BATCH as f64
        } else {
            1.0
        };
        if name == "send" {
            // What the sends left is taken, so that the claims below start from empty.
            drain(&mut consumer, &q).await?;
        }
        let per_call = counted[1].saturating_sub(counted[0]) as f64 / args.calls as f64 / per;
        rows.push((name, per_call));
    }
    println!(
        "instructions Redis ran per call (callgrind, {} and {} calls, by {}):",
        args.calls,
        2 * args.calls,
        if args.evalsha { "EVALSHA" } else { "FCALL" }
    );
    for (name, per_call) in rows {
        println!("  {name:<22} {per_call:>10.0}");
    }
    Ok(())
}

/// One message's life in W3, one call each: sent with `options`, claimed, acked.
async fn one_message(
    q: &Queue,
    consumer: &mut delayq::Consumer,
    options: &SendOptions,
) -> Result<()> {
    q.send(b"0123456789".to_vec(), options).await?;
    let receiving = ReceiveOptions {
        max: 1,
        lease: Duration::from_secs(30),
        wait: Duration::from_secs(5),
    };
    for d in consumer.receive(&receiving).await? {
        q.ack(&d).await?;
    }
    Ok(())
}

/// A batch's life in W2: [`BATCH`] messages sent in one call, claimed in one, acked in one.
const BATCH: usize = 100;

/// How far [`a_batch`] goes.
#[derive(PartialEq)]
enum Upto {
    Send,
    Claim,
    Ack,
}

async fn a_batch(q: &Queue, consumer: &mut delayq::Consumer, upto: Upto) -> Result<()> {
    let messages: Vec<_> = (0..BATCH)
        .map(|_| delayq::Message::new(vec![b'x'; 100], SendOptions::new()))
        .collect();
    q.send_batch(&messages).await?;
    if upto == Upto::Send {
        return Ok(());
    }
    // Leases that outlast the run (callgrind slows Redis fifty-fold): what the send-and-claim
    // row holds is never taken back meanwhile.
    let receiving = ReceiveOptions {
        max: BATCH,
        lease: Duration::from_secs(3600),
        wait: Duration::from_secs(5),
    };
    let mut left = BATCH;
    while left > 0 {
        let got = consumer.receive(&receiving).await?;
        left = left.saturating_sub(got.len());
        if upto == Upto::Ack {
            q.ack_many(&got).await?;
        }
    }
    Ok(())
}

async fn drain(consumer: &mut delayq::Consumer, q: &Queue) -> Result<()> {
    let options = ReceiveOptions {
        max: 500,
        lease: Duration::from_secs(30),
        wait: Duration::ZERO,
    };
    loop {
        let got = consumer.receive(&options).await?;
        if got.is_empty() {
            return Ok(());
        }
        q.ack_many(&got).await?;
    }
}

fn callgrind_control(pid: u32, args: &[&str]) -> Result<String> {
    let out = Command::new("callgrind_control")
        .args(args)
        .arg(pid.to_string())
        .output()
        .map_err(|e| format!("callgrind_control (valgrind): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "callgrind_control {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Dumps the counters and returns the instructions counted since they were zeroed.
fn dumped_instructions(pid: u32) -> Result<u64> {
    let before: Vec<_> = dump_files(pid)?;
    callgrind_control(pid, &["--dump"])?;
    let after = dump_files(pid)?;
    let newest = after
        .into_iter()
        .filter(|p| !before.contains(p))
        .max()
        .ok_or("callgrind wrote no dump")?;
    let text = std::fs::read_to_string(&newest)?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary: ")
                .or_else(|| l.strip_prefix("totals: "))
        })
        .and_then(|n| n.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("no totals in {}", newest.display()).into())
}

/// The dump files of process `pid`, in the directory `bench/call_cost.sh` names.
fn dump_files(pid: u32) -> Result<Vec<std::path::PathBuf>> {
    let dir = std::env::var("CALLGRIND_DIR")
        .map_err(|_| "CALLGRIND_DIR is not set (run bench/call_cost.sh)")?;
    let prefix = format!("callgrind.out.{pid}");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(Path::new(&dir))? {
        let path = entry?.path();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&prefix))
        {
            files.push(path);
        }
    }
    Ok(files)
}
