//! `delayq groups ...`: a queue's groups, most messages first; one group's counts and
//! settings; and one group's pause, resume, concurrency, weight and rate limit (README,
//! "Groups").

use delayq::{GroupInfo, GroupSettings, RateLimit};
use serde_json::{json, Value};

use super::common::{print, Common};

/// Group commands.
#[derive(clap::Subcommand)]
pub enum GroupsCommand {
    /// A queue's groups, most messages first.
    List {
        #[command(flatten)]
        common: Common,
        queue: String,
        #[arg(long, default_value_t = 0)]
        offset: u64,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// One group: its messages delayed, ready and in flight, and its settings.
    Show {
        #[command(flatten)]
        common: Common,
        queue: String,
        group: String,
    },
    /// Change one group's own settings.
    Set {
        #[command(flatten)]
        common: Common,
        queue: String,
        group: String,
        /// At most this many of its messages in flight, in place of the queue's.
        #[arg(long, conflicts_with = "queue_concurrency")]
        concurrency: Option<u32>,
        /// Go by the queue's group concurrency again.
        #[arg(long)]
        queue_concurrency: bool,
        /// Messages it gives per turn of the rotation (1 to 1000).
        #[arg(long)]
        weight: Option<u32>,
        /// At most this many of its messages delivered a second, in place of the queue's
        /// group rate limit.
        #[arg(long, conflicts_with = "queue_rate_limit")]
        rate_limit: Option<u32>,
        /// With --rate-limit: how many at once after a quiet spell (default 1).
        #[arg(long, requires = "rate_limit")]
        burst: Option<u32>,
        /// Go by the queue's group rate limit again.
        #[arg(long)]
        queue_rate_limit: bool,
    },
    /// Hold one group's messages while the rest of the queue flows.
    Pause {
        #[command(flatten)]
        common: Common,
        queue: String,
        group: String,
    },
    /// Deliver a paused group's messages again.
    Resume {
        #[command(flatten)]
        common: Common,
        queue: String,
        group: String,
    },
}

pub async fn run(command: GroupsCommand) -> anyhow::Result<()> {
    match command {
        GroupsCommand::List {
            common,
            queue,
            offset,
            limit,
        } => {
            let q = common.connect().await?.queue(&queue)?;
            let page = q.groups().list(offset, limit).await?;
            let out = json!({
                "total": page.total,
                "groups": page.groups.iter()
                    .map(|g| json!({ "name": g.name, "messages": g.messages }))
                    .collect::<Vec<_>>(),
            });
            print(&common, &out, || {
                let mut t = format!("{:<40} {:>10}", "GROUP", "MESSAGES");
                for g in &page.groups {
                    t.push_str(&format!("\n{:<40} {:>10}", g.name, g.messages));
                }
                t.push_str(&format!("\n({} groups in all)", page.total));
                t
            })
        }
        GroupsCommand::Show {
            common,
            queue,
            group,
        } => {
            let q = common.connect().await?.queue(&queue)?;
            show(&common, &q.groups().get(&group).await?)
        }
        GroupsCommand::Set {
            common,
            queue,
            group,
            concurrency,
            queue_concurrency,
            weight,
            rate_limit,
            burst,
            queue_rate_limit,
        } => {
            if concurrency.is_none()
                && !queue_concurrency
                && weight.is_none()
                && rate_limit.is_none()
                && !queue_rate_limit
            {
                anyhow::bail!(
                    "nothing to change: give --concurrency, --queue-concurrency, --weight, \
                     --rate-limit or --queue-rate-limit"
                );
            }
            let rate_limit = rate_limit.map(|per_second| RateLimit {
                per_second,
                burst: burst.unwrap_or(1),
            });
            let settings = GroupSettings {
                concurrency: (concurrency.is_some() || queue_concurrency).then_some(concurrency),
                weight: weight.map(Some),
                paused: None,
                rate_limit: (rate_limit.is_some() || queue_rate_limit).then_some(rate_limit),
            };
            let q = common.connect().await?.queue(&queue)?;
            show(&common, &q.groups().configure(&group, settings).await?)
        }
        GroupsCommand::Pause {
            common,
            queue,
            group,
        } => {
            let q = common.connect().await?.queue(&queue)?;
            show(&common, &q.groups().pause(&group).await?)
        }
        GroupsCommand::Resume {
            common,
            queue,
            group,
        } => {
            let q = common.connect().await?.queue(&queue)?;
            show(&common, &q.groups().resume(&group).await?)
        }
    }
}

fn show(common: &Common, g: &GroupInfo) -> anyhow::Result<()> {
    print(common, &group_json(g), || {
        let limit = g.concurrency.map_or("none".into(), |n| n.to_string());
        let rate = g.rate_limit.map_or("none".into(), |l| {
            format!("{}/s, burst {}", l.per_second, l.burst)
        });
        format!(
            "group       {}\ndelayed     {}\nready       {}\nin flight   {}\nstate       {}\nconcurrency {}{}\nweight      {}\nrate limit  {}{}",
            g.name,
            g.delayed,
            g.ready,
            g.in_flight,
            if g.paused { "paused" } else { "active" },
            limit,
            if g.own_concurrency.is_some() { " (its own)" } else { "" },
            g.weight,
            rate,
            if g.own_rate_limit.is_some() { " (its own)" } else { "" },
        )
    })
}

fn group_json(g: &GroupInfo) -> Value {
    json!({
        "name": g.name, "delayed": g.delayed, "ready": g.ready, "in_flight": g.in_flight,
        "paused": g.paused, "concurrency": g.concurrency,
        "own_concurrency": g.own_concurrency, "weight": g.weight,
        "rate_limit": g.rate_limit.map(rate_json),
        "own_rate_limit": g.own_rate_limit.map(rate_json),
    })
}

fn rate_json(l: RateLimit) -> Value {
    json!({ "per_second": l.per_second, "burst": l.burst })
}
