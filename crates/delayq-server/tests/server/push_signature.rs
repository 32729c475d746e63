//! The `Delayq-Signature` of pushed requests, checked as a receiver would check it, by the
//! README's recipe computed here independently: `v2` covers the time, the queue, the message
//! id, the attempt and the body, so a request cannot be replayed as another attempt, another
//! message or another queue; `v1` (the body alone) stays for receivers not yet upgraded.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use delayq_server::push::signature::{self, Signed};
use hmac::{Hmac, Mac};
use reqwest::{Method, StatusCode};
use serde_json::json;
use sha2::Sha256;

use crate::common::*;
use crate::receiver::{now_ms, Answer, Receiver, Seen};

fn hmac_hex(key: &str, message: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("any key");
    mac.update(message);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The values of `name` (`t`, `v1`, `v2`) in a signature header.
fn values<'a>(header: &'a str, name: &str) -> Vec<&'a str> {
    header
        .split(',')
        .filter_map(|part| part.split_once('='))
        .filter(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .collect()
}

/// What the README tells a receiver to sign: `<t>\n<queue>\n<id>\n<attempt>\n<body>`.
fn v2_of(key: &str, seen: &Seen) -> String {
    let header = seen.header(signature::HEADER);
    let t = values(header, "t")[0];
    let mut signed = format!(
        "{t}\n{}\n{}\n{}\n",
        seen.header("delayq-queue"),
        seen.header("delayq-message-id"),
        seen.header("delayq-attempt")
    )
    .into_bytes();
    signed.extend_from_slice(&seen.body);
    hmac_hex(key, &signed)
}

fn signed_of(seen: &Seen) -> Signed<'_> {
    Signed {
        queue: seen.header("delayq-queue"),
        id: seen.header("delayq-message-id"),
        attempt: seen.header("delayq-attempt").parse().expect("attempt"),
        body: &seen.body,
    }
}

#[tokio::test]
async fn a_push_signature_covers_queue_id_attempt_and_time() {
    let limits = Limits {
        push_allow: vec!["127.0.0.0/8".parse().expect("network")],
        ..Limits::default()
    };
    let s = TestServer::start_with(limits, Tokens::default()).await;
    let receiver = Receiver::start().await;
    let target = json!({ "url": format!("{}/hook", receiver.url),
        "failure_callback": format!("{}/failed", receiver.url) });
    let (status, body) = s
        .call(Method::PUT, "/v1/queues/signed/push", Some(target))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let key = body["signing_keys"][0].as_str().expect("key").to_owned();
    receiver.script("s1", vec![Answer::Status(500, vec![], "again".into()); 2]);
    let (status, _) = s
        .post(
            "/v1/queues/signed/messages",
            json!({ "payload": { "order": 1 }, "id": "s1", "max_attempts": 2,
                    "backoff": { "fixed": { "delay": "100ms" } } }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    wait_until(
        Duration::from_secs(10),
        "two attempts and the callback",
        || async { receiver.seen().len() >= 3 },
    )
    .await;
    let seen = receiver.seen();
    let (first, second) = (&seen[0], &seen[1]);
    let now = now_ms() / 1000;
    for request in [first, second] {
        let header = request.header(signature::HEADER);
        assert_eq!(values(header, "v2"), vec![v2_of(&key, request)], "{header}");
        assert!(signature::verify(
            &key,
            header,
            &signed_of(request),
            now,
            300
        ));
        // v1, deprecated, still signs `<t>.<body>` for receivers not yet upgraded.
        let mut old = format!("{}.", values(header, "t")[0]).into_bytes();
        old.extend_from_slice(&request.body);
        assert_eq!(values(header, "v1"), vec![hmac_hex(&key, &old)]);
    }
    // Attempt 1's signature does not pass for attempt 2 (same body, same message), nor for
    // another message or queue, nor long after.
    let replay = first.header(signature::HEADER);
    assert!(!signature::verify(
        &key,
        replay,
        &signed_of(second),
        now,
        300
    ));
    let mut other = signed_of(first);
    other.id = "s2";
    assert!(!signature::verify(&key, replay, &other, now, 300));
    let mut other = signed_of(first);
    other.queue = "other";
    assert!(!signature::verify(&key, replay, &other, now, 300));
    assert!(!signature::verify(
        &key,
        replay,
        &signed_of(first),
        now + 301,
        300
    ));
    // The failure callback is signed the same way, as attempt 0.
    let callback = &seen[2];
    assert_eq!(callback.path, "/failed");
    assert_eq!(callback.header("delayq-attempt"), "0");
    assert!(signature::verify(
        &key,
        callback.header(signature::HEADER),
        &signed_of(callback),
        now,
        300
    ));
}
