//! What the admin commands share: their common flags and connection, how they print (a table,
//! or JSON with `--json`), and the text forms of times, payloads and backoffs.

use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{bail, Context};
use delayq::{Backoff, DelayQ, PayloadKind, Stats};
use serde_json::{json, Value};

use super::redis_args::RedisArgs;

/// Flags every admin command takes.
#[derive(clap::Args)]
pub struct Common {
    #[command(flatten)]
    redis: RedisArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl Common {
    /// Whether to print JSON.
    pub(super) fn json(&self) -> bool {
        self.json
    }

    pub(super) async fn connect(&self) -> anyhow::Result<DelayQ> {
        let dq = self.open().await?;
        CONNECTED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(dq.clone());
        Ok(dq)
    }

    async fn open(&self) -> anyhow::Result<DelayQ> {
        if let Some(cluster) = self.redis.connect_cluster(Default::default()).await {
            return cluster;
        }
        let url = match &self.redis.redis_url {
            Some(url) => url.clone(),
            None => {
                let socket = self.redis.data_dir.join("redis.sock");
                if !socket.exists() {
                    bail!(
                        "no --redis-url given and no embedded Redis running in {} (start `delayq serve` there, or pass --redis-url)",
                        self.redis.data_dir.display()
                    );
                }
                let socket = std::fs::canonicalize(&socket)
                    .with_context(|| format!("cannot resolve {}", socket.display()))?;
                format!("redis+unix://{}", socket.display())
            }
        };
        DelayQ::connect(&url)
            .await
            .context("cannot connect to Redis")
    }
}

/// The clients this run connected: their announcements in `dq:processes` are taken back
/// when it ends ([`withdraw_all`]), so a command that ended is not listed as a process.
static CONNECTED: Mutex<Vec<DelayQ>> = Mutex::new(Vec::new());

/// Takes back the announcements of every client this run connected (best effort: one not
/// taken back ends with its lease).
pub(super) async fn withdraw_all() {
    let clients = std::mem::take(&mut *CONNECTED.lock().unwrap_or_else(|p| p.into_inner()));
    for dq in clients {
        if let Err(e) = dq.withdraw().await {
            tracing::debug!(error = %e, "announcement not taken back; it ends with its lease");
        }
    }
}

pub(super) fn print(
    common: &Common,
    json: &Value,
    table: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if common.json {
        println!("{json}");
    } else {
        println!("{}", table());
    }
    Ok(())
}

/// A payload as text: JSON as it is, bytes as UTF-8 where they are, else base64.
pub(super) fn payload_text(payload: &[u8], kind: PayloadKind) -> String {
    use base64::Engine;
    match std::str::from_utf8(payload) {
        Ok(text) if kind == PayloadKind::Json || !text.chars().any(char::is_control) => {
            text.to_owned()
        }
        _ => format!(
            "base64:{}",
            base64::engine::general_purpose::STANDARD.encode(payload)
        ),
    }
}

pub(super) fn time_text(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// `--backoff`: `fixed:30s`, `exponential:1s..10m`, `linear:30s..10m` or `list:30s,2m,10m`.
pub(super) fn parse_backoff(spec: &str) -> Result<Backoff, String> {
    let duration =
        |text: &str| humantime::parse_duration(text.trim()).map_err(|e| format!("{text:?}: {e}"));
    let range = |text: &str| -> Result<(Duration, Duration), String> {
        let (base, cap) = text
            .split_once("..")
            .ok_or_else(|| format!("{text:?}: give BASE..CAP, e.g. 1s..10m"))?;
        Ok((duration(base)?, duration(cap)?))
    };
    match spec.split_once(':') {
        Some(("fixed", delay)) => Ok(Backoff::fixed(duration(delay)?)),
        Some(("exponential", r)) => range(r).map(|(base, cap)| Backoff::exponential(base, cap)),
        Some(("linear", r)) => range(r).map(|(base, cap)| Backoff::linear(base, cap)),
        Some(("list", delays)) => {
            let delays = delays
                .split(',')
                .map(duration)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Backoff::steps(&delays))
        }
        _ => Err(format!(
            "{spec:?}: give fixed:30s, exponential:1s..10m, linear:30s..10m or list:30s,2m,10m"
        )),
    }
}

/// A queue's stats and settings as `--json` prints them.
pub(super) fn stats_json(name: &str, s: &Stats, partitions: u16) -> Value {
    json!({
        "queue": name, "delayed": s.delayed, "ready": s.ready, "in_flight": s.in_flight,
        "dead": s.dead, "oldest_ready_lag_ms": s.oldest_ready_lag_ms, "overdue": s.overdue,
        "oldest_overdue_ms": s.oldest_overdue_ms, "partitions": partitions,
        "paused": s.paused, "idempotency_window_ms": s.idempotency_window.as_millis() as u64,
        "rate_limit": s.rate_limit.map(|l| json!({ "per_second": l.per_second, "burst": l.burst })),
        "data_format": s.data_format, "groups": s.groups,
        "group_concurrency": s.group_concurrency,
        "group_rate_limit": s.group_rate_limit
            .map(|l| json!({ "per_second": l.per_second, "burst": l.burst })),
        "default_ttl_ms": s.default_ttl.map(|d| d.as_millis() as u64),
        "on_expire": if s.drop_expired { "drop" } else { "dead_letter" },
        "max_delay_ms": s.max_delay.map(|d| d.as_millis() as u64),
        "completed": s.completed,
        "retain_completed": s.retain_completed
            .map(|r| json!({ "keep_for_ms": r.keep_for.as_millis() as u64, "max": r.max })),
        "events": s.events, "events_max": s.events_kept,
    })
}
