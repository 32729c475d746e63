//! `delayq serve`: the HTTP API on a Redis given by URL, or on a private, durable
//! `redis-server` that it starts, supervises and stops (`embedded.rs`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use delayq::telemetry::Telemetry;
use delayq::{Config, DelayQ};
use delayq_server::auth::Tokens;
use delayq_server::embedded::{EmbeddedOptions, EmbeddedRedis};
use delayq_server::limits::Limits;
use delayq_server::state::AppState;
use tokio::net::TcpListener;
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;

use super::keys_file::KeysFile;
use super::redis_args::RedisArgs;
use super::token_reload::TokenSource;

/// Flags of `delayq serve`.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// A TOML file of these flags by their long names (`max-wait = "30s"`); a flag on the
    /// command line or in the environment wins over it.
    #[arg(long, env = "DELAYQ_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    redis: RedisArgs,
    #[command(flatten)]
    keys: KeysFile,
    /// Address to listen on.
    #[arg(long, env = "DELAYQ_LISTEN", default_value = "127.0.0.1:7400")]
    listen: SocketAddr,
    /// Embedded Redis: fsync every write (appendfsync always) instead of once a second.
    #[arg(long)]
    fsync_always: bool,
    /// Embedded Redis: the server binary to run. Default: redis-server, else valkey-server,
    /// on PATH.
    #[arg(long, env = "DELAYQ_REDIS_SERVER")]
    redis_server: Option<PathBuf>,
    /// Embedded Redis: its memory limit (e.g. 512mb, 4gb); sends are refused beyond it while
    /// draining goes on. Default: half of the machine's (or its cgroup's) memory.
    #[arg(long, value_parser = delayq_server::embedded::parse_size)]
    redis_maxmemory: Option<u64>,
    /// File of bearer tokens, one `role:token` per line (roles: send, consume, admin,
    /// monitor); read again on SIGHUP and when it changes.
    #[arg(long, env = "DELAYQ_TOKENS_FILE")]
    tokens_file: Option<PathBuf>,
    /// Bearer tokens as `role:token,role:token` (a file is safer: the environment of a
    /// process can be read by others of its user).
    #[arg(long, env = "DELAYQ_TOKENS", hide_env_values = true)]
    tokens: Option<String>,
    /// Listen on a non-loopback address without tokens.
    #[arg(long)]
    insecure_public: bool,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    max_body_bytes: usize,
    /// Most messages or receipts in one request.
    #[arg(long, default_value_t = delayq::MAX_BATCH)]
    max_batch: usize,
    /// Longest long-poll wait.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    max_wait: Duration,
    /// Longest lease.
    #[arg(long, default_value = "12h", value_parser = humantime::parse_duration)]
    max_lease: Duration,
    /// Longest delay.
    #[arg(long, default_value = "3660days", value_parser = humantime::parse_duration)]
    max_delay: Duration,
    /// How long a Redis command may take before the request fails with 503.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    redis_timeout: Duration,
    /// The least time between two claims of this server on one partition of a queue (at
    /// most 100ms; 0s: none). Messages that come due close together are then taken by one
    /// claim each spacing, which costs Redis far less than a claim each; one may be late by
    /// up to this time. A backlog is claimed without a pause.
    #[arg(long, default_value = "1ms", value_parser = humantime::parse_duration)]
    claim_spacing: Duration,
    /// How long before its due time push delivery may take a message (at most 1s; 0s: only
    /// once due). It is pushed at its due time, never before; taken ahead, it counts as in
    /// flight (a cancel answers `in_flight`). HTTP receives take only what is due.
    #[arg(long, default_value = "2ms", value_parser = humantime::parse_duration)]
    look_ahead: Duration,
    /// Longest a client may take to send a request's headers (and may idle between requests).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    header_timeout: Duration,
    /// Longest a client may take to send a request's body (every route).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    body_timeout: Duration,
    /// Most event streams (SSE) open at once on this server; beyond, 429 too_many_streams.
    #[arg(long, default_value_t = 1024)]
    max_event_streams: usize,
    /// Most event streams open at once per token (a dashboard session counts as its token).
    #[arg(long, default_value_t = 64)]
    max_event_streams_per_token: usize,
    /// About how many entries the audit log keeps in Redis (`dq:audit`); the oldest go first.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    audit_max_entries: u64,
    /// Most bytes of request bodies the server holds at once, across all requests; a body
    /// beyond is refused with 503 server_busy.
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    max_body_bytes_in_flight: usize,
    /// Most connections open at once.
    #[arg(long, default_value_t = 4096)]
    max_connections: usize,
    /// Names (besides loopback names and IP addresses) this server answers to, comma-separated:
    /// without tokens, requests naming another host are refused (DNS rebinding), and state
    /// changes are taken from pages of these origins (behind a proxy, its public name).
    #[arg(long, env = "DELAYQ_ALLOW_HOST", value_delimiter = ',')]
    allow_host: Vec<String>,
    /// Most connections from one client at once (an IPv4 address, an IPv6 /64), when
    /// listening on a non-loopback address (0: no cap of its own).
    #[arg(long, default_value_t = 256)]
    max_connections_per_peer: usize,
    /// Networks push targets may be in although they are loopback, private or link-local
    /// (comma-separated, e.g. 10.1.0.0/16,127.0.0.1): by default pushes go to public
    /// addresses only.
    #[arg(long, env = "DELAYQ_PUSH_ALLOW", value_delimiter = ',')]
    push_allow: Vec<delayq_server::push::address::Network>,
    /// Export OpenTelemetry spans (HTTP requests; send, receive, process, ack, nack; push)
    /// over OTLP/HTTP to this base URL, e.g. http://127.0.0.1:4318 (spans go to
    /// /v1/traces). Off when unset.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", hide_env_values = true)]
    otlp_endpoint: Option<String>,
    /// The service name spans are exported under.
    #[arg(long, env = "OTEL_SERVICE_NAME", default_value = "delayq")]
    otlp_service_name: String,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let telemetry = start_logs_and_traces(&args)?;
    let result = run_logged(args).await;
    if let Some(telemetry) = telemetry {
        // The last spans, of the requests that finished during shutdown.
        if let Err(e) = telemetry.shutdown().await {
            tracing::warn!("OTLP: the last spans were not sent: {e}");
        }
    }
    result
}

/// Logs to stderr (`RUST_LOG`, default `info`), and spans to `--otlp-endpoint` when given:
/// delayq's own only, never the libraries' below it.
fn start_logs_and_traces(args: &ServeArgs) -> anyhow::Result<Option<Telemetry>> {
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // Log lines only: formatting every span's fields (a span per message and per
        // request when spans are exported) would cost more than exporting them.
        .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
            !meta.is_span()
        }))
        .with_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        );
    let endpoint = args
        .otlp_endpoint
        .as_deref()
        .filter(|e| !e.trim().is_empty());
    let telemetry = endpoint
        .map(|endpoint| Telemetry::otlp(endpoint.trim(), &args.otlp_service_name))
        .transpose()
        .context("--otlp-endpoint")?;
    let spans = telemetry.as_ref().map(|t| {
        let ours = Targets::new()
            .with_target("delayq", Level::INFO)
            .with_target("delayq_server", Level::INFO);
        t.layer().with_filter(ours)
    });
    tracing_subscriber::registry().with(spans).with(logs).init();
    if let Some(endpoint) = endpoint {
        // Its scheme, host and port only: a collector's URL may carry credentials.
        let endpoint = delayq_server::redact::origin_of(endpoint);
        tracing::info!(endpoint, "exporting spans over OTLP");
    }
    Ok(telemetry)
}

async fn run_logged(args: ServeArgs) -> anyhow::Result<()> {
    let tokens = token_source(&args).load()?;
    if tokens.is_empty() && !args.listen.ip().is_loopback() && !args.insecure_public {
        bail!(
            "refusing to listen on {} without tokens: anyone who can reach it could read and \
             delete messages. Configure tokens (--tokens-file), listen on loopback, or pass \
             --insecure-public",
            args.listen
        );
    }
    if tokens.is_empty() {
        tracing::warn!("no tokens configured: every request is allowed (loopback only)");
    }
    if args.max_batch == 0 || args.max_batch > delayq::MAX_BATCH {
        bail!("--max-batch is 1 to {}", delayq::MAX_BATCH);
    }
    if args.claim_spacing > delayq::MAX_CLAIM_SPACING {
        bail!("--claim-spacing is at most {:?}", delayq::MAX_CLAIM_SPACING);
    }
    if args.look_ahead > delayq::MAX_LOOK_AHEAD {
        bail!("--look-ahead is at most {:?}", delayq::MAX_LOOK_AHEAD);
    }
    let limits = Limits {
        max_body_bytes: args.max_body_bytes,
        max_batch: args.max_batch,
        max_wait: args.max_wait,
        max_lease: args.max_lease,
        max_delay: args.max_delay.min(delayq::MAX_DELAY),
        header_timeout: args.header_timeout,
        body_timeout: args.body_timeout,
        max_body_bytes_in_flight: args.max_body_bytes_in_flight,
        max_event_streams: args.max_event_streams,
        max_event_streams_per_token: args.max_event_streams_per_token,
        audit_max_entries: usize::try_from(args.audit_max_entries).unwrap_or(usize::MAX),
        max_connections: args.max_connections,
        max_connections_per_peer: (!args.listen.ip().is_loopback()
            && args.max_connections_per_peer > 0)
            .then_some(args.max_connections_per_peer),
        allowed_hosts: args.allow_host.clone(),
        push_allow: args.push_allow.clone(),
        ..Limits::default()
    };

    let embedded = match args.redis.is_external() {
        true => None,
        false => Some(
            EmbeddedRedis::start(EmbeddedOptions {
                data_dir: args.redis.data_dir.clone(),
                fsync_always: args.fsync_always,
                redis_server: args.redis_server.clone(),
                maxmemory: args.redis_maxmemory,
            })
            .await?,
        ),
    };
    let url = match (&args.redis.redis_url, &embedded) {
        (Some(url), _) => Some(url.clone()),
        (None, Some(e)) => Some(e.url().to_owned()),
        (None, None) => None,
    };
    let served = serve(&args, url.as_deref(), embedded.is_none(), limits, tokens).await;
    if let Some(embedded) = embedded {
        // Last, after every request has finished.
        embedded.stop().await?;
    }
    served
}

/// Serves on the Redis at `url`, or on the cluster of `--redis-cluster` when `url` is `None`.
async fn serve(
    args: &ServeArgs,
    url: Option<&str>,
    external: bool,
    limits: Limits,
    tokens: Tokens,
) -> anyhow::Result<()> {
    let mut config = Config::default()
        .response_timeout(args.redis_timeout)
        .claim_spacing(args.claim_spacing)
        .look_ahead(args.look_ahead)
        .process_role("server");
    if let Some(keys) = args.keys.load()? {
        config = config.keys(keys);
    }
    let dq = match url {
        Some(url) => {
            if external {
                check_redis_config(url).await;
            }
            DelayQ::connect_with(url, config)
                .await
                .context("cannot connect to Redis")?
        }
        None => match args.redis.connect_cluster(config).await {
            Some(cluster) => cluster?,
            None => bail!("no Redis"),
        },
    };
    tracing::info!(server = %dq.server(), "connected to {}", dq.server());
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    tracing::info!(address = %args.listen, "delayq serving on http://{}", args.listen);
    let metrics = delayq_server::metrics::install().map_err(|e| anyhow::anyhow!("metrics: {e}"))?;
    let state = AppState::new(dq, limits, tokens, Some(metrics));
    super::token_reload::spawn(token_source(args), state.clone())?;
    delayq_server::server::run(listener, state, shutdown_signal()).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Where the tokens come from.
fn token_source(args: &ServeArgs) -> TokenSource {
    TokenSource {
        file: args.tokens_file.clone(),
        inline: args.tokens.clone(),
    }
}

/// Warns where Redis's settings can lose messages. A managed Redis may refuse `CONFIG GET`;
/// that is not an error.
async fn check_redis_config(url: &str) {
    let get = |name: &'static str| async move {
        let client = redis::Client::open(url)?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let pair: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query_async(&mut conn)
            .await?;
        Ok::<_, redis::RedisError>(pair.get(1).cloned().unwrap_or_default())
    };
    match get("maxmemory-policy").await {
        Ok(p) if p != "noeviction" => tracing::warn!(
            policy = %p,
            "Redis may evict delayq's keys when memory is full, losing messages: set maxmemory-policy noeviction"
        ),
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(error = %e, "cannot read Redis's settings; make sure it runs with appendonly yes and maxmemory-policy noeviction");
            return;
        }
    }
    if let Ok(aof) = get("appendonly").await {
        if aof != "yes" {
            tracing::warn!("Redis runs without AOF (appendonly no): messages sent since its last snapshot are lost if it restarts; set appendonly yes");
        }
    }
    if let Ok(fsync) = get("appendfsync").await {
        if fsync == "no" {
            tracing::warn!("appendfsync no: the operating system decides when sends reach disk; use everysec or always");
        }
    }
}

/// Completes at SIGINT or SIGTERM. The SIGTERM handler is installed when this is called,
/// not when the future is first polled: the server may answer (and a supervisor send
/// SIGTERM) before its accept loop polls it.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let term_signal = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    async move {
        shutdown_on(
            #[cfg(unix)]
            term_signal,
        )
        .await
    }
}

async fn shutdown_on(#[cfg(unix)] term_signal: std::io::Result<tokio::signal::unix::Signal>) {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match term_signal {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutting down: finishing requests in progress");
}
