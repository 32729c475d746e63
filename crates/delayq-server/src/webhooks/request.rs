//! One event's request to one webhook: a POST of the event as JSON, signed with the queue's
//! webhook keys as a push is (`Delayq-Signature` over the body, `push/signature.rs`), to an
//! address the server may reach (`push/address.rs`), within [`TIMEOUT`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq::Event;
use serde_json::json;

use crate::push::address::{check_url, AddressPolicy};
use crate::push::signature;
use crate::shapes::EventOut;

/// How long one request may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The request's body: the event (as `GET .../events` shows it) and its queue.
pub fn body(queue: &str, event: &Event) -> Vec<u8> {
    let mut value = serde_json::to_value(EventOut::from(event.clone())).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("queue".into(), json!(queue));
    }
    value.to_string().into_bytes()
}

/// Sends `body` (of `event`, try `attempt`) to `url`; `Err` says why it did not land (a
/// refused address, no answer, or a status other than 2xx).
pub async fn send(
    client: &reqwest::Client,
    policy: &AddressPolicy,
    url: &reqwest::Url,
    keys: &[String],
    (queue, event, attempt): (&str, &Event, u32),
    body: &[u8],
) -> Result<(), String> {
    match tokio::time::timeout(TIMEOUT, check_url(policy, url)).await {
        Ok(Ok(())) => {}
        Ok(Err(refused)) => return Err(refused.detailed()),
        Err(_) => {
            let origin = crate::redact::origin(url);
            return Err(format!("resolving {origin} took over {TIMEOUT:?}"));
        }
    }
    let signed = signature::Signed {
        queue,
        id: &event.id,
        attempt,
        body,
    };
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let event_id = event.cursor.to_string();
    let signed_event = signature::SignedEvent {
        queue,
        event_id: &event_id,
        body,
    };
    let sent = client
        .post(url.clone())
        .header("content-type", "application/json")
        .header("delayq-queue", queue)
        .header("delayq-message-id", &event.id)
        .header("delayq-event", event.kind.as_str())
        .header("delayq-event-id", &event_id)
        .header("delayq-attempt", attempt.to_string())
        .header(
            signature::HEADER,
            signature::sign_event(keys, secs, &signed, &signed_event),
        )
        .timeout(TIMEOUT)
        .body(body.to_vec())
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => Err(format!("HTTP {}", r.status().as_u16())),
        Err(e) => Err(crate::redact::request_error("no answer", url, &e)),
    }
}
