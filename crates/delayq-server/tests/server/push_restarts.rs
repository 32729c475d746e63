//! Push workers stopping, for a target edited or a server shut down, against a receiver that
//! works on a request for a long while (and goes on working if the client goes away): a
//! message whose request may still be running is never pushed again meanwhile, and the
//! workers of a server stop together.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;
use crate::receiver::{Answer, Receiver};

fn loopback_allowed() -> Limits {
    Limits {
        push_allow: vec!["127.0.0.0/8".parse().expect("network")],
        ..Limits::default()
    }
}

async fn put_target(s: &Endpoint, queue: &str, body: Value) {
    let (status, answer) = s
        .call(Method::PUT, &format!("/v1/queues/{queue}/push"), Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

async fn send(s: &Endpoint, queue: &str, id: &str) {
    let (status, sent) = s
        .post(
            &format!("/v1/queues/{queue}/messages"),
            json!({ "payload": 1, "id": id }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
}

async fn wait_for_requests(receiver: &Receiver, id: &str, n: usize, limit: Duration) {
    wait_until(limit, &format!("{n} requests for {id}"), || async {
        receiver.for_id(id).len() >= n
    })
    .await;
}

#[tokio::test]
async fn editing_a_target_never_pushes_a_message_again_while_its_request_runs() {
    let s = TestServer::start_with(loopback_allowed(), Tokens::default()).await;
    let receiver = Receiver::start().await;
    let url = format!("{}/hook", receiver.url);
    put_target(&s, "edited", json!({ "url": url, "timeout": "30s" })).await;
    // Longer than a worker's old 10 s grace, well within the target's timeout.
    receiver.script("long", vec![Answer::Work(Duration::from_secs(12))]);
    send(&s, "edited", "long").await;
    wait_for_requests(&receiver, "long", 1, Duration::from_secs(10)).await;

    // The target is edited while the request is open.
    put_target(
        &s,
        "edited",
        json!({ "url": url, "timeout": "30s", "headers": { "x-version": "2" } }),
    )
    .await;
    // Servers read targets again every second: messages sent meanwhile may still go out
    // under the old one. Send until one goes out under the new one.
    let mut n = 0;
    let after = loop {
        n += 1;
        let id = format!("after-{n}");
        send(&s, "edited", &id).await;
        wait_for_requests(&receiver, &id, 1, Duration::from_secs(20)).await;
        let seen = receiver.for_id(&id).remove(0);
        if seen.header("x-version") == "2" {
            break seen;
        }
    };

    wait_until(
        Duration::from_secs(30),
        "the long request's end",
        || async { receiver.for_id("long")[0].ended_ms > 0 },
    )
    .await;
    let long = receiver.for_id("long").remove(0);
    assert!(
        after.began_ms < long.ended_ms,
        "the edited target's pushes waited for the old worker to stop"
    );
    // The old worker's request finished and was acked: the message was never pushed again.
    wait_until(Duration::from_secs(10), "the ack", || async {
        s.get("/v1/queues/edited/messages/long").await.0 == StatusCode::NOT_FOUND
    })
    .await;
    assert_eq!(
        receiver.max_concurrent_per_id(),
        1,
        "two requests at once for one message"
    );
    assert_eq!(receiver.for_id("long").len(), 1);
}

#[tokio::test]
async fn a_server_shutting_down_stops_its_workers_together_and_leaves_their_messages_leased() {
    let redis = RedisServer::start();
    let receiver = Receiver::start().await;
    let leaving = Endpoint::start(&redis.url(), loopback_allowed(), Tokens::default()).await;
    let queues = ["q0", "q1", "q2"];
    for q in queues {
        let url = format!("{}/{q}", receiver.url);
        put_target(&leaving, q, json!({ "url": url, "timeout": "20s" })).await;
        // Past the server's shutdown grace (10 s), within the target's timeout.
        receiver.script(q, vec![Answer::Work(Duration::from_secs(14))]);
        send(&leaving, q, q).await;
    }
    for q in queues {
        wait_for_requests(&receiver, q, 1, Duration::from_secs(10)).await;
    }
    // A second server, which takes the messages over once their leases pass.
    let staying = Endpoint::start(&redis.url(), loopback_allowed(), Tokens::default()).await;
    leaving.shutdown().await;

    // The three requests were cut together, not one grace period after another.
    let cuts = || -> Vec<u64> {
        queues
            .iter()
            .map(|q| receiver.for_id(q)[0].cut_ms)
            .collect()
    };
    wait_until(
        Duration::from_secs(10),
        "the receiver to see the cuts",
        || async { cuts().iter().all(|&c| c > 0) },
    )
    .await;
    let cuts = cuts();
    let spread = cuts.iter().max().unwrap_or(&0) - cuts.iter().min().unwrap_or(&0);
    assert!(
        spread < 5_000,
        "workers stopped one after another: {cuts:?}"
    );

    // Nothing is pushed again while the receiver still works on attempt 1; after the lease,
    // the other server pushes attempt 2.
    for q in queues {
        wait_for_requests(&receiver, q, 2, Duration::from_secs(60)).await;
        let tries = receiver.for_id(q);
        assert!(
            tries[1].began_ms >= tries[0].ended_ms,
            "{q}: pushed again while attempt 1 was still being worked on"
        );
        assert_eq!(tries[1].header("delayq-attempt"), "2");
    }
    assert_eq!(receiver.max_concurrent_per_id(), 1);
    staying.shutdown().await;
}
