//! What a consumer agent records, in every mode: one record per handler invocation
//! (`seq`, due and start ms), the `progress` reports while it consumes, and the deliveries
//! file it writes when it stops.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::wire::{emit, Commands};
use crate::clock::now_ms;
use crate::error::Result;
use crate::protocol::{Command, Event};
use crate::workload::parse_payload;

/// How often `progress` is reported; the protocol asks for at least every second.
pub(super) const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// One handler invocation.
#[derive(Clone, Copy)]
pub(super) struct Record {
    seq: u64,
    due_ms: f64,
    start_ms: f64,
}

/// What handlers share.
#[derive(Default)]
pub(super) struct Log {
    records: Mutex<Vec<Record>>,
    total: AtomicU64,
    bad_payloads: AtomicU64,
}

impl Log {
    /// A log with room for `n` records.
    pub(super) fn with_capacity(n: usize) -> Self {
        Log {
            records: Mutex::new(Vec::with_capacity(n)),
            ..Log::default()
        }
    }

    /// Invocations logged so far, bad payloads included.
    pub(super) fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Invocations whose payload was not one of ours.
    pub(super) fn bad_payloads(&self) -> u64 {
        self.bad_payloads.load(Ordering::Relaxed)
    }

    fn push(&self, record: Record) {
        // A poisoned lock means a handler panicked mid-push, which the push cannot do; the
        // vector is intact either way.
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(record);
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    /// Logs one handler invocation that started at `start_ms`; the payload's `(seq, due_ms)`,
    /// or `None` (counted as a bad payload) if it is not one of ours.
    pub(super) fn record(&self, start_ms: f64, payload: &[u8]) -> Option<(u64, f64)> {
        let parsed = parse_payload(payload);
        match parsed {
            Some((seq, due_ms)) => self.push(Record {
                seq,
                due_ms,
                start_ms,
            }),
            None => {
                self.bad_payloads.fetch_add(1, Ordering::Relaxed);
                self.total.fetch_add(1, Ordering::Relaxed);
            }
        }
        parsed
    }

    /// The records so far, taken out of the log.
    pub(super) fn take(&self) -> Vec<Record> {
        std::mem::take(&mut *self.records.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Reports `progress` until `stop` (or the end of stdin).
pub(super) async fn report_progress_until_stop(log: &Log, commands: &mut Commands) -> Result<()> {
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => emit(&Event::Progress {
                total: log.total(),
                t_ms: now_ms(),
            })?,
            cmd = commands.next() => match cmd {
                Some(Command::Stop) | None => return Ok(()),
                Some(other) => tracing::warn!("ignoring {other:?} while consuming"),
            },
        }
    }
}

/// One line per handler invocation: `seq<TAB>due_ms<TAB>start_ms`, ms with 3 decimals.
pub(super) fn write_deliveries(path: &Path, records: &[Record]) -> Result<()> {
    let file = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let mut out = BufWriter::new(file);
    for r in records {
        writeln!(out, "{}\t{:.3}\t{:.3}", r.seq, r.due_ms, r.start_ms)?;
    }
    out.flush()
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(())
}
