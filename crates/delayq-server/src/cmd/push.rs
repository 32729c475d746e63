//! `delayq push ...`: set, show and remove a queue's push target. Every `delayq serve` then
//! pushes the queue's messages to it (a target whose address the server may not reach,
//! `--push-allow`, is logged there and not pushed to).

use std::time::Duration;

use anyhow::bail;
use delayq_server::push::target::{self, PushTarget};
use serde_json::json;

use super::common::{print, Common};

/// Push target commands.
#[derive(clap::Subcommand)]
pub enum PushCommand {
    /// Push a queue's messages to URL (replacing its target, if any).
    Set {
        #[command(flatten)]
        common: Common,
        queue: String,
        url: String,
        /// How long one request may take.
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        timeout: Duration,
        /// Most requests at once, per server.
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        /// An extra header, NAME:VALUE (repeatable).
        #[arg(long = "header")]
        headers: Vec<String>,
        /// Called once with each message that becomes a dead letter.
        #[arg(long)]
        failure_callback: Option<String>,
        /// Signing keys, current first (default: keep the target's, or make one).
        #[arg(long = "signing-key")]
        signing_keys: Vec<String>,
        /// An origin (https://hooks.example.com) a message's own push URL may be on
        /// (repeatable; default: messages cannot bring a URL).
        #[arg(long = "allow-message-url")]
        allow_message_urls: Vec<String>,
    },
    /// Show a queue's push target.
    Get {
        #[command(flatten)]
        common: Common,
        queue: String,
    },
    /// Remove a queue's push target: pull consumers get its messages again.
    Remove {
        #[command(flatten)]
        common: Common,
        queue: String,
    },
}

pub async fn run(command: PushCommand) -> anyhow::Result<()> {
    match command {
        PushCommand::Set {
            common,
            queue,
            url,
            timeout,
            concurrency,
            headers,
            failure_callback,
            signing_keys,
            allow_message_urls,
        } => {
            let dq = common.connect().await?;
            let q = dq.queue(&queue)?;
            let mut header_map = std::collections::BTreeMap::new();
            for h in headers {
                let Some((name, value)) = h.split_once(':') else {
                    bail!("--header {h:?}: give NAME:VALUE");
                };
                header_map.insert(name.trim().to_owned(), value.trim().to_owned());
            }
            let given = (!signing_keys.is_empty()).then_some(signing_keys);
            let replaced = target::load(&dq, &q).await?.map(|t| t.signing_keys);
            let signing_keys = delayq_server::push::signature::keys_to_set(given, replaced);
            let target = PushTarget {
                url,
                method: "POST".into(),
                headers: header_map,
                timeout_ms: timeout.as_millis() as u64,
                concurrency,
                signing_keys,
                dead_statuses: None,
                failure_callback,
                follow_redirects: false,
                allow_message_urls: target::allowed_origins(allow_message_urls)
                    .map_err(|e| anyhow::anyhow!(e))?,
            };
            target.validate().map_err(|e| anyhow::anyhow!(e))?;
            target::save(&dq, &q, &target).await?;
            show(&common, &target)
        }
        PushCommand::Get { common, queue } => {
            let dq = common.connect().await?;
            let Some(target) = target::load(&dq, &dq.queue(&queue)?).await? else {
                bail!("{queue} has no push target");
            };
            show(&common, &target)
        }
        PushCommand::Remove { common, queue } => {
            let dq = common.connect().await?;
            if !target::remove(&dq, &dq.queue(&queue)?).await? {
                bail!("{queue} has no push target");
            }
            print(&common, &json!({ "removed": queue }), || {
                format!("{queue}: pull again")
            })
        }
    }
}

fn show(common: &Common, target: &PushTarget) -> anyhow::Result<()> {
    let out = serde_json::to_value(target)?;
    print(common, &out, || {
        format!(
            "{} {}  timeout {} ms, {} at once\nsigning key: {}\nmessage URLs allowed on: {}",
            target.method,
            target.url,
            target.timeout_ms,
            target.concurrency,
            target.signing_keys.first().map_or("-", String::as_str),
            if target.allow_message_urls.is_empty() {
                "none".to_owned()
            } else {
                target.allow_message_urls.join(", ")
            }
        )
    })
}
