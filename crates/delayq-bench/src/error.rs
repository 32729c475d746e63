//! The crate's error type: a boxed error with a readable message. Everything here ends in a
//! log line or a JSON `errors` entry, so callers never match on error kinds.

/// Any error, with its message.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Shorthand for results of this crate.
pub type Result<T, E = BoxError> = std::result::Result<T, E>;
