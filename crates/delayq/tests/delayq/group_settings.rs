//! One group's own settings and what it holds: a paused group waits while the rest flows and
//! comes back when resumed; a group's own concurrency and weight stand in for the queue's;
//! the groups are listed most messages first, and one group's counts add up.

use std::time::Duration;

use delayq::{GroupSettings, Next, Queue, SendOptions, Setting};

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

async fn send_to(q: &Queue, group: &str, payloads: &[&str]) {
    for p in payloads {
        q.send(p.as_bytes(), &SendOptions::new().group(group))
            .await
            .expect("send");
    }
}

#[tokio::test]
async fn a_paused_group_waits_while_the_rest_flows_and_resumes_at_once() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "held");
    send_to(&q, "noisy", &["n1", "n2"]).await;
    send_to(&q, "calm", &["c1"]).await;
    let info = q.groups().pause("noisy").await.expect("pause");
    assert!(info.paused);
    assert_eq!(payloads(&claim(&q, 10).await), ["c1"]);
    assert!(claim(&q, 10).await.is_empty(), "noisy is paused");

    // A consumer waiting on the queue is woken by the resume.
    let waiting = {
        let q = q.clone();
        tokio::spawn(async move {
            let mut consumer = q.consumer().await.expect("consumer");
            consumer
                .receive(&receiving(10, LEASE, Duration::from_secs(5)))
                .await
                .expect("receive")
        })
    };
    wait_until(Duration::from_secs(5), "a waiting consumer", || async {
        listening(&_server, "held") > 0
    })
    .await;
    let info = q.groups().resume("noisy").await.expect("resume");
    assert!(!info.paused);
    let got = waiting.await.expect("join");
    assert_eq!(payloads(&got), ["n1", "n2"]);
}

#[tokio::test]
async fn a_groups_own_concurrency_and_weight_stand_in_for_the_queues() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "own");
    q.configure(&[Setting::GroupConcurrency(Some(1))])
        .await
        .expect("configure");
    send_to(&q, "big", &["b1", "b2", "b3", "b4", "b5"]).await;
    send_to(&q, "small", &["s1", "s2"]).await;
    let set = GroupSettings {
        concurrency: Some(Some(3)),
        weight: Some(Some(2)),
        ..GroupSettings::default()
    };
    let info = q.groups().configure("big", set).await.expect("configure");
    assert_eq!(
        (info.concurrency, info.own_concurrency, info.weight),
        (Some(3), Some(3), 2)
    );
    // One message per claim: big gives two per turn (its weight), small one; big holds at
    // most three at once, small one.
    let mut order = Vec::new();
    for _ in 0..5 {
        order.extend(payloads(&claim(&q, 1).await));
    }
    assert_eq!(order, ["b1", "b2", "s1", "b3"]);
    let big = q.groups().get("big").await.expect("get");
    assert_eq!((big.in_flight, big.ready, big.delayed), (3, 2, 0));
    // Back to the queue's limit.
    let unset = GroupSettings {
        concurrency: Some(None),
        ..GroupSettings::default()
    };
    let info = q.groups().configure("big", unset).await.expect("configure");
    assert_eq!((info.concurrency, info.own_concurrency), (Some(1), None));
    let bad = GroupSettings {
        weight: Some(Some(0)),
        ..GroupSettings::default()
    };
    assert!(q.groups().configure("big", bad).await.is_err());
}

#[tokio::test]
async fn groups_are_listed_most_messages_first_and_a_groups_counts_add_up() {
    let (_server, dq) = setup().await;
    for (name, partitions) in [("listed", 1), ("listed-wide", 3)] {
        let q = dq.create_queue(name, partitions).await.expect("create");
        send_to(&q, "three", &["t1", "t2", "t3"]).await;
        send_to(&q, "one", &["o1"]).await;
        send_to(&q, "two", &["w1", "w2"]).await;
        let page = q.groups().list(0, 10).await.expect("list");
        let names: Vec<_> = page.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(
            (page.total, names),
            (3, vec!["three", "two", "one"]),
            "{name}"
        );
        let second = q.groups().list(1, 1).await.expect("list");
        assert_eq!(second.groups[0].name, "two", "{name}");
    }
    let q = queue(&dq, "listed");
    q.send(
        b"later",
        &SendOptions::new()
            .group("three")
            .delay(Duration::from_secs(60)),
    )
    .await
    .expect("send");
    let got = claim(&q, 1).await;
    assert_eq!(got[0].group.as_deref(), Some("three"));
    q.fail(&got[0], "again", Next::After(Duration::from_secs(60)))
        .await
        .expect("fail");
    let more = claim(&q, 10).await;
    let three = q.groups().get("three").await.expect("get");
    let in_flight = more
        .iter()
        .filter(|d| d.group.as_deref() == Some("three"))
        .count() as u64;
    assert_eq!(
        (three.delayed, three.ready, three.in_flight),
        (2, 2 - in_flight, in_flight),
        "{three:?}"
    );
}
