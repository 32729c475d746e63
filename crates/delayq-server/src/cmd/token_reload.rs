//! Where `serve` reads its tokens (`--tokens-file`, `--tokens`), and their reload without a
//! restart: on `SIGHUP` (systemd's `ExecReload`, `kill -HUP`), and when the file changes (its
//! modification time or size, looked at every [`WATCH_EVERY`]: a Kubernetes Secret mounted
//! as a file is updated in place). A reload that fails (a file that cannot be read, a bad
//! line, no tokens at all) keeps the tokens before and logs why: a typo must not lock every
//! client out, nor turn authentication off.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use delayq_server::auth::Tokens;
use delayq_server::state::AppState;

/// How often the tokens file's metadata is looked at.
pub(super) const WATCH_EVERY: Duration = Duration::from_secs(5);

/// Where the tokens come from.
#[derive(Clone)]
pub(super) struct TokenSource {
    pub(super) file: Option<PathBuf>,
    pub(super) inline: Option<String>,
}

impl TokenSource {
    /// The tokens of the file and the inline list, together.
    pub(super) fn load(&self) -> anyhow::Result<Tokens> {
        let mut text = String::new();
        if let Some(path) = &self.file {
            text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read tokens file {}", path.display()))?;
        }
        if let Some(inline) = &self.inline {
            text.push('\n');
            text.push_str(inline);
        }
        Tokens::parse(&text).map_err(|e| anyhow::anyhow!("tokens: {e}"))
    }

    /// What tells that the file changed: its modification time and size.
    fn stamp(&self) -> Option<(SystemTime, u64)> {
        let meta = std::fs::metadata(self.file.as_ref()?).ok()?;
        Some((meta.modified().ok()?, meta.len()))
    }
}

/// Reloads the tokens into `state` on SIGHUP and when the file changes, until the server
/// stops. Nothing to do without a tokens file.
pub(super) fn spawn(source: TokenSource, state: AppState) -> anyhow::Result<()> {
    if source.file.is_none() {
        return Ok(());
    }
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("cannot listen for SIGHUP")?;
    tokio::spawn(async move {
        let mut stamp = source.stamp();
        let mut watch = tokio::time::interval(WATCH_EVERY);
        watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let why = tokio::select! {
                _ = hangups.recv() => "SIGHUP",
                _ = watch.tick() => "the file changed",
                () = state.shutdown_started() => return,
            };
            let now = source.stamp();
            if why != "SIGHUP" && now == stamp {
                continue;
            }
            stamp = now;
            let ok = reload(&source, &state, why);
            delayq_server::audit::record_reload(&state, ok, why).await;
        }
    });
    Ok(())
}

/// Reloads the tokens; whether they were (the audit log records either).
fn reload(source: &TokenSource, state: &AppState, why: &str) -> bool {
    let kept = state.tokens().summary();
    match source.load() {
        Ok(tokens) if tokens.is_empty() => {
            tracing::error!(
                why,
                kept,
                "tokens not reloaded: the file has no tokens (authentication stays on)"
            );
            false
        }
        Ok(tokens) => {
            let loaded = tokens.summary();
            state.replace_tokens(tokens);
            tracing::info!(why, loaded, "tokens reloaded");
            true
        }
        Err(e) => {
            tracing::error!(why, kept, "tokens not reloaded: {e:#}");
            false
        }
    }
}
