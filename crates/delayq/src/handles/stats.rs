//! A queue's counts per state, the lag of its oldest ready message and its settings, as
//! `stats.lua` reads them: one atomic read per partition, all at once, added up.

use std::time::Duration;

use crate::handles::queue_core::{invocation, QueueCore};
use crate::store::keys::Keys;
use crate::store::partitions::join_all;
use crate::store::scripts::SCRIPTS;
use crate::values::error::Result;
use crate::values::message::Stats;
use crate::values::reply::Reply;

/// [`Queue::stats`](crate::Queue::stats).
pub(crate) async fn stats(core: &QueueCore) -> Result<Stats> {
    let layout = core.known_layout().await?;
    let reads = layout
        .parts()
        .iter()
        .map(|keys| partition_stats(core, keys));
    let mut total = Stats::default();
    for stats in join_all(reads).await {
        let s = stats?;
        total.delayed += s.delayed;
        total.ready += s.ready;
        total.in_flight += s.in_flight;
        total.dead += s.dead;
        total.oldest_ready_lag_ms = total.oldest_ready_lag_ms.max(s.oldest_ready_lag_ms);
        total.overdue += s.overdue;
        total.oldest_overdue_ms = total.oldest_overdue_ms.max(s.oldest_overdue_ms);
        total.paused |= s.paused;
        total.idempotency_window = total.idempotency_window.max(s.idempotency_window);
        total.rate_limit = total.rate_limit.or(s.rate_limit);
        total.push |= s.push;
        total.groups += s.groups;
        total.group_concurrency = total.group_concurrency.or(s.group_concurrency);
        total.group_rate_limit = total.group_rate_limit.or(s.group_rate_limit);
        total.default_ttl = total.default_ttl.or(s.default_ttl);
        total.drop_expired |= s.drop_expired;
        total.encrypted |= s.encrypted;
        total.max_delay = total.max_delay.or(s.max_delay);
        total.completed += s.completed;
        total.retain_completed = total.retain_completed.or(s.retain_completed);
        total.events += s.events;
        total.events_kept = total.events_kept.or(s.events_kept);
        total.data_format = match total.data_format {
            0 => s.data_format,
            f => f.min(s.data_format),
        };
    }
    Ok(total)
}

async fn partition_stats(core: &QueueCore, keys: &Keys) -> Result<Stats> {
    let inv = invocation(keys, &SCRIPTS.stats);
    let mut r = Reply::new(core.invoke(&inv).await?)?;
    Ok(Stats {
        delayed: r.uint()?,
        ready: r.uint()?,
        in_flight: r.uint()?,
        dead: r.uint()?,
        oldest_ready_lag_ms: r.uint()?,
        paused: r.uint()? == 1,
        idempotency_window: Duration::from_millis(r.uint()?),
        rate_limit: crate::values::settings::parse_limit(&r.string()?),
        push: r.uint()? == 1,
        data_format: r.uint()? as u32,
        groups: r.uint()?,
        group_concurrency: Some(r.uint()? as u32).filter(|n| *n > 0),
        group_rate_limit: crate::values::settings::parse_limit(&r.string()?),
        default_ttl: Some(r.uint()?)
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis),
        drop_expired: r.uint()? == 1,
        max_delay: Some(r.uint()?)
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis),
        completed: r.uint()?,
        retain_completed: {
            let (ms, max) = (r.string()?, r.string()?);
            crate::values::retention::Retention::from_fields(&ms, &max)
        },
        events: r.uint()?,
        events_kept: r.string()?.parse().ok(),
        overdue: r.uint()?,
        oldest_overdue_ms: r.uint()?,
        encrypted: r.uint()? == 1,
    })
}
