//! State webhooks over real HTTP: an admin subscribes URLs to event kinds; each event of
//! those kinds reaches its URL, signed, at least once: retried after a failure, resumed after
//! a server restart, sent by one of two servers; a URL on a private address is refused unless
//! allowed; other roles cannot read the signing keys.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use delayq_server::push::signature;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;
use crate::receiver::{now_ms, Answer, Receiver};

const WAIT: Duration = Duration::from_secs(15);

fn loopback_allowed() -> Limits {
    Limits {
        push_allow: vec!["127.0.0.0/8".parse().expect("network")],
        ..Limits::default()
    }
}

/// Subscribes `receiver`'s `/events` to `kinds` of `queue`; returns the signing key.
async fn subscribe(s: &Endpoint, queue: &str, receiver: &Receiver, kinds: Value) -> String {
    let (status, out) = s
        .call(
            Method::PUT,
            &format!("/v1/queues/{queue}/webhooks"),
            Some(json!({ "webhooks": [{ "url": format!("{}/events", receiver.url), "kinds": kinds }] })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert!(
        out["events_max"].as_u64().is_some(),
        "events turned on: {out}"
    );
    out["signing_keys"][0].as_str().expect("a key").to_owned()
}

/// Sends message `id` to `queue`, receives and acks it.
async fn send_and_ack(s: &Endpoint, queue: &str, id: &str) {
    let (status, sent) = s
        .post(
            &format!("/v1/queues/{queue}/messages"),
            json!({ "payload": 1, "id": id }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    let (_, got) = s
        .post(
            &format!("/v1/queues/{queue}/receive"),
            json!({ "max": 1, "lease": "30s", "wait": "5s" }),
        )
        .await;
    let receipt = got["deliveries"][0]["receipt"].clone();
    let (status, _) = s
        .post(
            &format!("/v1/queues/{queue}/ack"),
            json!({ "receipt": receipt }),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

async fn wait_for(receiver: &Receiver, id: &str, n: usize) {
    wait_until(WAIT, &format!("{n} webhook requests for {id}"), || async {
        receiver.for_id(id).len() >= n
    })
    .await;
}

#[tokio::test]
async fn an_acked_event_reaches_its_webhook_signed() {
    let s = TestServer::start_with(loopback_allowed(), Tokens::default()).await;
    let receiver = Receiver::start().await;
    let key = subscribe(&s, "orders", &receiver, json!(["acked"])).await;
    send_and_ack(&s, "orders", "o-1").await;
    wait_for(&receiver, "o-1", 1).await;
    let seen = receiver.for_id("o-1");
    assert_eq!(seen.len(), 1, "only the acked event: {seen:?}");
    let request = &seen[0];
    assert_eq!(request.path, "/events");
    assert_eq!(request.header("delayq-event"), "acked");
    let body: Value = serde_json::from_slice(&request.body).expect("JSON");
    assert_eq!(
        (&body["kind"], &body["id"], &body["queue"]),
        (&json!("acked"), &json!("o-1"), &json!("orders"))
    );
    assert_eq!(
        body["cursor"].as_str(),
        Some(request.header("delayq-event-id"))
    );
    let signed = signature::Signed {
        queue: "orders",
        id: "o-1",
        attempt: 1,
        body: &request.body,
    };
    assert!(signature::verify(
        &key,
        request.header(signature::HEADER),
        &signed,
        now_ms() / 1000,
        300
    ));
    assert!(!signature::verify(
        "another-key-0123456789",
        request.header(signature::HEADER),
        &signed,
        now_ms() / 1000,
        300
    ));
    // Issue 49, item 15: the event id is signed (w1), so a receiver that drops events it
    // has seen by their id cannot be fooled by a replay under another id.
    let event = signature::SignedEvent {
        queue: "orders",
        event_id: request.header("delayq-event-id"),
        body: &request.body,
    };
    let header = request.header(signature::HEADER);
    assert!(signature::verify_event(
        &key,
        header,
        &event,
        now_ms() / 1000,
        300
    ));
    let renamed = signature::SignedEvent {
        event_id: "1-0",
        ..event
    };
    assert!(!signature::verify_event(
        &key,
        header,
        &renamed,
        now_ms() / 1000,
        300
    ));

    let (status, got) = s.get("/v1/queues/orders/webhooks").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["webhooks"][0]["kinds"], json!(["acked"]));
    let (status, _) = s
        .call(Method::DELETE, "/v1/queues/orders/webhooks", None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = s.get("/v1/queues/orders/webhooks").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // An empty list is no webhooks: nothing kept, no lease taken for it.
    let empty = Some(json!({ "webhooks": [] }));
    let (status, _) = s
        .call(Method::PUT, "/v1/queues/orders/webhooks", empty)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = s.get("/v1/queues/orders/webhooks").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_failed_request_is_retried_until_it_lands() {
    let s = TestServer::start_with(loopback_allowed(), Tokens::default()).await;
    let receiver = Receiver::start().await;
    receiver.script(
        "r-1",
        vec![
            Answer::Status(500, vec![], "down".into()),
            Answer::Status(503, vec![], "still down".into()),
        ],
    );
    subscribe(&s, "retried", &receiver, json!(["acked"])).await;
    send_and_ack(&s, "retried", "r-1").await;
    wait_for(&receiver, "r-1", 3).await;
    let attempts: Vec<String> = receiver
        .for_id("r-1")
        .iter()
        .map(|r| r.header("delayq-attempt").to_owned())
        .collect();
    assert_eq!(attempts, ["1", "2", "3"]);
}

#[tokio::test]
async fn events_while_no_server_runs_are_sent_after_a_restart_by_one_of_two_servers() {
    let redis = RedisServer::start();
    let receiver = Receiver::start().await;
    let first = Endpoint::start(&redis.url(), loopback_allowed(), Tokens::default()).await;
    subscribe(&first, "q", &receiver, json!([])).await;
    send_and_ack(&first, "q", "before").await;
    wait_until(WAIT, "the acked event of before", || async {
        receiver
            .for_id("before")
            .iter()
            .any(|r| r.header("delayq-event") == "acked")
    })
    .await;
    first.shutdown().await;

    // Nobody calls the webhook: the events wait in Redis.
    let dq = delayq::DelayQ::connect(&redis.url())
        .await
        .expect("connect");
    let q = dq.queue("q").expect("queue");
    q.send(b"x", &delayq::SendOptions::new().id("meanwhile"))
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let options = delayq::ReceiveOptions {
        max: 1,
        lease: Duration::from_secs(30),
        wait: Duration::from_secs(5),
    };
    for d in consumer.receive(&options).await.expect("receive") {
        q.ack(&d).await.expect("ack");
    }

    let a = Endpoint::start(&redis.url(), loopback_allowed(), Tokens::default()).await;
    let b = Endpoint::start(&redis.url(), loopback_allowed(), Tokens::default()).await;
    wait_for(&receiver, "meanwhile", 3).await;
    send_and_ack(&b, "q", "after").await;
    wait_until(WAIT, "the acked event of after", || async {
        receiver
            .for_id("after")
            .iter()
            .any(|r| r.header("delayq-event") == "acked")
    })
    .await;
    // Each event once: one server holds the queue's webhooks.
    for id in ["before", "meanwhile", "after"] {
        let ids: Vec<String> = receiver
            .for_id(id)
            .iter()
            .map(|r| r.header("delayq-event-id").to_owned())
            .collect();
        let mut distinct = ids.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(
            ids.len(),
            distinct.len(),
            "{id}: an event sent twice: {ids:?}"
        );
    }
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn private_addresses_bad_input_and_other_roles_are_refused() {
    let tokens =
        Tokens::parse("send:send-token-0123456789\nadmin:admin-token-0123456789").expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some("admin-token-0123456789".into());
    let receiver = Receiver::start().await;
    let keys = all_keys(&s.redis);
    let put = |body: Value| {
        let s = &s;
        async move {
            s.call(Method::PUT, "/v1/queues/q/webhooks", Some(body))
                .await
        }
    };
    let hook = |url: &str, kinds: Value| json!({ "webhooks": [{ "url": url, "kinds": kinds }] });
    let loopback = format!("{}/events", receiver.url);
    assert_error(
        &put(hook(&loopback, json!([]))).await,
        StatusCode::BAD_REQUEST,
        "webhook_refused",
    );
    for bad in [
        hook("ftp://example.com/x", json!([])),
        hook("https://user:pw@example.com/x", json!([])),
        hook("https://example.com/x", json!(["exploded"])),
        json!({ "webhooks": [{ "url": "https://example.com/a" }, { "url": "https://example.com/a" }] }),
        json!({ "webhooks": [], "signing_keys": ["short"] }),
        json!({ "hooks": [] }),
    ] {
        let (status, body) = put(bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    assert_eq!(all_keys(&s.redis), keys, "nothing written");
    s.token = Some("send-token-0123456789".into());
    let (status, _) = s.get("/v1/queues/q/webhooks").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[test]
fn the_cli_adds_lists_and_removes_webhooks() {
    use crate::cli::{fails, json, ok};

    let redis = RedisServer::start();
    let added = json(
        &redis,
        &[
            "webhooks",
            "add",
            "orders",
            "https://hooks.example.com/a",
            "--kind",
            "acked,dead",
        ],
    );
    assert_eq!(added["webhooks"][0]["kinds"], json!(["acked", "dead"]));
    let key = added["signing_keys"][0].as_str().expect("a key").to_owned();
    json(
        &redis,
        &["webhooks", "add", "orders", "https://hooks.example.com/b"],
    );
    let listed = json(&redis, &["webhooks", "list", "orders"]);
    assert_eq!(listed["webhooks"].as_array().map(Vec::len), Some(2));
    assert_eq!(listed["signing_keys"][0], json!(key), "the key stays");
    let stats = json(&redis, &["stats", "orders"]);
    assert!(stats["events_max"].as_u64().is_some(), "events on: {stats}");
    let left = json(
        &redis,
        &[
            "webhooks",
            "remove",
            "orders",
            "https://hooks.example.com/a",
        ],
    );
    assert_eq!(
        left["webhooks"][0]["url"],
        json!("https://hooks.example.com/b")
    );
    let refused = fails(&redis, &["webhooks", "add", "orders", "ftp://x/y"]);
    assert!(refused.contains("http"), "{refused}");
    let refused = fails(
        &redis,
        &["webhooks", "add", "orders", "https://x/y", "--kind", "boom"],
    );
    assert!(refused.contains("boom"), "{refused}");
    let table = ok(&redis, &["webhooks", "list", "orders"]);
    assert!(
        table.contains("https://hooks.example.com/b  every kind"),
        "{table}"
    );
}

#[tokio::test]
async fn the_queue_page_lists_the_webhooks() {
    use crate::ui::{form_client, page_as, session_cookie};

    let tokens = Tokens::parse("admin:admin-token-0123456789").expect("tokens");
    let mut s = TestServer::start_with(loopback_allowed(), tokens).await;
    s.token = Some("admin-token-0123456789".into());
    let receiver = Receiver::start().await;
    subscribe(&s, "listed", &receiver, json!(["dead"])).await;
    let http = form_client();
    let admin = session_cookie(&s, "admin-token-0123456789").await;
    let page = page_as(&http, &s, &admin, "/ui/queues/listed").await;
    assert!(page.contains("id=\"webhooks\""), "{page}");
    assert!(page.contains(&format!("{}/events", receiver.url)), "{page}");
    assert!(!page.contains("signing"), "no key on the page");
    s.shutdown().await;
}
