//! `delayq format ...`: the data format of each queue, the processes using this Redis with
//! the newest format each reads, and the upgrade of queues to this delayq's newest format
//! (README, "Upgrading").

use anyhow::bail;
use axum::http::Method;
use serde_json::{json, Value};

use super::api_client::{segment, ApiClient};
use super::common::{print, text, Common};

/// Data format commands.
#[derive(clap::Subcommand)]
pub enum FormatCommand {
    /// Each queue's data format and upgrade progress (or QUEUE's), and the processes running.
    Show {
        #[command(flatten)]
        common: Common,
        queue: Option<String>,
    },
    /// Upgrade queues to this delayq's newest data format. Nothing is rewritten and
    /// deliveries go on; refused while a process that reads only older formats runs.
    Upgrade {
        #[command(flatten)]
        common: Common,
        /// The queues to upgrade.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        queues: Vec<String>,
        /// Every queue.
        #[arg(long)]
        all: bool,
    },
}

pub async fn run(command: FormatCommand) -> anyhow::Result<()> {
    match command {
        FormatCommand::Show { common, queue } => {
            let api = common.api().await?;
            let names = match queue {
                Some(q) => vec![q],
                None => queue_names(&api).await?,
            };
            let mut rows = Vec::new();
            for name in names {
                rows.push(
                    api.get(&format!("/v1/queues/{}/format", segment(&name)))
                        .await?,
                );
            }
            let processes = api.get("/v1/processes").await?;
            let out = json!({
                "newest": processes["newest"],
                "queues": rows,
                "processes": processes["processes"],
            });
            print(&common, &out, || {
                format!(
                    "{}\n\n{}",
                    formats_table(&rows, &out["newest"]),
                    super::queues::processes_table(&out["processes"])
                )
            })
        }
        FormatCommand::Upgrade {
            common,
            queues,
            all,
        } => {
            let api = common.api().await?;
            let names = if all {
                queue_names(&api).await?
            } else {
                queues
            };
            let mut rows = Vec::new();
            for name in names {
                let path = format!("/v1/queues/{}/upgrade", segment(&name));
                match api.call(Method::POST, &path, None).await {
                    Ok(format) => rows.push(format),
                    Err(e) => bail!("{name}: {e}"),
                }
            }
            let newest = rows.first().map_or(Value::Null, |r| r["newest"].clone());
            let out = json!({ "newest": newest, "queues": rows });
            print(&common, &out, || formats_table(&rows, &out["newest"]))
        }
    }
}

async fn queue_names(api: &ApiClient) -> anyhow::Result<Vec<String>> {
    let out = api.get("/v1/queues").await?;
    Ok(out["queues"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|q| text(&q["name"]))
        .collect())
}

fn formats_table(rows: &[Value], newest: &Value) -> String {
    let mut t = format!(
        "{:<32} {:>6}  {:<24}  newest: {newest}",
        "QUEUE", "FORMAT", "UPGRADED"
    );
    for f in rows {
        let partitions = f["partitions"].as_array().map_or(0, Vec::len);
        let progress = match partitions {
            0 => "not used yet".to_owned(),
            n => format!("{} of {n} partition(s)", f["upgraded"]),
        };
        t.push_str(&format!(
            "\n{:<32} {:>6}  {progress:<24}",
            text(&f["queue"]),
            f["format"].to_string()
        ));
    }
    t
}
