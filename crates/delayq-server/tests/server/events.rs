//! The event stream over HTTP: `PATCH {"events": {}}` turns it on; `GET .../events` answers a
//! page as JSON, or with `Accept: text/event-stream` a live stream whose ids resume it,
//! across a restart of the server, with nothing lost or repeated; bad input is a 400 and
//! changes nothing; any token may read, none may not.

use std::collections::VecDeque;
use std::time::Duration;

use delayq::{DelayQ, SendOptions};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;

use crate::common::*;

pub async fn record_events(s: &Endpoint, queue: &str) {
    let (status, stats) = s
        .call(
            Method::PATCH,
            &format!("/v1/queues/{queue}"),
            Some(json!({ "events": {} })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(stats["events_max"], json!(delayq::DEFAULT_EVENTS_KEPT));
}

fn kinds(page: &Value) -> Vec<&str> {
    page["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().expect("kind"))
        .collect()
}

/// An open SSE stream, read frame by frame.
pub struct Stream {
    resp: reqwest::Response,
    buffer: String,
    frames: VecDeque<Frame>,
}

/// One SSE message: its fields as sent.
#[derive(Debug, Default)]
pub struct Frame {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: Option<Value>,
}

impl Stream {
    pub async fn open(s: &Endpoint, path: &str, last_event_id: Option<&str>) -> Stream {
        let mut req = s
            .http
            .get(format!("{}{path}", s.base))
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.expect("request");
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(
            resp.headers()["content-type"].to_str().expect("text"),
            "text/event-stream"
        );
        Stream {
            resp,
            buffer: String::new(),
            frames: VecDeque::new(),
        }
    }

    /// The next frame, failing the test if none comes within 10 s.
    pub async fn next(&mut self) -> Frame {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(frame) = self.frames.pop_front() {
                return frame;
            }
            let chunk = tokio::time::timeout_at(deadline, self.resp.chunk())
                .await
                .expect("a frame within 10 s")
                .expect("the stream goes on")
                .expect("not ended");
            self.buffer
                .push_str(std::str::from_utf8(&chunk).expect("text"));
            while let Some(end) = self.buffer.find("\n\n") {
                let text: String = self.buffer.drain(..end + 2).collect();
                let mut frame = Frame::default();
                for line in text.lines() {
                    match line.split_once(": ") {
                        Some(("id", v)) => frame.id = Some(v.to_owned()),
                        Some(("event", v)) => frame.event = Some(v.to_owned()),
                        Some(("data", v)) => {
                            frame.data = Some(serde_json::from_str(v).expect("JSON"))
                        }
                        _ => {}
                    }
                }
                self.frames.push_back(frame);
            }
        }
    }

    /// The next frame that carries an event.
    pub async fn next_event(&mut self) -> Frame {
        loop {
            let frame = self.next().await;
            if frame.data.is_some() {
                return frame;
            }
        }
    }

    /// Whether the server ended the stream (within 10 s).
    async fn ended(mut self) -> bool {
        let read = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match self.resp.chunk().await {
                    Ok(Some(_)) => continue,
                    _ => return true,
                }
            }
        });
        read.await.unwrap_or(false)
    }
}

#[tokio::test]
async fn a_page_tells_a_message_life_and_filters_it() {
    let s = TestServer::start().await;
    record_events(&s, "orders").await;
    for id in ["a", "b"] {
        let (status, _) = s
            .post(
                "/v1/queues/orders/messages",
                json!({ "payload": 1, "id": id }),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    for d in receive(&s, "orders", 2, "0s").await {
        let (status, _) = s
            .post("/v1/queues/orders/ack", json!({ "receipt": d["receipt"] }))
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT);
    }
    let (status, page) = s.get("/v1/queues/orders/events?from=oldest").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(
        kinds(&page),
        ["sent", "sent", "delivered", "delivered", "acked", "acked"]
    );
    let first = &page["events"][0];
    assert_eq!(
        (&first["id"], &first["kind"]),
        (&json!("a"), &json!("sent"))
    );
    assert!(first["at_ms"].as_u64().is_some() && first["due_ms"].as_u64().is_some());

    let (_, page) = s
        .get("/v1/queues/orders/events?from=oldest&id=b&kind=delivered,acked")
        .await;
    assert_eq!(kinds(&page), ["delivered", "acked"]);
    assert_eq!(page["events"][0]["attempt"], json!(1));

    // A page goes on from its cursor; a page at the end is empty and keeps its place.
    let (_, first_two) = s.get("/v1/queues/orders/events?from=oldest&limit=2").await;
    let cursor = first_two["cursor"].as_str().expect("cursor");
    let (_, rest) = s
        .get(&format!("/v1/queues/orders/events?from={cursor}"))
        .await;
    assert_eq!(kinds(&rest), ["delivered", "delivered", "acked", "acked"]);
    let end = rest["cursor"].as_str().expect("cursor");
    let (_, none) = s
        .get(&format!("/v1/queues/orders/events?from={end}&wait_ms=50"))
        .await;
    assert_eq!(kinds(&none), Vec::<&str>::new());
    assert_eq!(none["cursor"], json!(end));

    // Entries kept: a send each, one claim of both (packed), an ack each.
    let (_, stats) = s.get("/v1/queues/orders").await;
    assert_eq!(stats["events"], json!(5));
    // Stopping drops them.
    let (status, stats) = s
        .call(
            Method::PATCH,
            "/v1/queues/orders",
            Some(json!({ "events": null })),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (&stats["events"], &stats["events_max"]),
        (&json!(0), &Value::Null)
    );
}

#[tokio::test]
async fn a_stream_follows_the_queue_and_resumes_after_a_server_restart() {
    let redis = RedisServer::start();
    let first = Endpoint::start(&redis.url(), Limits::default(), Tokens::default()).await;
    record_events(&first, "live").await;
    let dq = DelayQ::connect(&redis.url()).await.expect("connect");
    let q = dq.queue("live").expect("queue");

    let mut stream = Stream::open(&first, "/v1/queues/live/events?from=now", None).await;
    // The stream opens with where it starts, before any event.
    let opening = stream.next().await;
    assert!(
        opening.id.is_some() && opening.data.is_none(),
        "{opening:?}"
    );
    for i in 0..3 {
        q.send(b"x", &SendOptions::new().id(format!("m{i}")))
            .await
            .expect("send");
    }
    let mut seen = Vec::new();
    let mut last_id = None;
    for _ in 0..3 {
        let frame = stream.next_event().await;
        assert_eq!(frame.event.as_deref(), Some("sent"));
        let data = frame.data.expect("data");
        assert_eq!(frame.id.as_deref(), data["cursor"].as_str());
        seen.push(data["id"].as_str().expect("id").to_owned());
        last_id = frame.id;
    }

    // The server stops (its stream ends with it); events go on meanwhile.
    first.shutdown().await;
    assert!(stream.ended().await, "shutdown ends the stream");
    for i in 3..6 {
        q.send(b"x", &SendOptions::new().id(format!("m{i}")))
            .await
            .expect("send");
    }
    let second = Endpoint::start(&redis.url(), Limits::default(), Tokens::default()).await;
    let mut stream = Stream::open(
        &second,
        "/v1/queues/live/events",
        Some(last_id.as_deref().expect("an id")),
    )
    .await;
    for i in 6..8 {
        q.send(b"x", &SendOptions::new().id(format!("m{i}")))
            .await
            .expect("send");
    }
    for _ in 3..8 {
        let data = stream.next_event().await.data.expect("data");
        seen.push(data["id"].as_str().expect("id").to_owned());
    }
    let expected: Vec<String> = (0..8).map(|i| format!("m{i}")).collect();
    assert_eq!(seen, expected, "every event once, in order");
}

#[tokio::test]
async fn bad_reads_and_settings_are_refused() {
    let s = TestServer::start().await;
    record_events(&s, "q").await;
    let keys = all_keys(&s.redis);
    for path in [
        "/v1/queues/q/events?from=yesterday",
        "/v1/queues/q/events?from=1-0.2-x",
        "/v1/queues/q/events?kind=exploded",
        "/v1/queues/q/events?limit=0",
        "/v1/queues/q/events?limit=100000",
        "/v1/queues/q/events?wait_ms=3600000",
        "/v1/queues/q/events?colour=blue",
    ] {
        let (status, body) = s.get(path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
    }
    let resp = s
        .http
        .get(format!("{}/v1/queues/q/events", s.base))
        .header("accept", "text/event-stream")
        .header("last-event-id", "not-an-id")
        .send()
        .await
        .expect("request");
    assert_error(&read(resp).await, StatusCode::BAD_REQUEST, "invalid_cursor");
    for events in [
        json!({ "max": 0 }),
        json!({ "max": 10_000_001u64 }),
        json!({ "keep": 5 }),
    ] {
        let (status, body) = s
            .call(
                Method::PATCH,
                "/v1/queues/q",
                Some(json!({ "events": events })),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{events}: {body}");
    }
    assert_eq!(all_keys(&s.redis), keys, "nothing changed");
}

#[tokio::test]
async fn any_token_reads_events_and_no_token_does_not() {
    let tokens =
        Tokens::parse("send:send-token-0123456789\nadmin:admin-token-0123456789").expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some("admin-token-0123456789".into());
    record_events(&s, "q").await;
    s.token = Some("send-token-0123456789".into());
    let (status, _) = s.get("/v1/queues/q/events?from=oldest").await;
    assert_eq!(status, StatusCode::OK);
    s.token = None;
    let (status, _) = s.get("/v1/queues/q/events?from=oldest").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let resp = s
        .http
        .get(format!("{}/v1/queues/q/events", s.base))
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
}

/// JSON lines, parsed.
fn lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn the_cli_turns_events_on_prints_them_and_follows_them() {
    use crate::cli::{fails, json, ok};
    use std::io::BufRead;

    let redis = RedisServer::start();
    let set = json(
        &redis,
        &["configure", "q", "--events", "--events-max", "500"],
    );
    assert_eq!(set["events_max"], json!(500));
    ok(&redis, &["send", "q", "x", "--id", "a", "--delay", "1h"]);
    ok(&redis, &["send", "q", "y", "--id", "b", "--delay", "1h"]);
    ok(&redis, &["cancel", "q", "a"]);
    let all = lines(&ok(&redis, &["events", "q", "--json"]));
    let kinds: Vec<&str> = all
        .iter()
        .map(|e| e["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, ["sent", "sent", "cancelled"]);
    let cancelled = lines(&ok(
        &redis,
        &["events", "q", "--json", "--kind", "cancelled"],
    ));
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0]["id"], json!("a"));
    let cursor = all[0]["cursor"].as_str().expect("cursor");
    let rest = lines(&ok(&redis, &["events", "q", "--json", "--from", cursor]));
    assert_eq!(rest.len(), 2);
    let table = ok(&redis, &["events", "q", "--id", "b"]);
    assert!(table.contains("sent") && table.contains(" b "), "{table}");

    // --follow prints what happens after it starts.
    let mut follower = std::process::Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["events", "q", "--follow", "--json"])
        .env("DELAYQ_REDIS_URL", redis.url())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run delayq events --follow");
    let stdout = follower.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while redis
        .cli(&["PUBSUB", "SHARDNUMSUB", "dq:{q}:events"])
        .lines()
        .nth(1)
        .is_none_or(|n| n.trim() != "1")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the follower subscribes"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    ok(&redis, &["send", "q", "z", "--id", "c"]);
    let line = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a followed event");
    let event: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(
        (&event["kind"], &event["id"]),
        (&json!("sent"), &json!("c"))
    );
    follower.kill().expect("kill");
    let _ = follower.wait();

    let refused = fails(&redis, &["events", "q", "--kind", "exploded"]);
    assert!(refused.contains("exploded"), "{refused}");
    let off = json(&redis, &["configure", "q", "--no-events"]);
    assert_eq!(
        (&off["events"], &off["events_max"]),
        (&json!(0), &Value::Null)
    );
    assert_eq!(ok(&redis, &["events", "q"]), "", "none kept");
}
