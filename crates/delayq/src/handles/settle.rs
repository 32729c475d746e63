//! Settling deliveries: what the holder of a lease does with it. Ack (done), nack and fail
//! (retry by the backoff, later, or never: a dead letter), release (hand back unprocessed)
//! and extend (keep the lease longer), each for a [`Delivery`] or a [`Receipt`](crate::Receipt), one or
//! many at once: one script call per partition that holds some of them. A holder whose lease
//! has passed changes nothing.

use std::future::Future;
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use crate::handles::queue_core::{invocation, Call, QueueCore};
use crate::handles::sealed;
use crate::store::partitions::{self, join_all};
use crate::store::scripts::QueueScript;
use crate::store::scripts::SCRIPTS;
use crate::telemetry::spans::OpSpan;
use crate::values::delivery::Delivery;
use crate::values::error::{Error, InvalidInput, Result};
use crate::values::message::{Amend, NackOutcome, Next};
use crate::values::options::{check_count, checked_ms};
use crate::values::receipt::Held;
use crate::values::reply::Reply;

/// Acks deliveries: `true` per delivery acked, `false` where its lease was lost.
pub(crate) async fn ack(core: &QueueCore, held: &[impl Held]) -> Result<Vec<bool>> {
    traced(
        "ack",
        core,
        held.iter().map(Held::traceparent),
        ack_untraced(core, held),
    )
    .await
}

async fn ack_untraced(core: &QueueCore, held: &[impl Held]) -> Result<Vec<bool>> {
    check_count("a batch", held.len())?;
    let acked = per_partition(
        core,
        held,
        &SCRIPTS.ack,
        |_| {},
        |inv, d| {
            inv.ack_of(d);
            Ok(())
        },
        flags,
    )
    .await?;
    let n = acked.iter().filter(|a| **a).count();
    core.metrics().acked.increment(n as u64);
    Ok(acked)
}

/// Reports one failed delivery; `next` says what comes of it, `amend` changes it for the
/// attempts that follow.
pub(crate) async fn fail(
    core: &QueueCore,
    held: &impl Held,
    error: &str,
    next: Next,
    amend: &Amend,
) -> Result<NackOutcome> {
    let work = fail_untraced(core, held, error, next, amend);
    traced("nack", core, [held.traceparent()].into_iter(), work).await
}

async fn fail_untraced(
    core: &QueueCore,
    held: &impl Held,
    error: &str,
    next: Next,
    amend: &Amend,
) -> Result<NackOutcome> {
    check_amend(core, amend)?;
    let layout = core.known_layout().await?;
    let mut inv = invocation(layout.part(layout.for_seq(held.seq())), &SCRIPTS.nack);
    push_failure(core, &mut inv, held, error, next, amend)?;
    let mut r = Reply::new(core.invoke(&inv).await?)?;
    let outcome = r.string()?;
    count_failures(core, [outcome.as_str()]);
    match outcome.as_str() {
        "lost" => Err(Error::LeaseLost {
            id: held.id().to_owned(),
        }),
        other => {
            nack_outcome(other).ok_or_else(|| Error::Protocol(format!("nack returned {other:?}")))
        }
    }
}

/// What `nack.lua` says became of a delivery, unless its lease was lost.
fn nack_outcome(outcome: &str) -> Option<NackOutcome> {
    match outcome {
        "retry" => Some(NackOutcome::Retry),
        "dead" => Some(NackOutcome::Dead),
        "expired" | "dropped" => Some(NackOutcome::Expired),
        "superseded" => Some(NackOutcome::Superseded),
        _ => None,
    }
}

/// Reports many failed deliveries in one round trip, each with its error and what comes
/// next; per delivery what became of it, `None` where its lease was lost.
pub(crate) async fn fail_many(
    core: &QueueCore,
    deliveries: &[Delivery],
    failures: &[(String, Next, Amend)],
) -> Result<Vec<Option<NackOutcome>>> {
    let traceparents = deliveries.iter().map(Held::traceparent);
    let work = fail_many_untraced(core, deliveries, failures);
    traced("nack", core, traceparents, work).await
}

async fn fail_many_untraced(
    core: &QueueCore,
    deliveries: &[Delivery],
    failures: &[(String, Next, Amend)],
) -> Result<Vec<Option<NackOutcome>>> {
    check_count("a batch", deliveries.len())?;
    for (_, _, amend) in failures {
        check_amend(core, amend)?;
    }
    let items: Vec<(&Delivery, &(String, Next, Amend))> = deliveries.iter().zip(failures).collect();
    let outcomes = per_partition(
        core,
        &items,
        &SCRIPTS.nack,
        |_| {},
        |inv, (d, (error, next, amend))| push_failure(core, inv, *d, error, *next, amend),
        strings,
    )
    .await?;
    count_failures(core, outcomes.iter().map(String::as_str));
    Ok(outcomes.iter().map(|o| nack_outcome(o)).collect())
}

/// Runs `work`, settling messages that carry `traceparents`, in an `operation` span
/// (`telemetry/spans.rs`; nothing when tracing is off).
async fn traced<'a, T>(
    operation: &'static str,
    core: &QueueCore,
    traceparents: impl Iterator<Item = Option<&'a str>>,
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    let span = OpSpan::settle(operation, core.name().as_str(), traceparents);
    let result = work.await;
    span.end(&result);
    result
}

/// A new payload is held to the same limit as a sent one.
pub(crate) fn check_amend(core: &QueueCore, amend: &Amend) -> Result<()> {
    amend
        .payload
        .as_deref()
        .map_or(Ok(()), |p| core.check_payload(p))
}

/// Counts nacks by what `nack.lua` made of them.
fn count_failures<'a>(core: &QueueCore, outcomes: impl IntoIterator<Item = &'a str>) {
    let m = core.metrics();
    for outcome in outcomes {
        match outcome {
            "retry" => m.retried.increment(1),
            "dead" => m.dead_lettered.increment(1),
            "expired" => {
                m.expired.increment(1);
                m.dead_lettered.increment(1);
            }
            "dropped" => m.expired.increment(1),
            "superseded" => {}
            _ => continue,
        }
        m.nacked.increment(1);
    }
}

/// Hands deliveries back unprocessed, without counting the attempt: `true` per delivery
/// released (or ended, superseded by a newer message of its caller id).
pub(crate) async fn release(core: &QueueCore, held: &[impl Held]) -> Result<Vec<bool>> {
    let work = release_untraced(core, held);
    traced("release", core, held.iter().map(Held::traceparent), work).await
}

async fn release_untraced(core: &QueueCore, held: &[impl Held]) -> Result<Vec<bool>> {
    check_count("a batch", held.len())?;
    let outcomes = per_partition(
        core,
        held,
        &SCRIPTS.nack,
        |_| {},
        |inv, d| {
            inv.arg(&d.lease_member()[..])
                .arg("r")
                .arg("")
                .arg("")
                .arg(0)
                .arg("")
                .arg("");
            Ok(())
        },
        strings,
    )
    .await?;
    Ok(outcomes
        .iter()
        .map(|o| o == "released" || o == "superseded")
        .collect())
}

/// Extends many leases in one round trip and updates each delivery's deadline; `None`
/// per delivery whose lease was lost.
pub(crate) async fn extend_many(
    core: &QueueCore,
    deliveries: &mut [Delivery],
    lease: Duration,
) -> Result<Vec<Option<u64>>> {
    let sent = Instant::now();
    let deadlines = extend(core, deliveries, lease).await?;
    for (d, deadline) in deliveries.iter_mut().zip(&deadlines) {
        if let Some(deadline) = deadline {
            d.lease_deadline_ms = *deadline;
            // The new lease began after `sent` in Redis.
            d.expires = sent + lease;
        }
    }
    Ok(deadlines)
}

/// Extends leases to `lease` from now: the new deadline per lease, `None` where it was lost.
pub(crate) async fn extend(
    core: &QueueCore,
    held: &[impl Held],
    lease: Duration,
) -> Result<Vec<Option<u64>>> {
    check_count("a batch", held.len())?;
    let lease_ms = checked_ms(lease, "lease")?;
    if lease_ms == 0 {
        return Err(InvalidInput::Option("a lease must be at least 1 ms".into()).into());
    }
    let deadlines = per_partition(
        core,
        held,
        &SCRIPTS.extend,
        |inv| {
            inv.arg(lease_ms);
        },
        |inv, d| {
            inv.arg(&d.lease_member()[..]);
            Ok(())
        },
        uints,
    )
    .await?;
    Ok(deadlines
        .into_iter()
        .map(|d| (d > 0).then_some(d))
        .collect())
}

/// Runs `script` once per partition that holds some of `items` (all at once), with the
/// arguments `start` gives first and `push` gives each item there, and returns the
/// per-item results that `read` takes from each reply, in the order of `items`.
async fn per_partition<T: Held, R>(
    core: &QueueCore,
    items: &[T],
    script: &QueueScript,
    start: impl Fn(&mut Call<'_>),
    push: impl Fn(&mut Call<'_>, &T) -> Result<()>,
    read: fn(Value) -> Result<Vec<R>>,
) -> Result<Vec<R>> {
    let layout = core.known_layout().await?;
    let groups = partitions::group(layout.count(), items, |item| layout.for_seq(item.seq()));
    let mut invocations = Vec::with_capacity(groups.len());
    for (k, positions) in &groups {
        let mut inv = invocation(layout.part(*k), script);
        start(&mut inv);
        for &i in positions {
            push(&mut inv, &items[i])?;
        }
        invocations.push(inv);
    }
    let replies = join_all(invocations.iter().map(|inv| core.invoke(inv))).await;
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    for (reply, (_, positions)) in replies.into_iter().zip(&groups) {
        let results = read(reply?)?;
        if results.len() != positions.len() {
            return Err(Error::Protocol(format!(
                "expected {} results, got {}",
                positions.len(),
                results.len()
            )));
        }
        for (result, &i) in results.into_iter().zip(positions) {
            out[i] = Some(result);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// The arguments `nack.lua` takes for one failed delivery.
fn push_failure(
    core: &QueueCore,
    inv: &mut Call<'_>,
    held: &impl Held,
    error: &str,
    next: Next,
    amend: &Amend,
) -> Result<()> {
    let (mode, retry_ms) = match next {
        Next::Backoff => ("f", String::new()),
        Next::After(d) => ("f", checked_ms(d, "retry-after")?.to_string()),
        Next::Dead => ("d", String::new()),
    };
    inv.arg(&held.lease_member()[..])
        .arg(mode)
        .arg(error)
        .arg(retry_ms)
        .arg(rand::random::<f64>());
    match &amend.payload {
        Some(p) if held.sealed() => {
            let sealed = sealed::amend_payload(core, p)?;
            inv.arg([b"#".as_slice(), &sealed].concat())
        }
        Some(p) => inv.arg([b"=".as_slice(), p].concat()),
        None => inv.arg(""),
    };
    match amend.extra_attempts {
        0 => inv.arg(""),
        n => inv.arg(n),
    };
    Ok(())
}

fn flags(value: Value) -> Result<Vec<bool>> {
    Reply::new(value)?.flags()
}

fn strings(value: Value) -> Result<Vec<String>> {
    let mut r = Reply::new(value)?;
    let mut out = Vec::with_capacity(r.remaining());
    while r.remaining() > 0 {
        out.push(r.string()?);
    }
    Ok(out)
}

fn uints(value: Value) -> Result<Vec<u64>> {
    let mut r = Reply::new(value)?;
    let mut out = Vec::with_capacity(r.remaining());
    while r.remaining() > 0 {
        out.push(r.uint()?);
    }
    Ok(out)
}

/// What became of one delivery's ack: nothing, if its lease was lost.
pub(crate) fn lease_result(delivery: &Delivery, ok: bool) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::LeaseLost {
            id: delivery.id.clone(),
        })
    }
}
