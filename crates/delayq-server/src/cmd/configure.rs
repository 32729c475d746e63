//! `delayq configure QUEUE ...`: changes a queue's settings (`PATCH /v1/queues/{queue}`), all
//! or none, and prints the settings it changed as they now are (`--json`: the API's answer,
//! the queue's stats and settings).

use std::time::Duration;

use anyhow::bail;
use axum::http::Method;
use serde_json::{json, Value};

use super::api_client::segment;
use super::common::{ms, print, Common};

/// The settings to change; those not given stay as they are.
#[derive(clap::Args)]
pub struct ConfigureArgs {
    #[command(flatten)]
    pub common: Common,
    pub queue: String,
    /// Keep a caller id reserved this long after its message is acked, cancelled or
    /// purged, so a late retry of the send is still a duplicate (e.g. 1h; 0s: off).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub idempotency_window: Option<Duration>,
    /// At most this many deliveries a second, across every consumer.
    #[arg(long, conflicts_with = "no_rate_limit")]
    pub rate_limit: Option<u32>,
    /// With --rate-limit: how many at once after a quiet spell (default 1).
    #[arg(long, requires = "rate_limit")]
    pub burst: Option<u32>,
    /// Lift the queue's rate limit.
    #[arg(long)]
    pub no_rate_limit: bool,
    /// At most this many messages of one group in flight at once (1: each group in
    /// order).
    #[arg(long, conflicts_with = "no_group_concurrency")]
    pub group_concurrency: Option<u32>,
    /// Lift the limit on a group's messages in flight.
    #[arg(long)]
    pub no_group_concurrency: bool,
    /// At most this many deliveries a second of each group (unless it has its own).
    #[arg(long, conflicts_with = "no_group_rate_limit")]
    pub group_rate_limit: Option<u32>,
    /// With --group-rate-limit: how many of a group at once after a quiet spell
    /// (default 1).
    #[arg(long, requires = "group_rate_limit")]
    pub group_burst: Option<u32>,
    /// Lift the rate limit of each group.
    #[arg(long)]
    pub no_group_rate_limit: bool,
    /// Never deliver a message without a deadline of its own more than this long after
    /// it is due (e.g. 10m).
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "no_default_ttl")]
    pub default_ttl: Option<Duration>,
    /// Lift the default ttl.
    #[arg(long)]
    pub no_default_ttl: bool,
    /// What an expired message becomes: dead-letter (the default) or drop.
    #[arg(long, value_parser = ["dead-letter", "drop"])]
    pub on_expire: Option<String>,
    /// Encrypt the payloads sent from now on (on), or send them in clear again (off), with
    /// the newest key of --keys-file (or, with --url, the server's).
    #[arg(long, value_parser = ["on", "off"])]
    pub encryption: Option<String>,
    /// Refuse sends due further out than this (e.g. 30d).
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "no_max_delay")]
    pub max_delay: Option<Duration>,
    /// Lift the queue's max delay.
    #[arg(long)]
    pub no_max_delay: bool,
    /// Keep the final record of each message that ends (acked, cancelled, expired, dead)
    /// this long (e.g. 7d), for `delayq get`.
    #[arg(long, value_parser = humantime::parse_duration, requires = "retain_max",
        conflicts_with = "no_retain_completed")]
    pub retain_completed: Option<Duration>,
    /// At most this many final records per partition (with --retain-completed).
    #[arg(long, requires = "retain_completed")]
    pub retain_max: Option<u32>,
    /// Stop keeping final records, and drop those kept.
    #[arg(long)]
    pub no_retain_completed: bool,
    /// Record an event for each change of a message's state, for `delayq events`.
    #[arg(long, conflicts_with = "no_events")]
    pub events: bool,
    /// With --events: about how many stream entries each partition keeps, an event or up
    /// to 100 of one call each (default 20000).
    #[arg(long, requires = "events")]
    pub events_max: Option<u64>,
    /// Stop recording events, and drop those kept.
    #[arg(long)]
    pub no_events: bool,
}

pub async fn run(args: ConfigureArgs) -> anyhow::Result<()> {
    let changes = changes(&args);
    if changes.is_empty() {
        bail!(
            "nothing to change: give --idempotency-window, --rate-limit, \
             --no-rate-limit, --group-concurrency, --no-group-concurrency, \
             --group-rate-limit, --no-group-rate-limit, --default-ttl, \
             --no-default-ttl, --on-expire, --max-delay, --no-max-delay, \
             --retain-completed, --no-retain-completed, --events, --no-events or \
             --encryption"
        );
    }
    let ConfigureArgs { common, queue, .. } = args;
    let path = format!("/v1/queues/{}", segment(&queue));
    let body = Value::Object(changes.iter().cloned().collect());
    let s = common
        .api()
        .await?
        .call(Method::PATCH, &path, Some(&body))
        .await?;
    print(&common, &s, || {
        let shown: Vec<String> = changes.iter().map(|(key, _)| changed(key, &s)).collect();
        format!("{queue}: {}", shown.join(", "))
    })
}

/// A setting that `configure` changed (by its name in the API), as the queue has it now.
fn changed(key: &str, s: &Value) -> String {
    let duration = |v: &Value| {
        v.as_u64().map_or("none".into(), |n| {
            humantime::format_duration(Duration::from_millis(n)).to_string()
        })
    };
    let rate = |v: &Value| match v["per_second"].as_u64() {
        Some(per_second) => format!("{per_second}/s, burst {}", v["burst"]),
        None => "none".into(),
    };
    let count = |v: &Value| v.as_u64().map_or("none".into(), |n| n.to_string());
    match key {
        "idempotency_window" => format!(
            "idempotency window {}",
            duration(&s["idempotency_window_ms"])
        ),
        "rate_limit" => format!("rate limit {}", rate(&s["rate_limit"])),
        "group_concurrency" => format!("group concurrency {}", count(&s["group_concurrency"])),
        "group_rate_limit" => format!("group rate limit {}", rate(&s["group_rate_limit"])),
        "default_ttl" => format!("default ttl {}", duration(&s["default_ttl_ms"])),
        "on_expire" => format!(
            "expired messages {}",
            match s["on_expire"].as_str() {
                Some("drop") => "dropped",
                _ => "dead-lettered",
            }
        ),
        "max_delay" => format!("max delay {}", duration(&s["max_delay_ms"])),
        "retain_completed" => match s["retain_completed"]["max"].as_u64() {
            Some(max) => format!(
                "final records kept {}, at most {max}",
                duration(&s["retain_completed"]["keep_for_ms"])
            ),
            None => "final records kept none".into(),
        },
        "events" => format!("events kept {}", count(&s["events_max"])),
        "encryption" => match s["encryption"].as_bool() {
            Some(true) => "payloads encrypted".into(),
            _ => "payloads in clear".into(),
        },
        other => other.to_owned(),
    }
}

/// The settings the flags change, in the order of the flags' help, as the API's `PATCH`
/// body takes them (`null`: lifted).
fn changes(args: &ConfigureArgs) -> Vec<(String, Value)> {
    let mut changes = Vec::new();
    let mut set = |key: &str, value: Value| {
        changes.push((key.to_owned(), value));
    };
    if let Some(window) = args.idempotency_window {
        set("idempotency_window", json!(ms(window)));
    }
    if let Some(per_second) = args.rate_limit {
        let burst = args.burst.unwrap_or(1);
        set(
            "rate_limit",
            json!({ "per_second": per_second, "burst": burst }),
        );
    } else if args.no_rate_limit {
        set("rate_limit", Value::Null);
    }
    if args.group_concurrency.is_some() || args.no_group_concurrency {
        set("group_concurrency", json!(args.group_concurrency));
    }
    if let Some(per_second) = args.group_rate_limit {
        let burst = args.group_burst.unwrap_or(1);
        set(
            "group_rate_limit",
            json!({ "per_second": per_second, "burst": burst }),
        );
    } else if args.no_group_rate_limit {
        set("group_rate_limit", Value::Null);
    }
    if args.default_ttl.is_some() || args.no_default_ttl {
        set("default_ttl", json!(args.default_ttl.map(ms)));
    }
    if args.max_delay.is_some() || args.no_max_delay {
        set("max_delay", json!(args.max_delay.map(ms)));
    }
    if let (Some(keep_for), Some(max)) = (args.retain_completed, args.retain_max) {
        set(
            "retain_completed",
            json!({ "keep_for": ms(keep_for), "max": max }),
        );
    } else if args.no_retain_completed {
        set("retain_completed", Value::Null);
    }
    if args.events {
        let max = args.events_max.unwrap_or(delayq::DEFAULT_EVENTS_KEPT);
        set("events", json!({ "max": max }));
    } else if args.no_events {
        set("events", Value::Null);
    }
    if let Some(on) = &args.encryption {
        set("encryption", json!(on == "on"));
    }
    if let Some(action) = &args.on_expire {
        let action = if action == "drop" {
            "drop"
        } else {
            "dead_letter"
        };
        set("on_expire", json!(action));
    }
    changes
}
