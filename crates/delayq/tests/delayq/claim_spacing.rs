//! Claims on a busy partition are spaced (`Config::claim_spacing`): messages that come due
//! close together are taken by a few claims, not one each; a backlog is not held back; and
//! the setting is checked.

use std::time::Duration;

use delayq::{Config, DelayQ, Error, Message, Queue, SendOptions, MAX_CLAIM_SPACING};
use tokio::time::Instant;

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

async fn client(server: &RedisServer, spacing: Duration) -> DelayQ {
    DelayQ::connect_with(&server.url(), Config::default().claim_spacing(spacing))
        .await
        .expect("connect")
}

/// Sends `n` messages, message i due `first + i * apart` from now, in one batch.
async fn send_spread(q: &Queue, n: usize, first: Duration, apart: Duration) {
    let batch: Vec<Message> = (0..n)
        .map(|i| {
            let delay = first + apart * i as u32;
            Message::new(format!("m{i}"), SendOptions::new().delay(delay))
        })
        .collect();
    q.send_batch(&batch).await.expect("send batch");
}

#[tokio::test]
async fn messages_due_close_together_are_taken_by_few_claims() {
    let server = RedisServer::start();
    let spacing = Duration::from_millis(50);
    let dq = client(&server, spacing).await;
    let q = queue(&dq, "spaced");
    let mut consumer = q.consumer().await.expect("consumer");
    // 40 messages due 5 ms apart: 200 ms in all. Claimed as each comes due, that would be
    // 40 claims; spaced 50 ms apart, about five.
    send_spread(&q, 40, Duration::from_millis(300), Duration::from_millis(5)).await;
    let (mut got, mut receives) = (Vec::new(), 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < 40 && Instant::now() < deadline {
        let batch = consumer
            .receive(&receiving(100, LEASE, Duration::from_secs(2)))
            .await
            .expect("receive");
        if !batch.is_empty() {
            receives += 1;
            got.extend(batch);
        }
    }
    let mut names = payloads(&got);
    names.sort();
    let mut expected: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
    expected.sort();
    assert_eq!(names, expected, "each message delivered once");
    assert!(
        receives <= 10,
        "40 messages due 5 ms apart took {receives} claims with 50 ms between claims"
    );
}

#[tokio::test]
async fn a_backlog_is_claimed_without_spacing() {
    let server = RedisServer::start();
    let dq = client(&server, MAX_CLAIM_SPACING).await;
    let q = queue(&dq, "backlog");
    let batch: Vec<Message> = (0..50)
        .map(|i| Message::new(format!("m{i}"), SendOptions::new()))
        .collect();
    q.send_batch(&batch).await.expect("send batch");
    let mut consumer = q.consumer().await.expect("consumer");
    // Ten claims of five: each took all it could, so the next goes at once. Spaced, they
    // would take nine spacings, 900 ms.
    let started = Instant::now();
    let mut got = 0;
    for _ in 0..10 {
        let batch = consumer
            .receive(&receiving(5, LEASE, Duration::from_secs(2)))
            .await
            .expect("receive");
        assert_eq!(
            batch.len(),
            5,
            "a claim of the backlog took all it asked for"
        );
        got += batch.len();
    }
    assert_eq!(got, 50);
    let took = started.elapsed();
    assert!(
        took < MAX_CLAIM_SPACING * 9,
        "ten claims of a backlog took {took:?}: they were spaced"
    );
}

#[tokio::test]
async fn a_message_due_alone_is_claimed_when_due() {
    let server = RedisServer::start();
    let dq = client(&server, MAX_CLAIM_SPACING).await;
    let q = queue(&dq, "alone");
    let mut consumer = q.consumer().await.expect("consumer");
    // The consumer's first claim finds nothing; the message comes due 300 ms later, long
    // after that claim's spacing ended, and is claimed then, not a spacing after.
    let due_at = now_ms() + 300;
    q.send("x", &SendOptions::new().deliver_at(due_at))
        .await
        .expect("send");
    let delivery = receive_one(&mut consumer, LEASE).await;
    let late = now_ms().saturating_sub(due_at);
    assert_eq!(payloads(&[delivery]), ["x"]);
    assert!(
        late < MAX_CLAIM_SPACING.as_millis() as u64,
        "a message due alone came {late} ms late, a spacing or more"
    );
}

#[tokio::test]
async fn a_spacing_over_the_longest_is_refused() {
    let server = RedisServer::start();
    let too_long = MAX_CLAIM_SPACING + Duration::from_millis(1);
    let config = Config::default().claim_spacing(too_long);
    match DelayQ::connect_with(&server.url(), config).await {
        Err(Error::Invalid(e)) => assert!(e.to_string().contains("claim spacing"), "{e}"),
        Err(e) => panic!("expected an invalid-input error, got {e}"),
        Ok(_) => panic!("a claim spacing of {too_long:?} was taken"),
    }
}

#[tokio::test]
async fn a_consumer_made_while_claims_are_spaced_still_claims() {
    let server = RedisServer::start();
    let dq = client(&server, MAX_CLAIM_SPACING).await;
    let q = queue(&dq, "fresh");
    // Sent before anyone listens: no wake-up is ever heard on this partition.
    q.send("x", &SendOptions::new().delay(Duration::from_millis(300)))
        .await
        .expect("send");
    let mut first = q.consumer().await.expect("consumer");
    let got = first
        .receive(&receiving(1, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    assert!(got.is_empty());
    // A consumer made within that claim's spacing (as an HTTP server makes one per
    // request) waits out the spacing, then for the due time, and takes the message.
    let mut second = q.consumer().await.expect("consumer");
    let started = Instant::now();
    let wait = Duration::from_secs(10);
    let got = second
        .receive(&receiving(1, LEASE, wait))
        .await
        .expect("receive");
    assert_eq!(payloads(&got), ["x"]);
    // Due 300 ms after the send: not at the end of the receive's wait.
    assert!(
        started.elapsed() < wait / 2,
        "the message came after {:?} of a {wait:?} wait",
        started.elapsed()
    );
}
