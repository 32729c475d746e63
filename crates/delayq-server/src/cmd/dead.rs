//! `delayq dead ...`: list a queue's dead letters, requeue or purge them (one by id, or all).

use axum::http::Method;
use serde_json::json;

use super::api_client::{segment, OffsetPage};
use super::common::{print, text, time_of, Common};

/// Dead-letter commands.
#[derive(clap::Subcommand)]
pub enum DeadCommand {
    /// List dead letters, oldest death first.
    List {
        #[command(flatten)]
        common: Common,
        queue: String,
        #[command(flatten)]
        page: OffsetPage,
    },
    /// Put dead letters back as ready (one by id, or --all).
    Requeue(DeadTarget),
    /// Delete dead letters (one by id, or --all).
    Purge(DeadTarget),
}

/// One dead letter by id, or all of a queue's.
#[derive(clap::Args)]
pub struct DeadTarget {
    #[command(flatten)]
    common: Common,
    queue: String,
    /// The dead letter's id.
    #[arg(required_unless_present = "all")]
    id: Option<String>,
    /// Every dead letter of the queue.
    #[arg(long, conflicts_with = "id")]
    all: bool,
}

pub async fn run(command: DeadCommand) -> anyhow::Result<()> {
    match command {
        DeadCommand::List {
            common,
            queue,
            page,
        } => {
            let page = page.query();
            let path = format!("/v1/queues/{}/dead{page}", segment(&queue));
            let out = common.api().await?.get(&path).await?;
            print(&common, &out, || {
                let mut t = format!(
                    "{:<36} {:<24} {:>8}  {}",
                    "ID", "DIED", "ATTEMPTS", "LAST ERROR"
                );
                for d in out["dead_letters"].as_array().into_iter().flatten() {
                    t.push_str(&format!(
                        "\n{:<36} {:<24} {:>8}  {}",
                        text(&d["id"]),
                        time_of(&d["died_at_ms"]),
                        d["attempts"],
                        text(&d["last_error"])
                    ));
                }
                t.push_str(&format!("\n({} in all)", out["total"]));
                t
            })
        }
        DeadCommand::Requeue(target) => one_or_all(target, "requeue", "requeued").await,
        DeadCommand::Purge(target) => one_or_all(target, "purge", "purged").await,
    }
}

/// `POST .../requeue` or `.../purge` for one id or all.
async fn one_or_all(target: DeadTarget, action: &str, done: &str) -> anyhow::Result<()> {
    let body = match &target.id {
        Some(id) if !target.all => json!({ "id": id }),
        _ => json!({ "all": true }),
    };
    let path = format!("/v1/queues/{}/{action}", segment(&target.queue));
    let out = target
        .common
        .api()
        .await?
        .call(Method::POST, &path, Some(&body))
        .await?;
    print(&target.common, &out, || format!("{done} {}", out["count"]))
}
