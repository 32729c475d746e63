//! Every process that uses a Redis announces the newest data format it reads, under a lease
//! it renews: what an upgrade asks before it stamps a newer format (`formats.rs` states the
//! rule), and what `delayq admin formats` lists.
//!
//! The registry is one sorted set, `dq:processes`: members `<newest format> <process>` or
//! `<newest format> <process> <role>` (`server`, `cli`, ...: the role is newer; an older
//! delayq splits at the first space and takes it for part of the name),
//! scored by the deadline of their lease in ms of the server's clock. A member stays one
//! lease past its deadline (a process that stalled may still have calls on their way), so
//! the upgrade counts it that long, and then it is pruned.
//!
//! A client announces before its first call and renews every third of a lease from a task
//! of its own. Its calls go by an *epoch*: the span of leases renewed in time. When a lease
//! runs out (Redis was out of reach, the process stalled), the next call announces anew and
//! starts a new epoch, and the formats read in the old one are read again (`FormatGate`).

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::store::connection;
use crate::store::scripts::SCRIPTS;
use crate::values::error::{Error, Result};

/// How long an announcement holds without renewal.
pub const LEASE: Duration = Duration::from_secs(30);

/// How often a client renews its announcement: three times a lease, so two renewals may fail
/// before it runs out.
const RENEW_EVERY: Duration = Duration::from_secs(10);

/// The registry's key (a key of its own: on a cluster it lives in one slot, apart from
/// every queue).
pub(crate) const REGISTRY: &str = "dq:processes";

/// A process as the registry lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Host, process id and a random part, so two clients in one process differ.
    pub name: String,
    /// The newest data format it reads.
    pub newest_format: u32,
    /// What it is (`server`, `cli`, ...: [`Config::process_role`](crate::Config::process_role)),
    /// if it said (a process of an older delayq does not).
    pub role: Option<String>,
    /// Milliseconds until its announcement's lease runs out (negative: it ran out that long
    /// ago, and the process is counted for one more lease).
    pub lease_left_ms: i64,
}

/// One client's announcement.
pub(crate) struct Announcer {
    member: String,
    lease: Mutex<Lease>,
    /// One announcement at a time: calls that find the lease run out wait for one.
    announcing: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Lease {
    valid_until: Option<Instant>,
    epoch: u64,
}

impl Announcer {
    /// An announcer for this process, which reads data formats up to `newest`, and the task
    /// that renews its announcement while the client lives (it ends when the announcer is
    /// dropped).
    pub(crate) fn start(
        conn: connection::Ordinary,
        newest: u32,
        role: Option<&str>,
    ) -> Arc<Announcer> {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty() && !h.contains(' '))
            .unwrap_or_else(|| "host".to_owned());
        let name = format!(
            "{host}:{}:{:08x}",
            std::process::id(),
            rand::random::<u32>()
        );
        let member = match role {
            Some(role) => format!("{newest} {name} {role}"),
            None => format!("{newest} {name}"),
        };
        let announcer = Arc::new(Announcer {
            member,
            lease: Mutex::default(),
            announcing: tokio::sync::Mutex::new(()),
        });
        tokio::spawn(renew(Arc::downgrade(&announcer), conn));
        announcer
    }

    /// This process's name, as the registry lists it.
    pub(crate) fn name(&self) -> &str {
        self.member.split(' ').nth(1).unwrap_or_default()
    }

    /// The epoch this client's calls are in, announcing first if its lease has run out (or
    /// it has not announced yet).
    pub(crate) async fn epoch(&self, conn: &connection::Ordinary) -> Result<u64> {
        if let Some(epoch) = self.current() {
            return Ok(epoch);
        }
        let _one = self.announcing.lock().await;
        if let Some(epoch) = self.current() {
            return Ok(epoch);
        }
        self.announce(conn).await
    }

    fn current(&self) -> Option<u64> {
        let lease = self.lock();
        let valid = lease
            .valid_until
            .is_some_and(|until| until > Instant::now());
        valid.then_some(lease.epoch)
    }

    /// Announces (or renews), and returns the epoch that goes on from here.
    async fn announce(&self, conn: &connection::Ordinary) -> Result<u64> {
        // The lease is counted from before the call: Redis starts it later, so this client
        // never thinks it holds a lease that Redis has let go.
        let sent = Instant::now();
        let mut inv = SCRIPTS.announce.prepare_invoke();
        inv.key(REGISTRY)
            .arg(&self.member)
            .arg(LEASE.as_millis() as u64);
        let _: i64 = inv.invoke_async(&mut conn.get()).await?;
        let mut lease = self.lock();
        if lease.valid_until.is_none_or(|until| until <= sent) {
            lease.epoch += 1;
        }
        lease.valid_until = Some(sent + LEASE);
        Ok(lease.epoch)
    }

    /// Takes the announcement back (a process that stops): an upgrade need not wait for its
    /// lease. Calls after this announce again.
    pub(crate) async fn withdraw(&self, conn: &connection::Ordinary) -> Result<()> {
        let _one = self.announcing.lock().await;
        let mut inv = SCRIPTS.announce.prepare_invoke();
        inv.key(REGISTRY)
            .arg(&self.member)
            .arg(LEASE.as_millis() as u64)
            .arg("withdraw");
        let _: i64 = inv.invoke_async(&mut conn.get()).await?;
        self.lock().valid_until = None;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lease> {
        self.lease.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Renews the announcement of `announcer` while it lives, once it has announced.
async fn renew(announcer: Weak<Announcer>, conn: connection::Ordinary) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let Some(announcer) = announcer.upgrade() else {
            return;
        };
        if announcer.lock().valid_until.is_none() {
            continue;
        }
        let _one = announcer.announcing.lock().await;
        if let Err(e) = announcer.announce(&conn).await {
            tracing::warn!(error = %e, "could not renew this process's announcement");
        }
    }
}

/// A member's format, name and role (none in a member of an older delayq).
fn parse_member(member: &str) -> Option<(u32, &str, Option<&str>)> {
    let mut parts = member.splitn(3, ' ');
    let format = parts.next()?.parse().ok()?;
    let name = parts.next()?;
    Some((format, name, parts.next()))
}

/// Every process the registry counts: announced, or whose lease ran out less than a lease
/// ago.
pub(crate) async fn processes(conn: &connection::Ordinary) -> Result<Vec<Process>> {
    let mut conn = conn.get();
    let members: Vec<(String, i64)> = redis::cmd("ZRANGE")
        .arg(REGISTRY)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut conn)
        .await?;
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await?;
    let now_ms = secs * 1000 + micros / 1000;
    let lease_ms = LEASE.as_millis() as i64;
    let mut out = Vec::with_capacity(members.len());
    for (member, deadline) in members {
        let Some((newest_format, name, role)) = parse_member(&member) else {
            return Err(Error::Protocol(format!("{REGISTRY}: member {member:?}")));
        };
        let lease_left_ms = deadline - now_ms;
        if lease_left_ms > -lease_ms {
            out.push(Process {
                name: name.to_owned(),
                newest_format,
                role: role.map(str::to_owned),
                lease_left_ms,
            });
        }
    }
    Ok(out)
}
