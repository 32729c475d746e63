//! Groups: claims serve the groups with due messages in turn, so one group's backlog delays
//! another group's message by one turn at most; within a group priority, then due time, then
//! send order; a group concurrency bounds a group's messages in flight, and at 1 delivers
//! the group in order (a retry keeps its group's slot); lookups, cancels, reschedules, dead
//! letters and stats know grouped messages; a queue must be in format 3 for them.

use std::time::Duration;

use delayq::{
    Error, InvalidInput, Next, Queue, Schedule, SendOptions, Setting, State, GROUPS_FORMAT,
};

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

fn in_group(group: &str) -> SendOptions {
    SendOptions::new().group(group)
}

async fn set_group_concurrency(q: &Queue, n: Option<u32>) {
    q.configure(&[Setting::GroupConcurrency(n)])
        .await
        .expect("configure");
}

#[tokio::test]
async fn a_groups_backlog_delays_another_groups_message_by_one_turn_at_most() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "fair");
    let heavy: Vec<_> = (0..300)
        .map(|i| delayq::Message::new(format!("heavy-{i}").into_bytes(), in_group("heavy")))
        .collect();
    q.send_batch(&heavy)
        .await
        .expect("the heavy tenant's burst");
    q.send(b"light", &in_group("light")).await.expect("send");
    q.send(b"plain", &SendOptions::new()).await.expect("send");

    // One message per claim, as a worker of concurrency 1 asks: the rotation is heavy,
    // light, then the messages without a group as one more turn.
    let mut order = Vec::new();
    for _ in 0..4 {
        order.extend(payloads(&claim(&q, 1).await));
    }
    assert_eq!(order, ["heavy-0", "light", "plain", "heavy-1"]);

    // A claim wide enough for every group in the rotation gives each its share.
    q.send(b"light-2", &in_group("light")).await.expect("send");
    let got = payloads(&claim(&q, 4).await);
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(got.contains(&"light-2".to_owned()), "{got:?}");
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.groups, stats.ready, stats.in_flight), (2, 295, 8));
}

#[tokio::test]
async fn within_a_group_priority_then_due_time_then_send_order() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "order");
    let t0 = now_ms();
    let sends = [
        ("low", in_group("g").priority(1)),
        ("second", in_group("g")),
        ("first-due", in_group("g").deliver_at(t0 - 5_000)),
        ("urgent", in_group("g").priority(9)),
        ("later", in_group("g").delay(Duration::from_secs(60))),
    ];
    for (p, options) in sends {
        q.send(p.as_bytes(), &options).await.expect("send");
    }
    let got = payloads(&claim(&q, 10).await);
    assert_eq!(got, ["urgent", "first-due", "second", "low"]);
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.delayed, stats.ready, stats.in_flight), (1, 0, 4));
}

#[tokio::test]
async fn a_delayed_grouped_message_comes_when_due_and_wakes_a_waiting_consumer() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "later");
    let mut consumer = q.consumer().await.expect("consumer");
    q.send(b"soon", &in_group("g").delay(Duration::from_millis(300)))
        .await
        .expect("send");
    let sent_at = now_ms();
    let got = consumer
        .receive(&receiving(1, LEASE, Duration::from_secs(5)))
        .await
        .expect("receive");
    assert_eq!(payloads(&got), ["soon"]);
    assert!(got[0].due_ms <= now_ms() && now_ms() >= sent_at + 250);
    assert_eq!(got[0].group.as_deref(), Some("g"));
}

#[tokio::test]
async fn with_concurrency_one_a_group_is_delivered_in_order_and_a_retry_keeps_its_turn() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "serial");
    set_group_concurrency(&q, Some(1)).await;
    let mut ids = Vec::new();
    for p in ["a1", "a2", "a3"] {
        ids.push(q.send(p.as_bytes(), &in_group("a")).await.expect("send").id);
    }
    q.send(b"b1", &in_group("b")).await.expect("send");

    let first = claim(&q, 10).await;
    assert_eq!(
        payloads(&first),
        ["a1", "b1"],
        "one of each group at a time"
    );
    assert!(
        claim(&q, 10).await.is_empty(),
        "both groups are at their limit"
    );

    // a1 fails: its retry is a's next message, even though a2 is ready meanwhile.
    let a1 = first.iter().find(|d| d.payload == b"a1").expect("a1");
    q.fail(a1, "boom", Next::After(Duration::from_millis(200)))
        .await
        .expect("fail");
    assert!(claim(&q, 10).await.is_empty(), "a waits for a1's retry");
    let mut consumer = q.consumer().await.expect("consumer");
    let retry = consumer
        .receive(&receiving(10, LEASE, Duration::from_secs(5)))
        .await
        .expect("receive");
    assert_eq!(payloads(&retry), ["a1"]);
    assert_eq!(retry[0].attempt, 2);

    q.ack(&retry[0]).await.expect("ack");
    let next = claim(&q, 10).await;
    assert_eq!(payloads(&next), ["a2"]);
    // Cancelling a pending message of the group changes nothing of the order.
    let a3 = q.get(&ids[2]).await.expect("get").expect("a3 is there");
    assert_eq!((a3.state, a3.group.as_deref()), (State::Ready, Some("a")));
    q.cancel(&ids[2]).await.expect("cancel");
    q.ack(&next[0]).await.expect("ack");
    assert!(claim(&q, 10).await.is_empty());
    let stats = q.stats().await.expect("stats");
    assert_eq!(
        (stats.groups, stats.in_flight, stats.group_concurrency),
        (1, 1, Some(1))
    );
}

#[tokio::test]
async fn an_expired_lease_passes_its_slot_to_the_retry_so_a_dead_worker_blocks_no_longer() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "crash");
    set_group_concurrency(&q, Some(1)).await;
    let fast = SendOptions::new()
        .group("a")
        .backoff(delayq::Backoff::fixed(Duration::ZERO));
    for p in ["a1", "a2"] {
        q.send(p.as_bytes(), &fast).await.expect("send");
    }
    assert_eq!(payloads(&claim(&q, 10).await), ["a1"]);
    // Its worker died: the lease runs out, and a1 (not a2) is the group's next delivery.
    expire_all_leases(&server, "crash");
    let again = claim(&q, 10).await;
    assert_eq!(payloads(&again), ["a1"]);
    assert_eq!(again[0].attempt, 2);
    q.ack(&again[0]).await.expect("ack");
    assert_eq!(payloads(&claim(&q, 10).await), ["a2"]);
}

#[tokio::test]
async fn a_dead_letter_frees_its_groups_slot_and_a_requeue_puts_it_back_in_its_group() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "dead");
    set_group_concurrency(&q, Some(1)).await;
    let a1 = q.send(b"a1", &in_group("a")).await.expect("send").id;
    q.send(b"a2", &in_group("a")).await.expect("send");
    let got = claim(&q, 10).await;
    q.fail(&got[0], "bad input", Next::Dead)
        .await
        .expect("fail");
    let next = claim(&q, 10).await;
    assert_eq!(payloads(&next), ["a2"], "the dead letter gave its slot up");
    assert!(q.dead_letters().requeue(&a1).await.expect("requeue"));
    assert!(claim(&q, 10).await.is_empty(), "a2 holds the group's slot");
    q.ack(&next[0]).await.expect("ack");
    let requeued = claim(&q, 10).await;
    assert_eq!(payloads(&requeued), ["a1"]);
    assert_eq!(requeued[0].group.as_deref(), Some("a"));
    q.ack(&requeued[0]).await.expect("ack");
    let stats = q.stats().await.expect("stats");
    assert_eq!(counts(&q).await, [0; 4]);
    assert_eq!(stats.groups, 0, "{stats:?}");
    // Nothing of the group is left behind: no set, count, slot or index entry.
    let left = server.cli(&["KEYS", "dq:{dead}:g*"]);
    assert_eq!(left.trim(), "", "group keys left: {left}");
    assert_eq!(server.cli(&["HLEN", "dq:{dead}:index"]).trim(), "0");
}

#[tokio::test]
async fn grouped_messages_are_found_cancelled_and_rescheduled_by_id() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "lookups");
    let later = in_group("g").delay(Duration::from_secs(600));
    let generated = q.send(b"gen", &later).await.expect("send").id;
    let caller = q
        .send(b"own", &later.clone().id("order-7"))
        .await
        .expect("send")
        .id;
    let duplicate = q.send(b"own", &later.clone().id("order-7")).await;
    assert!(duplicate.expect("send").duplicate);
    for id in [&generated, &caller] {
        let info = q.get(id).await.expect("get").expect("found");
        assert_eq!(
            (info.state, info.group.as_deref()),
            (State::Delayed, Some("g"))
        );
    }
    // Rescheduled to now: it is ready, in its group, and found under the same id.
    q.reschedule(&generated, Schedule::Now)
        .await
        .expect("reschedule");
    let info = q.get(&generated).await.expect("get").expect("found");
    assert_eq!(info.state, State::Ready);
    let got = claim(&q, 10).await;
    assert_eq!((got.len(), got[0].id.as_str()), (1, generated.as_str()));
    let cancelled = q.cancel(&caller).await.expect("cancel");
    assert_eq!(cancelled, delayq::CancelOutcome::Cancelled(State::Delayed));
    assert!(q.get(&caller).await.expect("get").is_none());
    q.ack(&got[0]).await.expect("ack");
    assert!(is_empty(&q).await, "{:?}", q.stats().await);
}

#[tokio::test]
async fn a_group_needs_format_3_and_an_older_queue_is_refused_with_nothing_written() {
    let (server, _dq) = setup().await;
    let (q, before) = queue_of_format(&server, "old", 2).await;
    match q.send(b"grouped", &in_group("g")).await {
        Err(Error::FormatTooOld { found, needed, .. }) => {
            assert_eq!((found, needed), (2, GROUPS_FORMAT));
        }
        other => panic!("expected FormatTooOld, got {other:?}"),
    }
    let batch = [delayq::Message::new(b"x".to_vec(), in_group("g"))];
    assert!(matches!(
        q.send_batch(&batch).await,
        Err(Error::FormatTooOld { .. })
    ));
    assert_eq!(
        server.every_key_dumped("dq:{old}*"),
        before,
        "something was written"
    );
    // Once the queue is upgraded, the same process sends groups (it reads the format again).
    server.cli(&[
        "HSET",
        "dq:{old}:control",
        "format",
        &GROUPS_FORMAT.to_string(),
    ]);
    q.send(b"grouped", &in_group("g"))
        .await
        .expect("send after the upgrade");
}

#[tokio::test]
async fn bad_group_names_are_refused() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "names");
    for bad in ["", "with space", "tag{x}", &"x".repeat(129)] {
        match q.send(b"x", &in_group(bad)).await {
            Err(Error::Invalid(InvalidInput::Group { .. })) => {}
            other => panic!("group {bad:?}: {other:?}"),
        }
    }
    assert!(q.send(b"x", &in_group(&"x".repeat(128))).await.is_ok());
    assert!(q
        .configure(&[Setting::GroupConcurrency(Some(0))])
        .await
        .is_err());
    drop(server);
}

#[tokio::test]
async fn a_group_lives_in_one_partition_of_a_partitioned_queue() {
    let (_server, dq) = setup().await;
    let q = dq.create_queue("wide", 4).await.expect("create");
    set_group_concurrency(&q, Some(1)).await;
    for i in 0..6 {
        q.send(format!("a{i}").as_bytes(), &in_group("tenant-a"))
            .await
            .expect("send");
    }
    // Its limit holds across the queue: one in flight, in send order.
    for i in 0..6 {
        let got = claim(&q, 10).await;
        assert_eq!(payloads(&got), [format!("a{i}")]);
        q.ack(&got[0]).await.expect("ack");
    }
    let both = SendOptions::new().group("g").id("order-1");
    match q.send(b"x", &both).await {
        Err(Error::Invalid(InvalidInput::Option(_))) => {}
        other => panic!("a caller id with a group on 4 partitions: {other:?}"),
    }
}
