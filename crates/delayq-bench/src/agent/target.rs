//! What an agent drives: the queue (W3q: the queues), through the library or a server's
//! HTTP API.

use delayq::Queue;

use super::http;

/// The queue (W3q: the queues), one way or the other.
pub(crate) enum Target {
    Library(Vec<Queue>),
    Http(http::HttpQueue),
    /// `--via push`: the server's HTTP API, to set the push target and to produce.
    Push(http::HttpQueue),
}
