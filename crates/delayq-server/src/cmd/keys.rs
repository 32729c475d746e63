//! The keys of payloads encrypted at rest (`delayq::Keyring`): where a process finds them
//! (`--keys-file`, for the server and the admin commands alike), and `delayq keys new`,
//! which prints a line of a new random key for that file. Nothing is sent anywhere.

use std::path::PathBuf;

use anyhow::Context;
use delayq::Keyring;

/// Where the keys are, for `serve` and every admin command that runs against Redis.
#[derive(clap::Args, Clone)]
pub struct KeysFile {
    /// File of the keys that seal and open payloads on queues that encrypt them, one
    /// `<id>:<32 bytes in base64>` a line (`delayq keys new`): the last line's key seals,
    /// every line's opens. Read at start.
    #[arg(long, env = "DELAYQ_KEYS_FILE", global = true)]
    keys_file: Option<PathBuf>,
}

impl KeysFile {
    /// The keys of --keys-file, if it was given.
    pub(super) fn load(&self) -> anyhow::Result<Option<Keyring>> {
        let Some(path) = &self.keys_file else {
            return Ok(None);
        };
        let keys =
            Keyring::load(path).with_context(|| format!("--keys-file {}", path.display()))?;
        tracing::info!(ids = ?keys.ids(), sealing = keys.newest(), "keys read");
        Ok(Some(keys))
    }
}

#[derive(clap::Subcommand)]
pub enum KeysCommand {
    /// Print a key file line of a new random key (keep it secret: it opens every payload
    /// it seals).
    New(NewArgs),
}

#[derive(clap::Args)]
pub struct NewArgs {
    /// The key's id, which each sealed payload names: 1 to 32 of A-Z, a-z, 0-9, '.', '_', '-'.
    #[arg(long)]
    id: String,
}

pub fn run(command: KeysCommand) -> anyhow::Result<()> {
    let KeysCommand::New(args) = command;
    let line = Keyring::new_key_line(&args.id).map_err(|e| anyhow::anyhow!("--id: {e}"))?;
    println!("{line}");
    Ok(())
}
