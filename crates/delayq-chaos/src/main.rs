//! `delayq-chaos`: proves delayq's promise under faults, the way Jepsen does: real processes,
//! real kills, a recorded history, and a checker that reads it.
//!
//! * `delayq-chaos run` (full: 20,000 messages, 150 s of faults) or `run --short` (CI: 2,000
//!   messages, 40 s) does everything: see `controller.rs`. `run --cluster` does it on a Redis
//!   Cluster whose masters fail over, sends waiting for a replica (`--no-wait`: not).
//! * `produce`, `work` and `consume` are the processes the controller starts.
//! * `delayq-chaos soak` is the long steady-rate run (by hand: 30 min at 5,000 msgs/s), with
//!   its processes `soak-produce`, `soak-work` and `soak-consume` (`soak/`).
//!
//! Layout: `plan.rs` (what each message is), `history.rs` (the recorded events),
//! `producer.rs`, `worker.rs`, `http_consumer.rs`, `holding.rs` (the processes' sides),
//! `shutdown.rs` (how they hear that they should stop),
//! `processes.rs` and `controller.rs` (starting and hurting them), `failover.rs` (the Redis
//! Cluster of `run --cluster` and its failovers), `evidence.rs` (what they hand the
//! checker beside the history), `checker.rs` (the verdict) with `group_checks.rs` (the
//! groups' promises: one at a time, in order), both over `hold.rs` (a handler's hold).

mod checker;
mod controller;
mod event_checks;
mod evidence;
mod expiry_checks;
mod failover;
mod figures;
mod group_checks;
mod history;
mod hold;
mod holding;
mod http;
mod http_consumer;
mod lookup;
mod plan;
mod processes;
mod producer;
mod sealing;
mod shutdown;
mod soak;
mod upgrade;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "Fault-injection run for delayq")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A whole run: start everything, inject faults, drain, check.
    Run(controller::RunArgs),
    /// A producer process (started by `run`).
    Produce(producer::ProduceArgs),
    /// A library worker process (started by `run`).
    Work(worker::WorkArgs),
    /// An HTTP consumer process (started by `run`).
    Consume(http_consumer::ConsumeArgs),
    /// A long run at a steady rate: memory and lateness over time.
    Soak(soak::SoakArgs),
    /// The soak run's producer (started by `soak`).
    SoakProduce(soak::load::ProduceArgs),
    /// The soak run's library worker (started by `soak`).
    SoakWork(soak::load::ConsumeArgs),
    /// The soak run's HTTP consumer (started by `soak`).
    SoakConsume(soak::load::ConsumeArgs),
    /// Prints how far this process's clock (the C library's, which delayq reads) is from the
    /// true one (the histories'), in ms: the clock-step scenario checks its steps with it.
    #[command(hide = true)]
    ClockProbe,
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run(args) => controller::run(args).map(|passed| {
            if passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }),
        Command::Soak(args) => soak::run(args).map(|passed| {
            if passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }),
        Command::SoakProduce(args) => block_on(soak::load::produce(args)),
        Command::SoakWork(args) => block_on(soak::load::work(args)),
        Command::SoakConsume(args) => block_on(soak::load::consume(args)),
        Command::ClockProbe => {
            let libc_us = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as i64);
            println!("{}", (libc_us - history::now_us() as i64) / 1000);
            Ok(ExitCode::SUCCESS)
        }
        Command::Produce(args) => block_on(producer::run(args)),
        Command::Work(args) => block_on(worker::run(args)),
        Command::Consume(args) => block_on(http_consumer::run(args)),
    };
    result.unwrap_or_else(|e| {
        eprintln!("delayq-chaos: {e}");
        ExitCode::from(2)
    })
}

fn block_on(
    work: impl std::future::Future<Output = Result<(), String>>,
) -> Result<ExitCode, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(work).map(|()| ExitCode::SUCCESS)
}
