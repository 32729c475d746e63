//! When messages arrive: a wait outlives the client's response timeout, delayed
//! messages are never delivered early, and a consumer asleep is woken by whatever makes a
//! message due sooner, whatever other consumers are doing.

use std::time::{Duration, Instant};

use delayq::{Config, DelayQ, Delivery, Message, Queue, Schedule, SendOptions};

use crate::common::*;

/// How long the woken consumers would wait.
const WAIT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_wait_outlives_the_response_timeout() {
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
        .expect("a 3 s wait outlives the 500 ms response timeout");
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
/// consumer listening for wake-ups.
async fn blocked_receive(server: &RedisServer, q: &Queue) -> tokio::task::JoinHandle<Received> {
    let receiving = receive_in_task(q, WAIT).await;
    wait_until(Duration::from_secs(5), "the consumer to listen", || async {
        listening(server, q.name().as_str()) == 1
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

/// Queue "wake-workers" through a client of its own, as on another host.
async fn other_client(server: &RedisServer) -> Queue {
    let other = DelayQ::connect(&server.url()).await.expect("connect");
    queue(&other, "wake-workers")
}

/// Starts a receive of up to one message on a consumer of its own, in a task.
async fn receive_in_task(q: &Queue, wait: Duration) -> tokio::task::JoinHandle<Received> {
    let mut consumer = q.consumer().await.expect("consumer");
    tokio::spawn(async move {
        let started = Instant::now();
        let got = consumer
            .receive(&receiving(1, Duration::from_secs(30), wait))
            .await
            .expect("receive");
        (got, started.elapsed(), now_ms())
    })
}

#[tokio::test]
async fn every_idle_consumer_hears_a_send_while_another_consumer_is_busy() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "wake-many");
    // The busy consumer gets its message by its timer, not by a wake-up, and then stays
    // busy (never receives again) while holding on to its consumer.
    let mut busy = q.consumer().await.expect("consumer");
    q.send(
        b"first",
        &SendOptions::new().delay(Duration::from_millis(300)),
    )
    .await
    .expect("send");
    let first = busy
        .receive(&receiving(1, Duration::from_secs(30), WAIT))
        .await
        .expect("receive");
    assert_eq!(first.len(), 1);

    // Each idle consumer on a client of its own, as on another host.
    let mut idle = Vec::new();
    for _ in 0..2 {
        let other = DelayQ::connect(&server.url()).await.expect("connect");
        idle.push(receive_in_task(&queue(&other, "wake-many"), WAIT).await);
    }
    wait_until(
        Duration::from_secs(5),
        "both idle consumers to listen",
        || async { listening(&server, "wake-many") >= 3 },
    )
    .await;
    let batch = vec![
        Message::new("a", SendOptions::new()),
        Message::new("b", SendOptions::new()),
    ];
    q.send_batch(&batch).await.expect("send");
    for receiving in idle {
        let (got, took, _) = receiving.await.expect("receive task");
        assert_eq!(got.len(), 1, "each idle consumer woke and took one");
        assert!(
            took < WAIT,
            "woken after {took:?}, when its {WAIT:?} wait ran out"
        );
    }
    drop(busy);
}

#[tokio::test]
async fn an_idle_worker_hears_a_send_while_another_worker_is_saturated() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "wake-workers");
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let hold = std::sync::Arc::new(tokio::sync::Notify::new());
    let worker = |concurrency, q: &Queue| {
        let (started_tx, hold) = (started_tx.clone(), hold.clone());
        delayq::worker::WorkerBuilder::new(q.clone())
            .concurrency(concurrency)
            .batch_size(1)
            .build(move |d: Delivery| {
                let (started_tx, hold) = (started_tx.clone(), hold.clone());
                async move {
                    let _ = started_tx.send((d.id.clone(), Instant::now()));
                    if d.payload == b"hold" {
                        hold.notified().await;
                    }
                    Ok::<(), String>(())
                }
            })
            .expect("build worker")
    };
    // The saturated worker takes its one message by timer and keeps its only slot busy.
    let saturated = spawn_worker(worker(1, &q));
    q.send(
        b"hold",
        &SendOptions::new().delay(Duration::from_millis(300)),
    )
    .await
    .expect("send");
    let held = tokio::time::timeout(Duration::from_secs(5), started.recv())
        .await
        .expect("the saturated worker starts its handler")
        .expect("channel open");
    let idle = spawn_worker(worker(1, &other_client(&server).await));
    wait_until(
        Duration::from_secs(5),
        "the idle worker to listen",
        || async { listening(&server, "wake-workers") >= 2 },
    )
    .await;

    let sent_at = Instant::now();
    let sent = q.send(b"now", &SendOptions::new()).await.expect("send");
    let (id, handled_at) = tokio::time::timeout(Duration::from_secs(10), started.recv())
        .await
        .expect("the message is handled")
        .expect("channel open");
    assert_eq!(id, sent.id);
    let took = handled_at - sent_at;
    assert!(
        took < Duration::from_secs(4),
        "handled {took:?} after the send: the idle worker slept through it"
    );
    hold.notify_one();
    let _ = held;
    idle.shutdown().await;
    saturated.shutdown().await;
}

#[tokio::test]
async fn wake_ups_are_heard_again_after_redis_restarts() {
    let (mut server, dq) = setup().await;
    let q = queue(&dq, "wake-restart");
    let mut consumer = q.consumer().await.expect("consumer");
    server.restart();
    // The first calls after the restart may meet the dropped connection.
    let deadline = Instant::now() + Duration::from_secs(10);
    let now_only = receiving(1, Duration::from_secs(30), Duration::ZERO);
    while let Err(e) = consumer.receive(&now_only).await {
        assert!(Instant::now() < deadline, "Redis did not answer again: {e}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let receiving = tokio::spawn(async move {
        let started = Instant::now();
        let got = consumer
            .receive(&receiving(1, Duration::from_secs(30), WAIT))
            .await
            .expect("receive");
        (got, started.elapsed())
    });
    wait_until(
        Duration::from_secs(5),
        "the consumer to listen again",
        || async { listening(&server, "wake-restart") == 1 },
    )
    .await;
    q.send(b"now", &SendOptions::new()).await.expect("send");
    let (got, took) = receiving.await.expect("receive task");
    assert_eq!(got.len(), 1);
    assert!(
        took < WAIT,
        "woken after {took:?}, when its {WAIT:?} wait ran out"
    );
}

#[tokio::test]
async fn consumers_of_one_queue_share_one_connection_for_wake_ups() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "shared");
    let clients = |server: &RedisServer| server.cli(&["CLIENT", "LIST"]).lines().count();
    let first = q.consumer().await.expect("consumer");
    let before = clients(&server);
    let mut waiting = Vec::new();
    for _ in 0..50 {
        waiting.push(receive_in_task(&q, WAIT).await);
    }
    assert_eq!(
        clients(&server),
        before,
        "50 more consumers, no more connections"
    );
    q.send_batch(&vec![Message::new("x", SendOptions::new()); 50])
        .await
        .expect("send");
    for receiving in waiting {
        let (got, took, _) = receiving.await.expect("receive task");
        assert_eq!(got.len(), 1);
        assert!(took < WAIT, "woken after {took:?}");
    }
    drop(first);
}
