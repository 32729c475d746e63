//! `delayq keys`: the keys of payloads encrypted at rest. `new` prints a line of a new
//! random key for the key file (nothing is sent anywhere); `rotate` seals what a queue
//! stores again with the newest key. Where a process finds its keys is `keys_file.rs`.

use axum::http::Method;
use delayq::Keyring;

use super::api_client::segment;
use super::common::{print, Common};

#[derive(clap::Subcommand)]
pub enum KeysCommand {
    /// Print a key file line of a new random key (keep it secret: it opens every payload
    /// it seals).
    New(NewArgs),
    /// Seal what QUEUE stores (pending messages, dead letters, schedules) again with the
    /// newest key (this process's --keys-file, or with --url the server's), online, a
    /// hundred records a step; on a queue that encrypts, seal what is stored in clear too.
    Rotate {
        #[command(flatten)]
        common: Common,
        queue: String,
    },
}

#[derive(clap::Args)]
pub struct NewArgs {
    /// The key's id, which each sealed payload names: 1 to 32 of A-Z, a-z, 0-9, '.', '_', '-'.
    #[arg(long)]
    id: String,
}

pub async fn run(command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::New(args) => {
            let line = Keyring::new_key_line(&args.id).map_err(|e| anyhow::anyhow!("--id: {e}"))?;
            println!("{line}");
            Ok(())
        }
        KeysCommand::Rotate { common, queue } => {
            let path = format!("/v1/queues/{}/rotate-keys", segment(&queue));
            let done = common.api().await?.call(Method::POST, &path, None).await?;
            print(&common, &done, || {
                format!(
                    "{queue}: {} sealed again with key {}; {} changed meanwhile, {} sealed with a key not held, {} in flight (run it again for those)",
                    done["resealed"], done["key"].as_str().unwrap_or("?"), done["changed"],
                    done["unopened"], done["in_flight"]
                )
            })
        }
    }
}
