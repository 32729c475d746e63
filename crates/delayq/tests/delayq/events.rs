//! The event stream: a queue that records events gets one per change of a message's state,
//! written by the script that makes the change (none for a change that did not happen),
//! read in order from the oldest kept, from now, or from a saved cursor, waiting for new
//! ones without polling; a queue that does not record them writes nothing.

use std::time::Duration;

use delayq::{
    Event, EventCursor, EventFilter, EventKind, EventStart, Message, Next, OnExpire, Queue,
    Schedule, SendOptions, Setting,
};

use crate::common::*;

const WAIT: Option<Duration> = Some(Duration::from_secs(5));

async fn recording(q: &Queue) {
    q.configure(&[Setting::Events(Some(1000))])
        .await
        .expect("configure");
}

/// Every event kept from the oldest (of message `id` when given).
async fn all_events(q: &Queue, id: Option<&str>) -> Vec<Event> {
    let filter = match id {
        Some(id) => EventFilter::new().id(id),
        None => EventFilter::new(),
    };
    let mut reader = q.events(EventStart::Oldest, filter).await.expect("reader");
    let mut out = Vec::new();
    loop {
        let got = reader.next(1000, Some(Duration::ZERO)).await.expect("next");
        if got.is_empty() {
            return out;
        }
        out.extend(got);
    }
}

fn kinds(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.kind.as_str()).collect()
}

#[tokio::test]
async fn a_message_life_is_told_in_order() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "told");
    recording(&q).await;
    let sent = q
        .send(b"x", &SendOptions::new().id("order-7").max_attempts(3))
        .await
        .expect("send");
    let first = claim(&q, 1).await.pop().expect("delivered");
    q.nack(&first, "upstream 502", Some(Duration::ZERO))
        .await
        .expect("nack");
    let second = claim(&q, 1).await.pop().expect("delivered again");
    q.ack(&second).await.expect("ack");

    let events = all_events(&q, None).await;
    assert_eq!(
        kinds(&events),
        ["sent", "delivered", "retry", "delivered", "acked"]
    );
    assert!(events.iter().all(|e| e.id == "order-7"), "{events:?}");
    assert_eq!(events[0].due_ms, sent.due_ms);
    assert_eq!(events[1].attempt, Some(1));
    assert_eq!(events[2].attempt, Some(1));
    assert_eq!(events[2].error.as_deref(), Some("upstream 502"));
    assert!(events[2].due_ms.is_some());
    assert_eq!(events[3].attempt, Some(2));
    assert_eq!(events[4].attempt, Some(2));
    let times: Vec<u64> = events.iter().map(|e| e.at_ms).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(
        times[0].abs_diff(now_ms()) < 60_000,
        "server time: {times:?}"
    );
}

#[tokio::test]
async fn a_queue_that_does_not_record_writes_no_event() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "silent");
    q.send(b"x", &SendOptions::new().id("a"))
        .await
        .expect("send");
    let d = claim(&q, 1).await.pop().expect("delivered");
    q.ack(&d).await.expect("ack");
    assert!(all_events(&q, None).await.is_empty());
    assert!(server.every_key_dumped("dq:{silent}:events").is_empty());
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.events, stats.events_kept), (0, None));
}

#[tokio::test]
async fn every_kind_of_change_is_an_event() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "kinds");
    recording(&q).await;
    q.configure(&[Setting::OnExpire(OnExpire::Drop)])
        .await
        .expect("configure");
    let later = SendOptions::new().delay(Duration::from_secs(3600));
    q.send(b"c", &later.clone().id("cancel-me"))
        .await
        .expect("send");
    q.cancel("cancel-me").await.expect("cancel");
    q.send(b"r", &later.clone().id("move-me"))
        .await
        .expect("send");
    q.reschedule("move-me", Schedule::After(Duration::from_secs(60)))
        .await
        .expect("reschedule");

    q.send(b"d", &SendOptions::new().id("doomed").max_attempts(1))
        .await
        .expect("send");
    let d = claim(&q, 1).await.pop().expect("delivered");
    q.fail(&d, "bad order", Next::Dead).await.expect("fail");
    assert!(q.dead_letters().requeue("doomed").await.expect("requeue"));
    let d = claim(&q, 1).await.pop().expect("delivered again");
    q.nack(&d, "still bad", None).await.expect("nack");
    assert!(q.dead_letters().purge("doomed").await.expect("purge"));

    q.send(b"l", &SendOptions::new().id("let-go"))
        .await
        .expect("send");
    let d = claim(&q, 1).await.pop().expect("delivered");
    q.release(&[d]).await.expect("release");

    q.send(b"t", &SendOptions::new().id("timed-out").max_attempts(2))
        .await
        .expect("send");
    // let-go comes first (released, ready), then timed-out.
    let held = claim(&q, 2).await;
    assert_eq!(held.len(), 2);
    expire_all_leases(&server, "kinds");
    // The claim that reclaims the expired leases retries them.
    claim(&q, 10).await;

    q.send(
        b"e",
        &SendOptions::new()
            .id("expired")
            .ttl(Duration::from_millis(1))
            .delay(Duration::from_millis(5)),
    )
    .await
    .expect("send");
    wait_until(Duration::from_secs(5), "the expiry", || async {
        claim(&q, 10).await;
        all_events(&q, Some("expired"))
            .await
            .iter()
            .any(|e| e.kind == EventKind::Expired)
    })
    .await;

    let of = |id: &'static str| {
        let q = q.clone();
        async move { all_events(&q, Some(id)).await }
    };
    assert_eq!(kinds(&of("cancel-me").await), ["sent", "cancelled"]);
    let moved = of("move-me").await;
    assert_eq!(kinds(&moved), ["sent", "rescheduled"]);
    assert!(
        moved[1].due_ms < moved[0].due_ms,
        "brought forward: {moved:?}"
    );
    let doomed = of("doomed").await;
    assert_eq!(
        kinds(&doomed),
        [
            "sent",
            "delivered",
            "dead",
            "requeued",
            "delivered",
            "dead",
            "purged"
        ]
    );
    assert_eq!(doomed[2].error.as_deref(), Some("bad order"));
    assert_eq!(doomed[5].error.as_deref(), Some("still bad"));
    let let_go = of("let-go").await;
    assert_eq!(
        kinds(&let_go[..3]),
        ["sent", "delivered", "released"],
        "{let_go:?}"
    );
    let timed_out = of("timed-out").await;
    let retry = timed_out
        .iter()
        .find(|e| e.kind == EventKind::Retry)
        .expect("the expired lease's retry");
    assert_eq!(retry.error.as_deref(), Some("lease expired"));
    let expired = of("expired").await;
    assert_eq!(kinds(&expired), ["sent", "expired"]);
    assert_eq!(expired[1].detail.as_deref(), Some("dropped"));
}

#[tokio::test]
async fn a_change_that_did_not_happen_is_no_event() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "stale");
    recording(&q).await;
    q.send(b"x", &SendOptions::new().id("m"))
        .await
        .expect("send");
    q.send(b"x", &SendOptions::new().id("m"))
        .await
        .expect("a duplicate send");
    let d = claim(&q, 1).await.pop().expect("delivered");
    expire_all_leases(&server, "stale");
    assert!(q.ack(&d).await.is_err(), "a stale holder cannot ack");
    assert!(matches!(
        q.cancel("m").await.expect("cancel"),
        delayq::CancelOutcome::NotCancelled(_)
    ));
    assert_eq!(kinds(&all_events(&q, None).await), ["sent", "delivered"]);
}

#[tokio::test]
async fn a_batch_without_ids_is_told_too() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "batch");
    recording(&q).await;
    let batch: Vec<Message> = (0..5)
        .map(|i| Message::new(format!("m{i}"), SendOptions::new()))
        .collect();
    let sent = q.send_batch(&batch).await.expect("send");
    let events = all_events(&q, None).await;
    assert_eq!(kinds(&events), ["sent"; 5]);
    let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
    let sent_ids: Vec<&str> = sent.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, sent_ids);
    assert_eq!(events[0].due_ms, sent[0].due_ms);
}

#[tokio::test]
async fn a_reader_from_now_waits_for_what_comes() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "live");
    recording(&q).await;
    q.send(b"old", &SendOptions::new().id("before"))
        .await
        .expect("send");
    let mut reader = q
        .events(EventStart::Now, EventFilter::new())
        .await
        .expect("reader");
    let waiting = tokio::spawn(async move { reader.next(10, WAIT).await });
    // The reader is waiting (subscribed) before this send.
    wait_until(
        Duration::from_secs(5),
        "the reader to subscribe",
        || async {
            _server
                .cli(&["PUBSUB", "SHARDNUMSUB", "dq:{live}:events"])
                .lines()
                .nth(1)
                .is_some_and(|n| n.trim() == "1")
        },
    )
    .await;
    q.send(b"new", &SendOptions::new().id("after"))
        .await
        .expect("send");
    let got = waiting.await.expect("join").expect("next");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].kind.as_str(), got[0].id.as_str()),
        ("sent", "after")
    );
}

#[tokio::test]
async fn a_reader_resumes_from_its_cursor_and_misses_nothing() {
    let (_server, dq) = setup().await;
    let q = dq.create_queue("resumed", 3).await.expect("create");
    recording(&q).await;
    for i in 0..30 {
        q.send(b"x", &SendOptions::new().id(format!("m{i}")))
            .await
            .expect("send");
    }
    let mut reader = q
        .events(EventStart::Oldest, EventFilter::new())
        .await
        .expect("reader");
    let first = reader.next(10, WAIT).await.expect("next");
    assert_eq!(first.len(), 10);
    let cursor = first.last().expect("ten").cursor.to_string();
    drop(reader);
    for i in 30..40 {
        q.send(b"x", &SendOptions::new().id(format!("m{i}")))
            .await
            .expect("send");
    }
    let cursor = EventCursor::parse(&cursor).expect("its own cursor");
    let mut reader = q
        .events(EventStart::After(cursor), EventFilter::new())
        .await
        .expect("reader");
    let rest = reader.next(1000, WAIT).await.expect("next");
    let mut seen: Vec<String> = first.iter().chain(&rest).map(|e| e.id.clone()).collect();
    assert_eq!(seen.len(), 40, "none twice: {seen:?}");
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 40, "none missed");
    // The merge over partitions is in the server's time order.
    let times: Vec<u64> = first.iter().chain(&rest).map(|e| e.at_ms).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

#[tokio::test]
async fn a_filter_keeps_the_kinds_asked_for() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "filtered");
    recording(&q).await;
    for i in 0..3 {
        q.send(b"x", &SendOptions::new().id(format!("m{i}")))
            .await
            .expect("send");
    }
    for d in claim(&q, 3).await {
        q.ack(&d).await.expect("ack");
    }
    let mut reader = q
        .events(
            EventStart::Oldest,
            EventFilter::new().kind(EventKind::Acked),
        )
        .await
        .expect("reader");
    let got = reader.next(2, WAIT).await.expect("next");
    assert_eq!(kinds(&got), ["acked", "acked"]);
    let got = reader.next(10, WAIT).await.expect("next");
    assert_eq!(kinds(&got), ["acked"]);
    assert!(reader
        .next(10, Some(Duration::from_millis(50)))
        .await
        .expect("next")
        .is_empty());
}

#[tokio::test]
async fn the_stream_is_capped_and_dropped_when_turned_off() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "capped");
    q.configure(&[Setting::Events(Some(100))])
        .await
        .expect("configure");
    // Single sends: an entry each.
    for i in 0..400 {
        q.send(b"x", &SendOptions::new().id(format!("m{i}")))
            .await
            .expect("send");
    }
    let stats = q.stats().await.expect("stats");
    assert_eq!(stats.events_kept, Some(100));
    // MAXLEN ~ trims whole nodes of the stream (100 entries each by default).
    assert!(
        (100..=300).contains(&stats.events),
        "kept {} of 400",
        stats.events
    );
    q.configure(&[Setting::Events(None)])
        .await
        .expect("configure");
    assert!(server.every_key_dumped("dq:{capped}:events").is_empty());
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.events, stats.events_kept), (0, None));
}

#[tokio::test]
async fn bad_settings_and_cursors_are_refused() {
    let (_server, dq) = setup().await;
    let q = dq.create_queue("refusing", 2).await.expect("create");
    for kept in [0, delayq::MAX_EVENTS_KEPT + 1] {
        let e = q
            .configure(&[Setting::Events(Some(kept))])
            .await
            .expect_err("out of range");
        assert!(matches!(e, delayq::Error::Invalid(_)), "{e:?}");
    }
    for text in ["", "1-0.x", "1", "-1-0", "1-0..2-0"] {
        assert!(EventCursor::parse(text).is_err(), "{text:?}");
    }
    let one = EventCursor::parse("1-0").expect("valid text");
    let e = q
        .events(EventStart::After(one), EventFilter::new())
        .await
        .err()
        .expect("one position for two partitions");
    assert!(matches!(e, delayq::Error::Invalid(_)), "{e:?}");
    assert!(EventKind::parse("exploded").is_err());
    let mut reader = q
        .events(EventStart::Oldest, EventFilter::new())
        .await
        .expect("reader");
    assert!(reader.next(0, WAIT).await.is_err());
}

#[tokio::test]
async fn the_latest_events_and_a_message_timeline_are_read_backwards() {
    let (_server, dq) = setup().await;
    let q = dq.create_queue("looked-back", 3).await.expect("create");
    recording(&q).await;
    for i in 0..10 {
        q.send(b"x", &SendOptions::new().id(format!("m{i}")))
            .await
            .expect("send");
    }
    let d = claim(&q, 10).await;
    let m3 = d
        .iter()
        .find(|d| d.id == "m3")
        .expect("m3 delivered")
        .clone();
    // Partitions' events are merged to the millisecond (stream ids): the ack must come in a
    // later one than the deliveries of the other partitions to be the newest for sure.
    tokio::time::sleep(Duration::from_millis(2)).await;
    q.ack(&m3).await.expect("ack");

    let latest = q.latest_events(3).await.expect("latest");
    assert_eq!(latest.len(), 3);
    assert_eq!(
        (latest[0].kind.as_str(), latest[0].id.as_str()),
        ("acked", "m3")
    );
    let times: Vec<u64> = latest.iter().map(|e| e.at_ms).collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {times:?}"
    );
    // Its cursor resumes at or before it: never after.
    let mut reader = q
        .events(
            EventStart::After(latest[1].cursor.clone()),
            EventFilter::new(),
        )
        .await
        .expect("reader");
    let after = reader.next(100, WAIT).await.expect("next");
    assert!(
        after
            .iter()
            .any(|e| e.kind == EventKind::Acked && e.id == "m3"),
        "{after:?}"
    );

    let timeline = q.timeline("m3").await.expect("timeline");
    assert!(timeline.complete);
    assert_eq!(kinds(&timeline.events), ["sent", "delivered", "acked"]);
    assert!(q
        .timeline("never")
        .await
        .expect("timeline")
        .events
        .is_empty());
    assert!(q.timeline("").await.is_err());
}

#[tokio::test]
async fn a_batch_told_in_one_entry_is_read_a_part_at_a_time() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "packed");
    recording(&q).await;
    let batch: Vec<Message> = (0..7)
        .map(|i| Message::new(b"x".to_vec(), SendOptions::new().id(format!("m{i}"))))
        .collect();
    q.send_batch(&batch).await.expect("send");
    // One call, one entry: the seven sends are packed into it.
    assert_eq!(server.cli(&["XLEN", "dq:{packed}:events"]).trim(), "1");
    let mut reader = q
        .events(EventStart::Oldest, EventFilter::new())
        .await
        .expect("reader");
    let first = reader.next(3, WAIT).await.expect("next");
    assert_eq!(first.len(), 3);
    let cursor = EventCursor::parse(&first[2].cursor.to_string()).expect("a cursor");
    let mut resumed = q
        .events(EventStart::After(cursor), EventFilter::new())
        .await
        .expect("reader");
    let rest = resumed.next(100, WAIT).await.expect("next");
    let ids: Vec<&str> = first.iter().chain(&rest).map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["m0", "m1", "m2", "m3", "m4", "m5", "m6"]);
    // The first reader goes on where it was, too.
    assert_eq!(reader.next(100, WAIT).await.expect("next").len(), 4);
}
