//! `delayq schedule ...`: create, show, list and delete recurring schedules. Schedules fire
//! wherever `delayq serve` runs (each server runs a scheduler).

use std::time::Duration;

use anyhow::bail;
use delayq::{Firing, MissedTicks, PayloadKind, Recurrence, ScheduleInfo, SendOptions};
use serde_json::{json, Value};

use super::common::{parse_backoff, payload_text, print, time_text, Common};

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
            let recurrence = match (cron, every) {
                (Some(cron), _) => Recurrence::cron(&cron, time_zone.as_deref().unwrap_or("UTC"))?,
                (None, Some(every)) => Recurrence::interval(every, 0)?,
                (None, None) => bail!("give --cron or --every"),
            };
            let missed: MissedTicks = missed.parse()?;
            let firing = Firing {
                jitter,
                overlap: overlap.parse()?,
            };
            let mut options = SendOptions::new();
            if let Some(p) = priority {
                options = options.priority(p);
            }
            if let Some(n) = max_attempts {
                options = options.max_attempts(n);
            }
            if let Some(spec) = backoff {
                let backoff = parse_backoff(&spec).map_err(|e| anyhow::anyhow!("--backoff {e}"))?;
                options = options.backoff(backoff);
            }
            if json_payload {
                serde_json::from_str::<Value>(&payload)
                    .map_err(|e| anyhow::anyhow!("--json-payload: not JSON: {e}"))?;
                options = options.kind(PayloadKind::Json);
            }
            let q = common.connect().await?.queue(&queue)?;
            q.schedules()
                .put_with(
                    &name,
                    recurrence,
                    missed,
                    firing,
                    payload.as_bytes(),
                    &options,
                )
                .await?;
            let Some(info) = q.schedules().get(&name).await? else {
                bail!("schedule {name} was deleted meanwhile");
            };
            show(&common, &[info], false)
        }
        ScheduleCommand::Get {
            common,
            queue,
            name,
        } => {
            let q = common.connect().await?.queue(&queue)?;
            let Some(info) = q.schedules().get(&name).await? else {
                bail!("no schedule {name} in {queue}");
            };
            show(&common, &[info], false)
        }
        ScheduleCommand::List { common, queue } => {
            let q = common.connect().await?.queue(&queue)?;
            show(&common, &q.schedules().list().await?, true)
        }
        ScheduleCommand::Delete {
            common,
            queue,
            name,
        } => {
            let q = common.connect().await?.queue(&queue)?;
            if !q.schedules().delete(&name).await? {
                bail!("no schedule {name} in {queue}");
            }
            print(&common, &json!({ "deleted": name }), || {
                format!("deleted {name}")
            })
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
            let ms = |t: std::time::SystemTime| {
                t.duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64)
            };
            let q = common.connect().await?.queue(&queue)?;
            let Some(done) = q.schedules().backfill(&name, ms(from), ms(to)).await? else {
                bail!("no schedule {name} in {queue}");
            };
            let out = json!({ "sent": done.sent, "already_sent": done.already_sent });
            print(&common, &out, || {
                format!(
                    "{name}: {} ticks sent, {} sent before",
                    done.sent, done.already_sent
                )
            })
        }
    }
}

/// Pauses or resumes schedule `name` of `queue`, and shows it.
async fn set_paused(common: &Common, queue: &str, name: &str, paused: bool) -> anyhow::Result<()> {
    let q = common.connect().await?.queue(queue)?;
    let schedules = q.schedules();
    let found = match paused {
        true => schedules.pause(name).await?,
        false => schedules.resume(name).await?,
    };
    match found.then_some(schedules.get(name).await?).flatten() {
        Some(info) => show(common, &[info], false),
        None => bail!("no schedule {name} in {queue}"),
    }
}

/// Prints `schedules`: as a JSON array for a `list`, else as the one object.
fn show(common: &Common, schedules: &[ScheduleInfo], list: bool) -> anyhow::Result<()> {
    let when = |s: &ScheduleInfo| s.recurrence.to_string();
    let out: Vec<Value> = schedules
        .iter()
        .map(|s| {
            let cron = s.recurrence.as_cron();
            json!({
                "name": s.name,
                "cron": cron.map(|c| c.0),
                "time_zone": cron.map(|c| c.1),
                "every_ms": s.recurrence.as_interval().map(|(d, _)| d.as_millis() as u64),
                "missed": s.missed.to_string(),
                "priority": s.priority,
                "max_attempts": s.max_attempts,
                "payload": payload_text(&s.payload, s.kind),
                "created_ms": s.created_ms,
                "last_tick_ms": s.last_tick_ms,
                "next_ticks_ms": s.next_ticks_ms,
                "paused": s.paused,
                "jitter_ms": s.firing.jitter.map(|j| j.as_millis() as u64),
                "overlap": s.firing.overlap.as_str(),
            })
        })
        .collect();
    let json = match (list, out.first()) {
        (false, Some(one)) => one.clone(),
        _ => Value::Array(out),
    };
    print(common, &json, || {
        let mut t = String::new();
        for s in schedules {
            let next: Vec<String> = s.next_ticks_ms.iter().map(|t| time_text(*t)).collect();
            t.push_str(&format!(
                "{}{}  {}  missed: {}  last: {}\n  next: {}\n",
                s.name,
                if s.paused { " (paused)" } else { "" },
                when(s),
                s.missed,
                s.last_tick_ms.map_or("-".into(), time_text),
                next.join(", ")
            ));
        }
        t.trim_end().to_owned()
    })
}
