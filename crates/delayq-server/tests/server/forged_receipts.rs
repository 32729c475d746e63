//! Receipts and claims as an HTTP client meets them. A receipt is the client's to keep and
//! to edit: an ack whose receipt names another caller id, or the wrong kind of id, for the
//! lease it carries is refused (409) and changes nothing; a generated id is read from the
//! message, not the receipt. A receive leaves no key behind.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn an_edited_receipt_is_refused_and_touches_no_other_message() {
    let s = TestServer::start().await;
    s.post("/v1/queues/q/messages", json!({ "payload": 1, "id": "a" }))
        .await;
    s.post(
        "/v1/queues/q/messages",
        json!({ "payload": 2, "id": "b", "delay": "1h" }),
    )
    .await;
    let got = receive(&s, "q", 1, "0s").await;
    let real = got[0]["receipt"].as_str().expect("a receipt").to_owned();
    // Token and sequence (24 hex digits), the id's kind (e: the caller's), the id.
    assert_eq!(&real[24..], "ea");
    for forged in [format!("{}b", &real[..25]), format!("{}ga", &real[..24])] {
        let answer = s
            .post("/v1/queues/q/ack", json!({ "receipt": forged }))
            .await;
        assert_error(&answer, StatusCode::CONFLICT, "lease_lost");
    }
    let (_, a) = s.get("/v1/queues/q/messages/a").await;
    assert_eq!(a["state"], "in_flight", "{a}");
    let (status, cancelled) = s
        .call(Method::DELETE, "/v1/queues/q/messages/b", None)
        .await;
    assert_eq!(status, StatusCode::OK, "b is still found: {cancelled}");
    let (status, _) = s.post("/v1/queues/q/ack", json!({ "receipt": real })).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

/// A generated id says nothing the lease does not: ack takes it from the held message, never
/// from the receipt, so a receipt whose generated id was edited to another message's acks
/// only the message its lease holds.
#[tokio::test]
async fn an_edited_generated_id_acks_only_the_leased_message() {
    let s = TestServer::start().await;
    s.post("/v1/queues/q/messages", json!({ "payload": 1 }))
        .await;
    let (_, later) = s
        .post(
            "/v1/queues/q/messages",
            json!({ "payload": 2, "delay": "1h" }),
        )
        .await;
    let other = later["id"].as_str().expect("an id").to_owned();
    let got = receive(&s, "q", 1, "0s").await;
    let real = got[0]["receipt"].as_str().expect("a receipt").to_owned();
    let leased = got[0]["id"].as_str().expect("an id").to_owned();
    assert_eq!(&real[24..25], "g");
    let forged = format!("{}g{other}", &real[..24]);
    let (status, _) = s
        .post("/v1/queues/q/ack", json!({ "receipt": forged }))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = s.get(&format!("/v1/queues/q/messages/{leased}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the leased message is acked");
    let (_, still) = s.get(&format!("/v1/queues/q/messages/{other}")).await;
    assert_eq!(still["state"], "delayed", "{still}");
    let answer = s.post("/v1/queues/q/ack", json!({ "receipt": real })).await;
    assert_error(&answer, StatusCode::CONFLICT, "lease_lost");
}

/// An HTTP receive is one request's consumer, which never repeats a claim: it leaves no
/// claim record behind for the length of its lease (at high rates with long leases that was
/// a key per request, millions of them).
#[tokio::test]
async fn http_receives_leave_no_key_per_request() {
    let s = TestServer::start().await;
    for i in 0..20 {
        s.post("/v1/queues/q/messages", json!({ "payload": i }))
            .await;
    }
    for _ in 0..20 {
        let (status, got) = s
            .post("/v1/queues/q/receive", json!({ "max": 1, "lease": "1h" }))
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(got["deliveries"].as_array().map(Vec::len), Some(1));
    }
    let claim_keys = s.redis.cli(&["KEYS", "*claim:*"]);
    assert_eq!(claim_keys.trim(), "", "claim records left: {claim_keys}");
}
