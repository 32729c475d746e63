//! The data format upgrade under faults (README, "Upgrading"): on one Redis, the queue starts
//! as the release before formats were named left it (format 1), and `delayq format upgrade`
//! runs in the middle of the fault phase, through the proxy that cuts connections, while
//! Redis may be down or frozen, with producers and consumers at work. The checker's promises
//! (nothing lost, nothing held twice, nothing early) hold across it, and the run fails unless
//! the queue ends in the newest format.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use redis_fixture::RedisServer;

use crate::plan;

/// How long the upgrade may keep trying while faults get in its way.
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(60);

/// Records the queue with one partition and no format, as the release before did: its data
/// is format 1 until it is upgraded. Before anything uses it.
/// Its group concurrency is set too (a setting, not data): every group in order.
pub fn as_the_release_before(redis: &RedisServer) -> Result<(), String> {
    let key = format!("dq:{{{}}}:partitions", plan::QUEUE);
    redis
        .command(&["SET", &key, "1"])
        .map(|_| ())
        .map_err(|e| format!("SET {key}: {e}"))?;
    let control = format!("dq:{{{}}}:control", plan::QUEUE);
    let limit = plan::GROUP_CONCURRENCY.to_string();
    // And it records events (control.lua's field: about this many kept), all of the run's.
    let events = plan::EVENTS_KEPT.to_string();
    // And a short bucket horizon, which counts once the upgrade makes it format 5.
    let horizon = plan::BUCKET_HORIZON_MS.to_string();
    redis
        .command(&[
            "HSET",
            &control,
            "gconc",
            &limit,
            "events",
            &events,
            "bucket_horizon_ms",
            &horizon,
        ])
        .map(|_| ())
        .map_err(|e| format!("HSET {control}: {e}"))
}

/// Runs `delayq format upgrade` on the queue until it succeeds (a refused or failed try is
/// tried again: Redis may be down, or the connection cut) or the time runs out. Returns how
/// many tries it took.
pub fn upgrade(delayq_bin: &Path, redis_args: &[String]) -> Result<u32, String> {
    let started = Instant::now();
    let mut tries = 0;
    loop {
        tries += 1;
        let out = admin(delayq_bin, redis_args, &["format", "upgrade", plan::QUEUE])?;
        if out.status.success() {
            return Ok(tries);
        }
        if started.elapsed() > UPGRADE_TIMEOUT {
            return Err(format!(
                "the format upgrade failed {tries} times in {UPGRADE_TIMEOUT:?}, last: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Keeps a caller id reserved for an hour after its message is done
/// (`delayq configure --idempotency-window 1h`), as a team whose producers retry across
/// network faults should: a send that a partition held back until after its first copy was
/// acked is then a duplicate, not a second message. The scenarios' queue does.
pub fn keep_ids(delayq_bin: &Path, redis_args: &[String]) -> Result<(), String> {
    let out = admin(
        delayq_bin,
        redis_args,
        &["configure", plan::QUEUE, "--idempotency-window", "1h"],
    )?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "delayq configure --idempotency-window: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// Fails unless every partition of the queue is of the newest format.
pub fn check_current(delayq_bin: &Path, redis_args: &[String]) -> Result<(), String> {
    let out = admin(
        delayq_bin,
        redis_args,
        &["format", "show", plan::QUEUE, "--json"],
    )?;
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "delayq format show: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    match shown["queues"][0]["current"].as_bool() {
        Some(true) => Ok(()),
        _ => Err(format!(
            "the queue did not end in the newest format: {shown}"
        )),
    }
}

/// `delayq ARGS REDIS_ARGS`, killed if it takes over 20 s (a frozen Redis).
fn admin(delayq_bin: &Path, redis_args: &[String], args: &[&str]) -> Result<Output, String> {
    let mut child = Command::new(delayq_bin)
        .args(args)
        .args(redis_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {delayq_bin:?}: {e}"))?;
    // Read while it runs: an answer longer than a pipe holds (`format show` of a run with
    // a crowd of clients lists them all) would otherwise stop it until it is killed.
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err("no pipes to the admin command".into());
    };
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = pipe.read_to_end(&mut all);
            all
        })
    };
    let (stdout, stderr) = (drain(Box::new(stdout)), drain(Box::new(stderr)));
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}
