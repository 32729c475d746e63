//! The other servers some tests need beside the one every test runs on: an older Redis
//! that delayq must refuse, Valkey on its own. `.ci/servers.sh` fetches them into
//! `target/servers` (or `$DELAYQ_SERVERS_DIR`).
//!
//! A test that needs one which is not there does not pass silently: it says why it cannot
//! run on the test's own stderr, which the test harness does not capture, and with
//! `DELAYQ_REQUIRE_SERVERS` set (as CI sets it) it fails instead.

use std::io::Write;
use std::path::PathBuf;

/// The binary `name` (as `redis-6.2.14/redis-server`) of `.ci/servers.sh`, if it is there.
pub fn tested_server(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("DELAYQ_SERVERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/servers"));
    Some(dir.join(name)).filter(|p| p.is_file())
}

/// Tells, past the harness's capture, that the calling test cannot run and why; panics
/// with `why` instead when `DELAYQ_REQUIRE_SERVERS` is set.
pub fn cannot_run(test: &str, why: &str) {
    if std::env::var_os("DELAYQ_REQUIRE_SERVERS").is_some() {
        panic!("{test}: {why} (DELAYQ_REQUIRE_SERVERS is set)");
    }
    let _ = writeln!(std::io::stderr(), "NOT RUN: {test}: {why}");
}
