//! A worker's acks ride on its next claim (`ack_carry.rs`): one script call acks what its
//! handlers finished and claims what comes next. What no claim takes is acked on its own
//! within the linger, and shutdown acks everything that waits. A receive given receipts to
//! ack (an HTTP client's) carries them the same way.

use std::time::Duration;

use delayq::worker::{StopReason, WorkerBuilder};
use delayq::SendOptions;

use crate::common::*;

/// Logs every command `server` runs from now on (`SLOWLOG`), for [`function_calls`].
fn log_every_call(server: &RedisServer) {
    server.cli(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    server.cli(&["CONFIG", "SET", "slowlog-max-len", "100000"]);
    server.cli(&["SLOWLOG", "RESET"]);
}

/// Calls of delayq's function `name` (`ack`, `claim`) logged since [`log_every_call`].
fn function_calls(server: &RedisServer, name: &str) -> usize {
    let suffix = format!("_{name}");
    server
        .cli(&["SLOWLOG", "GET", "-1"])
        .lines()
        .filter(|l| {
            // delayq_<16 hex>_<name>
            l.starts_with("delayq_") && l.ends_with(&suffix) && l.len() == 23 + suffix.len()
        })
        .count()
}

#[tokio::test]
async fn a_worker_that_goes_on_acks_with_its_next_claim() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "carried");
    // Due one after another, 50 ms apart: the worker handles each and waits for the next.
    let n = 8;
    let mut ids = Vec::new();
    for i in 0..n {
        let options = SendOptions::new().delay(Duration::from_millis(300 + 50 * i));
        ids.push(q.send(format!("m{i}"), &options).await.expect("send").id);
    }
    log_every_call(&server);
    let (running, seen) = spawn_recording_worker(
        WorkerBuilder::new(q.clone())
            .concurrency(1)
            .ack_linger(Duration::from_secs(1)),
    );
    // Well within the 30 s lease: acked, not redelivered by lease expiry.
    wait_until(Duration::from_secs(10), "every message acked", || async {
        seen.contains_all(&ids) && is_empty(&q).await
    })
    .await;
    // Every ack but the last rode on the claim of the message after it; the last one's,
    // with no claim to take it, went on its own after the linger.
    assert_eq!(function_calls(&server, "ack"), 1, "acks sent on their own");
    assert!(function_calls(&server, "claim") >= n as usize);
    assert_eq!(
        running.shutdown().await,
        StopReason::GracefulShutdown { released: 0 }
    );
}

#[tokio::test]
async fn an_ack_no_claim_takes_is_sent_within_its_linger() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "lingering");
    let id = q.send("only", &SendOptions::new()).await.expect("send").id;
    log_every_call(&server);
    let (running, seen) = spawn_recording_worker(
        WorkerBuilder::new(q.clone()).ack_linger(Duration::from_millis(200)),
    );
    wait_until(Duration::from_secs(5), "the message handled", || async {
        seen.contains_all([&id])
    })
    .await;
    // Nothing else comes, so no claim carries it: the settler acks it after 200 ms, long
    // before the 30 s lease would hand the message out again.
    wait_until(Duration::from_secs(5), "the ack", || async {
        is_empty(&q).await
    })
    .await;
    assert_eq!(function_calls(&server, "ack"), 1);
    assert_eq!(
        running.shutdown().await,
        StopReason::GracefulShutdown { released: 0 }
    );
}

#[tokio::test]
async fn shutdown_sends_the_acks_that_wait() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "flushed");
    let id = q.send("only", &SendOptions::new()).await.expect("send").id;
    // A linger far longer than the test waits: only shutdown can send this ack in time.
    let (running, seen) =
        spawn_recording_worker(WorkerBuilder::new(q.clone()).ack_linger(Duration::from_secs(1)));
    wait_until(Duration::from_secs(5), "the message handled", || async {
        seen.contains_all([&id])
    })
    .await;
    assert_eq!(
        running.shutdown().await,
        StopReason::GracefulShutdown { released: 0 }
    );
    assert!(is_empty(&q).await, "acked by the time the worker stopped");
}

#[tokio::test]
async fn a_linger_over_a_second_is_refused() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "refused");
    let built = WorkerBuilder::new(q)
        .ack_linger(Duration::from_millis(1001))
        .build(|_| async { Ok::<(), String>(()) });
    let error = built.err().expect("refused").to_string();
    assert!(error.contains("ack linger"), "{error}");
}

#[tokio::test]
async fn receipts_acked_with_a_receive_ride_on_its_claim() {
    let (server, dq) = setup().await;
    for (name, partitions) in [("one", 1), ("three", 3)] {
        let q = dq.create_queue(name, partitions).await.expect("create");
        for i in 0..6 {
            q.send(format!("m{i}"), &SendOptions::new())
                .await
                .expect("send");
        }
        let mut consumer = q.consumer().await.expect("consumer");
        let lease = Duration::from_secs(30);
        let first = consumer
            .receive(&receiving(3, lease, Duration::ZERO))
            .await
            .expect("receive");
        assert_eq!(first.len(), 3);
        let mut acks: Vec<delayq::Receipt> = first.iter().map(|d| d.receipt()).collect();
        // A receipt under another token (the first 12 hex digits) acks nothing.
        let text = acks[0].to_string();
        let token = u64::from_str_radix(&text[..12], 16).expect("hex");
        let stale = format!("{:012x}{}", token ^ 1, &text[12..]);
        acks.push(stale.parse().expect("a receipt"));
        log_every_call(&server);
        let (acked, second) = consumer
            .ack_then_receive_until(
                &acks,
                &receiving(3, lease, Duration::ZERO),
                std::future::pending(),
            )
            .await
            .expect("ack and receive");
        assert_eq!(acked, [true, true, true, false], "{name}");
        assert_eq!(second.len(), 3, "{name}");
        // With one partition the acks went with the claim; with three, any the receive's
        // claims did not carry went in one call beside them.
        let ack_calls = function_calls(&server, "ack");
        assert!(
            ack_calls <= usize::from(partitions > 1),
            "{name}: {ack_calls} ack calls"
        );
        assert_eq!(counts(&q).await, [0, 0, 3, 0], "{name}");
    }
}
