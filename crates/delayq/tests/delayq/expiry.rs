//! Expiry: a message with a deadline (`ttl`, `expires_at`, or the queue's default ttl) is
//! never delivered at or after it. A claim that meets it expires it (a dead letter with the
//! error `expired`, or nothing when the queue drops them), a retry that would start after it
//! expires it, an expired grouped message frees its group's slot, and a queue whose data is
//! older than format 4 refuses deadlines with nothing written.

use std::time::Duration;

use delayq::{Error, NackOutcome, OnExpire, Queue, SendOptions, Setting, State, EXPIRY_FORMAT};

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

/// Lets a deadline `ms` from now pass (the deadline is by Redis's clock, on this host).
async fn past(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms + 20)).await;
}

async fn dead_error(q: &Queue, id: &str) -> Option<String> {
    let info = q.get(id).await.expect("get").expect("the message is known");
    assert_eq!(info.state, State::Dead);
    info.last_error
}

#[tokio::test]
async fn a_message_not_claimed_before_its_deadline_is_never_delivered() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "orders");
    let late = q
        .send(b"close", &SendOptions::new().ttl(Duration::from_millis(50)))
        .await
        .expect("send");
    let on_time = q
        .send(
            b"remind",
            &SendOptions::new().ttl(Duration::from_secs(3600)),
        )
        .await
        .expect("send");
    past(50).await;
    let got = claim(&q, 10).await;
    assert_eq!(payloads(&got), ["remind"]);
    let deadline = got[0].expires_at_ms.expect("its deadline");
    assert_eq!(deadline, on_time.due_ms.expect("due") + 3_600_000);
    assert_eq!(dead_error(&q, &late.id).await.as_deref(), Some("expired"));
    assert_eq!(counts(&q).await, [0, 0, 1, 1]);
}

#[tokio::test]
async fn a_delayed_message_gets_its_whole_window_after_it_is_due() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "window");
    let sent = q
        .send(
            b"x",
            &SendOptions::new()
                .delay(Duration::from_millis(100))
                .ttl(Duration::from_secs(60)),
        )
        .await
        .expect("send");
    let info = q.get(&sent.id).await.expect("get").expect("known");
    assert_eq!(
        info.expires_at_ms,
        Some(sent.due_ms.expect("due") + 60_000),
        "the ttl counts from the due time"
    );
    let mut consumer = q.consumer().await.expect("consumer");
    let d = receive_one(&mut consumer, LEASE).await;
    assert_eq!(d.payload, b"x");
}

#[tokio::test]
async fn a_retry_that_would_start_after_the_deadline_expires_instead() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "webhooks");
    q.send(b"hook", &SendOptions::new().ttl(Duration::from_secs(2)))
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let d = receive_one(&mut consumer, LEASE).await;
    let outcome = q
        .nack(&d, "503", Some(Duration::from_secs(5)))
        .await
        .expect("nack");
    assert_eq!(outcome, NackOutcome::Expired);
    let info = q.get(&d.id).await.expect("get").expect("known");
    assert_eq!(info.state, State::Dead);
    assert_eq!(info.last_error.as_deref(), Some("expired"));
    assert_eq!(
        info.errors
            .iter()
            .map(|e| e.error.as_str())
            .collect::<Vec<_>>(),
        ["503", "expired"],
        "the failure is kept, then why it ended"
    );
    // A retry within the window is a retry.
    q.send(b"hook2", &SendOptions::new().ttl(Duration::from_secs(60)))
        .await
        .expect("send");
    let d = receive_one(&mut consumer, LEASE).await;
    let outcome = q
        .nack(&d, "503", Some(Duration::from_millis(10)))
        .await
        .expect("nack");
    assert_eq!(outcome, NackOutcome::Retry);
}

#[tokio::test]
async fn a_queue_that_drops_expired_messages_keeps_nothing_of_them() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "drops");
    q.configure(&[Setting::OnExpire(OnExpire::Drop)])
        .await
        .expect("configure");
    assert!(q.stats().await.expect("stats").drop_expired);
    let sent = q
        .send(
            b"x",
            &SendOptions::new()
                .id("order-1")
                .ttl(Duration::from_millis(30)),
        )
        .await
        .expect("send");
    past(30).await;
    assert!(claim(&q, 10).await.is_empty());
    assert_eq!(q.get(&sent.id).await.expect("get"), None);
    assert_eq!(counts(&q).await, [0, 0, 0, 0]);
}

#[tokio::test]
async fn the_queues_default_ttl_bounds_how_late_any_message_is_delivered() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "fresh");
    q.configure(&[Setting::DefaultTtl(Some(Duration::from_millis(50)))])
        .await
        .expect("configure");
    assert_eq!(
        q.stats().await.expect("stats").default_ttl,
        Some(Duration::from_millis(50))
    );
    // A batch without ids (sent without Lua) and a message with its own, longer deadline.
    let batch: Vec<delayq::Message> = (0..3)
        .map(|i| delayq::Message::new(format!("stale-{i}"), SendOptions::new()))
        .collect();
    q.send_batch(&batch).await.expect("send");
    q.send(b"own", &SendOptions::new().ttl(Duration::from_secs(60)))
        .await
        .expect("send");
    past(50).await;
    assert_eq!(payloads(&claim(&q, 10).await), ["own"]);
    assert_eq!(counts(&q).await, [0, 0, 1, 3]);
    q.configure(&[Setting::DefaultTtl(None)])
        .await
        .expect("lift");
    assert_eq!(q.stats().await.expect("stats").default_ttl, None);
}

#[tokio::test]
async fn an_expired_grouped_message_frees_its_groups_slot() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ordered");
    q.configure(&[Setting::GroupConcurrency(Some(1))])
        .await
        .expect("configure");
    q.send(
        b"first",
        &SendOptions::new()
            .group("order-7")
            .ttl(Duration::from_millis(30)),
    )
    .await
    .expect("send");
    q.send(b"second", &SendOptions::new().group("order-7"))
        .await
        .expect("send");
    past(30).await;
    let mut consumer = q.consumer().await.expect("consumer");
    let d = receive_one(&mut consumer, LEASE).await;
    assert_eq!(d.payload, b"second");
    let info = q.groups().get("order-7").await.expect("group");
    assert_eq!((info.in_flight, info.ready), (1, 0));
}

#[tokio::test]
async fn bad_deadlines_are_refused() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "bad");
    for options in [
        SendOptions::new().ttl(Duration::ZERO),
        SendOptions::new().ttl(Duration::from_secs(400 * 24 * 3600)),
        SendOptions::new().expires_at(now_ms().saturating_sub(1000)),
        SendOptions::new().expires_at(u64::MAX),
        SendOptions::new()
            .delay(Duration::from_secs(3600))
            .expires_at(now_ms() + 60_000),
    ] {
        match q.send(b"x", &options).await {
            Err(Error::Invalid(_)) => {}
            other => panic!("{options:?}: expected InvalidInput, got {other:?}"),
        }
    }
    assert!(is_empty(&q).await);
}

#[tokio::test]
async fn a_deadline_needs_format_4_and_an_older_queue_is_refused_with_nothing_written() {
    let (server, _dq) = setup().await;
    let (q, before) = queue_of_format(&server, "old", 3).await;
    let expiring = SendOptions::new().ttl(Duration::from_secs(60));
    match q.send(b"x", &expiring).await {
        Err(Error::FormatTooOld { found, needed, .. }) => {
            assert_eq!((found, needed), (3, EXPIRY_FORMAT));
        }
        other => panic!("expected FormatTooOld, got {other:?}"),
    }
    assert_eq!(
        server.every_key_dumped("dq:{old}*"),
        before,
        "something was written"
    );
    server.cli(&[
        "HSET",
        "dq:{old}:control",
        "format",
        &EXPIRY_FORMAT.to_string(),
    ]);
    q.send(b"x", &expiring)
        .await
        .expect("send after the upgrade");
}

#[tokio::test]
async fn a_claim_repeated_after_the_deadline_expires_the_message_it_had_taken() {
    // A claim took the message in time, but its reply was lost (a Redis restart, a cut
    // connection), so its consumer repeats it. The repeat comes after the deadline: handing
    // the message over then would be a delivery after it.
    let server = RedisServer::start();
    let (proxy, dq, direct) = behind_proxy(&server).await;
    let (q, watched) = (queue(&dq, "late-repeat"), queue(&direct, "late-repeat"));
    let mut consumer = q.consumer().await.expect("consumer");
    // Loads the claim script, so that the claim below runs at once in Redis.
    let none = consumer
        .receive(&receiving(1, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    assert!(none.is_empty());
    // Two messages, so that the claim holds them under one lease: one with a deadline.
    let sent = q
        .send(
            b"close",
            &SendOptions::new().ttl(Duration::from_millis(400)),
        )
        .await
        .expect("send");
    let other = q.send(b"remind", &SendOptions::new()).await.expect("send");
    proxy.set_reply_delay(Duration::from_millis(600));
    let lost = consumer.receive(&receiving(2, LEASE, Duration::ZERO)).await;
    assert!(
        matches!(&lost, Err(e) if e.is_connection_error()),
        "the reply timed out: {lost:?}"
    );
    wait_until(Duration::from_secs(5), "the claim to have run", || async {
        counts(&watched).await == [0, 0, 2, 0]
    })
    .await;
    proxy.set_reply_delay(Duration::ZERO);
    past(400).await;
    let repeated = consumer
        .receive(&receiving(2, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(
        repeated.iter().map(|d| &d.id).collect::<Vec<_>>(),
        [&other.id],
        "only the message without a deadline is handed over"
    );
    assert_eq!(repeated[0].attempt, 1);
    assert_eq!(
        dead_error(&watched, &sent.id).await.as_deref(),
        Some("expired")
    );
    let reported: Vec<_> = consumer
        .take_dead_lettered()
        .into_iter()
        .map(|d| (d.id, d.error))
        .collect();
    assert_eq!(reported, [(sent.id.clone(), "expired".to_owned())]);
    assert_eq!(counts(&watched).await, [0, 0, 1, 1]);
    q.ack(&repeated[0])
        .await
        .expect("its lease still holds: acked");
    assert_eq!(counts(&watched).await, [0, 0, 0, 1]);
    let dead = watched.get(&sent.id).await.expect("get").expect("dead");
    assert_eq!(dead.attempts, 0, "the lost claim's delivery reached no one");
}
