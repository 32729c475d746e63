//! A message's own push destination (its envelope) stays the server's (issue 49, items 10
//! and 11): a search looks in the payload only, never in the envelope's headers; and a
//! consume token's new payload on a nack is stored as a payload, so it cannot plant a push
//! destination.

use std::time::Duration;

use base64::Engine;
use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::*;
use crate::receiver::Receiver;

const ADMIN: &str = "admin-token-envelopes";
const SEND: &str = "send-token-envelopes";
const CONSUME: &str = "consume-token-envelopes";

async fn server() -> TestServer {
    let limits = Limits {
        push_allow: vec!["127.0.0.0/8".parse().expect("network")],
        ..Limits::default()
    };
    let tokens =
        Tokens::parse(&format!("admin:{ADMIN}\nsend:{SEND}\nconsume:{CONSUME}")).expect("tokens");
    TestServer::start_with(limits, tokens).await
}

#[tokio::test]
async fn a_search_does_not_find_text_in_a_messages_push_headers() {
    let mut s = server().await;
    let target = Receiver::start().await;
    s.token = Some(ADMIN.into());
    let (status, body) = s
        .call(
            Method::PUT,
            "/v1/queues/hidden/push",
            Some(json!({ "url": format!("{}/hook", target.url) })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    s.token = Some(SEND.into());
    let sent = s
        .post(
            "/v1/queues/hidden/messages",
            json!({ "payload": { "order": 7 }, "id": "m", "delay": "1h",
                    "push": { "headers": { "x-api-key": "HEADER-SECRET-VALUE" } } }),
        )
        .await;
    assert_eq!(sent.0, StatusCode::CREATED, "{}", sent.1);

    let search = |text: &'static str| {
        let s = &s;
        async move {
            let (status, step) = s
                .get(&format!(
                    "/v1/queues/hidden/messages?state=delayed&contains={text}"
                ))
                .await;
            assert_eq!(status, StatusCode::OK, "{step}");
            step["messages"].as_array().map_or(0, Vec::len)
        }
    };
    assert_eq!(search("HEADER-SECRET").await, 0, "a header value was found");
    assert_eq!(search("x-api-key").await, 0, "a header name was found");
    assert_eq!(search("order").await, 1, "the payload is searched");
}

#[tokio::test]
async fn a_nacks_new_payload_cannot_plant_a_push_destination() {
    let mut s = server().await;
    let target = Receiver::start().await;
    let attacker = Receiver::start().await;
    // A message sent as bytes, received by a consume token (the queue pushes nothing yet).
    let resp = s
        .http
        .post(format!("{}/v1/queues/planted/messages?id=m", s.base))
        .bearer_auth(SEND)
        .header("content-type", "application/octet-stream")
        .body("original")
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), StatusCode::CREATED);
    s.token = Some(CONSUME.into());
    let got = receive(&s, "planted", 1, "5s").await;
    assert_eq!(got.len(), 1);

    // Its nack's new payload is an envelope naming the consumer's own URL.
    let destination = json!({ "url": format!("{}/planted", attacker.url) }).to_string();
    let mut forged = b"\0dq-push\x01".to_vec();
    forged.extend_from_slice(&(destination.len() as u32).to_be_bytes());
    forged.extend_from_slice(destination.as_bytes());
    forged.extend_from_slice(b"owned");
    let encoded = base64::engine::general_purpose::STANDARD.encode(&forged);
    let (status, body) = s
        .post(
            "/v1/queues/planted/nack",
            json!({ "receipt": got[0]["receipt"], "retry_after": "1h", "payload_base64": encoded }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Stored as the consumer's bytes, whole: no envelope was opened.
    s.token = Some(ADMIN.into());
    let (_, message) = s.get("/v1/queues/planted/messages/m").await;
    assert_eq!(message["payload_base64"], encoded, "{message}");

    // Pushed later, it goes to the target (which even allows the consumer's origin), not to
    // the URL the consumer planted.
    let (status, body) = s
        .call(
            Method::PUT,
            "/v1/queues/planted/push",
            Some(json!({ "url": format!("{}/hook", target.url),
                         "allow_message_urls": [attacker.url.clone()] })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = s
        .post(
            "/v1/queues/planted/messages/m/reschedule",
            json!({ "delay": "0s" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_until(Duration::from_secs(10), "the push", || async {
        !target.for_id("m").is_empty() || !attacker.for_id("m").is_empty()
    })
    .await;
    assert!(
        attacker.for_id("m").is_empty(),
        "the planted URL got the message"
    );
    assert_eq!(target.for_id("m").remove(0).body, forged);
}
