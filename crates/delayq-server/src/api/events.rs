//! `GET /v1/queues/{queue}/events`: a queue's events (one per change of a message's state,
//! recorded while the queue records them: `PATCH {"events": {...}}`), as Server-Sent Events
//! that follow the queue live, or as one JSON page.
//!
//! Each event's SSE `id` is the reader's cursor after it, so a client that reconnects with
//! `Last-Event-ID` (as a browser's `EventSource` does by itself) goes on after the last
//! event it saw, across its own restarts and the server's: the events are in Redis. A frame
//! with an `id` and no data opens the stream and ends each quiet spell (every
//! [`KEEP_ALIVE`]), so a filtered stream's resume point moves past what the filter left
//! out, and a stream started at `now` has one before its first event.
//!
//! Any valid token may read, as it may browse messages: an event names a message and what
//! happened to it, never its payload. A stream holds one connection and a place among the
//! streams a token and the server may have open (`stream_slots.rs`; beyond, 429); it catches
//! up on its own reader, then follows the queue's one reader on this server
//! (`event_hub.rs`), and ends when the client goes or the server shuts down. A page looks at
//! up to `Limits::max_events_scanned` events: a filter that matches little answers with what
//! it found, perhaps nothing, and the cursor to go on from.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use delayq::{Event, EventCursor, EventFilter, EventKind, EventReader, EventStart, Queue};
use hyper::body::Frame;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc};
use utoipa::{IntoParams, ToSchema};

use super::access::{AnyRole, Authorized};
use super::path::Path;
use super::query::Query;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::shapes::EventOut;
use crate::state::AppState;
use crate::streams::event_hub::{self, Batch};
use crate::streams::stream_slots::{Holder, StreamSlot};

/// How long a stream stays silent before it says where it is.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Events per page when the request does not say.
const DEFAULT_PAGE: usize = 100;

/// Events a stream reads at a time.
const STREAM_READ: usize = 100;

/// The query of an event read.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Where to start: `oldest` (the oldest event kept), `now` (the default: what happens
    /// from now on), or a cursor an event carried. A stream's `Last-Event-ID` header wins.
    from: Option<String>,
    /// Only events of these kinds, comma-separated: sent, delivered, acked, retry,
    /// released, dead, expired, superseded, cancelled, rescheduled, requeued, purged.
    kind: Option<String>,
    /// Only events of the message with this id.
    id: Option<String>,
    /// A page: at most this many events (1-1000, default 100).
    limit: Option<usize>,
    /// A page: how long to wait for a first event when there is none yet (ms; default 0,
    /// at most the server's longest wait).
    wait_ms: Option<u64>,
}

/// A page of events.
#[derive(Serialize, ToSchema)]
struct EventsOut {
    events: Vec<EventOut>,
    /// Where the next page starts (`from=`): after every event this read looked at. A
    /// filtered read looks at a bounded number of events (10,000 by default), then answers
    /// with what matched, perhaps nothing: go on from here.
    cursor: String,
}

/// `GET /v1/queues/{queue}/events`: with `Accept: text/event-stream`, a stream of the
/// queue's events (SSE: `event` the kind, `data` the event as JSON, `id` the cursor after
/// it; resumed after `Last-Event-ID`); otherwise one page as JSON. Events are recorded only
/// while the queue records them (`PATCH /v1/queues/{queue}` `{"events": {}}`).
#[utoipa::path(get, path = "/v1/queues/{queue}/events", tag = "browse",
    params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$"),
        ("Last-Event-ID" = Option<String>, Header, description = "Resume a stream after this event (its id)"),
        EventsQuery),
    responses(
        (status = 200, description = "A page (JSON), or a stream (Accept: text/event-stream)",
            content((EventsOut = "application/json"), (String = "text/event-stream"))),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 429, body = ErrorBody, description = "A stream beyond the caps per token or per server"),
        (status = 503, body = ErrorBody)))]
pub async fn events(
    State(state): State<AppState>,
    _: Authorized<AnyRole>,
    Path(queue): Path<String>,
    Query(query): Query<EventsQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let q = state.queue(&queue)?;
    let filter = filter_of(&query)?;
    let stream = wants_stream(&headers);
    let resume = match headers.get("last-event-id") {
        Some(value) if stream => Some(value.to_str().map_err(|_| bad_cursor())?),
        _ => None,
    };
    let start = start_of(resume.or(query.from.as_deref()))?;
    if stream {
        let holder = state.tokens().holder_of(&headers);
        return open_stream(&state, &q, start, filter, holder).await;
    }
    let mut reader = q
        .events(start, filter)
        .await?
        .with_scan_limit(state.limits().max_events_scanned);
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    let wait = Duration::from_millis(query.wait_ms.unwrap_or(0));
    state.limits().check_wait(wait)?;
    let events = tokio::select! {
        read = reader.next(limit, Some(wait)) => read?,
        () = state.shutdown_started() => Vec::new(),
    };
    Ok(Json(EventsOut {
        events: events.into_iter().map(EventOut::from).collect(),
        cursor: reader.cursor().to_string(),
    })
    .into_response())
}

/// True when the client asks for a stream (`Accept: text/event-stream`).
fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}

fn bad_cursor() -> ApiError {
    ApiError::bad_request(
        "invalid_cursor",
        "Last-Event-ID is not an event id delayq gave out",
    )
}

/// Where a read starts: `oldest`, `now` (also when not said) or a cursor.
pub fn start_of(from: Option<&str>) -> ApiResult<EventStart> {
    Ok(match from {
        None | Some("now") => EventStart::Now,
        Some("oldest") => EventStart::Oldest,
        Some(cursor) => EventStart::After(
            EventCursor::parse(cursor)
                .map_err(|e| ApiError::bad_request("invalid_cursor", e.to_string()))?,
        ),
    })
}

fn filter_of(query: &EventsQuery) -> ApiResult<EventFilter> {
    let mut filter = EventFilter::new();
    if let Some(kinds) = &query.kind {
        for name in kinds.split(',').filter(|k| !k.is_empty()) {
            filter = filter.kind(EventKind::parse(name)?);
        }
    }
    if let Some(id) = &query.id {
        filter = filter.id(id.clone());
    }
    Ok(filter)
}

/// A stream of `q`'s events from `start` that pass `filter`, for `holder` (429 when it, or
/// the server, has as many open as it may).
pub async fn open_stream(
    state: &AppState,
    q: &Queue,
    start: EventStart,
    filter: EventFilter,
    holder: Holder,
) -> ApiResult<Response> {
    let slot = state.take_stream_slot(holder)?;
    // The hub first: what it read before is in Redis before the catch-up's reads.
    let stop = {
        let state = state.clone();
        async move { state.shutdown_started().await }
    };
    let hub = state.event_hubs().subscribe(q, stop).await?;
    let reader = q.events(start, filter.clone()).await?;
    Ok(event_stream(
        state.clone(),
        q.clone(),
        (reader, hub),
        filter,
        (slot, holder),
    ))
}

/// The stream's response: a task catches up on `reader`, then follows the hub, and hands
/// each frame to the body through a channel of a few frames, so a slow client holds the
/// task back rather than piling frames up in memory.
fn event_stream(
    state: AppState,
    q: Queue,
    (reader, hub): (EventReader, broadcast::Receiver<Arc<Batch>>),
    filter: EventFilter,
    (slot, holder): (StreamSlot, Holder),
) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        let _slot = slot;
        // The server stops, or a reload removed the stream's token: the stream ends.
        let ends = state.stream_ends(holder);
        let pumped = pump(&q, (reader, hub), &filter, &tx);
        tokio::select! {
            () = ends => {}
            () = pumped => {}
        }
    });
    let mut response = Body::new(FrameBody(rx)).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The stream's frames: its catch-up on `reader`, then the hub's, until the client goes or
/// Redis fails (the server's stop, and a reload that removed the stream's token, end it from
/// outside: `event_stream`).
async fn pump(
    q: &Queue,
    (mut reader, mut hub): (EventReader, broadcast::Receiver<Arc<Batch>>),
    filter: &EventFilter,
    tx: &mpsc::Sender<Bytes>,
) {
    // Opens the stream: how soon to reconnect, and where it starts.
    let opening = format!("retry: 1000\nid: {}\n\n", reader.cursor());
    if tx.send(Bytes::from(opening)).await.is_err() {
        return;
    }
    loop {
        // Catching up, on its own reader, to the end of what Redis keeps.
        while !reader.caught_up() {
            let read = tokio::select! {
                read = reader.next(STREAM_READ, Some(Duration::ZERO)) => read,
                () = tx.closed() => return,
            };
            let events = match read {
                Ok(events) => events,
                Err(e) => {
                    // The client reconnects after its last event; Redis may be back then.
                    tracing::warn!(error = %e, "an event stream ends: Redis did not answer");
                    return;
                }
            };
            if !events.is_empty() && !send(tx, events).await {
                return;
            }
        }
        // Following the hub, until it leaves this stream behind.
        let mut cursor = reader.cursor();
        let followed = follow(tx, &mut hub, &mut cursor, filter).await;
        if !followed {
            return;
        }
        reader = match q.events(EventStart::After(cursor), filter.clone()).await {
            Ok(reader) => reader,
            Err(e) => {
                tracing::warn!(error = %e, "an event stream ends: Redis did not answer");
                return;
            }
        };
    }
}

/// Sends the hub's new events at `cursor` on; true when the stream fell behind the hub's
/// backlog (it catches up on its own from `cursor`), false when it ends.
async fn follow(
    tx: &mpsc::Sender<Bytes>,
    hub: &mut broadcast::Receiver<Arc<Batch>>,
    cursor: &mut EventCursor,
    filter: &EventFilter,
) -> bool {
    loop {
        let received = tokio::select! {
            received = tokio::time::timeout(KEEP_ALIVE, hub.recv()) => received,
            () = tx.closed() => return false,
        };
        let batch = match received {
            // A quiet spell: where the stream is (past what the filter left out).
            Err(_) => {
                let keep_alive = format!("id: {cursor}\n\n");
                if tx.send(Bytes::from(keep_alive)).await.is_err() {
                    return false;
                }
                continue;
            }
            Ok(Ok(batch)) => batch,
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => return true,
            // The hub stopped (Redis failed): the client reconnects after its last event.
            Ok(Err(broadcast::error::RecvError::Closed)) => return false,
        };
        let Some(events) = event_hub::new_events(&batch, cursor, filter) else {
            return false;
        };
        if !events.is_empty() && !send(tx, events).await {
            return false;
        }
    }
}

/// Sends `events` as frames; false when the client is gone.
async fn send(tx: &mpsc::Sender<Bytes>, events: Vec<Event>) -> bool {
    let frames: String = events.into_iter().map(frame).collect();
    tx.send(Bytes::from(frames)).await.is_ok()
}

/// One event as an SSE message. Its JSON has no newline, so one `data` line carries it.
fn frame(event: Event) -> String {
    let kind = event.kind.as_str().to_owned();
    let out = EventOut::from(event);
    let data = serde_json::to_string(&out).unwrap_or_default();
    format!("id: {}\nevent: {kind}\ndata: {data}\n\n", out.cursor)
}

/// A response body of the frames the stream's task sends; it ends when the task does.
struct FrameBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for FrameBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}
