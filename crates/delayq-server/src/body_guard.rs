//! What holds every request body, whichever route reads it and however: a deadline and a
//! share of the server's budget of bytes in flight. A route added later cannot forget them,
//! since they wrap the body before any route sees the request.
//!
//! * **Deadline.** The body must arrive within `Limits::body_timeout` of the request's head.
//!   After that, reading it fails with [`BodyRefused::Deadline`] (a 408 in `api/body.rs`).
//!   Without it, a client that announces megabytes and sends a byte a second holds its
//!   connection and its buffer as long as it likes.
//! * **Bytes in flight.** Each chunk read takes its size from one server-wide budget
//!   (`Limits::max_body_bytes_in_flight`). It holds it until the request is answered,
//!   because the handler keeps the bytes (or what it parsed from them) until then. A chunk
//!   that does not fit fails the read with [`BodyRefused::Busy`] (a 503): the server refuses
//!   new work instead of growing without bound. Only bytes that arrived are counted, so a
//!   client cannot reserve the budget by announcing a large `Content-Length`.
//! * **An answer before the whole body.** A request answered without its body read to the
//!   end (refused for its size, its deadline, its token) leaves the rest of that body on the
//!   connection, which is then closed after the answer: the answer says `Connection: close`,
//!   so a client does not send its next request on a connection about to go.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyRefused {
    /// It did not arrive within the deadline.
    #[error("the request body did not arrive within {}", humantime::format_duration(*.0))]
    Deadline(Duration),
    /// It does not fit in what the server may hold of bodies in flight.
    #[error("the server holds as many request bodies as it may; try again shortly")]
    Busy,
}

impl BodyRefused {
    /// The refusal somewhere in `error`'s chain of sources, if that is why it failed.
    pub fn find<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a BodyRefused> {
        let mut at = Some(error);
        while let Some(e) = at {
            if let Some(refused) = e.downcast_ref::<BodyRefused>() {
                return Some(refused);
            }
            at = e.source();
        }
        None
    }
}

/// The guard's settings and its budget (one per server).
#[derive(Clone)]
pub struct BodyGuard {
    timeout: Duration,
    budget: Arc<Semaphore>,
}

impl BodyGuard {
    /// Bodies due within `timeout`, at most `max_in_flight` bytes of them held at once.
    pub fn new(timeout: Duration, max_in_flight: usize) -> Self {
        BodyGuard {
            timeout,
            budget: Arc::new(Semaphore::new(max_in_flight.min(Semaphore::MAX_PERMITS))),
        }
    }
}

/// The middleware: wraps the body, and gives its bytes back to the budget once answered.
pub async fn guard(State(guard): State<BodyGuard>, request: Request, next: Next) -> Response {
    let held = Arc::new(Mutex::new(Held::default()));
    let request = request.map(|body| {
        held.lock().unwrap_or_else(|p| p.into_inner()).ended =
            http_body::Body::is_end_stream(&body);
        Body::new(GuardedBody {
            inner: body,
            deadline: Box::pin(tokio::time::sleep(guard.timeout)),
            timeout: guard.timeout,
            budget: guard.budget.clone(),
            held: held.clone(),
        })
    });
    let mut response = next.run(request).await;
    // The handler is done with the bytes; a body not read to its end is dropped with the
    // request, so nothing else keeps them.
    let ended = std::mem::take(&mut *held.lock().unwrap_or_else(|p| p.into_inner())).ended;
    if !ended {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A body that fails at its deadline and counts what it read against the budget.
struct GuardedBody {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
    budget: Arc<Semaphore>,
    /// Shared with the middleware, which lets the bytes go once the request is answered.
    held: Arc<Mutex<Held>>,
}

/// What a request's body holds, as its middleware sees it.
#[derive(Default)]
struct Held {
    /// The bytes it holds of the budget.
    permit: Option<OwnedSemaphorePermit>,
    /// It was read to its end (or had none): otherwise the answer closes the connection.
    ended: bool,
}

impl http_body::Body for GuardedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(axum::Error::new(BodyRefused::Deadline(
                self.timeout,
            )))));
        }
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(None) => {
                self.held.lock().unwrap_or_else(|p| p.into_inner()).ended = true;
                return Poll::Ready(None);
            }
            other => return other,
        };
        if let Some(data) = frame.data_ref() {
            let taken = u32::try_from(data.len())
                .ok()
                .and_then(|n| self.budget.clone().try_acquire_many_owned(n).ok());
            let Some(taken) = taken else {
                return Poll::Ready(Some(Err(axum::Error::new(BodyRefused::Busy))));
            };
            let end = self.inner.is_end_stream();
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            match held.permit.as_mut() {
                Some(permit) => permit.merge(taken),
                None => held.permit = Some(taken),
            }
            held.ended |= end;
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
