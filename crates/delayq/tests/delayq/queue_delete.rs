//! Deleting a queue: refused while it holds messages unless forced; everything of it gone
//! but its partition count and data format (so a process that used it before writes what
//! the data says); out of the queue list; in batches of bounded size; and a send that races
//! the delete keeps its message.

use std::time::Duration;

use delayq::{
    Error, EventFilter, EventStart, MissedTicks, RateLimit, Recurrence, SendOptions, Setting,
};

use crate::common::*;

/// The keys of `name`'s partitions left in Redis.
fn keys_of(server: &RedisServer, name: &str) -> Vec<String> {
    let mut keys: Vec<String> = server
        .every_key_dumped(&format!("dq:{{{name}[}}#]*"))
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    keys.sort();
    keys
}

/// A queue with a bit of everything: settings, a schedule, events, history, a final record.
async fn busy_queue(dq: &delayq::DelayQ, name: &str, partitions: u16) -> delayq::Queue {
    let q = dq.create_queue(name, partitions).await.expect("create");
    q.configure(&[
        Setting::RateLimit(Some(RateLimit {
            per_second: 100,
            burst: 10,
        })),
        Setting::Events(Some(1000)),
    ])
    .await
    .expect("configure");
    put_hourly(&q, b"tick").await;
    for i in 0..4 {
        q.send(format!("m{i}"), &SendOptions::new())
            .await
            .expect("send");
    }
    let mut consumer = q.consumer().await.expect("consumer");
    for _ in 0..4 {
        let got = receive_one(&mut consumer, Duration::from_secs(30)).await;
        q.ack(&got).await.expect("ack");
    }
    q
}

#[tokio::test]
async fn an_empty_queue_is_deleted_with_everything_but_its_data_format() {
    let (server, dq) = setup().await;
    let q = busy_queue(&dq, "old-orders", 3).await;
    let other = queue(&dq, "old-orders-eu");
    other
        .send("stays", &SendOptions::new())
        .await
        .expect("send");
    let before = keys_of(&server, "old-orders");
    assert!(before.len() > 10, "{before:?}");
    assert!(dq
        .queues()
        .await
        .expect("queues")
        .iter()
        .any(|n| n.as_str() == "old-orders"));

    let deleted = q.delete(false).await.expect("delete");
    assert_eq!(deleted.messages, 0);
    assert!(deleted.existed && !deleted.raced);
    let never = queue(&dq, "never-used")
        .delete(false)
        .await
        .expect("delete");
    assert!(!never.existed, "{never:?}");
    let left = keys_of(&server, "old-orders");
    assert_eq!(deleted.keys as usize, before.len() - left.len(), "{left:?}");
    // Each partition's control hash (its data format only) and the partition count.
    for key in &left {
        assert!(
            key.ends_with(":control") || key == "dq:{old-orders}:partitions",
            "{key} left"
        );
        if key.ends_with(":control") {
            let fields = server.cli(&["HKEYS", key]);
            assert_eq!(fields.trim(), "format", "{key}: {fields}");
        }
    }
    let names = dq.queues().await.expect("queues");
    assert!(
        !names.iter().any(|n| n.as_str() == "old-orders"),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n.as_str() == "old-orders-eu"),
        "another queue stays"
    );
    assert_eq!(other.stats().await.expect("stats").ready, 1);

    // A create for another count is refused, and does not list it again (nothing written).
    let before_refusal = server.every_key_dumped("dq:*");
    assert!(dq.create_queue("old-orders", 5).await.is_err());
    assert_eq!(
        server.every_key_dumped("dq:*"),
        before_refusal,
        "a refused create wrote"
    );

    // Started again by a send: default settings, nothing of before.
    let again = queue(&dq, "old-orders");
    again.send("new", &SendOptions::new()).await.expect("send");
    let s = again.stats().await.expect("stats");
    assert_eq!(
        (s.ready, s.rate_limit, s.events_kept),
        (1, None, None),
        "{s:?}"
    );
    assert!(again
        .schedules()
        .list()
        .await
        .expect("schedules")
        .is_empty());
    let mut events = again
        .events(EventStart::Oldest, EventFilter::new())
        .await
        .expect("events");
    assert!(events
        .next(100, Some(Duration::ZERO))
        .await
        .expect("read")
        .is_empty());
}

#[tokio::test]
async fn a_queue_with_messages_is_refused_unless_forced() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "busy");
    for i in 0..3 {
        q.send(
            format!("m{i}"),
            &SendOptions::new().delay(Duration::from_secs(3600)),
        )
        .await
        .expect("send");
    }
    q.send("dead", &SendOptions::new().max_attempts(1))
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let got = receive_one(&mut consumer, Duration::from_secs(30)).await;
    q.nack(&got, "boom", None).await.expect("nack");
    q.send("held", &SendOptions::new()).await.expect("send");
    let held = receive_one(&mut consumer, Duration::from_secs(30)).await;

    let before = server.every_key_dumped("dq:{busy[}#]*");
    match q.delete(false).await {
        Err(Error::NotEmpty { queue, messages }) => {
            assert_eq!((queue.as_str(), messages), ("busy", 5));
        }
        other => panic!("expected NotEmpty, got {other:?}"),
    }
    assert_eq!(
        server.every_key_dumped("dq:{busy[}#]*"),
        before,
        "nothing touched"
    );

    let deleted = q.delete(true).await.expect("forced");
    assert_eq!(deleted.messages, 5);
    let s = q.stats().await.expect("stats");
    assert_eq!(
        [s.delayed, s.ready, s.in_flight, s.dead],
        [0, 0, 0, 0],
        "{s:?}"
    );
    // The consumer that held one cannot settle it any more.
    assert!(
        matches!(q.ack(&held).await, Err(Error::LeaseLost { .. })),
        "an ack after the delete"
    );
}

#[tokio::test]
async fn many_keys_go_in_several_bounded_calls() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "wide");
    q.send("x", &SendOptions::new()).await.expect("send");
    // 1,200 schedules: a key each, more than two batches.
    let daily = Recurrence::interval(Duration::from_secs(86_400), 0).expect("interval");
    for i in 0..1200 {
        q.schedules()
            .put(
                &format!("s{i}"),
                daily.clone(),
                MissedTicks::Skip,
                "t",
                &SendOptions::new(),
            )
            .await
            .expect("schedule");
    }
    let calls = || server.script_calls();
    let unlinks_before = server.command_calls("unlink");
    let before = calls();
    let deleted = q.delete(true).await.expect("delete");
    assert!(deleted.keys >= 1200, "{deleted:?}");
    assert_eq!(
        server.command_calls("unlink") - unlinks_before,
        deleted.keys
    );
    // 500 keys a call at most: three calls for the keys, one to clear the settings, and
    // the stats that count the messages before and after.
    let made = calls() - before;
    assert!(made >= 4, "{made} script calls for {} keys", deleted.keys);
    assert!(keys_of(&server, "wide").len() <= 2);
}

#[tokio::test]
async fn a_send_after_the_delete_starts_the_queue_again_and_is_delivered() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "raced");
    q.send("before", &SendOptions::new()).await.expect("send");
    q.delete(true).await.expect("delete");
    // A producer that knew the queue (its handle cached the layout and format) sends on.
    q.send("after", &SendOptions::new())
        .await
        .expect("send after the delete");
    // ... and the queue is listed again, as a server that deleted it and then took a send
    // for it lists it.
    let names = dq.queues().await.expect("queues");
    assert!(names.iter().any(|n| n.as_str() == "raced"), "{names:?}");
    let mut consumer = q.consumer().await.expect("consumer");
    let got = receive_one(&mut consumer, Duration::from_secs(30)).await;
    assert_eq!(got.payload, b"after");
    q.ack(&got).await.expect("ack");
    // A second delete tidies it up.
    q.delete(false).await.expect("empty again");
}

/// A consumer that lives on (a worker, a server's push runtime) and starts on a queue just
/// deleted lists nothing again: only a message sent brings a deleted queue back. (The
/// server's push runtime started a worker on a queue deleted under it and listed the queue
/// again, which its API fuzzing caught as a change beside a refused request.)
#[tokio::test]
async fn a_consumer_started_after_the_delete_does_not_list_the_queue_again() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "gone-for-good");
    q.send("before", &SendOptions::new()).await.expect("send");
    q.delete(true).await.expect("delete");
    let before = server.every_key_dumped("*");

    // Another process, whose handle learns the layout afresh.
    let other = delayq::DelayQ::connect_with(&server.url(), delayq::Config::default())
        .await
        .expect("connect");
    let mut consumer = queue(&other, "gone-for-good")
        .consumer()
        .await
        .expect("consumer");
    let got = consumer
        .receive(&receiving(
            1,
            Duration::from_secs(30),
            Duration::from_millis(50),
        ))
        .await
        .expect("receive");
    assert!(got.is_empty(), "the deleted queue delivered {got:?}");
    let names: Vec<String> = dq
        .queues()
        .await
        .expect("queues")
        .iter()
        .map(|n| n.as_str().to_owned())
        .collect();
    assert!(
        !names.contains(&"gone-for-good".to_owned()),
        "listed again: {names:?}"
    );
    let unchanged = |(k, _): &(String, String)| !k.contains(":claim:") && k != "dq:processes";
    let after = server.every_key_dumped("*");
    assert_eq!(
        before.into_iter().filter(unchanged).collect::<Vec<_>>(),
        after.into_iter().filter(unchanged).collect::<Vec<_>>(),
    );

    // A send from that process brings it back, listed.
    queue(&other, "gone-for-good")
        .send("after", &SendOptions::new())
        .await
        .expect("send");
    let names = dq.queues().await.expect("queues");
    assert!(names.iter().any(|n| n.as_str() == "gone-for-good"));
}

/// Data outlives code: queues written by the first release (data format 1, no format field,
/// messages pending, retried, in flight and dead, a 3-partition queue) are deleted whole,
/// and the queues beside them are left as they were.
#[tokio::test]
async fn queues_of_data_format_1_are_deleted_whole_and_their_neighbours_kept() {
    let (server, dq) = setup().await;
    crate::data_set_files::load(&dq, crate::data_sets::FORMAT1).await;
    let orders = queue(&dq, "orders");
    let paused = queue(&dq, "paused");
    let held = orders.stats().await.expect("stats").held();
    assert!(held >= 6, "the data set's orders: {held}");
    let neighbour = paused.stats().await.expect("stats");
    let neighbour_keys = keys_of(&server, "paused");

    match orders.delete(false).await {
        Err(Error::NotEmpty { messages, .. }) => assert_eq!(messages, held),
        other => panic!("expected NotEmpty, got {other:?}"),
    }
    let deleted = orders.delete(true).await.expect("forced");
    assert_eq!(deleted.messages, held);
    assert_eq!(orders.stats().await.expect("stats").held(), 0);
    assert_eq!(orders.data_format().await.expect("format").format(), 1);
    let left = keys_of(&server, "orders");
    assert!(
        left.iter()
            .all(|k| k == "dq:{orders}:partitions" || k.ends_with(":control")),
        "{left:?}"
    );

    let parts = queue(&dq, "parts");
    assert_eq!(parts.partitions().await.expect("partitions"), 3);
    parts.delete(true).await.expect("forced");
    let left = keys_of(&server, "parts");
    assert!(
        left.iter()
            .all(|k| k == "dq:{parts}:partitions" || k.ends_with(":control")),
        "{left:?}"
    );

    // As it was (but its lag, which grows by itself).
    let now = paused.stats().await.expect("stats");
    assert_eq!(
        (now.held(), now.ready, now.paused, now.rate_limit),
        (
            neighbour.held(),
            neighbour.ready,
            neighbour.paused,
            neighbour.rate_limit
        )
    );
    assert_eq!(keys_of(&server, "paused"), neighbour_keys);
    let names: Vec<String> = dq
        .queues()
        .await
        .expect("queues")
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(names, ["paused"]);
}
