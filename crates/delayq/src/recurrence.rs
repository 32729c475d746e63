//! Tick times for recurring schedules.
//!
//! A recurring schedule in delayq fires *ticks*, and each tick becomes one message. This module
//! turns a schedule definition ([`Recurrence`]) into tick times and decides which ticks a
//! scheduler must fire when it wakes up, including after downtime ([`ticks_to_fire`] with a
//! [`MissedTicks`] policy).
//!
//! A tick is an instant in milliseconds since the Unix epoch (UTC, `u64`).
//!
//! Schedulers on different hosts compute ticks independently and must agree, so everything here
//! is a pure function of the definition and the arguments: no clock, no randomness, no state.
//! Cron matching comes from `croner` and zone rules from `chrono-tz`, which compiles its own copy
//! of the IANA database into the binary; hosts therefore agree as long as they run builds with the
//! same crate versions. A newer tz database can move ticks in a zone whose rules changed.
//!
//! Limits, chosen so that no input can make a call slow or panic:
//! * no tick lies after 9999-12-31T23:59:59.999Z; cron ticks end sooner, with the local year 5000,
//!   where croner stops searching;
//! * one call searches for and returns at most 4096 ticks (see [`Recurrence::upcoming`] and
//!   [`ticks_to_fire`]).

use std::time::Duration;

use chrono::{DateTime, TimeZone};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds};
use croner::Cron;

use crate::error::InvalidInput;

/// 9999-12-31T23:59:59.999Z. Past this, formatting and other tools stop coping with the
/// timestamps, so ticks end here; it also keeps every tick far from `u64` overflow.
const MAX_TICK_MS: u64 = 253_402_300_799_999;

/// The most ticks one call searches for and returns. Keeps a call cheap however long the
/// scheduler was down and however large `n`, `max` or `grace_ms` are.
const MAX_TICKS_PER_CALL: usize = 4096;

const MIN_INTERVAL_MS: u64 = 1_000;
const MAX_INTERVAL_MS: u64 = 366 * 24 * 60 * 60 * 1_000;

/// When a schedule fires.
///
/// Build one with [`Recurrence::cron`] or [`Recurrence::interval`]; both validate, so every value
/// of this type is a schedule that the tick functions can evaluate. The parsed forms are kept
/// private so that an unvalidated definition cannot be built.
///
/// # Cron schedules and daylight saving time
///
/// Cron expressions are matched against the wall clock of their time zone, as croner does.
/// Croner sorts expressions into *fixed-time* ones (seconds, minutes and hours fields each a
/// single number, e.g. `0 30 2 * * *`) and *interval/wildcard* ones (a `*`, a step, a list or a
/// range in any of those fields). On a DST change:
///
/// * **Spring forward** (wall clock times that do not exist): a fixed-time schedule fires at the
///   first instant after the gap, on the same day. `0 30 2 * * *` in Europe/Berlin fires on
///   2026-03-29 at 03:00 CEST (01:00Z). An interval/wildcard schedule has no ticks inside the
///   gap.
/// * **Fall back** (wall clock times that happen twice): a fixed-time schedule fires once, at the
///   first (earlier, summer time) instant. `0 30 2 * * *` in Europe/Berlin fires on 2026-10-25 at
///   02:30 CEST (00:30Z), not again at 02:30 CET. An interval/wildcard schedule fires on both
///   passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recurrence {
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// `expr` and `time_zone` are kept as given, for messages and debugging; `cron` and `tz` are
    /// what the tick functions use.
    Cron {
        expr: String,
        time_zone: String,
        /// Boxed: a parsed pattern is a few hundred bytes and intervals need none of it.
        cron: Box<Cron>,
        tz: Tz,
    },
    /// Ticks at `anchor_ms + k * every_ms` for every `k >= 0`.
    Interval { every_ms: u64, anchor_ms: u64 },
}

impl Recurrence {
    /// A cron schedule evaluated in an IANA time zone.
    ///
    /// `expr` must have a seconds field: 6 fields (`sec min hour day-of-month month day-of-week`)
    /// or 7 with croner's optional trailing year field (years 1 to 5000). Croner's extensions
    /// (`L`, `W`, `#`, `+`, names such as `MON` and `JAN`) and its nicknames (`@daily`, `@hourly`,
    /// ..., which fire at second 0) are accepted. Day-of-week numbers follow POSIX cron: 0 and 7
    /// are Sunday. As in Vixie cron, when both day-of-month and day-of-week are restricted a day
    /// matching either one fires, unless day-of-week starts with `+`.
    ///
    /// `time_zone` is an IANA name such as `"Europe/Berlin"` or `"UTC"` (case-sensitive).
    ///
    /// An expression that can never fire (e.g. February 30th) is accepted; its schedule simply
    /// has no ticks.
    ///
    /// # Errors
    ///
    /// A human-readable message naming the problem: an empty expression, a 5-field expression
    /// (the seconds field is required), an expression croner rejects, or an unknown time zone.
    pub fn cron(expr: &str, time_zone: &str) -> Result<Recurrence, InvalidInput> {
        Self::parse_cron(expr, time_zone).map_err(InvalidInput::Schedule)
    }

    fn parse_cron(expr: &str, time_zone: &str) -> Result<Recurrence, String> {
        let trimmed = expr.trim();
        if trimmed.is_empty() {
            return Err("cron expression is empty".to_string());
        }
        // Croner's own message for this case only counts fields; the usual cause is a classic
        // 5-field crontab line, so say what is missing and how to fix it.
        if !trimmed.starts_with('@') && trimmed.split_whitespace().count() == 5 {
            return Err(format!(
                "cron expression {expr:?} has 5 fields, but a seconds field is required: use 6 \
                 fields (second minute hour day-of-month month day-of-week), e.g. \"0 {trimmed}\""
            ));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Required)
            .build()
            .parse(trimmed)
            .map_err(|e| format!("invalid cron expression {expr:?}: {e}"))?;
        let tz: Tz = time_zone.parse().map_err(|_| {
            format!(
                "unknown time zone {time_zone:?}: expected an IANA time zone name such as \
                 \"Europe/Berlin\" or \"UTC\""
            )
        })?;
        Ok(Recurrence {
            kind: Kind::Cron {
                expr: trimmed.to_string(),
                time_zone: time_zone.to_string(),
                cron: Box::new(cron),
                tz,
            },
        })
    }

    /// A fixed-period schedule: ticks at `anchor_ms + k * every` for `k = 0, 1, 2, ...`.
    ///
    /// The anchor is the first tick; the grid does not extend before it. Time zones and DST do
    /// not apply: the period is elapsed time.
    ///
    /// # Errors
    ///
    /// `every` must be a whole number of milliseconds from 1 second to 366 days inclusive.
    /// Any `anchor_ms` is accepted (ticks past 9999-12-31 do not exist, see the module docs).
    pub fn interval(every: Duration, anchor_ms: u64) -> Result<Recurrence, InvalidInput> {
        Self::parse_interval(every, anchor_ms).map_err(InvalidInput::Schedule)
    }

    fn parse_interval(every: Duration, anchor_ms: u64) -> Result<Recurrence, String> {
        let every_ms = match u64::try_from(every.as_millis()) {
            Ok(ms) if (MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&ms) => ms,
            _ => {
                return Err(format!(
                    "interval {every:?} is out of range: it must be from 1 second to 366 days"
                ));
            }
        };
        // Ticks are whole milliseconds; rounding a finer period would drift off the grid the
        // caller asked for, so refuse it instead.
        if Duration::from_millis(every_ms) != every {
            return Err(format!(
                "interval {every:?} is not a whole number of milliseconds"
            ));
        }
        Ok(Recurrence {
            kind: Kind::Interval {
                every_ms,
                anchor_ms,
            },
        })
    }

    /// The cron expression and time zone, for a cron schedule.
    pub fn as_cron(&self) -> Option<(&str, &str)> {
        match &self.kind {
            Kind::Cron {
                expr, time_zone, ..
            } => Some((expr, time_zone)),
            Kind::Interval { .. } => None,
        }
    }

    /// The period and the first tick (ms since the Unix epoch), for an interval schedule.
    pub fn as_interval(&self) -> Option<(Duration, u64)> {
        match self.kind {
            Kind::Interval {
                every_ms,
                anchor_ms,
            } => Some((Duration::from_millis(every_ms), anchor_ms)),
            Kind::Cron { .. } => None,
        }
    }

    /// The first tick strictly after `after_ms`.
    ///
    /// `None` when there is none: a cron expression that never fires again, or a tick that would
    /// lie past the limits in the module docs.
    pub fn next_after(&self, after_ms: u64) -> Option<u64> {
        Walk::after(self, after_ms).next()
    }

    /// Up to `n` ticks strictly after `after_ms`, ascending; fewer if the schedule ends.
    ///
    /// At most 4096 ticks are returned whatever `n` is: this is for "next run times" listings,
    /// and the bound keeps a huge `n` from tying up the caller.
    pub fn upcoming(&self, after_ms: u64, n: usize) -> Vec<u64> {
        Walk::after(self, after_ms)
            .take(n.min(MAX_TICKS_PER_CALL))
            .collect()
    }

    /// One search step from `pos`: the next tick after it (`forward`) or before it, at `pos`
    /// itself too when `inclusive`. Forward steps are always exclusive (see [`Walk`]).
    fn step(&self, pos: &Pos, forward: bool, inclusive: bool) -> Option<(Pos, u64)> {
        match (&self.kind, pos) {
            (Kind::Cron { cron, .. }, Pos::Cron(dt)) => {
                // Croner errors once its search limits are hit (no match within its window, or
                // past year 5000 / before year 1); for a tick search that simply means "none".
                let found = if forward {
                    cron.find_next_occurrence(dt, inclusive)
                } else {
                    cron.find_previous_occurrence(dt, inclusive)
                }
                .ok()?;
                let ms = datetime_to_ms(&found)?;
                Some((Pos::Cron(found), ms))
            }
            (
                Kind::Interval {
                    every_ms,
                    anchor_ms,
                },
                Pos::Interval(t),
            ) => {
                let tick = if forward {
                    interval_next_after(*every_ms, *anchor_ms, *t)?
                } else if inclusive {
                    interval_tick_at_or_before(*every_ms, *anchor_ms, *t)?
                } else {
                    interval_tick_at_or_before(*every_ms, *anchor_ms, t.checked_sub(1)?)?
                };
                Some((Pos::Interval(tick), tick))
            }
            // A walk only ever holds positions made for its own recurrence.
            _ => None,
        }
    }

    /// The search position for the instant `ms`. For cron this is whole seconds: cron ticks fall
    /// on whole seconds, so dropping the milliseconds changes no answer.
    fn pos_at(&self, ms: u64) -> Option<Pos> {
        match &self.kind {
            Kind::Cron { tz, .. } => {
                let secs = i64::try_from(ms / 1000).ok()?;
                tz.timestamp_opt(secs, 0).single().map(Pos::Cron)
            }
            Kind::Interval { .. } => Some(Pos::Interval(ms)),
        }
    }
}

/// The tick `t_ms` belongs to on the interval grid `anchor_ms + k * every_ms` (`k >= 0`): the
/// latest tick at or before it. `None` before the anchor.
fn interval_tick_at_or_before(every_ms: u64, anchor_ms: u64, t_ms: u64) -> Option<u64> {
    let since_anchor = t_ms.checked_sub(anchor_ms)?;
    let whole_periods = since_anchor.checked_div(every_ms)?;
    // At most t_ms, so it cannot overflow.
    Some(anchor_ms + whole_periods * every_ms)
}

/// The first interval tick strictly after `after_ms`; the anchor if `after_ms` is before it.
fn interval_next_after(every_ms: u64, anchor_ms: u64, after_ms: u64) -> Option<u64> {
    match interval_tick_at_or_before(every_ms, anchor_ms, after_ms) {
        None => Some(anchor_ms),
        Some(tick) => tick.checked_add(every_ms),
    }
}

fn datetime_to_ms<Z: TimeZone>(dt: &DateTime<Z>) -> Option<u64> {
    u64::try_from(dt.timestamp()).ok()?.checked_mul(1000)
}

/// Where a walk over ticks stands.
#[derive(Debug, Clone)]
enum Pos {
    /// Croner's own value is kept, not just its instant: inside a repeated (fall-back) hour the
    /// next search must start from the exact instant croner returned to stay on the right pass.
    Cron(DateTime<Tz>),
    Interval(u64),
}

/// The ticks of one recurrence, one at a time, forward from an instant (exclusive) or backward
/// from one (inclusive). Each step is one croner search or one subtraction, so the caller bounds
/// the work by bounding how many ticks it takes.
struct Walk<'a> {
    rec: &'a Recurrence,
    forward: bool,
    pos: Option<Pos>,
    inclusive: bool,
    /// Every tick must lie strictly beyond this one in the walk's direction (for the first step,
    /// the starting bound). Guards against a search that fails to advance, which would
    /// otherwise repeat or reorder ticks.
    limit: u64,
}

impl<'a> Walk<'a> {
    /// Ticks strictly after `after_ms`, ascending.
    fn after(rec: &'a Recurrence, after_ms: u64) -> Walk<'a> {
        let pos = if after_ms < MAX_TICK_MS {
            rec.pos_at(after_ms)
        } else {
            None
        };
        Walk {
            rec,
            forward: true,
            pos,
            inclusive: false,
            limit: after_ms,
        }
    }

    /// Ticks at or before `at_ms`, descending.
    fn at_or_before(rec: &'a Recurrence, at_ms: u64) -> Walk<'a> {
        // No tick lies past MAX_TICK_MS, so starting there loses nothing and keeps croner and
        // chrono inside the dates they handle.
        let at_ms = at_ms.min(MAX_TICK_MS);
        Walk {
            rec,
            forward: false,
            pos: rec.pos_at(at_ms),
            inclusive: true,
            limit: at_ms + 1,
        }
    }
}

impl Iterator for Walk<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let pos = self.pos.take()?;
        let inclusive = std::mem::replace(&mut self.inclusive, false);
        let (pos, tick) = self.rec.step(&pos, self.forward, inclusive)?;
        let advanced = if self.forward {
            tick > self.limit
        } else {
            tick < self.limit
        };
        if !advanced || tick > MAX_TICK_MS {
            return None;
        }
        self.pos = Some(pos);
        self.limit = tick;
        Some(tick)
    }
}

/// What a scheduler does with ticks that passed while no scheduler was running.
///
/// Only *missed* ticks are affected (see [`ticks_to_fire`] for the definition); ticks within the
/// grace period are always fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissedTicks {
    /// Fire none of them; wait for the next tick.
    Skip,
    /// Fire the most recent missed tick once.
    Once,
    /// Fire every missed tick, but at most the `max` most recent ones (oldest dropped).
    ///
    /// `max` is further capped so that the whole result holds at most 4096 ticks.
    All {
        /// How many of the most recent missed ticks to fire.
        max: u32,
    },
}

/// `skip`, `once` or `all:<n>`.
impl std::fmt::Display for MissedTicks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MissedTicks::Skip => f.write_str("skip"),
            MissedTicks::Once => f.write_str("once"),
            MissedTicks::All { max } => write!(f, "all:{max}"),
        }
    }
}

/// Reads `skip`, `once` or `all:<n>` (n at least 1).
impl std::str::FromStr for MissedTicks {
    type Err = InvalidInput;

    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        match text {
            "skip" => Ok(MissedTicks::Skip),
            "once" => Ok(MissedTicks::Once),
            _ => text
                .strip_prefix("all:")
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|n| *n > 0)
                .map(|max| MissedTicks::All { max })
                .ok_or_else(|| {
                    InvalidInput::Option(format!(
                        "missed ticks: skip, once or all:<n> (n at least 1), not {text:?}"
                    ))
                }),
        }
    }
}

/// The ticks a scheduler must fire now, ascending.
///
/// Definitions:
/// * `from = last_fired_ms.unwrap_or(created_ms)`: the last tick already fired, or, for a
///   schedule that never fired, its creation time (ticks at or before creation never count).
/// * **Candidates** are the ticks `t` with `from < t <= now_ms`. A tick equal to `now_ms` is due.
/// * A candidate is **on time** if `t >= now_ms - grace_ms` (saturating at 0): the scheduler woke
///   up for it, a little late. On-time ticks are always fired.
/// * The other candidates (`t < now_ms - grace_ms`) are **missed**, and `policy` picks which of
///   them fire: [`MissedTicks::Skip`] none, [`MissedTicks::Once`] the latest one,
///   [`MissedTicks::All`] the latest `max`.
///
/// The result is the chosen missed ticks followed by the on-time ticks, all ascending. It is
/// empty when `now_ms <= from`.
///
/// Bound: the result holds at most 4096 ticks, and finding them takes at most 4097 steps back
/// from `now_ms` (an interval step is a subtraction, a cron step one croner search), however
/// large the gap since `from` is. Only a `grace_ms` spanning more than 4096 ticks reaches the
/// bound; then the latest 4096 on-time ticks are returned and no missed ones. Keep `grace_ms`
/// well below the schedule's period times 4096 and the bound never changes an answer.
///
/// A scheduler typically fires the result and records its last element as the new
/// `last_fired_ms`. When the result is empty but candidates were skipped, nothing needs
/// recording: skipped ticks stay missed and stay skipped on the next call.
pub(crate) fn ticks_to_fire(
    rec: &Recurrence,
    policy: MissedTicks,
    last_fired_ms: Option<u64>,
    created_ms: u64,
    now_ms: u64,
    grace_ms: u64,
) -> Vec<u64> {
    let from = last_fired_ms.unwrap_or(created_ms);
    if now_ms <= from {
        return Vec::new();
    }
    let on_time_from = now_ms.saturating_sub(grace_ms);
    let wanted_missed = match policy {
        MissedTicks::Skip => 0,
        MissedTicks::Once => 1,
        MissedTicks::All { max } => usize::try_from(max).unwrap_or(usize::MAX),
    };

    // Walk back from now: the ticks wanted are always the latest ones, so the walk stops as soon
    // as it has them instead of visiting every tick since `from`.
    let mut on_time = Vec::new();
    let mut missed = Vec::new();
    for tick in Walk::at_or_before(rec, now_ms) {
        if tick <= from {
            break;
        }
        if tick >= on_time_from {
            if on_time.len() == MAX_TICKS_PER_CALL {
                break;
            }
            on_time.push(tick);
        } else {
            if missed.len() >= wanted_missed || on_time.len() + missed.len() >= MAX_TICKS_PER_CALL {
                break;
            }
            missed.push(tick);
        }
    }
    missed.reverse();
    on_time.reverse();
    missed.extend(on_time);
    missed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RFC 3339 timestamp as epoch milliseconds, computed by chrono alone so expected values
    /// do not depend on the code under test.
    fn ms(rfc3339: &str) -> u64 {
        let dt = DateTime::parse_from_rfc3339(rfc3339).expect("valid");
        u64::try_from(dt.timestamp_millis()).expect("valid")
    }

    fn cron(expr: &str, tz: &str) -> Recurrence {
        Recurrence::cron(expr, tz).expect("valid")
    }

    fn every(secs: u64, anchor_ms: u64) -> Recurrence {
        Recurrence::interval(Duration::from_secs(secs), anchor_ms).expect("valid")
    }

    /// Ticks in (start, end], found backward from `end`.
    fn backward(rec: &Recurrence, start: u64, end: u64) -> Vec<u64> {
        let mut ticks: Vec<u64> = Walk::at_or_before(rec, end)
            .take_while(|&t| t > start)
            .take(10_000)
            .collect();
        ticks.reverse();
        ticks
    }

    /// Ticks in (start, end], found forward from `start`.
    fn forward(rec: &Recurrence, start: u64, end: u64) -> Vec<u64> {
        Walk::after(rec, start)
            .take_while(|&t| t <= end)
            .take(10_000)
            .collect()
    }

    #[test]
    fn berlin_0230_spring_forward_moves_to_end_of_gap() {
        let rec = cron("0 30 2 * * *", "Europe/Berlin");
        let got = rec.upcoming(ms("2026-03-27T12:00:00Z"), 3);
        assert_eq!(
            got,
            vec![
                ms("2026-03-28T02:30:00+01:00"),
                // 02:30 does not exist on 03-29; croner fires a fixed-time job at the first
                // instant after the gap: 03:00 CEST.
                ms("2026-03-29T03:00:00+02:00"),
                ms("2026-03-30T02:30:00+02:00"),
            ]
        );
        assert_eq!(got[0], ms("2026-03-28T01:30:00Z"));
        assert_eq!(got[1], ms("2026-03-29T01:00:00Z"));
        assert_eq!(got[2], ms("2026-03-30T00:30:00Z"));
    }

    #[test]
    fn berlin_0230_fall_back_fires_once_on_first_pass() {
        let rec = cron("0 30 2 * * *", "Europe/Berlin");
        let got = rec.upcoming(ms("2026-10-23T12:00:00Z"), 3);
        assert_eq!(
            got,
            vec![
                ms("2026-10-24T00:30:00Z"),
                ms("2026-10-25T00:30:00Z"), // 02:30 CEST; 02:30 CET (01:30Z) does not fire
                ms("2026-10-26T01:30:00Z"),
            ]
        );
        assert_eq!(got[1], ms("2026-10-25T02:30:00+02:00"));
        // Starting between the two passes must not produce the second one.
        assert_eq!(
            rec.next_after(ms("2026-10-25T00:45:00Z")),
            Some(ms("2026-10-26T01:30:00Z"))
        );
        assert_eq!(
            rec.next_after(ms("2026-10-25T01:15:00Z")),
            Some(ms("2026-10-26T01:30:00Z"))
        );
        assert_eq!(
            backward(&rec, ms("2026-10-24T12:00:00Z"), ms("2026-10-25T12:00:00Z")),
            vec![ms("2026-10-25T00:30:00Z")]
        );
    }

    #[test]
    fn berlin_0900_across_both_changes() {
        let rec = cron("0 0 9 * * *", "Europe/Berlin");
        assert_eq!(
            rec.upcoming(ms("2026-03-27T12:00:00Z"), 2),
            vec![ms("2026-03-28T08:00:00Z"), ms("2026-03-29T07:00:00Z")]
        );
        assert_eq!(
            rec.upcoming(ms("2026-10-23T12:00:00Z"), 2),
            vec![ms("2026-10-24T07:00:00Z"), ms("2026-10-25T08:00:00Z")]
        );
    }

    #[test]
    fn wildcard_schedule_skips_gap_and_repeats_overlap() {
        let rec = cron("0 */30 * * * *", "Europe/Berlin");
        assert_eq!(
            forward(&rec, ms("2026-03-29T00:15:00Z"), ms("2026-03-29T01:45:00Z")),
            vec![
                ms("2026-03-29T00:30:00Z"), // 01:30 CET
                ms("2026-03-29T01:00:00Z"), // 03:00 CEST; 02:00 and 02:30 do not exist
                ms("2026-03-29T01:30:00Z"),
            ]
        );
        assert_eq!(
            forward(&rec, ms("2026-10-24T23:45:00Z"), ms("2026-10-25T01:45:00Z")),
            vec![
                ms("2026-10-25T00:00:00Z"), // 02:00 CEST
                ms("2026-10-25T00:30:00Z"), // 02:30 CEST
                ms("2026-10-25T01:00:00Z"), // 02:00 CET
                ms("2026-10-25T01:30:00Z"), // 02:30 CET
            ]
        );
    }

    /// ticks_to_fire walks backward while upcoming walks forward; both must see the same ticks,
    /// DST changes included, or a scheduler would fire different ticks than it lists.
    #[test]
    fn backward_and_forward_agree_across_dst() {
        let windows = [
            (
                "Europe/Berlin",
                "2026-03-28T00:00:00Z",
                "2026-03-30T12:00:00Z",
            ),
            (
                "Europe/Berlin",
                "2026-10-24T00:00:00Z",
                "2026-10-26T12:00:00Z",
            ),
            (
                "America/New_York",
                "2026-03-07T00:00:00Z",
                "2026-03-09T12:00:00Z",
            ),
            (
                "America/New_York",
                "2026-10-31T00:00:00Z",
                "2026-11-02T12:00:00Z",
            ),
            (
                "Australia/Sydney",
                "2026-04-03T12:00:00Z",
                "2026-04-06T00:00:00Z",
            ),
            (
                "Australia/Sydney",
                "2026-10-02T12:00:00Z",
                "2026-10-05T00:00:00Z",
            ),
        ];
        let exprs = [
            "0 30 2 * * *",
            "0 0 3 * * *",
            "0 0 9 * * *",
            "0 */30 * * * *",
            "0 0 * * * *",
            "0 15 1-3 * * *",
            "30 59 1 * * *",
            "*/20 * 2 * * *",
        ];
        for (tz, start, end) in windows {
            for expr in exprs {
                let rec = cron(expr, tz);
                let (start, end) = (ms(start), ms(end));
                let fwd = forward(&rec, start, end);
                assert!(!fwd.is_empty(), "{expr} in {tz}");
                assert_eq!(fwd, backward(&rec, start, end), "{expr} in {tz}");
            }
        }
    }

    #[test]
    fn seconds_field_every_five_seconds() {
        let rec = cron("*/5 * * * * *", "UTC");
        let start = ms("2026-01-01T00:00:03.250Z");
        let got = rec.upcoming(start, 4);
        assert_eq!(
            got,
            vec![
                ms("2026-01-01T00:00:05Z"),
                ms("2026-01-01T00:00:10Z"),
                ms("2026-01-01T00:00:15Z"),
                ms("2026-01-01T00:00:20Z"),
            ]
        );
        assert!(got.iter().all(|t| t % 5_000 == 0));
        assert!(got.windows(2).all(|w| w[1] - w[0] == 5_000));
        // Strictly after: a tick equal to after_ms is not returned, sub-second parts respected.
        assert_eq!(
            rec.next_after(ms("2026-01-01T00:00:05Z")),
            Some(ms("2026-01-01T00:00:10Z"))
        );
        assert_eq!(
            rec.next_after(ms("2026-01-01T00:00:04.999Z")),
            Some(ms("2026-01-01T00:00:05Z"))
        );
    }

    #[test]
    fn seven_field_year_expression_is_accepted() {
        let rec = cron("0 0 12 1 1 * 2030", "UTC");
        assert_eq!(rec.next_after(0), Some(ms("2030-01-01T12:00:00Z")));
        assert_eq!(rec.next_after(ms("2030-01-01T12:00:00Z")), None);
    }

    #[test]
    fn invalid_definitions_are_rejected() {
        let err = Recurrence::cron("30 2 * * *", "UTC")
            .expect_err("refused")
            .to_string();
        assert!(err.contains("seconds"), "{err}");
        let err = Recurrence::cron("0 30 2 * * *", "Mars/Olympus")
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains("Mars/Olympus") && err.contains("time zone"),
            "{err}"
        );
        for garbage in [
            "",
            "   ",
            "hello world",
            "a b c d e f",
            "61 * * * * *",
            "* * * * * * * *",
        ] {
            let err = Recurrence::cron(garbage, "UTC")
                .expect_err("refused")
                .to_string();
            assert!(!err.is_empty());
        }
        for bad in [
            Duration::ZERO,
            Duration::from_millis(500),
            Duration::from_millis(999),
            Duration::from_secs(400 * 86_400),
            Duration::from_secs(366 * 86_400) + Duration::from_millis(1),
            Duration::from_micros(1_500_500),
            Duration::MAX,
        ] {
            let err = Recurrence::interval(bad, 0)
                .expect_err("refused")
                .to_string();
            assert!(err.contains("interval"), "{err}");
        }
        assert!(Recurrence::interval(Duration::from_secs(1), 0).is_ok());
        assert!(Recurrence::interval(Duration::from_secs(366 * 86_400), 0).is_ok());
        assert!(Recurrence::cron("@daily", "UTC").is_ok());
    }

    #[test]
    fn interval_grid_starts_at_anchor() {
        let rec = Recurrence::interval(Duration::from_secs(2), 1000).expect("valid");
        assert_eq!(rec.next_after(1000), Some(3000));
        assert_eq!(rec.next_after(2999), Some(3000));
        assert_eq!(rec.next_after(3000), Some(5000));
        assert_eq!(rec.next_after(0), Some(1000));
        assert_eq!(rec.next_after(999), Some(1000));
        assert_eq!(interval_tick_at_or_before(2000, 1000, 4999), Some(3000));
        assert_eq!(interval_tick_at_or_before(2000, 1000, 999), None);
    }

    const T: u64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

    fn downtime(policy: MissedTicks, now: u64, grace: u64) -> Vec<u64> {
        ticks_to_fire(&every(1, 0), policy, Some(T), 0, now, grace)
    }

    #[test]
    fn policies_after_downtime() {
        let s = |k: u64| T + k * 1000;
        let now = T + 10_300;
        assert_eq!(downtime(MissedTicks::Skip, now, 500), vec![s(10)]);
        assert_eq!(downtime(MissedTicks::Once, now, 500), vec![s(9), s(10)]);
        assert_eq!(
            downtime(MissedTicks::All { max: 3 }, now, 500),
            vec![s(7), s(8), s(9), s(10)]
        );
        assert_eq!(
            downtime(MissedTicks::All { max: 100 }, now, 500),
            (1..=10).map(s).collect::<Vec<_>>()
        );
        assert_eq!(downtime(MissedTicks::All { max: 0 }, now, 500), vec![s(10)]);

        // No on-time tick: T+10 is 900 ms old with a 100 ms grace.
        let now = T + 10_900;
        assert_eq!(downtime(MissedTicks::Skip, now, 100), Vec::<u64>::new());
        assert_eq!(downtime(MissedTicks::Once, now, 100), vec![s(10)]);
        assert_eq!(
            downtime(MissedTicks::All { max: 2 }, now, 100),
            vec![s(9), s(10)]
        );
    }

    #[test]
    fn ticks_to_fire_edges() {
        let rec = every(1, 0);
        // A tick equal to now is due, even with no grace.
        assert_eq!(
            ticks_to_fire(&rec, MissedTicks::Skip, Some(T), 0, T + 1000, 0),
            vec![T + 1000]
        );
        // Ticks at or before the last fired one never come back.
        assert!(ticks_to_fire(&rec, MissedTicks::Once, Some(T), 0, T, 0).is_empty());
        assert!(ticks_to_fire(&rec, MissedTicks::Once, Some(T), 0, T + 999, 0).is_empty());
        assert!(ticks_to_fire(&rec, MissedTicks::Once, Some(T), 0, T - 5000, 0).is_empty());
        // Never fired: creation time is the starting point, and a tick at creation does not count.
        assert_eq!(
            ticks_to_fire(&rec, MissedTicks::All { max: 10 }, None, T, T + 2500, 0),
            vec![T + 1000, T + 2000]
        );
        // Grace larger than now saturates: everything is on time.
        assert_eq!(
            ticks_to_fire(&rec, MissedTicks::Skip, None, 0, 3000, u64::MAX),
            vec![1000, 2000, 3000]
        );
        // A huge grace is bounded: the latest MAX_TICKS_PER_CALL on-time ticks.
        let got = ticks_to_fire(&rec, MissedTicks::All { max: 5 }, None, 0, T, u64::MAX);
        assert_eq!(got.len(), MAX_TICKS_PER_CALL);
        assert_eq!(got.last(), Some(&T));
        assert!(got.windows(2).all(|w| w[1] - w[0] == 1000));
    }

    #[test]
    fn huge_gaps_stay_bounded() {
        // Interval: 1 s ticks, ten years down.
        let rec = every(1, 0);
        let now = T + 10 * 365 * 86_400_000 + 250;
        let got = ticks_to_fire(&rec, MissedTicks::All { max: 3 }, Some(T), 0, now, 500);
        let last = now - 250;
        assert_eq!(got, vec![last - 3000, last - 2000, last - 1000, last]);
        let got = ticks_to_fire(
            &rec,
            MissedTicks::All { max: u32::MAX },
            Some(T),
            0,
            now,
            500,
        );
        assert_eq!(got.len(), MAX_TICKS_PER_CALL);
        assert_eq!(got.last(), Some(&last));

        // Cron: per-second schedule, 30 days down (2.6 million candidates).
        let rec = cron("* * * * * *", "Europe/Berlin");
        let now = ms("2026-01-31T00:00:00.250Z");
        let last_fired = ms("2026-01-01T00:00:00Z");
        let s = |k: u64| ms("2026-01-31T00:00:00Z") - k * 1000;
        assert_eq!(
            ticks_to_fire(&rec, MissedTicks::Once, Some(last_fired), 0, now, 500),
            vec![s(1), s(0)]
        );
        assert_eq!(
            ticks_to_fire(
                &rec,
                MissedTicks::All { max: 5 },
                Some(last_fired),
                0,
                now,
                500
            ),
            vec![s(5), s(4), s(3), s(2), s(1), s(0)]
        );
        assert_eq!(
            ticks_to_fire(&rec, MissedTicks::Skip, Some(last_fired), 0, now, 500),
            vec![s(0)]
        );
        let got = ticks_to_fire(
            &rec,
            MissedTicks::All { max: u32::MAX },
            Some(last_fired),
            0,
            now,
            500,
        );
        assert_eq!(got.len(), MAX_TICKS_PER_CALL);
        assert_eq!(got.last(), Some(&s(0)));
        assert!(got.windows(2).all(|w| w[1] - w[0] == 1000));
    }

    #[test]
    fn never_firing_cron_has_no_ticks() {
        let rec = cron("0 0 0 30 2 *", "UTC");
        assert_eq!(rec.next_after(0), None);
        assert_eq!(rec.next_after(ms("2026-01-01T00:00:00Z")), None);
        assert!(rec.upcoming(0, 5).is_empty());
        assert!(ticks_to_fire(
            &rec,
            MissedTicks::Once,
            None,
            0,
            ms("2026-01-01T00:00:00Z"),
            0
        )
        .is_empty());
    }

    #[test]
    fn upcoming_returns_n_ascending() {
        let rec = cron("0 0 9 * * MON-FRI", "Europe/Berlin");
        let got = rec.upcoming(ms("2026-01-01T00:00:00Z"), 10);
        assert_eq!(got.len(), 10);
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(got[0], ms("2026-01-01T09:00:00+01:00")); // a Thursday
        assert_eq!(got[2], ms("2026-01-05T09:00:00+01:00")); // the weekend is skipped

        let rec = every(60, 500);
        assert_eq!(rec.upcoming(500, 3), vec![60_500, 120_500, 180_500]);
        assert!(rec.upcoming(500, 0).is_empty());
        assert_eq!(rec.upcoming(0, usize::MAX).len(), MAX_TICKS_PER_CALL);
    }

    #[test]
    fn extreme_inputs_do_not_panic() {
        let recs = [
            cron("* * * * * *", "UTC"),
            cron("0 30 2 * * *", "Pacific/Kiritimati"),
            cron("0 0 0 29 2 *", "America/Los_Angeles"),
            every(1, 0),
            every(366 * 86_400, u64::MAX),
            every(1, MAX_TICK_MS),
        ];
        let instants = [
            0,
            1,
            999,
            MAX_TICK_MS - 1,
            MAX_TICK_MS,
            MAX_TICK_MS + 1,
            u64::MAX,
        ];
        for rec in &recs {
            for &a in &instants {
                if let Some(t) = rec.next_after(a) {
                    assert!(t > a && t <= MAX_TICK_MS);
                }
                let up = rec.upcoming(a, 3);
                assert!(up.windows(2).all(|w| w[0] < w[1]));
                // Fewer `now` values than `after` values: each cron call here may run the full
                // 4096 searches, and these few cover the edges.
                for b in [0, 999, MAX_TICK_MS + 1, u64::MAX] {
                    for policy in [
                        MissedTicks::Skip,
                        MissedTicks::Once,
                        MissedTicks::All { max: u32::MAX },
                    ] {
                        for grace in [0, 1000, u64::MAX] {
                            let got = ticks_to_fire(rec, policy, Some(a), a, b, grace);
                            assert!(got.len() <= MAX_TICKS_PER_CALL);
                            assert!(got.windows(2).all(|w| w[0] < w[1]));
                            assert!(got.iter().all(|&t| t > a && t <= b));
                        }
                    }
                }
            }
        }
        // An anchor past the last representable tick has no ticks at all.
        assert_eq!(every(1, u64::MAX).next_after(0), None);
        assert_eq!(every(1, MAX_TICK_MS).next_after(0), Some(MAX_TICK_MS));
        // Croner stops searching at the end of year 5000.
        let every_second = cron("* * * * * *", "UTC");
        assert_eq!(
            every_second.next_after(ms("5000-06-01T00:00:00Z")),
            Some(ms("5000-06-01T00:00:01Z"))
        );
        assert_eq!(every_second.next_after(ms("5000-12-31T23:59:59Z")), None);
        assert_eq!(every_second.next_after(ms("5001-01-01T00:00:00Z")), None);
        assert_eq!(
            ticks_to_fire(&every_second, MissedTicks::Once, None, 0, u64::MAX, 0),
            vec![ms("5000-12-31T23:59:59Z")]
        );
    }
}
