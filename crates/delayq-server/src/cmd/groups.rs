//! `delayq groups ...`: a queue's groups, most messages first; one group's counts and
//! settings; and one group's pause, resume, concurrency, weight and rate limit (README,
//! "Groups").

use axum::http::Method;
use serde_json::{json, Value};

use super::api_client::{segment, OffsetPage};
use super::common::{print, text, Common};

/// Group commands.
#[derive(clap::Subcommand)]
pub enum GroupsCommand {
    /// A queue's groups, most messages first.
    List {
        #[command(flatten)]
        common: Common,
        queue: String,
        #[command(flatten)]
        page: OffsetPage,
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
            page,
        } => {
            let page = page.query();
            let path = format!("/v1/queues/{}/groups{page}", segment(&queue));
            let out = common.api().await?.get(&path).await?;
            print(&common, &out, || {
                let mut t = format!("{:<40} {:>10}", "GROUP", "MESSAGES");
                for g in out["groups"].as_array().into_iter().flatten() {
                    t.push_str(&format!("\n{:<40} {:>10}", text(&g["name"]), g["messages"]));
                }
                t.push_str(&format!("\n({} groups in all)", out["total"]));
                t
            })
        }
        GroupsCommand::Show {
            common,
            queue,
            group,
        } => {
            let out = common.api().await?.get(&path(&queue, &group)).await?;
            show(&common, &out)
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
            let mut body = json!({});
            if concurrency.is_some() || queue_concurrency {
                body["concurrency"] = json!(concurrency);
            }
            if let Some(weight) = weight {
                body["weight"] = json!(weight);
            }
            if let Some(per_second) = rate_limit {
                body["rate_limit"] =
                    json!({ "per_second": per_second, "burst": burst.unwrap_or(1) });
            } else if queue_rate_limit {
                body["rate_limit"] = Value::Null;
            }
            if body.as_object().is_some_and(serde_json::Map::is_empty) {
                anyhow::bail!(
                    "nothing to change: give --concurrency, --queue-concurrency, --weight, \
                     --rate-limit or --queue-rate-limit"
                );
            }
            patch(&common, &queue, &group, body).await
        }
        GroupsCommand::Pause {
            common,
            queue,
            group,
        } => patch(&common, &queue, &group, json!({ "paused": true })).await,
        GroupsCommand::Resume {
            common,
            queue,
            group,
        } => patch(&common, &queue, &group, json!({ "paused": false })).await,
    }
}

fn path(queue: &str, group: &str) -> String {
    format!("/v1/queues/{}/groups/{}", segment(queue), segment(group))
}

/// Changes a group's own settings, and shows the group.
async fn patch(common: &Common, queue: &str, group: &str, body: Value) -> anyhow::Result<()> {
    let api = common.api().await?;
    let out = api
        .call(Method::PATCH, &path(queue, group), Some(&body))
        .await?;
    show(common, &out)
}

fn show(common: &Common, g: &Value) -> anyhow::Result<()> {
    print(common, g, || {
        let limit = g["concurrency"]
            .as_u64()
            .map_or("none".into(), |n| n.to_string());
        let rate = match g["rate_limit"]["per_second"].as_u64() {
            Some(per_second) => format!("{per_second}/s, burst {}", g["rate_limit"]["burst"]),
            None => "none".into(),
        };
        let own = |key: &str| match g[key].is_null() {
            true => "",
            false => " (its own)",
        };
        format!(
            "group       {}\ndelayed     {}\nready       {}\nin flight   {}\nstate       {}\nconcurrency {limit}{}\nweight      {}\nrate limit  {rate}{}",
            text(&g["name"]),
            g["delayed"],
            g["ready"],
            g["in_flight"],
            if g["paused"].as_bool() == Some(true) { "paused" } else { "active" },
            own("own_concurrency"),
            g["weight"],
            own("own_rate_limit"),
        )
    })
}
