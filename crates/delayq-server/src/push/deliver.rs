//! One push: a message's HTTP request, and what its outcome means for the message.
//!
//! 2xx acks it. 429 and 503 with `Retry-After` retry after that long. A status in the
//! target's dead statuses (default: every 4xx but 408 and 429) makes it a dead letter at once.
//! Anything else (another status, a timeout, a refused connection, a TLS error) retries it by
//! its backoff. The error of a failed attempt names the status and the first bytes of the
//! response body.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq::worker::Failure;
use delayq::{Delivery, PayloadKind};
use metrics::{Counter, Histogram};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use tracing::Instrument;

use super::address::{check_url, AddressPolicy};
use super::signature;
use super::target::PushTarget;
use crate::push_envelope::{self as envelope, Destination};

/// Most bytes of a response body read (the rest is dropped unread).
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Most bytes of a response body kept in a failed attempt's error.
const ERROR_BODY_BYTES: usize = 200;

/// Longest `Retry-After` honoured; a longer one is cut to this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// What one target's pushes share, made once per worker: the parsed URL and method, and the
/// metric handles (a push's own work is then the request itself).
pub struct Pusher {
    client: reqwest::Client,
    policy: Arc<AddressPolicy>,
    target: Arc<PushTarget>,
    url: reqwest::Url,
    method: reqwest::Method,
    lateness: Histogram,
    duration: Histogram,
    /// Requests to the target's host by class: 1xx to 5xx, then transport errors.
    requests: [Counter; 6],
    /// The same, since the runtime last took them for the queue's history.
    tally: Arc<Tally>,
}

/// Answers by class (1xx to 5xx, then none) counted since they were last taken: a server
/// adds them to the queue's history about once a second, not one write per push.
#[derive(Default)]
pub struct Tally([AtomicU64; 6]);

impl Tally {
    /// The counts so far, and zero from here on.
    pub fn take(&self) -> [u64; 6] {
        std::array::from_fn(|i| self.0[i].swap(0, Ordering::Relaxed))
    }
}

const CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "error"];

impl Pusher {
    /// The pusher of `queue`'s `target`.
    pub fn new(
        client: reqwest::Client,
        policy: Arc<AddressPolicy>,
        queue: &str,
        target: Arc<PushTarget>,
        tally: Arc<Tally>,
    ) -> Result<Self, String> {
        let (url, _) = target.validate()?;
        let method = reqwest::Method::from_bytes(target.method.as_bytes())
            .map_err(|_| format!("bad method {}", target.method))?;
        let host = url.host_str().unwrap_or("").to_owned();
        let requests = CLASSES.map(|class| request_counter(queue, &host, class));
        Ok(Pusher {
            client,
            policy,
            url,
            method,
            lateness: metrics::histogram!("delayq_push_lateness_seconds", "queue" => queue.to_owned()),
            duration: metrics::histogram!("delayq_push_request_seconds", "queue" => queue.to_owned()),
            requests,
            target,
            tally,
        })
    }

    /// Sends `delivery`; `Err` says how the attempt failed.
    pub async fn push(&self, delivery: &Delivery) -> Result<(), Failure> {
        let target = &self.target;
        let (destination, body) = envelope::open(&delivery.payload);
        let destination = destination.unwrap_or_default();
        // Checked when it was sent, and again here: an envelope stored before a rule, or a
        // target changed since, must not get a message through. What is refused now will be
        // refused on every retry: a dead letter now, with the reason.
        super::headers::check("push.headers", &destination.headers).map_err(Failure::dead)?;
        let own_url = match &destination.url {
            None => None,
            Some(text) => {
                let url = reqwest::Url::parse(text)
                    .map_err(|e| Failure::dead(format!("bad push.url: {e}")))?;
                if !target.allows_message_url(&url) {
                    return Err(Failure::dead(format!(
                        "push.url {}: its origin is not in the allow_message_urls of the \
                         queue's push target",
                        url.origin().ascii_serialization()
                    )));
                }
                // The error is the message's, which a send token reads: no addresses.
                check_url(&self.policy, &url)
                    .await
                    .map_err(|e| Failure::dead(e.public()))?;
                Some(url)
            }
        };
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.lateness
            .record(now_ms.saturating_sub(delivery.due_ms) as f64 / 1000.0);
        // The target's headers (its credentials, often) go to the target's URL only.
        let target_headers = own_url.is_none().then_some(&target.headers);
        let span = push_span(delivery);
        let mut headers = headers(
            target_headers,
            &target.signing_keys,
            &destination,
            delivery,
            body,
            now_ms / 1000,
        );
        // The receiver's work goes on the trace: under this push span when spans are
        // exported, else under the context the message was sent with (W3C Trace Context).
        let traceparent = delayq::telemetry::traceparent_of(&span).or(delivery.traceparent.clone());
        if let Some(v) = traceparent.and_then(|t| HeaderValue::from_str(&t).ok()) {
            headers.insert(HeaderName::from_static("traceparent"), v);
        }
        let request = self
            .client
            .request(
                self.method.clone(),
                own_url.clone().unwrap_or_else(|| self.url.clone()),
            )
            .headers(headers)
            .timeout(Duration::from_millis(target.timeout_ms))
            .body(body.to_vec());
        let timer = std::time::Instant::now();
        let result = request.send().instrument(span.clone()).await;
        let count = |class: usize| {
            self.tally.0[class].fetch_add(1, Ordering::Relaxed);
            match &own_url {
                None => self.requests[class].increment(1),
                Some(url) => {
                    let host = url.host_str().unwrap_or("");
                    request_counter(delivery.queue.as_str(), host, CLASSES[class]).increment(1);
                }
            }
        };
        let outcome = match result {
            Err(e) => {
                count(5);
                let url = own_url.as_ref().unwrap_or(&self.url);
                Err(Failure::retry(transport_error(url, &e)))
            }
            Ok(mut response) => {
                let status = response.status().as_u16();
                span.record("http.response.status_code", status);
                let retry_after = response
                    .headers()
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_retry_after);
                let body = read_bounded(&mut response).await;
                count(usize::from(status / 100).clamp(1, 5) - 1);
                if (200..300).contains(&status) {
                    Ok(())
                } else {
                    let snippet =
                        String::from_utf8_lossy(&body[..body.len().min(ERROR_BODY_BYTES)])
                            .into_owned();
                    let error = format!("HTTP {status}: {snippet}");
                    match (status, retry_after) {
                        (429 | 503, Some(after)) => Err(Failure::retry_after(after, error)),
                        _ if target.is_dead_status(status) => Err(Failure::dead(error)),
                        _ => Err(Failure::retry(error)),
                    }
                }
            }
        };
        self.duration.record(timer.elapsed().as_secs_f64());
        outcome
    }
}

fn request_counter(queue: &str, host: &str, class: &str) -> Counter {
    metrics::counter!("delayq_push_requests_total", "queue" => queue.to_owned(),
        "host" => host.to_owned(), "class" => class.to_owned())
}

/// The request's headers: the content type; the message's own headers, then the target's
/// (`target_headers`, given when the request goes to the target's URL), which a message's
/// cannot replace; and delayq's.
fn headers(
    target_headers: Option<&BTreeMap<String, String>>,
    signing_keys: &[String],
    destination: &Destination,
    delivery: &Delivery,
    body: &[u8],
    unix_secs: u64,
) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let content_type = match delivery.kind {
        PayloadKind::Json => "application/json",
        _ => "application/octet-stream",
    };
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    for (name, value) in destination
        .headers
        .iter()
        .chain(target_headers.into_iter().flatten())
    {
        // A target stored before the header rules may hold one: it is left out.
        if super::headers::is_reserved(name) {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.insert(n, v);
        }
    }
    let signed = signature::Signed {
        queue: delivery.queue.as_str(),
        id: &delivery.id,
        attempt: delivery.attempt,
        body,
    };
    let signature = signature::sign(signing_keys, unix_secs, &signed);
    let ours = [
        ("delayq-queue", delivery.queue.as_str().to_owned()),
        ("delayq-message-id", delivery.id.clone()),
        ("delayq-attempt", delivery.attempt.to_string()),
        ("delayq-due-ms", delivery.due_ms.to_string()),
        (signature::HEADER, signature),
    ];
    for (name, value) in ours {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), v);
        }
    }
    headers
}

/// The span of one push request, when spans are exported: a child of the handler's
/// `process` span, which is the message's trace.
fn push_span(delivery: &Delivery) -> tracing::Span {
    if !delayq::telemetry::is_enabled() {
        return tracing::Span::none();
    }
    tracing::info_span!(
        "push",
        otel.name = %format_args!("push {}", delivery.queue),
        otel.kind = "client",
        messaging.message.id = %delivery.id,
        http.response.status_code = tracing::field::Empty,
    )
}

/// What went wrong below HTTP, in words a person reading the error history understands. A
/// send token reads it: the URL's origin only (`redact.rs`).
fn transport_error(url: &reqwest::Url, e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else if e.is_redirect() {
        "redirect refused"
    } else {
        "request failed"
    };
    crate::redact::request_error(kind, url, e)
}

/// `Retry-After`: seconds, or an HTTP date.
fn parse_retry_after(text: &str) -> Option<Duration> {
    let after = match text.trim().parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => {
            let at = humantime::parse_rfc3339_weak(text.trim())
                .ok()
                .or_else(|| httpdate(text.trim()))?;
            at.duration_since(SystemTime::now()).unwrap_or_default()
        }
    };
    Some(after.min(MAX_RETRY_AFTER))
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form HTTP dates take.
fn httpdate(text: &str) -> Option<SystemTime> {
    let rest = text.split_once(", ")?.1;
    let mut parts = rest.split_whitespace();
    let (day, month, year, time) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? + 1;
    humantime::parse_rfc3339_weak(&format!("{year}-{month:02}-{day:0>2}T{time}Z")).ok()
}

async fn read_bounded(response: &mut reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < MAX_RESPONSE_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(MAX_RESPONSE_BYTES);
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(parse_retry_after("120"), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("99999999"), Some(MAX_RETRY_AFTER));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert!(httpdate("Sun, 06 Nov 1994 08:49:37 GMT").is_some());
        assert_eq!(parse_retry_after("soon"), None);
    }
}
