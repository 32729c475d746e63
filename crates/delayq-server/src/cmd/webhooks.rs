//! `delayq webhooks ...`: add, list and remove the URLs a queue's events are sent to. Every
//! `delayq serve` then calls them (one server per queue at a time), checking each request's
//! address against its `--push-allow` as it goes.

use anyhow::bail;
use delayq::EventKind;
use delayq_server::webhooks::config::{self, Hook, Webhooks};
use serde_json::json;

use super::common::{print, Common};

/// Webhook commands.
#[derive(clap::Subcommand)]
pub enum WebhooksCommand {
    /// Send a queue's events to URL (in place of its kinds, if it is there already), from
    /// now on; turns the queue's events on.
    Add {
        #[command(flatten)]
        common: Common,
        queue: String,
        url: String,
        /// Only events of these kinds (comma-separated; default: every kind).
        #[arg(long, value_delimiter = ',')]
        kind: Vec<String>,
    },
    /// Show a queue's webhooks and the key their requests are signed with.
    List {
        #[command(flatten)]
        common: Common,
        queue: String,
    },
    /// Stop sending a queue's events to URL.
    Remove {
        #[command(flatten)]
        common: Common,
        queue: String,
        url: String,
    },
}

pub async fn run(command: WebhooksCommand) -> anyhow::Result<()> {
    match command {
        WebhooksCommand::Add {
            common,
            queue,
            url,
            kind,
        } => {
            for k in &kind {
                EventKind::parse(k)?;
            }
            let dq = common.connect().await?;
            let q = dq.queue(&queue)?;
            let mut webhooks = config::load(&dq, q.name()).await?.unwrap_or(Webhooks {
                hooks: Vec::new(),
                signing_keys: delayq_server::push::signature::keys_to_set(None, None),
            });
            webhooks.hooks.retain(|h| h.url != url);
            webhooks.hooks.push(Hook { url, kinds: kind });
            if let Err(why) = webhooks.validate() {
                bail!("{why}");
            }
            config::save(&dq, &q, &webhooks).await?;
            show(&common, &webhooks)
        }
        WebhooksCommand::List { common, queue } => {
            let dq = common.connect().await?;
            let q = dq.queue(&queue)?;
            match config::load(&dq, q.name()).await? {
                Some(webhooks) => show(&common, &webhooks),
                None => bail!("{queue} has no webhooks"),
            }
        }
        WebhooksCommand::Remove { common, queue, url } => {
            let dq = common.connect().await?;
            let q = dq.queue(&queue)?;
            let Some(mut webhooks) = config::load(&dq, q.name()).await? else {
                bail!("{queue} has no webhooks");
            };
            let before = webhooks.hooks.len();
            webhooks.hooks.retain(|h| h.url != url);
            if webhooks.hooks.len() == before {
                bail!("{queue} has no webhook {url}");
            }
            match webhooks.hooks.is_empty() {
                true => config::remove(&dq, q.name()).await.map(drop)?,
                false => config::save(&dq, &q, &webhooks).await?,
            }
            show(&common, &webhooks)
        }
    }
}

fn show(common: &Common, webhooks: &Webhooks) -> anyhow::Result<()> {
    let out = json!({
        "webhooks": webhooks.hooks.iter().map(|h| json!({ "url": h.url, "kinds": h.kinds })).collect::<Vec<_>>(),
        "signing_keys": webhooks.signing_keys,
    });
    print(common, &out, || {
        let mut lines: Vec<String> = webhooks
            .hooks
            .iter()
            .map(|h| {
                let kinds = if h.kinds.is_empty() {
                    "every kind".to_owned()
                } else {
                    h.kinds.join(",")
                };
                format!("{}  {kinds}", h.url)
            })
            .collect();
        lines.push(format!("signing key: {}", webhooks.signing_keys[0]));
        lines.join("\n")
    })
}
