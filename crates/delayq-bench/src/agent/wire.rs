//! The agent's end of the Agent protocol: events out, one JSON line each on stdout, flushed
//! at once; commands in, read from stdin on a thread of their own.

use std::io::{BufRead, Write};

use tokio::sync::mpsc;

use crate::error::Result;
use crate::protocol::{self, Command, Event};

/// Writes one event line to stdout and flushes it.
pub(crate) fn emit(event: &Event) -> Result<()> {
    let line = protocol::to_line(event)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(())
}

/// The version reported in `ready`: delayq and this crate share the workspace version.
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Commands from stdin. Read on a plain thread: a read blocked on stdin would otherwise hold
/// up the runtime's shutdown, and the agent must be able to exit while the driver keeps its
/// end open.
pub(crate) struct Commands(mpsc::UnboundedReceiver<Command>);

impl Commands {
    pub(super) fn spawn() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let line = match line {
                    Ok(line) => line,
                    Err(e) => {
                        tracing::error!("reading stdin failed: {e}");
                        break;
                    }
                };
                if line.trim().is_empty() {
                    continue;
                }
                match protocol::parse_command(&line) {
                    Ok(cmd) => {
                        if tx.send(cmd).is_err() {
                            break;
                        }
                    }
                    Err(e) => tracing::warn!("ignoring unknown command line {line:?}: {e}"),
                }
            }
            // Dropping the sender reports end of input: the driver is gone.
        });
        Commands(rx)
    }

    /// The next command, or `None` once stdin is closed.
    pub(crate) async fn next(&mut self) -> Option<Command> {
        self.0.recv().await
    }

    /// Waits for one of `wanted`; others are logged and skipped. `None` on end of input.
    pub(crate) async fn wait_for(&mut self, wanted: &[Command]) -> Option<Command> {
        loop {
            let cmd = self.next().await?;
            if wanted.contains(&cmd) {
                return Some(cmd);
            }
            tracing::warn!("ignoring {cmd:?} here (waiting for one of {wanted:?})");
        }
    }
}
