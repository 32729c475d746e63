//! Data formats: which ones this delayq reads, how a partition names the format of its data,
//! and the gate that every call on a partition passes first.
//!
//! A partition's control hash names its format in the field `format` (none: format 1, all
//! data written before formats were named). A process reads the formats up to
//! [`DATA_FORMAT`]; a partition of a newer one was written by a newer delayq and is refused
//! ([`Error::NewerFormat`]) before anything is read or written there.
//!
//! The rule for a rolling upgrade (mixed versions on one Redis):
//! * every process announces the newest format it reads, under a lease it renews
//!   (`announcements.rs`);
//! * a process writes what the partition's format allows, never more: a new process on a
//!   format-1 partition writes format-1 records, which every process reads;
//! * the upgrade (the upgrade handle) stamps a newer format only while no process that reads only
//!   older formats is announced, or was within one lease;
//! * the gate here reads a partition's format once per announcement lease, not per call:
//!   a process whose lease ran out (stalled, or cut off from Redis) announces again before
//!   its next call and reads every format afresh, so it meets a stamp made meanwhile.
//!
//! Format 2 is format 1 with room to grow (the record's extension area, `record.rs`); every
//! format-1 record is a valid format-2 record, so the upgrade rewrites nothing: it is the
//! stamp alone. A field that older readers must not ignore comes with a format of its own,
//! and its writer waits for that stamp ([`FormatGate::admit`] returns the format).
//!
//! Format 7 ([`ENCRYPTION_FORMAT`](crate::ENCRYPTION_FORMAT)) lets a record mark its payload
//! sealed (extension tag 7; the sealed payload names its key, `sealing.rs`): an older delayq
//! would hand the sealed bytes over as the payload. Every format-6 record is a format-7 record, so its upgrade is
//! the stamp alone; a queue may encrypt only once its partitions are stamped 7.
//!
//! Format 6 ([`CLAIM_LEASE_FORMAT`]) changes no record either: a claim on a partition
//! stamped 6 may hold the messages it took under one lease, the claim's (leases.lua's
//! `claim_leases`), which an older delayq would take for no lease at all, and a full
//! far-future bucket sends what does not fit to overflow lists (`buckets.lua`), where an
//! older delayq would not look. Every lease and bucket of an older format stays readable
//! beside them, so its upgrade is the stamp alone too.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::store::announcements::{self, Announcer, LEASE};
use crate::store::connection;
use crate::store::partitions::Layout;
use crate::store::scripts::SCRIPTS;
use crate::values::error::{Error, Result};

/// The newest data format this delayq reads, and the one an upgrade stamps.
///
/// `DELAYQ_NEWEST_FORMAT=<n>` at build time makes a delayq that reads only up to format
/// `n`: how the mixed-version test builds "the release before" (never set it otherwise).
pub const DATA_FORMAT: u32 = match option_env!("DELAYQ_NEWEST_FORMAT") {
    Some(n) => parse_decimal(n),
    None => 7,
};

/// The format from which a claim may hold what it took under one lease, the claim's.
pub const CLAIM_LEASE_FORMAT: u32 = 6;

/// The format of data no format is named for: everything written before formats existed.
pub const FIRST_FORMAT: u32 = 1;

const fn parse_decimal(s: &str) -> u32 {
    let bytes = s.as_bytes();
    let mut n = 0u32;
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit(), "DELAYQ_NEWEST_FORMAT: digits");
        n = n * 10 + (bytes[i] - b'0') as u32;
        i += 1;
    }
    assert!(n >= FIRST_FORMAT, "DELAYQ_NEWEST_FORMAT: 1 or more");
    n
}

/// The format a partition's control hash names (`named`: its field `format`), if this delayq
/// reads it.
pub(crate) fn readable(named: Option<String>) -> Result<u32> {
    let Some(named) = named else {
        return Ok(FIRST_FORMAT);
    };
    match named.parse::<u32>() {
        Ok(format) if format <= DATA_FORMAT => Ok(format),
        _ => Err(Error::NewerFormat {
            found: named,
            supported: DATA_FORMAT,
        }),
    }
}

/// What a client knows of the formats of the partitions it has called on: each read once
/// per announcement lease.
#[derive(Default)]
pub(crate) struct FormatGate {
    read: Mutex<HashMap<String, Reading>>,
}

#[derive(Clone, Copy)]
struct Reading {
    format: u32,
    /// Whether the partition's queue encrypts its payloads (the control field `encrypt`,
    /// [`Setting::Encryption`](crate::Setting::Encryption)), read with the format.
    encrypts: bool,
    epoch: u64,
    at: Instant,
}

impl FormatGate {
    /// The format of the partition whose control hash is `control`, once this process may
    /// call on it: its announcement is current, and the partition's data is of a format it
    /// reads. Read from Redis at most once per lease, so a call pays a lookup here, not a
    /// round trip.
    pub(crate) async fn admit(
        &self,
        announcer: &Announcer,
        conn: &connection::Ordinary,
        control: &str,
    ) -> Result<u32> {
        self.admit_at_least(announcer, conn, control, FIRST_FORMAT)
            .await
    }

    /// [`admit`](Self::admit), but a format read before that is older than `needed` is read
    /// again: formats only grow, so a reading can be stale only by being too old (the queue
    /// was upgraded since). Returns the format, which may still be older than `needed`.
    pub(crate) async fn admit_at_least(
        &self,
        announcer: &Announcer,
        conn: &connection::Ordinary,
        control: &str,
        needed: u32,
    ) -> Result<u32> {
        Ok(self.reading(announcer, conn, control, needed).await?.format)
    }

    /// Whether the queue of the partition whose control hash is `control` encrypts its
    /// payloads, as read with its format (at most a lease ago, or again after
    /// [`forget`](Self::forget)). The send script checks it again as it writes.
    pub(crate) async fn encrypts(
        &self,
        announcer: &Announcer,
        conn: &connection::Ordinary,
        control: &str,
    ) -> Result<bool> {
        Ok(self
            .reading(announcer, conn, control, FIRST_FORMAT)
            .await?
            .encrypts)
    }

    /// Drops what is known of partition `control`, so that it is read again on next use:
    /// its settings changed (a send was refused for a setting read before the change).
    pub(crate) fn forget(&self, control: &str) {
        self.lock().remove(control);
    }

    async fn reading(
        &self,
        announcer: &Announcer,
        conn: &connection::Ordinary,
        control: &str,
        needed: u32,
    ) -> Result<Reading> {
        let epoch = announcer.epoch(conn).await?;
        let known = self.lock().get(control).copied();
        if let Some(r) =
            known.filter(|r| r.epoch == epoch && r.at.elapsed() < LEASE && r.format >= needed)
        {
            return Ok(r);
        }
        let at = Instant::now();
        let (named, encrypt): (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(control)
            .arg("format")
            .arg("encrypt")
            .query_async(&mut conn.get())
            .await?;
        let reading = Reading {
            format: readable(named)?,
            encrypts: encrypt.is_some_and(|on| !on.is_empty()),
            epoch,
            at,
        };
        self.lock().insert(control.to_owned(), reading);
        Ok(reading)
    }

    /// Stamps every partition of `layout` with [`DATA_FORMAT`] (the upgrade's step; nothing
    /// in the records changes). Refused ([`Error::OlderProcesses`]) while a process that
    /// reads only older formats is running, or was less than a lease ago; a partition of a
    /// newer format is refused too, and left as it is.
    pub(crate) async fn stamp(
        &self,
        announcer: &Announcer,
        conn: &connection::Ordinary,
        layout: &Layout,
    ) -> Result<()> {
        let older: Vec<String> = announcements::processes(conn)
            .await?
            .into_iter()
            .filter(|p| p.newest_format < DATA_FORMAT)
            .map(|p| format!("{} (reads up to format {})", p.name, p.newest_format))
            .collect();
        if !older.is_empty() {
            return Err(Error::OlderProcesses {
                newest: DATA_FORMAT,
                processes: older,
            });
        }
        for keys in layout.parts() {
            self.admit(announcer, conn, keys.control()).await?;
            let mut inv = SCRIPTS.stamp_format.prepare_invoke();
            inv.key(keys.control()).arg(DATA_FORMAT);
            let _: i64 = inv.invoke_async(&mut conn.get()).await?;
            self.lock().remove(keys.control());
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Reading>> {
        self.read.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_of_a_format_this_delayq_does_not_read_is_refused() {
        assert_eq!(readable(None).ok(), Some(FIRST_FORMAT));
        assert_eq!(readable(Some("1".into())).ok(), Some(1));
        assert_eq!(
            readable(Some(DATA_FORMAT.to_string())).ok(),
            Some(DATA_FORMAT)
        );
        for named in [(DATA_FORMAT + 1).to_string(), "two".into(), "".into()] {
            match readable(Some(named.clone())) {
                Err(Error::NewerFormat { found, supported }) => {
                    assert_eq!((found, supported), (named, DATA_FORMAT))
                }
                other => panic!("{named:?}: {other:?}"),
            }
        }
    }
}
