//! When messages arrive: a blocking wait outlives the client's response timeout, delayed
//! messages are never delivered early, and a consumer asleep is woken by whatever makes a
//! message due sooner.

use std::time::{Duration, Instant};

use delayq::{Config, DelayQ, Delivery, Message, Queue, Schedule, SendOptions};

use crate::common::*;

/// How long the woken consumers would wait.
const WAIT: Duration = Duration::from_secs(5);

/// Number of clients blocked in a command (the consumers' `BLPOP`s).
fn blocked_clients(server: &RedisServer) -> u64 {
    server
        .cli(&["INFO", "clients"])
        .lines()
        .find_map(|l| l.trim().strip_prefix("blocked_clients:"))
        .and_then(|n| n.parse().ok())
        .expect("blocked_clients in INFO clients")
}

#[tokio::test]
async fn blocking_wait_outlives_the_response_timeout() {
    let server = RedisServer::start();
    let config = Config::default().response_timeout(Duration::from_millis(500));
    let dq = DelayQ::connect_with(&server.url(), config)
        .await
        .expect("connect");
    let q = queue(&dq, "patient");
    let producer = DelayQ::connect(&server.url()).await.expect("connect");
    let sending = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        queue(&producer, "patient")
            .send(b"late", &SendOptions::new())
            .await
            .expect("send")
    });

    let mut consumer = q.consumer().await.expect("consumer");
    let wait = Duration::from_secs(3);
    let started = Instant::now();
    let got = consumer
        .receive(&receiving(1, Duration::from_secs(30), wait))
        .await
        .expect("receive outlives the 500 ms response timeout");
    let took = started.elapsed();
    let sent = sending.await.expect("sender task");
    assert_eq!(got.len(), 1, "the message sent 1.2 s into the wait");
    assert!(
        took < wait,
        "woken by the send, not by its {wait:?} wait running out"
    );
    assert_eq!(
        (got[0].id.as_str(), got[0].payload.as_slice()),
        (sent.id.as_str(), &b"late"[..])
    );
    q.ack(&got[0]).await.expect("ack");
    assert!(is_empty(&q).await, "nothing was popped and lost");
}

#[tokio::test]
async fn delayed_messages_are_never_delivered_early() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "punctual");
    let delays = [150, 300, 500, 700, 950, 1200];
    let batch: Vec<Message> = delays
        .iter()
        .map(|ms| {
            let delay = Duration::from_millis(*ms);
            Message::new(format!("{ms} ms"), SendOptions::new().delay(delay))
        })
        .collect();
    let sent = q.send_batch(&batch).await.expect("send");

    let mut consumer = q.consumer().await.expect("consumer");
    let options = receiving(1, Duration::from_secs(30), Duration::from_secs(3));
    let mut lateness = Vec::new();
    for expected in &sent {
        let got = consumer.receive(&options).await.expect("receive");
        let received_at = now_ms();
        assert_eq!(got.len(), 1, "{} delivered within 3 s", expected.id);
        let d = &got[0];
        assert_eq!(d.id, expected.id, "delivered in due order");
        assert_eq!(Some(d.due_ms), expected.due_ms);
        assert!(
            received_at >= d.due_ms,
            "{} delivered {} ms early",
            d.id,
            d.due_ms - received_at
        );
        lateness.push(received_at - d.due_ms);
        q.ack(d).await.expect("ack");
    }
    println!("lateness per message (ms), delays {delays:?}: {lateness:?}");
    lateness.sort_unstable();
    println!(
        "lateness ms: min {} median {} max {}",
        lateness[0],
        lateness[lateness.len() / 2],
        lateness[lateness.len() - 1]
    );
}

/// What a receive returned, how long it took, and when it returned (host ms).
type Received = (Vec<Delivery>, Duration, u64);

/// Starts a receive (waiting up to [`WAIT`]) in a task and returns once Redis shows the
/// consumer blocked.
async fn blocked_receive(server: &RedisServer, q: &Queue) -> tokio::task::JoinHandle<Received> {
    let mut consumer = q.consumer().await.expect("consumer");
    let receiving = tokio::spawn(async move {
        let started = Instant::now();
        let got = consumer
            .receive(&receiving(1, Duration::from_secs(30), WAIT))
            .await
            .expect("receive");
        (got, started.elapsed(), now_ms())
    });
    wait_until(Duration::from_secs(5), "the consumer to block", || async {
        blocked_clients(server) == 1
    })
    .await;
    receiving
}

#[tokio::test]
async fn send_of_a_ready_message_wakes_a_waiting_consumer() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "wake-send");
    let hour = SendOptions::new().delay(Duration::from_secs(3600));
    q.send(b"in an hour", &hour).await.expect("send");
    let receiving = blocked_receive(&server, &q).await;

    let now = q.send(b"now", &SendOptions::new()).await.expect("send");
    let (got, took, _) = receiving.await.expect("receive task");
    assert_eq!(got.len(), 1, "woken with a message, not timed out");
    assert_eq!(
        got[0].id, now.id,
        "the ready message, not the one due in an hour"
    );
    assert!(
        took < WAIT,
        "returned after {took:?}, when its {WAIT:?} wait ran out"
    );
}

#[tokio::test]
async fn a_batch_send_wakes_a_waiting_consumer() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "wake-batch");
    let hour = SendOptions::new().delay(Duration::from_secs(3600));
    q.send(b"in an hour", &hour).await.expect("send");
    let receiving = blocked_receive(&server, &q).await;

    let batch = [delayq::Message::new("now", SendOptions::new())];
    let sent = q.send_batch(&batch).await.expect("send batch");
    let (got, took, _) = receiving.await.expect("receive task");
    assert_eq!(got.len(), 1, "woken with a message, not timed out");
    assert_eq!(got[0].id, sent[0].id, "the batch's ready message");
    assert!(
        took < WAIT,
        "returned after {took:?}, when its {WAIT:?} wait ran out"
    );
}

#[tokio::test]
async fn reschedule_to_an_earlier_time_wakes_a_waiting_consumer() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "wake-reschedule");
    let in_hours = |h: u64| SendOptions::new().delay(Duration::from_secs(3600 * h));
    q.send(b"first", &in_hours(1)).await.expect("send");
    let second = q.send(b"second", &in_hours(2)).await.expect("send");
    let receiving = blocked_receive(&server, &q).await;

    let due = q
        .reschedule(&second.id, Schedule::After(Duration::from_millis(300)))
        .await
        .expect("reschedule");
    let (got, took, received_at) = receiving.await.expect("receive task");
    assert_eq!(got.len(), 1, "woken with a message, not timed out");
    assert_eq!(got[0].id, second.id, "the rescheduled message");
    assert_eq!(got[0].due_ms, due);
    assert!(received_at >= due, "delivered before its new due time");
    assert!(
        took < WAIT,
        "returned after {took:?}, when its {WAIT:?} wait ran out"
    );
}
