//! Where a process finds the keys of payloads encrypted at rest (`delayq::Keyring`):
//! `--keys-file`, for `serve` and every admin command that runs against Redis alike.

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
