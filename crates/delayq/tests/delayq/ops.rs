//! Queue operations on the send side: ids, schedules, duplicates, batches, delivery order,
//! binary payloads and their kinds, and what a pending message costs in memory. Cancel,
//! reschedule, get, stats and receipts: `ops_by_id.rs`.

use std::time::Duration;

use delayq::{CancelOutcome, Message, PayloadKind, Queue, SendOptions, Sent, State};

use crate::common::*;

const HOUR: Duration = Duration::from_secs(3600);
const HOUR_MS: u64 = 3_600_000;
const LEASE: Duration = Duration::from_secs(30);

pub(crate) async fn state(q: &Queue, id: &str) -> Option<State> {
    q.get(id).await.expect("get").map(|info| info.state)
}

/// Receives everything that is due now (up to 100), without waiting.
pub(crate) async fn receive_due(q: &Queue) -> Vec<delayq::Delivery> {
    let mut consumer = q.consumer().await.expect("consumer");
    consumer
        .receive(&receiving(100, LEASE, Duration::ZERO))
        .await
        .expect("receive")
}

fn payloads(deliveries: &[delayq::Delivery]) -> Vec<&[u8]> {
    deliveries.iter().map(|d| d.payload.as_slice()).collect()
}

fn assert_due_between(sent: &Sent, low: u64, high: u64) -> u64 {
    let due = sent.due_ms.expect("a new message has a due time");
    assert!(
        (low..=high).contains(&due),
        "due {due} outside [{low}, {high}]"
    );
    due
}

/// A generated id `<due µs>-<seq>` as (due ms, seq).
fn generated_id_parts(id: &str) -> (u64, u64) {
    let (due_us, seq) = id.split_once('-').expect("id is <due µs>-<seq>");
    let number = |s: &str| s.parse::<u64>().expect("id parts are numbers");
    (number(due_us) / 1000, number(seq))
}

#[tokio::test]
async fn generated_ids_are_due_time_and_sequence() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ops");
    let before = now_ms();
    let now = q.send(b"now", &SendOptions::new()).await.expect("send");
    let later = q
        .send(b"later", &SendOptions::new().delay(HOUR))
        .await
        .expect("send delayed");
    let after = now_ms();

    let mut seqs = Vec::new();
    for (sent, offset) in [(&now, 0), (&later, HOUR_MS)] {
        assert!(!sent.duplicate);
        let due = assert_due_between(sent, before + offset, after + offset);
        let (id_due_ms, seq) = generated_id_parts(&sent.id);
        assert_eq!(id_due_ms, due, "id {} encodes the due time", sent.id);
        seqs.push(seq);
    }
    assert!(seqs[0] < seqs[1], "sequence grows: {seqs:?}");
    assert_eq!(state(&q, &now.id).await, Some(State::Ready));
    assert_eq!(state(&q, &later.id).await, Some(State::Delayed));
    assert_eq!(counts(&q).await, [1, 1, 0, 0]);
}

#[tokio::test]
async fn deliver_at_is_the_exact_due_time() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ops");
    let future = now_ms() + 60_000;
    let past = now_ms() - 60_000;
    for (at, expected) in [(future, State::Delayed), (past, State::Ready)] {
        let sent = q
            .send(b"x", &SendOptions::new().deliver_at(at))
            .await
            .expect("send");
        assert_eq!(sent.due_ms, Some(at));
        let info = q.get(&sent.id).await.expect("get").expect("exists");
        assert_eq!((info.state, info.due_ms), (expected, at));
    }
}

#[tokio::test]
async fn equal_due_times_keep_send_order() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ops");
    let at = now_ms() - 1000;
    for id in ["b", "a", "c"] {
        q.send(id, &SendOptions::new().deliver_at(at).id(id))
            .await
            .expect("send");
    }
    let batch: Vec<Message> = ["g1", "g2", "g3"]
        .into_iter()
        .map(|p| Message::new(p, SendOptions::new().deliver_at(at)))
        .collect();
    q.send_batch(&batch).await.expect("send batch");

    let got = receive_due(&q).await;
    assert_eq!(payloads(&got), [&b"b"[..], b"a", b"c", b"g1", b"g2", b"g3"]);
    let ids: Vec<&str> = got.iter().take(3).map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["b", "a", "c"]);
}

#[tokio::test]
async fn different_due_times_come_out_in_due_order() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ops");
    let base = now_ms() - 10_000;
    for offset in [3000, 1000, 2000] {
        q.send(
            offset.to_string(),
            &SendOptions::new().deliver_at(base + offset),
        )
        .await
        .expect("send");
    }
    q.send("now", &SendOptions::new()).await.expect("send now");
    q.send("later", &SendOptions::new().delay(HOUR))
        .await
        .expect("send later");

    let got = receive_due(&q).await;
    assert_eq!(payloads(&got), [&b"1000"[..], b"2000", b"3000", b"now"]);
    assert!(got.windows(2).all(|w| w[0].due_ms <= w[1].due_ms));
    assert_eq!(counts(&q).await, [1, 0, 4, 0]);
}

#[tokio::test]
async fn caller_id_is_a_duplicate_until_the_message_is_gone() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ops");
    let send = |payload: &'static str, options: SendOptions| {
        let q = q.clone();
        async move { q.send(payload, &options.id("order-1")).await.expect("send") }
    };

    // Pending: the duplicate reports the existing due time and changes nothing.
    let first = send("first", SendOptions::new().delay(HOUR)).await;
    assert!(!first.duplicate);
    let dup = send("second", SendOptions::new()).await;
    assert!(dup.duplicate);
    assert_eq!((dup.id.as_str(), dup.due_ms), ("order-1", first.due_ms));
    let info = q.get("order-1").await.expect("get").expect("exists");
    assert_eq!(
        (info.payload.as_slice(), info.state),
        (&b"first"[..], State::Delayed)
    );
    assert_eq!(counts(&q).await, [1, 0, 0, 0]);

    // Cancelled: the id is free again.
    assert_eq!(
        q.cancel("order-1").await.expect("cancel"),
        CancelOutcome::Cancelled(State::Delayed)
    );
    assert!(!send("third", SendOptions::new()).await.duplicate);

    // In flight: still a duplicate, with no pending due time.
    let delivery = receive_due(&q).await.pop().expect("one delivery");
    assert_eq!(delivery.payload, b"third");
    let dup = send("fourth", SendOptions::new()).await;
    assert!(dup.duplicate);
    assert_eq!(dup.due_ms, None);
    assert_eq!(counts(&q).await, [0, 0, 1, 0]);

    // Acked: the id is free again.
    q.ack(&delivery).await.expect("ack");
    assert!(!send("fifth", SendOptions::new()).await.duplicate);
    let info = q.get("order-1").await.expect("get").expect("exists");
    assert_eq!(info.payload, b"fifth");
}

#[tokio::test]
async fn send_batch_answers_in_input_order() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ops");
    let past = now_ms() - 5000;
    let before = now_ms();
    let sent = q
        .send_batch(&[
            Message::new("p0", SendOptions::new().id("k1")),
            Message::new("p1", SendOptions::new().delay(HOUR)),
            Message::new("p2", SendOptions::new().id("k1").delay(HOUR)),
            Message::new("p3", SendOptions::new().id("k2").deliver_at(past)),
        ])
        .await
        .expect("send batch");
    let after = now_ms();

    assert_eq!(sent.len(), 4);
    assert_eq!((sent[0].id.as_str(), sent[0].duplicate), ("k1", false));
    assert_due_between(&sent[0], before, after);
    assert!(!sent[1].duplicate);
    let due = assert_due_between(&sent[1], before + HOUR_MS, after + HOUR_MS);
    assert_eq!(generated_id_parts(&sent[1].id).0, due);
    // The same id twice in one batch: the second is a duplicate of the first.
    assert_eq!((sent[2].id.as_str(), sent[2].duplicate), ("k1", true));
    assert_eq!(sent[2].due_ms, sent[0].due_ms);
    assert_eq!(sent[3].due_ms, Some(past));

    assert_eq!(counts(&q).await, [1, 2, 0, 0]);
    let k1 = q.get("k1").await.expect("get").expect("exists");
    assert_eq!(k1.payload, b"p0");
}

#[tokio::test]
async fn a_batch_without_caller_ids_is_one_findable_message_each() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ops");
    let before = now_ms();
    let batch: Vec<Message> = (0..5u64)
        .map(|i| {
            let options = SendOptions::new().delay(Duration::from_secs(60 * i));
            Message::new(format!("m{i}"), options)
        })
        .collect();
    let sent = q.send_batch(&batch).await.expect("send batch");
    let after = now_ms();

    assert_eq!(sent.len(), 5);
    for (i, s) in (0..).zip(&sent) {
        assert!(!s.duplicate);
        assert_due_between(s, before + 60_000 * i, after + 60_000 * i);
        let info = q
            .get(&s.id)
            .await
            .expect("get")
            .expect("findable by its id");
        assert_eq!(info.payload, format!("m{i}").into_bytes());
        assert_eq!(Some(info.due_ms), s.due_ms);
    }
    assert_eq!(counts(&q).await, [4, 1, 0, 0]);
    assert_eq!(
        q.cancel(&sent[3].id).await.expect("cancel"),
        CancelOutcome::Cancelled(State::Delayed)
    );
    let got = receive_due(&q).await;
    assert_eq!(payloads(&got), [&b"m0"[..]]);
    assert_eq!(got[0].id, sent[0].id);
}

#[tokio::test]
async fn binary_payloads_round_trip_unchanged() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ops");
    let every_byte: Vec<u8> = (0..=255u8).collect();
    let one_mib: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
    let cases: [(&str, &[u8]); 3] = [
        ("empty", &[]),
        ("every-byte", &every_byte),
        ("one-mib", &one_mib),
    ];
    for (id, payload) in cases {
        q.send(payload, &SendOptions::new().id(id))
            .await
            .expect("send");
        let info = q.get(id).await.expect("get").expect("exists");
        assert!(info.payload == payload, "{id}: get changed the payload");
    }
    let got = receive_due(&q).await;
    assert_eq!(got.len(), 3);
    for (delivery, (id, payload)) in got.iter().zip(cases) {
        assert_eq!(delivery.id, id);
        assert!(
            delivery.payload == payload,
            "{id}: receive changed the payload"
        );
    }
}

/// 1000 messages of 100 bytes, due in an hour.
fn hundred_byte_batch(tag: u64) -> Vec<Message> {
    (0..1000)
        .map(|i| {
            let payload = format!("{tag:04}-{i:04}-{}", "x".repeat(90));
            assert_eq!(payload.len(), 100);
            Message::new(payload, SendOptions::new().delay(HOUR))
        })
        .collect()
}

#[tokio::test]
async fn a_pending_message_costs_little_memory() {
    const BATCHES: u64 = 10;
    const MESSAGES: u64 = BATCHES * 1000;
    let (server, dq) = setup().await;
    // One-time costs (the script cache, buffers sized for a batch) go into the baseline: one
    // batch to another queue first.
    let warm_up = queue(&dq, "warm-up");
    warm_up
        .send_batch(&hundred_byte_batch(BATCHES))
        .await
        .expect("send batch");
    let q = queue(&dq, "mem");
    let before = server.used_memory();
    for tag in 0..BATCHES {
        q.send_batch(&hundred_byte_batch(tag))
            .await
            .expect("send batch");
    }
    let after = server.used_memory();
    assert_eq!(counts(&q).await, [MESSAGES, 0, 0, 0]);
    let per_message = after.saturating_sub(before) / MESSAGES;
    println!("memory per pending 100-byte message: {per_message} bytes");
    assert!(
        per_message <= 250,
        "a pending 100-byte message costs {per_message} bytes"
    );
}

#[tokio::test]
async fn a_payload_comes_back_as_the_kind_it_was_sent_as() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "kinds");
    let json = SendOptions::new().kind(PayloadKind::Json).max_attempts(1);
    let sent_json = q.send(br#"{"order":1}"#, &json).await.expect("send");
    let sent_bytes = q.send([0u8, 255], &SendOptions::new()).await.expect("send");
    let batch = [
        Message::new(&b"[1]"[..], json.clone()),
        Message::new(&b"[2]"[..], json.clone().id("json-2")),
    ];
    q.send_batch(&batch[..1]).await.expect("generated batch");
    q.send_batch(&batch[1..]).await.expect("scripted batch");
    for (id, kind) in [
        (&sent_json.id, PayloadKind::Json),
        (&sent_bytes.id, PayloadKind::Bytes),
    ] {
        let info = q.get(id).await.expect("get").expect("exists");
        assert_eq!(info.kind, kind, "{id} pending");
    }
    let mut consumer = q.consumer().await.expect("consumer");
    let got = consumer
        .receive(&receiving(10, Duration::from_secs(30), Duration::ZERO))
        .await
        .expect("receive");
    let kinds: Vec<PayloadKind> = got.iter().map(|d| d.kind).collect();
    use PayloadKind::{Bytes, Json};
    assert_eq!(kinds, [Json, Bytes, Json, Json]);
    q.nack(&got[0], "broken", None).await.expect("nack");
    let dead = q.dead_letters().list(0, 10).await.expect("list");
    assert_eq!(
        (dead[0].id.as_str(), dead[0].kind),
        (sent_json.id.as_str(), Json)
    );
}
