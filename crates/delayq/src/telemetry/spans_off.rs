//! Without the `otlp` feature no span is made: these stand-ins for `spans.rs` do nothing and
//! cost nothing.

use std::fmt::Display;
use std::time::SystemTime;

use crate::values::delivery::Delivery;

/// Never on without the feature.
pub(crate) fn on() -> bool {
    false
}

/// A span that is never made.
pub(crate) struct OpSpan;

impl OpSpan {
    pub(crate) fn send(_queue: &str, _count: usize, _given: Option<&str>) -> OpSpan {
        OpSpan
    }

    pub(crate) fn settle<'a>(
        _operation: &'static str,
        _queue: &str,
        _traceparents: impl Iterator<Item = Option<&'a str>>,
    ) -> OpSpan {
        OpSpan
    }

    pub(crate) fn traceparent(&self) -> Option<String> {
        None
    }

    pub(crate) fn message_id(&mut self, _id: &str) {}

    pub(crate) fn end<T, E: Display>(self, _result: &Result<T, E>) {}
}

pub(crate) fn record_receive(_queue: &str, _started: SystemTime, _claimed: &[Delivery]) {}

/// Handlers run as they are.
pub(crate) struct ProcessTrace;

impl ProcessTrace {
    pub(crate) fn of(_delivery: &Delivery) -> ProcessTrace {
        ProcessTrace
    }

    pub(crate) fn run<F: std::future::Future>(self, work: F) -> F {
        work
    }
}
