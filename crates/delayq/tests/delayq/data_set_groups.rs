//! The groups of a data set (format 3 on): a queue `tenants` of group concurrency 1 with a
//! grouped message in every state: in flight with a message behind it, waiting for a retry
//! (it keeps its group's slot) with one behind it, delayed, ready, dead, and a message
//! without a group beside them. `data_sets.rs` writes it with the rest and loads it; this
//! checks it is whole, and that each message is delivered once, in its group's order, never
//! two of a group at once.

use std::collections::HashMap;
use std::time::Duration;

use delayq::{DelayQ, Next, ReceiveOptions, SendOptions, Setting, State};

use crate::common::*;

/// Per caller id: its group (None: no group) and the state the writer leaves it in.
const MESSAGES: [(&str, Option<&str>, State); 9] = [
    ("a1", Some("a"), State::InFlight),
    ("a2", Some("a"), State::Ready),
    ("a3", Some("a"), State::Delayed),
    ("b1", Some("b"), State::Delayed),
    ("b2", Some("b"), State::Ready),
    ("c1", Some("c"), State::Ready),
    ("d1", Some("d"), State::Dead),
    ("e1", Some("e"), State::Ready),
    ("u1", None, State::Ready),
];

fn options(group: Option<&str>) -> SendOptions {
    let options = SendOptions::new();
    match group {
        Some(g) => options.group(g),
        None => options,
    }
}

/// Leaves the `tenants` queue as `MESSAGES` says.
pub async fn write(dq: &DelayQ) {
    let q = queue(dq, "tenants");
    q.configure(&[Setting::GroupConcurrency(Some(1))])
        .await
        .expect("configure");
    let send = |id: &'static str, options: SendOptions| {
        let q = q.clone();
        async move {
            q.send(id.as_bytes(), &options.id(id)).await.expect("send");
        }
    };
    for (id, group, _) in MESSAGES.iter().filter(|(id, ..)| *id != "e1") {
        match *id {
            "a3" => send(id, options(*group).delay(Duration::from_secs(3600))).await,
            _ => send(id, options(*group)).await,
        }
    }
    // One claim takes the head of each group: a1, b1, c1, d1 and u1.
    let mut consumer = q.consumer().await.expect("consumer");
    let got = consumer
        .receive(&receiving(100, Duration::from_secs(2), Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(got.len(), 5, "{got:?}");
    let mut back = Vec::new();
    for d in got {
        match d.id.as_str() {
            "a1" => {} // left in flight; its lease has passed by the time a test loads it
            "b1" => {
                q.fail(&d, "later", Next::After(Duration::from_secs(3600)))
                    .await
                    .expect("fail");
            }
            "d1" => {
                q.fail(&d, "fatal", Next::Dead).await.expect("fail");
            }
            _ => back.push(d),
        }
    }
    // Released, c1 keeps its group's slot; u1 is ready again; e1 comes after, plain.
    q.release(&back).await.expect("release");
    send("e1", options(Some("e"))).await;
}

/// Checks the loaded `tenants` queue, then delivers each message once.
pub async fn check_and_deliver_once(dq: &DelayQ) {
    let q = queue(dq, "tenants");
    for (id, group, state) in MESSAGES {
        let m = q.get(id).await.expect("get").expect(id);
        // Delayed an hour when the data set was written: due by now, once an hour passed.
        let states = match state {
            State::Delayed => vec![State::Delayed, State::Ready],
            other => vec![other],
        };
        assert!(states.contains(&m.state), "{id}: {:?}", m.state);
        assert_eq!(m.group.as_deref(), group, "{id}");
        assert_eq!(m.payload, id.as_bytes());
    }
    let stats = q.stats().await.expect("stats");
    assert_eq!(
        (stats.groups, stats.group_concurrency, stats.in_flight),
        (4, Some(1), 1),
        "{stats:?}"
    );

    q.reschedule("a3", delayq::Schedule::Now)
        .await
        .expect("reschedule");
    q.reschedule("b1", delayq::Schedule::Now)
        .await
        .expect("reschedule");
    assert!(q.dead_letters().requeue("d1").await.expect("requeue"));
    let mut left: HashMap<&str, usize> = MESSAGES.iter().map(|(id, ..)| (*id, 1)).collect();
    let mut order: HashMap<String, Vec<String>> = HashMap::new();
    let mut consumer = q.consumer().await.expect("consumer");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while left.values().any(|n| *n > 0) {
        assert!(tokio::time::Instant::now() < deadline, "left: {left:?}");
        let options = ReceiveOptions {
            max: 100,
            lease: Duration::from_secs(60),
            wait: Duration::from_millis(200),
        };
        let got = consumer.receive(&options).await.expect("receive");
        let mut groups_now = Vec::new();
        for d in &got {
            let n = left
                .get_mut(d.id.as_str())
                .expect("a message of the data set");
            assert_eq!(*n, 1, "{} delivered twice", d.id);
            *n = 0;
            if let Some(g) = &d.group {
                assert!(!groups_now.contains(g), "two of group {g} at once");
                groups_now.push(g.clone());
                order.entry(g.clone()).or_default().push(d.id.clone());
            }
        }
        if !got.is_empty() {
            q.ack_many(&got).await.expect("ack");
        }
    }
    assert_eq!(order["a"], ["a1", "a2", "a3"]);
    assert_eq!(order["b"], ["b1", "b2"]);
    let stats = q.stats().await.expect("stats");
    assert_eq!(
        (stats.delayed, stats.ready, stats.in_flight, stats.groups),
        (0, 0, 0, 0)
    );
}
