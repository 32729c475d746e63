//! What survives Redis going away: with AOF every acknowledged send that was not acked comes
//! back after a crash and restart; while Redis is gone, calls fail with connection errors
//! instead of panicking or hanging.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::process::Command;
use std::time::Duration;

use delayq::{Backoff, Config, DelayQ, Message, SendOptions};

use crate::common::*;

#[tokio::test]
async fn aof_restart_keeps_every_unacked_message() {
    let (mut server, before) = setup_with(ServerConfig::appendonly()).await;
    let old_q = queue(&before, "durable");
    let retry = Backoff::fixed(Duration::from_millis(50));
    let message = |id: String, delay: Duration| {
        let options = SendOptions::new()
            .id(id.clone())
            .delay(delay)
            .backoff(retry);
        Message::new(id, options)
    };
    let mut batch: Vec<Message> = (0..10)
        .map(|i| message(format!("ready-{i}"), Duration::ZERO))
        .collect();
    batch.extend((0..10).map(|i| message(format!("delayed-{i}"), Duration::from_millis(400))));
    let sent: HashMap<String, u64> = old_q
        .send_batch(&batch)
        .await
        .expect("send")
        .into_iter()
        .map(|s| (s.id, s.due_ms.expect("due time")))
        .collect();

    let mut consumer = old_q.consumer().await.expect("consumer");
    let acked = consumer
        .receive(&receiving(4, Duration::from_secs(30), Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(acked.len(), 4);
    for d in &acked {
        old_q.ack(d).await.expect("ack");
    }
    let lease = Duration::from_millis(800);
    let in_flight = consumer
        .receive(&receiving(3, lease, Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(in_flight.len(), 3);
    let lease_ends: HashMap<&str, u64> = in_flight
        .iter()
        .map(|d| (d.id.as_str(), d.lease_deadline_ms))
        .collect();

    server.kill();
    server.restart();

    let after = DelayQ::connect(&server.url())
        .await
        .expect("connect after restart");
    let new_q = queue(&after, "durable");
    let acked_ids: HashSet<&str> = acked.iter().map(|d| d.id.as_str()).collect();
    for id in &acked_ids {
        assert!(
            new_q.get(id).await.expect("get").is_none(),
            "acked {id} stays gone"
        );
    }
    let expected = sent.len() - acked_ids.len();
    let mut consumer = new_q.consumer().await.expect("consumer");
    let mut delivered = HashMap::new();
    while delivered.len() < expected {
        let got = consumer
            .receive(&receiving(
                20,
                Duration::from_secs(30),
                Duration::from_secs(5),
            ))
            .await
            .expect("receive");
        assert!(!got.is_empty(), "the rest is delivered within 5 s");
        let received_at = now_ms();
        for d in got {
            new_q.ack(&d).await.expect("ack");
            assert!(delivered.insert(d.id.clone(), (d, received_at)).is_none());
        }
    }
    for (id, (d, received_at)) in &delivered {
        assert!(
            !acked_ids.contains(id.as_str()),
            "acked {id} delivered again"
        );
        assert_eq!(d.payload, id.as_bytes());
        match lease_ends.get(id.as_str()) {
            Some(&lease_end) => {
                assert_eq!(d.attempt, 2, "{id} was in flight: its lease expired once");
                assert!(
                    *received_at >= lease_end,
                    "{id} back before its lease ended"
                );
            }
            None => {
                assert_eq!(d.attempt, 1, "{id}");
                assert_eq!(d.due_ms, sent[id], "{id} keeps its due time");
                assert!(*received_at >= d.due_ms, "{id} delivered early");
            }
        }
    }

    // The connection made before the crash reconnects on its own.
    wait_until(
        Duration::from_secs(10),
        "the old connection back",
        || async { old_q.stats().await.is_ok() },
    )
    .await;
    assert!(is_empty(&old_q).await);
}

/// Runs a call against an unreachable Redis: it must end (within 10 s) in a connection error.
async fn expect_connection_error<T>(what: &str, call: impl Future<Output = delayq::Result<T>>) {
    let started = std::time::Instant::now();
    match tokio::time::timeout(Duration::from_secs(10), call).await {
        Err(_) => panic!("{what} hung"),
        Ok(Ok(_)) => panic!("{what} succeeded without Redis"),
        Ok(Err(e)) => assert!(
            e.is_connection_error(),
            "{what}: {e:?} is not a connection error"
        ),
    }
    println!("{what} failed after {:?}", started.elapsed());
}

#[tokio::test]
async fn calls_to_a_dead_redis_fail_with_connection_errors() {
    let (mut server, dq) = setup().await;
    let q = queue(&dq, "gone");
    q.send(b"x", &SendOptions::new()).await.expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let held = consumer
        .receive(&receiving(1, Duration::from_secs(30), Duration::ZERO))
        .await
        .expect("receive")
        .pop()
        .expect("one delivery");

    server.kill();
    let wait = receiving(1, Duration::from_secs(30), Duration::from_secs(1));
    expect_connection_error("send", q.send(b"y", &SendOptions::new())).await;
    expect_connection_error("get", q.get(&held.id)).await;
    expect_connection_error("stats", q.stats()).await;
    expect_connection_error("cancel", q.cancel(&held.id)).await;
    expect_connection_error("ack", q.ack(&held)).await;
    expect_connection_error("receive", consumer.receive(&wait)).await;
    expect_connection_error("consumer", q.consumer()).await;
    expect_connection_error("connect", DelayQ::connect(&server.url())).await;
}

/// The server's process id.
fn pid(server: &RedisServer) -> String {
    let info = server.cli(&["INFO", "server"]);
    info.lines()
        .find_map(|l| l.trim().strip_prefix("process_id:"))
        .expect("process_id in INFO server")
        .to_owned()
}

/// Sends `signal` (STOP or CONT) to process `pid`.
fn signal(pid: &str, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), pid])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid}");
}

#[tokio::test]
async fn unresponsive_redis_fails_calls_by_the_response_timeout() {
    let server = RedisServer::start();
    let config = Config::default().response_timeout(Duration::from_millis(500));
    let dq = DelayQ::connect_with(&server.url(), config)
        .await
        .expect("connect");
    let q = queue(&dq, "frozen");
    let mut consumer = q.consumer().await.expect("consumer");
    q.stats().await.expect("stats while Redis answers");

    let pid = pid(&server);
    signal(&pid, "STOP");
    let wait = receiving(1, Duration::from_secs(30), Duration::from_secs(1));
    expect_connection_error("stats", q.stats()).await;
    expect_connection_error("receive", consumer.receive(&wait)).await;
    signal(&pid, "CONT");

    wait_until(Duration::from_secs(10), "calls to work again", || async {
        q.stats().await.is_ok()
    })
    .await;
}
