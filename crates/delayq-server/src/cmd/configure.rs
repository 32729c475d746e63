//! `delayq configure QUEUE ...`: changes a queue's settings (the library's `Setting`s), all
//! or none, and prints the stats with the settings as they now are.

use std::time::Duration;

use anyhow::bail;
use delayq::Setting;

use super::common::{print, stats_json, Common};

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
             --retain-completed, --no-retain-completed, --events or --no-events"
        );
    }
    let ConfigureArgs { common, queue, .. } = args;
    let q = common.connect().await?.queue(&queue)?;
    q.configure(&changes).await?;
    let s = q.stats().await?;
    let out = stats_json(&queue, &s, q.partitions().await?);
    print(&common, &out, || {
        let shown: Vec<String> = changes.iter().map(|c| changed(c, &s)).collect();
        format!("{queue}: {}", shown.join(", "))
    })
}

/// A setting that `configure` changed, as the queue has it now.
fn changed(setting: &Setting, s: &delayq::Stats) -> String {
    let duration = |d: Option<std::time::Duration>| {
        d.map_or("none".into(), |d| humantime::format_duration(d).to_string())
    };
    let rate = |l: Option<delayq::RateLimit>| {
        l.map_or("none".into(), |l| {
            format!("{}/s, burst {}", l.per_second, l.burst)
        })
    };
    match setting {
        Setting::IdempotencyWindow(_) => format!(
            "idempotency window {}",
            humantime::format_duration(s.idempotency_window)
        ),
        Setting::RateLimit(_) => format!("rate limit {}", rate(s.rate_limit)),
        Setting::GroupConcurrency(_) => format!(
            "group concurrency {}",
            s.group_concurrency.map_or("none".into(), |n| n.to_string())
        ),
        Setting::GroupRateLimit(_) => format!("group rate limit {}", rate(s.group_rate_limit)),
        Setting::DefaultTtl(_) => format!("default ttl {}", duration(s.default_ttl)),
        Setting::OnExpire(_) => format!(
            "expired messages {}",
            if s.drop_expired {
                "dropped"
            } else {
                "dead-lettered"
            }
        ),
        Setting::MaxDelay(_) => format!("max delay {}", duration(s.max_delay)),
        Setting::RetainCompleted(_) => match s.retain_completed {
            Some(r) => format!(
                "final records kept {}, at most {}",
                humantime::format_duration(r.keep_for),
                r.max
            ),
            None => "final records kept none".into(),
        },
        Setting::Events(_) => format!(
            "events kept {}",
            s.events_kept.map_or("none".into(), |n| n.to_string())
        ),
        other => format!("{other:?}"),
    }
}

/// The settings the flags change, in the library's terms.
fn changes(args: &ConfigureArgs) -> Vec<Setting> {
    let mut changes = Vec::new();
    if let Some(window) = args.idempotency_window {
        changes.push(Setting::IdempotencyWindow(window));
    }
    if let Some(per_second) = args.rate_limit {
        let burst = args.burst.unwrap_or(1);
        changes.push(Setting::RateLimit(Some(delayq::RateLimit {
            per_second,
            burst,
        })));
    } else if args.no_rate_limit {
        changes.push(Setting::RateLimit(None));
    }
    if args.group_concurrency.is_some() || args.no_group_concurrency {
        changes.push(Setting::GroupConcurrency(args.group_concurrency));
    }
    if args.group_rate_limit.is_some() || args.no_group_rate_limit {
        changes.push(Setting::GroupRateLimit(args.group_rate_limit.map(
            |per_second| delayq::RateLimit {
                per_second,
                burst: args.group_burst.unwrap_or(1),
            },
        )));
    }
    if args.default_ttl.is_some() || args.no_default_ttl {
        changes.push(Setting::DefaultTtl(args.default_ttl));
    }
    if args.max_delay.is_some() || args.no_max_delay {
        changes.push(Setting::MaxDelay(args.max_delay));
    }
    if let (Some(keep_for), Some(max)) = (args.retain_completed, args.retain_max) {
        changes.push(Setting::RetainCompleted(Some(delayq::Retention {
            keep_for,
            max,
        })));
    } else if args.no_retain_completed {
        changes.push(Setting::RetainCompleted(None));
    }
    if args.events {
        let max = args.events_max.unwrap_or(delayq::DEFAULT_EVENTS_KEPT);
        changes.push(Setting::Events(Some(max)));
    } else if args.no_events {
        changes.push(Setting::Events(None));
    }
    if let Some(action) = &args.on_expire {
        changes.push(Setting::OnExpire(if action == "drop" {
            delayq::OnExpire::Drop
        } else {
            delayq::OnExpire::DeadLetter
        }));
    }
    changes
}
