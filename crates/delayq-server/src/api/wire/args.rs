//! The API's durations (`"15m"` or milliseconds), times (RFC 3339 or Unix milliseconds),
//! retry policies and due times, as requests give them, and what they mean to the library.

use std::time::{Duration, UNIX_EPOCH};

use delayq::Schedule;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::limits::Limits;

/// A duration: a number of milliseconds, or text such as `"15m"`, `"1h 30m"`, `"250ms"`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum DurationArg {
    /// Milliseconds.
    Millis(u64),
    /// Human-readable text.
    Text(String),
}

impl DurationArg {
    /// The duration; a 400 naming `field` if it cannot be read.
    pub fn get(&self, field: &str) -> ApiResult<Duration> {
        match self {
            DurationArg::Millis(ms) => Ok(Duration::from_millis(*ms)),
            DurationArg::Text(text) => humantime::parse_duration(text).map_err(|e| {
                ApiError::bad_request("invalid_duration", format!("{field}: {text:?}: {e}"))
            }),
        }
    }
}

/// A point in time: Unix milliseconds, or RFC 3339 text (`"2026-12-01T09:00:00Z"`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum TimeArg {
    /// Milliseconds since the Unix epoch.
    Millis(u64),
    /// RFC 3339.
    Text(String),
}

impl TimeArg {
    /// Milliseconds since the Unix epoch; a 400 naming `field` if it cannot be read.
    pub fn unix_ms(&self, field: &str) -> ApiResult<u64> {
        match self {
            TimeArg::Millis(ms) => Ok(*ms),
            TimeArg::Text(text) => crate::rfc3339::unix_ms(text)
                .map_err(|e| ApiError::bad_request("invalid_time", format!("{field}: {e}"))),
        }
    }
}

/// A retry policy: `{"fixed": {"delay": "30s"}}`,
/// `{"exponential": {"base": "1s", "cap": "10m", "factor": 2, "jitter_percent": 10}}`,
/// `{"linear": {"base": "30s", "cap": "10m"}}` or `{"list": {"delays": ["30s", "2m", "10m"]}}`
/// (the last delay repeats); each takes `jitter_percent`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BackoffArg {
    /// The same delay before every retry.
    Fixed {
        /// The delay.
        delay: DurationArg,
        /// Random shortening in percent (default 0).
        jitter_percent: Option<u8>,
    },
    /// Growing delays.
    Exponential {
        /// First delay.
        base: DurationArg,
        /// Largest delay.
        cap: DurationArg,
        /// Growth per attempt (default 2).
        factor: Option<u8>,
        /// Random shortening in percent (default 0).
        jitter_percent: Option<u8>,
    },
    /// Delays growing by `base` per retry, up to `cap`.
    Linear {
        /// First delay, and the step of growth.
        base: DurationArg,
        /// Largest delay.
        cap: DurationArg,
        /// Random shortening in percent (default 0).
        jitter_percent: Option<u8>,
    },
    /// The listed delays in turn; the last one repeats.
    List {
        /// 1 to 8 delays.
        delays: Vec<DurationArg>,
        /// Random shortening in percent (default 0).
        jitter_percent: Option<u8>,
    },
}

/// Where a message is due: after a delay, at a time, or now when neither is given.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleArgs {
    /// Due this long after Redis receives the request.
    pub delay: Option<DurationArg>,
    /// Due at this time.
    pub deliver_at: Option<TimeArg>,
}

impl ScheduleArgs {
    /// The schedule, checked against the longest delay allowed.
    pub fn schedule(&self, limits: &Limits) -> ApiResult<Schedule> {
        match (&self.delay, &self.deliver_at) {
            (Some(_), Some(_)) => Err(ApiError::bad_request(
                "invalid_schedule",
                "give delay or deliver_at, not both",
            )),
            (Some(delay), None) => {
                let delay = delay.get("delay")?;
                limits.check_delay(delay)?;
                Ok(Schedule::After(delay))
            }
            (None, Some(at)) => {
                let at_ms = at.unix_ms("deliver_at")?;
                let now_ms = std::time::SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                limits.check_delay(Duration::from_millis(at_ms.saturating_sub(now_ms)))?;
                Ok(Schedule::At(at_ms))
            }
            (None, None) => Ok(Schedule::Now),
        }
    }
}
