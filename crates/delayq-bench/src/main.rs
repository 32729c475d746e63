//! `delayq-bench`: the benchmark of delayq, following `shared/bench/WORKLOADS.md`.
//!
//! * `delayq-bench agent …` is one side of delayq under test (producer or consumer), driven
//!   over the JSON-lines Agent protocol on stdin/stdout.
//! * `delayq-bench run …` is the driver: fresh redis-server per workload, agents as separate
//!   processes, end-of-run rules, metrics, one JSON per workload and a summary table.
//! * `delayq-bench slowlog` measures how long each operation blocks Redis on a big queue.
//! * `delayq-bench fairness` is W5: fairness across groups, and what groups cost W2a.
//! * `delayq-bench depth` is W6: 10 million scheduled, and what that depth costs.
//! * `delayq-bench call-cost` counts the instructions one script call costs Redis.
//!
//! This file only parses the command line and hands over.

mod agent;
mod call_cost;
mod ceiling;
mod clock;
mod debounce;
mod depth;
mod driver;
mod error;
mod fairness;
mod idle;
mod metrics;
mod protocol;
mod report;
mod retention;
mod slowlog;
mod workload;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::prelude::*;
use tracing_subscriber::{Layer, Registry};

/// Benchmark of the delayq delayed-message queue.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one agent (producer or consumer) speaking the Agent protocol on stdin/stdout.
    Agent(agent::AgentArgs),
    /// Run the benchmark: drive agents through the workloads and report.
    Run(driver::RunArgs),
    /// Measure with SLOWLOG how long each operation blocks Redis on a queue of a million.
    Slowlog(slowlog::SlowlogArgs),
    /// W5: fairness across groups (a heavy tenant's backlog, 1,000 light tenants), and what
    /// groups cost W2a.
    Fairness(fairness::FairnessArgs),
    /// W6: 10,000,000 messages scheduled over an hour: enqueue rate at depth, bytes per
    /// message, W3 on top, the operator's reads, and a restart's load time.
    Depth(depth::DepthArgs),
    /// Upserts at volume: 100,000 ids sent 10 times each with debounce, replace and keep.
    Debounce(debounce::DebounceArgs),
    /// What completed retention costs: memory per final record, rate and Redis CPU.
    Retention(retention::RetentionArgs),
    /// What consumers waiting on empty queues cost Redis: 1,000 for 60 s by default.
    Idle(idle::IdleArgs),
    /// What one script call costs Redis, in instructions (Redis under callgrind:
    /// `bench/call_cost.sh`).
    CallCost(call_cost::CallCostArgs),
}

fn main() -> ExitCode {
    let command = Cli::parse().command;
    // An agent sets up its logging itself: with spans, when it exports them.
    if !matches!(command, Cmd::Agent(_)) {
        init_logging(None);
    }
    match command {
        Cmd::Agent(args) => agent::main(args),
        Cmd::Run(args) => driver::main(args),
        Cmd::Slowlog(args) => block_on("slowlog", slowlog::run(args)),
        Cmd::Fairness(args) => block_on("fairness", fairness::run(args)),
        Cmd::Depth(args) => block_on("depth", depth::run(args)),
        Cmd::Debounce(args) => block_on("debounce", debounce::run(args)),
        Cmd::Retention(args) => block_on("retention", retention::run(args)),
        Cmd::Idle(args) => block_on("idle", idle::run(args)),
        Cmd::CallCost(args) => block_on("call-cost", call_cost::run(args)),
    }
}

/// Runs `work` (the command `what`) to its end on a multi-threaded runtime; its error, if
/// any, goes to stderr and fails the process.
fn block_on<E: std::fmt::Display>(
    what: &str,
    work: impl std::future::Future<Output = Result<(), E>>,
) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("delayq-bench {what}: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(work) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("delayq-bench {what}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr: an agent's stdout carries the protocol and nothing else, and the
/// driver's stdout carries the summary table. `spans`: the layer that exports spans, for an
/// agent of `run --otlp`.
fn init_logging(spans: Option<Box<dyn Layer<Registry> + Send + Sync>>) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Log lines only: formatting every span's fields (a span per message when spans are
    // exported) would cost more than exporting them.
    let lines_only = tracing_subscriber::filter::filter_fn(|meta| !meta.is_span());
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_filter(lines_only)
        .with_filter(filter);
    tracing_subscriber::registry().with(spans).with(logs).init();
}
