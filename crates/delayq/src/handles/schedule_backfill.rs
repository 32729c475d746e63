//! Backfill of a recurring schedule: the ticks in a past time range that were never sent
//! (missed while no scheduler ran, skipped by the schedule's [`MissedTicks`] policy, or
//! while it was paused) are sent now, each once. `send.lua` records every tick sent in its
//! partition and refuses one sent before, so a backfill is idempotent, and safe beside
//! running schedulers and other backfills.
//!
//! [`MissedTicks`]: crate::MissedTicks

use crate::handles::schedule_definition::check_name;
use crate::handles::schedules::{server_ms, Schedules};
use crate::values::error::{Error, InvalidInput, Result};

/// Most ticks one backfill looks at.
pub const MAX_BACKFILL_TICKS: usize = 1000;

/// What a backfill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Backfilled {
    /// Ticks sent now.
    pub sent: u32,
    /// Ticks in the range that had been sent before (nothing written for them).
    pub already_sent: u32,
}

impl Schedules<'_> {
    /// Sends each tick of schedule `name` from `from_ms` to `to_ms` (unix ms, inclusive)
    /// that was never sent, due at its tick (plus its jitter): due already, so delivered
    /// now. Only ticks up to now, after the schedule was created, and since its record of
    /// sent ticks began (it keeps the last 10,000 per partition; a schedule put by a delayq
    /// that kept none has one once it is put again) can be backfilled, at most
    /// [`MAX_BACKFILL_TICKS`] a call. `None` when there is no such schedule.
    pub async fn backfill(
        &self,
        name: &str,
        from_ms: u64,
        to_ms: u64,
    ) -> Result<Option<Backfilled>> {
        check_name(name)?;
        if from_ms > to_ms {
            return Err(InvalidInput::Schedule(format!(
                "a backfill runs from a time to a later one, not from {from_ms} to {to_ms}"
            ))
            .into());
        }
        let Some(def) = self.definition(name).await? else {
            return Ok(None);
        };
        let Some(ticks_from) = def.ticks_from else {
            return Err(InvalidInput::Schedule(format!(
                "schedule {name} has no record of the ticks it sent (it was put by an older \
                 delayq): put it again, and ticks from then on can be backfilled"
            ))
            .into());
        };
        let now_ms = server_ms(&mut self.queue.connection()).await?;
        if to_ms > now_ms {
            return Err(InvalidInput::Schedule(format!(
                "a backfill ends by now ({now_ms}), not at {to_ms}: later ticks are the \
                 schedulers'"
            ))
            .into());
        }
        let start = from_ms.max(def.created_ms.max(ticks_from) + 1);
        let ticks: Vec<u64> = def
            .recurrence
            .upcoming(start.saturating_sub(1), MAX_BACKFILL_TICKS + 1)
            .into_iter()
            .take_while(|t| *t <= to_ms)
            .collect();
        if ticks.len() > MAX_BACKFILL_TICKS {
            return Err(InvalidInput::Schedule(format!(
                "a backfill sends at most {MAX_BACKFILL_TICKS} ticks: narrow the range"
            ))
            .into());
        }
        let mut done = Backfilled {
            sent: 0,
            already_sent: 0,
        };
        for tick in ticks {
            match self.send_missed_tick(&def, tick).await {
                Ok(true) => done.sent += 1,
                Ok(false) => done.already_sent += 1,
                Err(e) => return Err(before_the_record(e)),
            }
        }
        Ok(Some(done))
    }
}

/// `send.lua`'s refusal of a tick older than its partition's record of sent ticks, as the bad
/// input it is; any other error as it is.
fn before_the_record(e: Error) -> Error {
    e.refused_schedule(
        "delayq: before the record of sent ticks: ",
        "cannot backfill that far back",
    )
}
