//! Upserts: a send with a caller id that replaces or debounces the message of that id. A
//! pending message is replaced whole (payload, due time, group), a debounce never pushes
//! the due time past its max wait, a message in flight is never changed (a second message
//! supersedes it, or the send is refused), a dead letter keeps its id, and a message gone
//! for good makes room for a new one.

use std::time::Duration;

use delayq::{
    Error, IfInFlight, InvalidInput, NackOutcome, OnDuplicate, SendOptions, Setting, State,
};

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

fn replace(id: &str) -> SendOptions {
    SendOptions::new().id(id).on_duplicate(OnDuplicate::Replace)
}

fn debounce(id: &str, delay_ms: u64, max_wait_ms: u64) -> SendOptions {
    SendOptions::new()
        .id(id)
        .delay(Duration::from_millis(delay_ms))
        .on_duplicate(OnDuplicate::Debounce {
            max_wait: Duration::from_millis(max_wait_ms),
        })
}

#[tokio::test]
async fn a_replace_takes_the_place_of_a_pending_message_under_its_id() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "replace");
    let opts = SendOptions::new().id("order-1");
    q.send(b"v1", &opts.clone().delay(Duration::from_secs(3600)))
        .await
        .expect("send");
    // Keep, the default, is an idempotent send: nothing changes.
    let kept = q.send(b"v2", &opts).await.expect("send");
    assert!(kept.duplicate);
    assert_eq!(kept.replaced, None);
    assert_eq!(counts(&q).await, [1, 0, 0, 0]);

    let sent = q.send(b"v3", &replace("order-1")).await.expect("send");
    assert!(!sent.duplicate);
    assert_eq!(sent.replaced, Some(State::Delayed));
    assert_eq!(counts(&q).await, [0, 1, 0, 0], "one message, now ready");
    let got = claim(&q, 10).await;
    assert_eq!(payloads(&got), ["v3"]);
    assert_eq!(got[0].id, "order-1");
    q.ack(&got[0]).await.expect("ack");
    assert!(is_empty(&q).await);
}

#[tokio::test]
async fn a_debounce_pushes_the_due_time_out_but_never_past_its_max_wait() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "debounce");
    let first = q
        .send(b"1", &debounce("index-7", 200, 600))
        .await
        .expect("send");
    let first_due = first.due_ms.expect("due");
    assert_eq!(first.replaced, None, "nothing to replace");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second = q
        .send(b"2", &debounce("index-7", 200, 600))
        .await
        .expect("send");
    assert_eq!(second.replaced, Some(State::Delayed));
    assert!(
        second.due_ms.expect("due") > first_due,
        "pushed out by its delay"
    );
    // The first send was due 200 ms after the server's now, so its max wait ends 400 ms
    // after that: a send that asks for 10 s is due then.
    let last = q
        .send(b"3", &debounce("index-7", 10_000, 600))
        .await
        .expect("send");
    assert_eq!(last.due_ms, Some(first_due + 400));
    let info = q.get("index-7").await.expect("get").expect("known");
    assert_eq!(info.debounce_until_ms, Some(first_due + 400));
    assert_eq!(counts(&q).await, [1, 0, 0, 0]);
    let mut consumer = q.consumer().await.expect("consumer");
    let d = receive_one(&mut consumer, LEASE).await;
    assert_eq!(d.payload, b"3", "the latest payload");
    assert_eq!(d.attempt, 1);
    q.ack(&d).await.expect("ack");
    assert!(is_empty(&q).await, "one delivery for three sends");
}

#[tokio::test]
async fn a_debounce_of_a_message_with_a_ttl_counts_it_from_the_due_time_it_gets() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "debounce-ttl");
    let opts = debounce("x", 5_000, 1_000).ttl(Duration::from_secs(60));
    let sent = q.send(b"x", &opts).await.expect("send");
    let info = q.get("x").await.expect("get").expect("known");
    assert_eq!(info.due_ms, sent.due_ms.expect("due"));
    assert_eq!(info.expires_at_ms, Some(info.due_ms + 60_000));
}

#[tokio::test]
async fn a_message_in_flight_is_superseded_by_a_second_one_and_its_ack_still_counts() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "in-flight");
    q.send(b"v1", &SendOptions::new().id("doc-1"))
        .await
        .expect("send");
    let first = claim(&q, 1).await.pop().expect("delivered");
    let sent = q.send(b"v2", &replace("doc-1")).await.expect("send");
    assert_eq!(sent.replaced, Some(State::InFlight));
    assert_eq!(counts(&q).await, [0, 1, 1, 0], "one in flight, one waiting");
    let info = q.get("doc-1").await.expect("get").expect("known");
    assert_eq!(info.state, State::Ready, "the id names the newer message");

    q.ack(&first)
        .await
        .expect("the superseded delivery's ack counts");
    let second = claim(&q, 1).await.pop().expect("delivered");
    assert_eq!(
        (second.id.as_str(), &second.payload[..]),
        ("doc-1", &b"v2"[..])
    );
    q.ack(&second).await.expect("ack");
    assert!(is_empty(&q).await);
}

#[tokio::test]
async fn a_superseded_message_that_fails_ends_there() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "superseded");
    for id in ["a", "b", "c"] {
        q.send(id.as_bytes(), &SendOptions::new().id(id))
            .await
            .expect("send");
    }
    let held = claim(&q, 3).await;
    for id in ["a", "b", "c"] {
        let sent = q.send(b"new", &replace(id)).await.expect("send");
        assert_eq!(sent.replaced, Some(State::InFlight));
    }
    let by_id = |id: &str| held.iter().find(|d| d.id == id).expect("held");
    let outcome = q.nack(by_id("a"), "boom", None).await.expect("nack");
    assert_eq!(outcome, NackOutcome::Superseded);
    assert_eq!(
        q.release(std::slice::from_ref(by_id("b")))
            .await
            .expect("release"),
        [true]
    );
    expire_all_leases(&server, "superseded");
    // The claim that finds "c"'s lease run out ends it, and delivers the three newer ones.
    let newer = claim(&q, 10).await;
    let mut ids: Vec<_> = newer.iter().map(|d| d.id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(payloads(&newer), ["new", "new", "new"]);
    assert_eq!(counts(&q).await, [0, 0, 3, 0], "no retry, no dead letter");
    let info = q.get("a").await.expect("get").expect("known");
    assert_eq!(info.attempts, 1, "the newer message starts over");
}

#[tokio::test]
async fn a_send_that_refuses_in_flight_writes_nothing() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "refuse");
    q.send(b"v1", &SendOptions::new().id("job"))
        .await
        .expect("send");
    let held = claim(&q, 1).await.pop().expect("delivered");
    let opts = replace("job").if_in_flight(IfInFlight::Refuse);
    let sent = q.send(b"v2", &opts).await.expect("send");
    assert!(sent.duplicate);
    assert_eq!((sent.replaced, sent.due_ms), (None, None));
    assert_eq!(counts(&q).await, [0, 0, 1, 0]);
    q.ack(&held).await.expect("ack");
}

#[tokio::test]
async fn a_dead_letter_keeps_its_id_and_a_message_gone_makes_room() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "dead-and-gone");
    q.configure(&[Setting::IdempotencyWindow(Duration::from_secs(600))])
        .await
        .expect("configure");
    q.send(b"d", &SendOptions::new().id("dead").max_attempts(1))
        .await
        .expect("send");
    q.send(b"g", &SendOptions::new().id("gone"))
        .await
        .expect("send");
    let held = claim(&q, 2).await;
    for d in &held {
        if d.id == "dead" {
            q.nack(d, "boom", None).await.expect("nack");
        } else {
            q.ack(d).await.expect("ack");
        }
    }
    let dead = q.send(b"d2", &replace("dead")).await.expect("send");
    assert!(dead.duplicate, "the dead letter keeps its id");
    let kept = q
        .send(b"g2", &SendOptions::new().id("gone"))
        .await
        .expect("send");
    assert!(kept.duplicate, "within the idempotency window");
    let gone = q.send(b"g2", &replace("gone")).await.expect("send");
    assert!(!gone.duplicate);
    assert_eq!(gone.replaced, None);
    assert_eq!(counts(&q).await, [0, 1, 0, 1]);
}

#[tokio::test]
async fn a_replaced_grouped_message_moves_group_and_a_superseded_one_holds_its_slot() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "grouped-upserts");
    q.configure(&[Setting::GroupConcurrency(Some(1))])
        .await
        .expect("configure");
    let in_group = |g: &str| SendOptions::new().id("m").group(g);
    q.send(b"1", &in_group("a").delay(Duration::from_secs(60)))
        .await
        .expect("send");
    let sent = q
        .send(b"2", &in_group("b").on_duplicate(OnDuplicate::Replace))
        .await
        .expect("send");
    assert_eq!(sent.replaced, Some(State::Delayed));
    let a = q.groups().get("a").await.expect("group a");
    let b = q.groups().get("b").await.expect("group b");
    assert_eq!((a.delayed, a.ready), (0, 0));
    assert_eq!((b.delayed, b.ready), (0, 1));

    let first = claim(&q, 10).await.pop().expect("delivered");
    q.send(b"3", &in_group("b").on_duplicate(OnDuplicate::Replace))
        .await
        .expect("send");
    assert!(
        claim(&q, 10).await.is_empty(),
        "the group's one slot is the superseded message's until it ends"
    );
    q.ack(&first).await.expect("ack");
    let second = claim(&q, 10).await;
    assert_eq!(payloads(&second), ["3"]);
    q.ack(&second[0]).await.expect("ack");
    let b = q.groups().get("b").await.expect("group b");
    assert_eq!((b.delayed, b.ready, b.in_flight), (0, 0, 0));
    assert_eq!(counts(&q).await, [0, 0, 0, 0]);
    assert_eq!(q.stats().await.expect("stats").groups, 0);
}

#[tokio::test]
async fn upserts_need_a_caller_id_and_a_max_wait_in_bounds() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "upsert-input");
    let no_id = SendOptions::new().on_duplicate(OnDuplicate::Replace);
    let err = q.send(b"x", &no_id).await.expect_err("refused");
    assert!(
        matches!(err, Error::Invalid(InvalidInput::Option(_))),
        "{err:?}"
    );
    let err = q
        .send(b"x", &debounce("x", 10, 0))
        .await
        .expect_err("refused");
    assert!(
        matches!(err, Error::Invalid(InvalidInput::Option(_))),
        "{err:?}"
    );
    assert!(is_empty(&q).await, "nothing written");
}
