//! `delayq schedule ...`: create, show, list and delete recurring schedules. Schedules fire
//! wherever `delayq serve` runs (each server runs a scheduler).

use std::time::Duration;

use axum::http::Method;
use serde_json::{json, Value};

use super::api_client::{segment, ApiClient};
use super::common::{
    backoff_json, ms, payload_field, print, text, time_of, time_text, unix_ms, Common,
};

/// Schedule commands.
#[derive(clap::Subcommand)]
pub enum ScheduleCommand {
    /// Create a schedule, or replace one (it goes on from its last tick).
    Put {
        #[command(flatten)]
        common: Common,
        queue: String,
        name: String,
        /// The payload of each message (text; with --json-payload, a JSON document).
        payload: String,
        /// A cron expression: a crontab line "min hour day-of-month month day-of-week" (e.g.
        /// "30 9 * * MON-FRI", at second 0), the same with seconds first ("0 30 9 * *
        /// MON-FRI"), or a nickname ("@daily").
        #[arg(long, conflicts_with = "every", required_unless_present = "every")]
        cron: Option<String>,
        /// The IANA time zone of --cron (default UTC), e.g. Europe/Berlin.
        #[arg(long, requires = "cron")]
        time_zone: Option<String>,
        /// Or a fixed period from the Unix epoch (e.g. 10m fires at :00, :10, ...).
        #[arg(long, value_parser = humantime::parse_duration)]
        every: Option<Duration>,
        /// Ticks missed while no scheduler ran: skip, once (the latest) or all:N.
        #[arg(long, default_value = "skip")]
        missed: String,
        /// Each message's priority, 0 to 9.
        #[arg(long)]
        priority: Option<u8>,
        /// Each message's deliveries before the dead letters.
        #[arg(long)]
        max_attempts: Option<u16>,
        /// Each message's retry policy, as for `send`.
        #[arg(long)]
        backoff: Option<String>,
        /// Each tick's message is due up to this long after its tick (e.g. 30s), the same
        /// offset for every scheduler.
        #[arg(long, value_parser = humantime::parse_duration)]
        jitter: Option<Duration>,
        /// allow (every tick fires) or skip (a tick fires only once the last tick's message
        /// is no longer pending or in flight).
        #[arg(long, default_value = "allow")]
        overlap: String,
        /// The payload is JSON.
        #[arg(long)]
        json_payload: bool,
    },
    /// Show one schedule and its next run times.
    Get {
        #[command(flatten)]
        common: Common,
        queue: String,
        name: String,
    },
    /// The schedules of a queue, with their next run times.
    List {
        #[command(flatten)]
        common: Common,
        queue: String,
    },
    /// Delete a schedule (a tick already sent ahead and not yet due goes with it).
    Delete {
        #[command(flatten)]
        common: Common,
        queue: String,
        name: String,
    },
    /// Pause a schedule: no tick fires until it is resumed.
    Pause {
        #[command(flatten)]
        common: Common,
        queue: String,
        name: String,
    },
    /// Resume a paused schedule; its missed policy says which skipped ticks fire now.
    Resume {
        #[command(flatten)]
        common: Common,
        queue: String,
        name: String,
    },
    /// Send each tick from --from to --to that was never sent (missed while no scheduler
    /// ran, skipped, or paused); a repeat sends nothing more.
    Backfill {
        #[command(flatten)]
        common: Common,
        queue: String,
        name: String,
        /// From this time (RFC 3339), inclusive.
        #[arg(long, value_parser = delayq_server::rfc3339::system_time)]
        from: std::time::SystemTime,
        /// To this time (RFC 3339), inclusive; at most now.
        #[arg(long, value_parser = delayq_server::rfc3339::system_time)]
        to: std::time::SystemTime,
    },
}

pub async fn run(command: ScheduleCommand) -> anyhow::Result<()> {
    match command {
        ScheduleCommand::Put {
            common,
            queue,
            name,
            payload,
            cron,
            time_zone,
            every,
            missed,
            priority,
            max_attempts,
            backoff,
            jitter,
            overlap,
            json_payload,
        } => {
            let mut body = json!({ "missed": missed, "overlap": overlap });
            payload_field(&mut body, &payload, json_payload)?;
            if let Some(cron) = cron {
                body["cron"] = json!(cron);
                body["time_zone"] = json!(time_zone.unwrap_or_else(|| "UTC".into()));
            }
            if let Some(every) = every {
                body["every"] = json!(ms(every));
            }
            if let Some(p) = priority {
                body["priority"] = json!(p);
            }
            if let Some(n) = max_attempts {
                body["max_attempts"] = json!(n);
            }
            if let Some(spec) = backoff {
                body["backoff"] = backoff_json(&spec, None)?;
            }
            if let Some(jitter) = jitter {
                body["jitter"] = json!(ms(jitter));
            }
            let api = common.api().await?;
            let out = api
                .call(Method::PUT, &path(&queue, &name), Some(&body))
                .await?;
            show(&common, &out)
        }
        ScheduleCommand::Get {
            common,
            queue,
            name,
        } => {
            let out = common.api().await?.get(&path(&queue, &name)).await?;
            show(&common, &out)
        }
        ScheduleCommand::List { common, queue } => {
            let list = format!("/v1/queues/{}/schedules", segment(&queue));
            let out = common.api().await?.get(&list).await?;
            print(&common, &out, || {
                let schedules = out["schedules"].as_array().cloned().unwrap_or_default();
                schedules.iter().map(table).collect::<Vec<_>>().join("\n")
            })
        }
        ScheduleCommand::Delete {
            common,
            queue,
            name,
        } => {
            let api = common.api().await?;
            let out = api.call(Method::DELETE, &path(&queue, &name), None).await?;
            print(&common, &out, || format!("deleted {name}"))
        }
        ScheduleCommand::Pause {
            common,
            queue,
            name,
        } => set_paused(&common, &queue, &name, true).await,
        ScheduleCommand::Resume {
            common,
            queue,
            name,
        } => set_paused(&common, &queue, &name, false).await,
        ScheduleCommand::Backfill {
            common,
            queue,
            name,
            from,
            to,
        } => {
            let body = json!({ "from": unix_ms(from), "to": unix_ms(to) });
            let backfill = format!("{}/backfill", path(&queue, &name));
            let api: ApiClient = common.api().await?;
            let out = api.call(Method::POST, &backfill, Some(&body)).await?;
            print(&common, &out, || {
                format!(
                    "{name}: {} ticks sent, {} sent before",
                    out["sent"], out["already_sent"]
                )
            })
        }
    }
}

fn path(queue: &str, name: &str) -> String {
    format!("/v1/queues/{}/schedules/{}", segment(queue), segment(name))
}

/// Pauses or resumes schedule `name` of `queue`, and shows it.
async fn set_paused(common: &Common, queue: &str, name: &str, paused: bool) -> anyhow::Result<()> {
    let body = json!({ "paused": paused });
    let api = common.api().await?;
    let out = api
        .call(Method::PATCH, &path(queue, name), Some(&body))
        .await?;
    show(common, &out)
}

/// Prints one schedule.
fn show(common: &Common, schedule: &Value) -> anyhow::Result<()> {
    print(common, schedule, || table(schedule))
}

/// A schedule as two lines: name, when, missed and last tick; then its next ticks.
fn table(s: &Value) -> String {
    let when = match (s["cron"].as_str(), s["every_ms"].as_u64()) {
        (Some(cron), _) => format!("cron {cron:?} in {}", text(&s["time_zone"])),
        (None, Some(every)) => format!(
            "every {}",
            humantime::format_duration(std::time::Duration::from_millis(every))
        ),
        (None, None) => "-".into(),
    };
    let next: Vec<String> = s["next_ticks_ms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .map(time_text)
        .collect();
    format!(
        "{}{}  {when}  missed: {}  last: {}\n  next: {}",
        text(&s["name"]),
        if s["paused"].as_bool() == Some(true) {
            " (paused)"
        } else {
            ""
        },
        text(&s["missed"]),
        time_of(&s["last_tick_ms"]),
        next.join(", ")
    )
}
