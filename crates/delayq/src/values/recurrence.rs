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

use crate::values::error::InvalidInput;

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
#[derive(Clone, PartialEq, Eq)]
pub struct Recurrence {
    kind: Kind,
}

/// As written: `cron "0 9 * * MON-FRI" in Europe/Berlin`, `every 30s`.
impl std::fmt::Display for Recurrence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Cron {
                expr, time_zone, ..
            } => write!(f, "cron {expr:?} in {time_zone}"),
            Kind::Interval { every_ms, .. } => write!(f, "every {}", Period(*every_ms)),
        }
    }
}

/// The expression or period as written, not the parsed pattern (a few KB of tables).
impl std::fmt::Debug for Recurrence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Cron {
                expr, time_zone, ..
            } => f
                .debug_struct("Recurrence::Cron")
                .field("expr", expr)
                .field("time_zone", time_zone)
                .finish(),
            Kind::Interval {
                every_ms,
                anchor_ms,
            } => f
                .debug_struct("Recurrence::Interval")
                .field("every_ms", every_ms)
                .field("anchor_ms", anchor_ms)
                .finish(),
        }
    }
}

/// A period in ms in its largest whole unit: `1d`, `90m`, `30s`, `250ms`.
struct Period(u64);

impl std::fmt::Display for Period {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const UNITS: [(u64, &str); 4] = [
            (86_400_000, "d"),
            (3_600_000, "h"),
            (60_000, "m"),
            (1000, "s"),
        ];
        match UNITS
            .iter()
            .find(|(ms, _)| self.0 >= *ms && self.0.is_multiple_of(*ms))
        {
            Some((ms, unit)) => write!(f, "{}{unit}", self.0 / ms),
            None => write!(f, "{}ms", self.0),
        }
    }
}

#[derive(Clone, PartialEq, Eq)]
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
    /// `expr` is a classic crontab line of 5 fields (`min hour day-of-month month day-of-week`,
    /// firing at second 0), or has a seconds field: 6 fields (`sec min hour day-of-month month
    /// day-of-week`) or 7 with croner's optional trailing year field (years 1 to 5000). It is
    /// kept as written ([`as_cron`](Self::as_cron)). Croner's extensions
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
    /// A human-readable message naming the problem: an empty expression, an expression croner
    /// rejects, or an unknown time zone.
    pub fn cron(expr: &str, time_zone: &str) -> Result<Recurrence, InvalidInput> {
        Self::parse_cron(expr, time_zone).map_err(InvalidInput::Schedule)
    }

    fn parse_cron(expr: &str, time_zone: &str) -> Result<Recurrence, String> {
        let trimmed = expr.trim();
        if trimmed.is_empty() {
            return Err("cron expression is empty".to_string());
        }
        // A classic crontab line has no seconds field: it fires at second 0. (Croner's optional
        // seconds would read 6 fields as seconds-first too, but 5 are unambiguous.)
        let with_seconds =
            match !trimmed.starts_with('@') && trimmed.split_whitespace().count() == 5 {
                true => format!("0 {trimmed}"),
                false => trimmed.to_string(),
            };
        let cron = CronParser::builder()
            .seconds(Seconds::Required)
            .build()
            .parse(&with_seconds)
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
mod tests;
