//! The agent side of the Agent protocol: delayq as the system under test.
//!
//! An agent connects to Redis, announces `ready`, then obeys commands read from stdin and
//! reports events on stdout, one JSON object per line, flushed at once so the driver's clock
//! readings are not skewed by buffering. Everything else it has to say goes to stderr.

mod consumer;
mod http;
mod log;
mod producer;
mod push;
mod target;
mod wire;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use delayq::telemetry::Telemetry;
use delayq::{Config, DelayQ, Queue};
use tracing_subscriber::Layer;

use crate::error::Result;
use crate::protocol::Event;
use crate::workload::Workload;
use target::Target;
use wire::{emit, Commands};

/// Which side an agent plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Role {
    /// Enqueues the workload's messages on `produce`.
    Producer,
    /// Consumes between `start` and `stop`.
    Consumer,
}

impl Role {
    /// The name used on the command line and in file names.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Producer => "producer",
            Role::Consumer => "consumer",
        }
    }
}

/// How an agent reaches the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum Via {
    /// The delayq library, straight to Redis.
    #[default]
    Library,
    /// `delayq serve`'s HTTP API.
    Http,
    /// `delayq serve` pushing each due message to the consumer, an HTTP receiver; the
    /// producer sends as with `Http`.
    Push,
}

impl Via {
    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Library => "library",
            Via::Http => "http",
            Via::Push => "push",
        }
    }
}

/// Command line of `delayq-bench agent`.
#[derive(Args, Debug)]
pub struct AgentArgs {
    /// producer or consumer.
    #[arg(long, value_enum)]
    pub role: Role,
    /// W1, W2a, W2b, W3 or W4.
    #[arg(long)]
    pub workload: Workload,
    /// Redis port on 127.0.0.1.
    #[arg(long)]
    pub port: u16,
    /// Number of messages of the workload.
    #[arg(long)]
    pub n: u64,
    /// Consumer: where to write `seq<TAB>due_ms<TAB>start_ms` per handler invocation.
    #[arg(long)]
    pub deliveries: Option<PathBuf>,
    /// Through the library (Redis at --port), or HTTP or push (`delayq serve` at --http-port).
    #[arg(long, value_enum, default_value_t)]
    pub via: Via,
    /// `delayq serve`'s port on 127.0.0.1, with `--via http` or `--via push`.
    #[arg(long)]
    pub http_port: Option<u16>,
    /// `--port` is a node of a Redis Cluster: connect with `DelayQ::connect_cluster` (the
    /// driver has created the queue with its partitions).
    #[arg(long)]
    pub cluster: bool,
}

/// Runs an agent to the end; a fatal error is reported as an `error` event and exit code 1.
pub fn main(args: AgentArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the tokio runtime: {e}")),
    };
    // `run --otlp` hands its receiver's address down: spans on, exported to it.
    let telemetry = {
        let _in_runtime = runtime.enter();
        Telemetry::from_env("delayq-bench")
    };
    let telemetry = match telemetry {
        Ok(t) => t,
        Err(e) => return fail(&format!("OTLP: {e}")),
    };
    crate::init_logging(telemetry.as_ref().map(|t| t.layer().boxed()));
    let outcome = runtime.block_on(run(args));
    if let Some(telemetry) = telemetry {
        if let Err(e) = runtime.block_on(telemetry.shutdown()) {
            tracing::warn!("OTLP: the last spans were not sent: {e}");
        }
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}

fn fail(msg: &str) -> ExitCode {
    tracing::error!("{msg}");
    // If even this write fails the driver is gone and the exit code is all that is left.
    let _ = emit(&Event::Error {
        msg: msg.to_owned(),
    });
    ExitCode::FAILURE
}

async fn run(args: AgentArgs) -> Result<()> {
    let queue = match args.via {
        Via::Library => Target::Library(connect(args.port, args.cluster, args.workload).await?),
        Via::Http | Via::Push if args.workload.queue_names().len() > 1 => {
            return Err(format!("{} runs through the library only", args.workload).into())
        }
        Via::Http | Via::Push => {
            let port = args
                .http_port
                .ok_or("--via http or push needs --http-port")?;
            let queue = http::HttpQueue::new(port)?;
            match args.via {
                Via::Push => Target::Push(queue),
                _ => Target::Http(queue),
            }
        }
    };
    let commands = Commands::spawn();
    match args.role {
        Role::Producer => producer::run(queue, args.workload, args.n, commands).await,
        Role::Consumer => {
            let file = args
                .deliveries
                .ok_or("a consumer needs --deliveries FILE")?;
            consumer::run(queue, args.n, file, commands).await
        }
    }
}

async fn connect(port: u16, cluster: bool, workload: Workload) -> Result<Vec<Queue>> {
    let url = format!("redis://127.0.0.1:{port}/");
    let config = client_config()?;
    let dq = match cluster {
        false => DelayQ::connect_with(&url, config).await,
        true => DelayQ::connect_cluster(&[&url], config).await,
    }
    .map_err(|e| format!("cannot connect to {url}: {e}"))?;
    let mut queues = Vec::new();
    for name in workload.queue_names() {
        queues.push(dq.queue(&name)?);
    }
    Ok(queues)
}

/// The client's settings: the defaults, but for a look-ahead and a claim spacing given in
/// the environment (`DELAYQ_BENCH_LOOK_AHEAD`, `DELAYQ_BENCH_CLAIM_SPACING`, e.g. `25ms`), so
/// that one driver runs its agents with them beside an older build's, which ignores them;
/// and the keys of `--encrypt` (`DELAYQ_BENCH_KEYS_FILE`).
fn client_config() -> Result<Config> {
    let mut config = Config::default();
    let setting = |name: &str| -> Result<Option<std::time::Duration>> {
        match std::env::var(name) {
            Ok(text) => humantime::parse_duration(&text)
                .map(Some)
                .map_err(|e| format!("{name}={text}: {e}").into()),
            Err(_) => Ok(None),
        }
    };
    if let Some(ahead) = setting("DELAYQ_BENCH_LOOK_AHEAD")? {
        config = config.look_ahead(ahead);
    }
    if let Some(spacing) = setting("DELAYQ_BENCH_CLAIM_SPACING")? {
        config = config.claim_spacing(spacing);
    }
    // `--encrypt`: the driver's key file.
    if let Ok(path) = std::env::var("DELAYQ_BENCH_KEYS_FILE") {
        config = config.keys(delayq::Keyring::load(std::path::Path::new(&path))?);
    }
    Ok(config)
}
