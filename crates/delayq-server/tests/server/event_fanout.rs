//! What event streams and pages cost (issue 49, item 4): Redis's work per event does not
//! grow with the listeners (one reader per queue and server, fanned out), reads only the
//! partitions that woke, streams are capped per token and per server, and a filtered page
//! looks at a bounded number of events and says where to go on.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;
use crate::events::{record_events, Stream};

#[tokio::test]
async fn twenty_listeners_on_four_partitions_cost_redis_what_one_does() {
    let s = TestServer::start().await;
    let (status, body) = s
        .call(
            Method::PUT,
            "/v1/queues/watched",
            Some(json!({ "partitions": 4 })),
        )
        .await;
    assert!(status.is_success(), "{body}");
    record_events(&s, "watched").await;
    let mut streams = Vec::new();
    for _ in 0..20 {
        let mut stream = Stream::open(&s, "/v1/queues/watched/events", None).await;
        // The opening frame: the stream is caught up and follows the queue's hub.
        assert!(stream.next().await.id.is_some());
        streams.push(stream);
    }
    s.redis.cli(&["CONFIG", "RESETSTAT"]);
    let sends = 10;
    for i in 0..sends {
        let sent = s
            .post(
                "/v1/queues/watched/messages",
                json!({ "payload": i, "id": format!("m{i}") }),
            )
            .await;
        assert_eq!(sent.0, StatusCode::CREATED, "{}", sent.1);
    }
    for stream in &mut streams {
        for i in 0..sends {
            let frame = stream.next_event().await;
            assert_eq!(frame.event.as_deref(), Some("sent"));
            assert_eq!(frame.data.expect("data")["id"], format!("m{i}"));
        }
    }
    // One reader, reading the partition that woke: about one XRANGE a send. Read per
    // listener and per partition it was 20 x 4 x 2 = 160 a send.
    let xrange = s.redis.command_calls("xrange");
    assert!(
        xrange <= 2 * sends,
        "{xrange} XRANGE calls for {sends} sends with 20 listeners"
    );
}

/// Opens an event stream as `token`; its status (the stream stays open while `resp` lives).
async fn open_as(s: &TestServer, token: &str) -> reqwest::Response {
    s.http
        .get(format!("{}/v1/queues/capped/events", s.base))
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("request")
}

#[tokio::test]
async fn streams_beyond_the_caps_per_token_and_per_server_are_a_429() {
    const A: &str = "consume-token-streams-a";
    const B: &str = "send-token-streams-bbbb";
    let limits = Limits {
        max_event_streams_per_token: 2,
        max_event_streams: 3,
        ..Limits::default()
    };
    let tokens = Tokens::parse(&format!("consume:{A}\nsend:{B}")).expect("tokens");
    let s = TestServer::start_with(limits, tokens).await;

    let a1 = open_as(&s, A).await;
    let a2 = open_as(&s, A).await;
    assert_eq!((a1.status(), a2.status()), (StatusCode::OK, StatusCode::OK));
    let refused = read(open_as(&s, A).await).await;
    assert_error(&refused, StatusCode::TOO_MANY_REQUESTS, "too_many_streams");
    assert!(
        refused.1["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("token"),
        "{}",
        refused.1
    );

    let b1 = open_as(&s, B).await;
    assert_eq!(b1.status(), StatusCode::OK, "another token has its own");
    let refused = read(open_as(&s, B).await).await;
    assert_error(&refused, StatusCode::TOO_MANY_REQUESTS, "too_many_streams");
    assert!(
        refused.1["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("server"),
        "{}",
        refused.1
    );

    // A stream that ends gives its place back.
    drop(a1);
    wait_until(Duration::from_secs(10), "a place to come free", || async {
        open_as(&s, B).await.status() == StatusCode::OK
    })
    .await;
    drop((a2, b1));
}

#[tokio::test]
async fn a_filtered_page_looks_at_a_bounded_number_of_events_and_says_where_to_go_on() {
    let limits = Limits {
        max_events_scanned: 50,
        ..Limits::default()
    };
    let s = TestServer::start_with(limits, Tokens::default()).await;
    record_events(&s, "many").await;
    let items: Vec<Value> = (0..200)
        .map(|i| json!({ "payload": i, "id": format!("m{i}") }))
        .collect();
    let sent = s
        .post("/v1/queues/many/batch", json!({ "messages": items }))
        .await;
    assert!(sent.0.is_success(), "{}", sent.1);

    // Only the last message's events match: each page looks at 50 and answers at once,
    // even asked to wait, with the cursor past what it looked at.
    let mut from = "oldest".to_owned();
    let mut pages = 0;
    let found = loop {
        pages += 1;
        assert!(pages <= 20, "no end after {pages} pages");
        let started = std::time::Instant::now();
        let (status, page) = s
            .get(&format!(
                "/v1/queues/many/events?from={from}&id=m199&wait_ms=5000"
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let events = page["events"].as_array().cloned().unwrap_or_default();
        if !events.is_empty() {
            break events;
        }
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "a page with nothing found waited for new events instead of saying where to go on"
        );
        from = page["cursor"].as_str().expect("cursor").to_owned();
    };
    assert_eq!(found[0]["id"], "m199");
    assert!(
        pages >= 4,
        "200 events were looked at in {pages} pages of at most 50"
    );
}
