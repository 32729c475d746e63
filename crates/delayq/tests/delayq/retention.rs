//! Completed retention: a queue that retains keeps the final record of each message sent
//! while it retains that ended (acked, cancelled, expired, dead and purged), and `get` and
//! `list` answer with it after the message is gone; the records are bounded by age and
//! count, and dropped when the queue stops retaining.

use std::time::Duration;

use delayq::{Message, OnExpire, Outcome, Queue, Retention, SendOptions, Setting, State};

use crate::common::*;

fn retain(keep_for: Duration, max: u32) -> Setting {
    Setting::RetainCompleted(Some(Retention { keep_for, max }))
}

async fn retaining(q: &Queue, max: u32) {
    q.configure(&[retain(Duration::from_secs(3600), max)])
        .await
        .expect("configure");
}

async fn outcome(q: &Queue, id: &str) -> Option<Outcome> {
    let info = q.get(id).await.expect("get")?;
    assert_eq!(info.state, State::Completed, "{info:?}");
    Some(
        info.completion
            .expect("a completed message's record")
            .outcome,
    )
}

/// When message `id` ended, by its completed record.
async fn finished_at_ms(q: &Queue, id: &str) -> u64 {
    let info = q.get(id).await.expect("get").expect("retained");
    info.completion.expect("completed").finished_at_ms
}

#[tokio::test]
async fn an_acked_message_is_answered_for_after_it_is_gone() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "retained");
    retaining(&q, 100).await;
    let sent = q
        .send(b"x", &SendOptions::new().id("order-1").max_attempts(3))
        .await
        .expect("send");
    let first = claim(&q, 1).await.pop().expect("delivered");
    q.nack(&first, "upstream 502", Some(Duration::ZERO))
        .await
        .expect("nack");
    let second = claim(&q, 1).await.pop().expect("delivered again");
    q.ack(&second).await.expect("ack");

    let info = q.get("order-1").await.expect("get").expect("retained");
    assert_eq!(info.state, State::Completed);
    assert_eq!((info.attempts, info.max_attempts), (2, 3));
    assert_eq!(info.last_error.as_deref(), Some("upstream 502"));
    assert!(info.payload.is_empty(), "no payload is kept");
    let done = info.completion.expect("its final record");
    assert_eq!(done.outcome, Outcome::Acked);
    let sent_at = done.sent_at_ms.expect("sent while retaining");
    let first_at = done.first_delivered_at_ms.expect("delivered");
    assert!(sent_at <= sent.due_ms.expect("due"));
    assert!(
        sent_at <= first_at && first_at <= done.finished_at_ms,
        "{done:?}"
    );
    assert_eq!(q.stats().await.expect("stats").completed, 1);
}

#[tokio::test]
async fn messages_sent_in_a_batch_without_ids_are_retained_too() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "batch-retained");
    retaining(&q, 100).await;
    let batch = [
        Message::new("a", SendOptions::new()),
        Message::new("b", SendOptions::new()),
    ];
    let sent = q.send_batch(&batch).await.expect("send");
    for d in claim(&q, 10).await {
        q.ack(&d).await.expect("ack");
    }
    for s in sent {
        let info = q.get(&s.id).await.expect("get").expect("retained");
        let done = info.completion.expect("completed");
        assert_eq!(done.outcome, Outcome::Acked);
        assert!(done.sent_at_ms.is_some() && done.first_delivered_at_ms.is_some());
    }
}

#[tokio::test]
async fn cancelled_expired_and_dead_messages_are_retained_with_their_outcome() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "outcomes");
    retaining(&q, 100).await;
    q.configure(&[Setting::OnExpire(OnExpire::Drop)])
        .await
        .expect("configure");
    let later = SendOptions::new().delay(Duration::from_secs(60));
    q.send(b"c", &later.clone().id("cancelled"))
        .await
        .expect("send");
    q.send(
        b"e",
        &SendOptions::new()
            .id("expired")
            .ttl(Duration::from_millis(20)),
    )
    .await
    .expect("send");
    q.send(b"d", &SendOptions::new().id("dead").max_attempts(1))
        .await
        .expect("send");
    q.cancel("cancelled").await.expect("cancel");
    tokio::time::sleep(Duration::from_millis(40)).await;
    let dead = claim(&q, 10)
        .await
        .pop()
        .expect("only the dead one is delivered");
    assert_eq!(dead.id, "dead");
    q.nack(&dead, "bad input", None).await.expect("nack");

    assert_eq!(outcome(&q, "cancelled").await, Some(Outcome::Cancelled));
    assert_eq!(outcome(&q, "expired").await, Some(Outcome::Expired));
    let info = q.get("dead").await.expect("get").expect("known");
    assert_eq!(
        info.state,
        State::Dead,
        "the dead letter answers while it is there"
    );
    q.dead_letters().purge_all().await.expect("purge");
    assert_eq!(outcome(&q, "dead").await, Some(Outcome::Dead));
    let cancelled = q.get("cancelled").await.expect("get").expect("retained");
    assert_eq!(
        cancelled
            .completion
            .expect("completed")
            .first_delivered_at_ms,
        None
    );
}

#[tokio::test]
async fn retention_keeps_at_most_its_count_the_latest_first() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "capped");
    retaining(&q, 3).await;
    for i in 0..5 {
        q.send(b"x", &SendOptions::new().id(format!("m{i}")))
            .await
            .expect("send");
        let d = claim(&q, 1).await.pop().expect("delivered");
        q.ack(&d).await.expect("ack");
        // Records are ordered by the millisecond they ended in (then by id): the next ack
        // must come in a later one for "latest first" to name one order.
        let ended = finished_at_ms(&q, &format!("m{i}")).await;
        wait_until(
            Duration::from_secs(1),
            "the ack's millisecond to pass",
            || async { now_ms() > ended },
        )
        .await;
    }
    assert_eq!(q.stats().await.expect("stats").completed, 3);
    assert!(
        q.get("m0").await.expect("get").is_none(),
        "the oldest went first"
    );
    assert!(q.get("m1").await.expect("get").is_none());
    let page = q.list(State::Completed, None, 10).await.expect("list");
    let ids: Vec<_> = page.messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["m4", "m3", "m2"], "the latest ended first");
}

#[tokio::test]
async fn a_record_older_than_the_retention_goes_at_the_next_end() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "aged");
    q.configure(&[retain(Duration::from_secs(1), 100)])
        .await
        .expect("configure");
    for id in ["old", "new"] {
        q.send(b"x", &SendOptions::new().id(id))
            .await
            .expect("send");
        let d = claim(&q, 1).await.pop().expect("delivered");
        q.ack(&d).await.expect("ack");
        if id == "old" {
            assert!(q.get("old").await.expect("get").is_some());
            tokio::time::sleep(Duration::from_millis(1_100)).await;
        }
    }
    assert!(q.get("old").await.expect("get").is_none(), "older than 1 s");
    assert!(q.get("new").await.expect("get").is_some());
}

#[tokio::test]
async fn only_messages_sent_while_retaining_are_kept_and_stopping_drops_the_records() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "stopped");
    q.send(b"x", &SendOptions::new().id("before"))
        .await
        .expect("send");
    retaining(&q, 100).await;
    q.send(b"x", &SendOptions::new().id("while"))
        .await
        .expect("send");
    for d in claim(&q, 10).await {
        q.ack(&d).await.expect("ack");
    }
    assert!(
        q.get("before").await.expect("get").is_none(),
        "sent before the queue retained: not kept"
    );
    assert_eq!(outcome(&q, "while").await, Some(Outcome::Acked));
    let stats = q.stats().await.expect("stats");
    assert_eq!(stats.retain_completed.map(|r| r.max), Some(100));

    q.configure(&[Setting::RetainCompleted(None)])
        .await
        .expect("configure");
    assert!(q.get("while").await.expect("get").is_none());
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.completed, stats.retain_completed), (0, None));
    // A message sent while it retained, ending after it stopped, leaves nothing.
    retaining(&q, 100).await;
    q.send(b"x", &SendOptions::new().id("late"))
        .await
        .expect("send");
    q.configure(&[Setting::RetainCompleted(None)])
        .await
        .expect("configure");
    let d = claim(&q, 1).await.pop().expect("delivered");
    q.ack(&d).await.expect("ack");
    assert_eq!(q.stats().await.expect("stats").completed, 0);
}

#[tokio::test]
async fn a_retention_out_of_bounds_is_refused() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "bad-retention");
    for setting in [
        retain(Duration::from_millis(10), 10),
        retain(Duration::from_secs(10), 0),
    ] {
        assert!(q.configure(&[setting]).await.is_err(), "{setting:?}");
    }
    assert_eq!(q.stats().await.expect("stats").retain_completed, None);
}
