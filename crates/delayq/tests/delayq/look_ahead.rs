//! Claims that look ahead (`Config::look_ahead`): a consumer takes what comes due within its
//! look-ahead and hands each message over at its due time, never before; one claim serves
//! several messages due close together; a message taken ahead is in flight for cancel,
//! reschedule and upsert; what was taken ahead and not handed over is released for its due
//! time (by `release_taken_ahead`, a dropped consumer, a worker's shutdown); a group's
//! messages are taken only once due; and the setting is checked.

use std::future::Future;
use std::time::Duration;

use delayq::worker::WorkerBuilder;
use delayq::{
    CancelOutcome, Config, DelayQ, Error, Message, OnDuplicate, Queue, SendOptions, State,
    MAX_LOOK_AHEAD,
};
use tokio::time::Instant;

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

async fn client(server: &RedisServer, config: Config) -> DelayQ {
    DelayQ::connect_with(&server.url(), config)
        .await
        .expect("connect")
}

async fn state(q: &Queue, id: &str) -> Option<State> {
    q.get(id).await.expect("get").map(|m| m.state)
}

/// Waits until message `id` is in `wanted` state.
async fn wait_for_state(q: &Queue, id: &str, wanted: State) {
    wait_until(Duration::from_secs(5), "the message's state", || async {
        state(q, id).await == Some(wanted)
    })
    .await;
}

/// Sends message `id` due `delay` from now; returns its due time (ms).
async fn send_due_in(q: &Queue, id: &str, payload: &[u8], delay: Duration) -> u64 {
    q.send(payload, &SendOptions::new().id(id).delay(delay))
        .await
        .expect("send");
    q.get(id).await.expect("get").expect("pending").due_ms
}

/// A receive of `consumer` that stops once it took message `id` ahead: it returns nothing.
async fn take_ahead(consumer: &mut delayq::Consumer, q: &Queue, id: &str) {
    let got = consumer
        .receive_until(
            &receiving(10, LEASE, Duration::from_secs(5)),
            once_in_flight(q, id),
        )
        .await
        .expect("receive");
    assert!(got.is_empty(), "handed over before its due time");
}

/// Message `id`, checked to be pending again after a release, with no attempt counted.
async fn pending_again(q: &Queue, id: &str) -> delayq::MessageInfo {
    let info = q.get(id).await.expect("get").expect("pending again");
    assert_eq!(info.state, State::Delayed);
    assert_eq!(info.attempts, 0);
    info
}

/// A future that completes once message `id` is in flight (taken by a claim).
fn once_in_flight<'a>(q: &'a Queue, id: &'a str) -> impl Future<Output = ()> + 'a {
    wait_for_state(q, id, State::InFlight)
}

#[tokio::test]
async fn messages_taken_ahead_are_handed_over_at_their_due_time_by_few_claims() {
    let server = RedisServer::start();
    let config = Config::default()
        .look_ahead(Duration::from_millis(20))
        .claim_spacing(Duration::from_millis(15));
    let dq = client(&server, config).await;
    let q = queue(&dq, "ahead");
    let mut consumer = q.consumer().await.expect("consumer");
    // 30 messages due 5 ms apart, as W3's one by one. Claimed as each comes due that is
    // 30 claims; taking what comes due within 20 ms, a claim every 15 ms or so.
    let batch: Vec<Message> = (0..30)
        .map(|i| {
            let delay = Duration::from_millis(300 + 5 * i);
            Message::new(format!("m{i}"), SendOptions::new().delay(delay))
        })
        .collect();
    q.send_batch(&batch).await.expect("send batch");
    let calls_before = command_calls(&server, "fcall");
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < 30 && Instant::now() < deadline {
        let batch = consumer
            .receive(&receiving(100, LEASE, Duration::from_secs(2)))
            .await
            .expect("receive");
        let handed_at = now_ms();
        for d in &batch {
            assert!(
                handed_at >= d.due_ms,
                "{:?} handed over at {handed_at}, before its due time {}",
                String::from_utf8_lossy(&d.payload),
                d.due_ms
            );
            // Its lease runs from its due time on.
            assert!(d.lease_deadline_ms >= d.due_ms + LEASE.as_millis() as u64);
        }
        got.extend(batch);
    }
    let claims = command_calls(&server, "fcall") - calls_before;
    let mut names = payloads(&got);
    names.sort();
    let mut expected: Vec<String> = (0..30).map(|i| format!("m{i}")).collect();
    expected.sort();
    assert_eq!(names, expected, "each message delivered once");
    assert!(
        claims <= 15,
        "30 messages due 5 ms apart took {claims} claims with a look-ahead of 20 ms"
    );
    q.ack_many(&got).await.expect("ack");
}

#[tokio::test]
async fn without_look_ahead_a_message_is_not_taken_before_it_is_due() {
    let server = RedisServer::start();
    let dq = client(&server, Config::default().look_ahead(Duration::ZERO)).await;
    let q = queue(&dq, "no-ahead");
    let sent = q
        .send(
            b"later",
            &SendOptions::new().delay(Duration::from_millis(400)),
        )
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let delivery = receive_one(&mut consumer, LEASE).await;
    assert!(now_ms() >= delivery.due_ms);
    assert_eq!(delivery.id, sent.id);
}

#[tokio::test]
async fn a_message_taken_ahead_is_in_flight_for_cancel_reschedule_and_upsert() {
    let server = RedisServer::start();
    let dq = client(&server, looking_ahead()).await;
    let q = queue(&dq, "ahead-ops");
    let id = "order-1";
    let due_ms = send_due_in(&q, id, b"v1", Duration::from_millis(600)).await;
    let mut consumer = q.consumer().await.expect("consumer");
    let receiving_task = tokio::spawn(async move {
        let got = consumer
            .receive(&receiving(10, LEASE, Duration::from_secs(5)))
            .await
            .expect("receive");
        (now_ms(), got)
    });
    once_in_flight(&q, id).await;
    // Taken ahead, it counts as being delivered.
    assert_eq!(
        q.cancel(id).await.expect("cancel"),
        CancelOutcome::NotCancelled(State::InFlight)
    );
    match q
        .reschedule(id, delayq::Schedule::After(Duration::from_secs(60)))
        .await
    {
        Err(Error::WrongState { state, .. }) => assert_eq!(state, State::InFlight),
        other => panic!("a reschedule of a message taken ahead answered {other:?}"),
    }
    let replace = SendOptions::new()
        .id(id)
        .delay(Duration::from_secs(60))
        .on_duplicate(OnDuplicate::Replace);
    let upserted = q.send(b"v2", &replace).await.expect("upsert");
    assert_eq!(upserted.replaced, Some(State::InFlight));
    // The message taken ahead is still delivered, at its due time, as it was sent.
    let (handed_at, got) = receiving_task.await.expect("receive task");
    assert_eq!(payloads(&got), ["v1"]);
    assert_eq!(got[0].id, id);
    assert_eq!(got[0].due_ms, due_ms);
    assert!(
        handed_at >= due_ms,
        "handed over at {handed_at}, due {due_ms}"
    );
    q.ack(&got[0]).await.expect("ack");
    // The upsert's message waits for its own time.
    let info = q.get(id).await.expect("get").expect("the upserted message");
    assert_eq!(info.state, State::Delayed);
    assert_eq!(info.payload, b"v2");
}

#[tokio::test]
async fn what_was_taken_ahead_and_not_handed_over_is_released_for_its_due_time() {
    let server = RedisServer::start();
    let dq = client(&server, looking_ahead()).await;
    let q = queue(&dq, "ahead-release");
    let id = "m";
    let due_ms = send_due_in(&q, id, b"m", Duration::from_millis(800)).await;

    // Released by the consumer: pending again, for the same due time, no attempt counted.
    let mut consumer = q.consumer().await.expect("consumer");
    take_ahead(&mut consumer, &q, id).await;
    assert_eq!(consumer.release_taken_ahead().await.expect("release"), 1);
    assert_eq!(pending_again(&q, id).await.due_ms, due_ms);

    // Released by dropping the consumer.
    take_ahead(&mut consumer, &q, id).await;
    drop(consumer);
    wait_for_state(&q, id, State::Delayed).await;

    // A consumer that does not look ahead gets it at its due time.
    let plain = client(&server, Config::default().look_ahead(Duration::ZERO)).await;
    let mut consumer = queue(&plain, "ahead-release")
        .consumer()
        .await
        .expect("consumer");
    let delivery = receive_one(&mut consumer, LEASE).await;
    assert!(now_ms() >= due_ms);
    assert_eq!(delivery.due_ms, due_ms);
    assert_eq!(delivery.attempt, 1);
}

#[tokio::test]
async fn a_worker_that_stops_releases_what_it_took_ahead() {
    let server = RedisServer::start();
    let dq = client(&server, looking_ahead()).await;
    let q = queue(&dq, "ahead-worker");
    let id = "m";
    send_due_in(&q, id, b"m", Duration::from_millis(900)).await;
    let (worker, seen) = spawn_recording_worker(WorkerBuilder::new(q.clone()).lease(LEASE));
    once_in_flight(&q, id).await;
    worker.shutdown().await;
    assert!(
        seen.ids().is_empty(),
        "not handed to the handler before due"
    );
    pending_again(&q, id).await;
}

#[tokio::test]
async fn a_groups_message_is_taken_only_once_due() {
    let server = RedisServer::start();
    let dq = client(&server, looking_ahead()).await;
    let q = queue(&dq, "ahead-group");
    let id = "g1";
    let options = SendOptions::new()
        .id(id)
        .group("tenant-a")
        .delay(Duration::from_millis(500));
    q.send(b"g", &options).await.expect("send");
    let due_ms = q.get(id).await.expect("get").expect("pending").due_ms;
    let mut consumer = q.consumer().await.expect("consumer");
    let delivery = receive_one(&mut consumer, LEASE).await;
    assert!(now_ms() >= due_ms);
    // Not taken ahead: its claim came once it was due, and its lease runs from then. (Taken
    // at once, 500 ms before due, under a look-ahead of 1 s, it would end 500 ms later.)
    let lease_ms = LEASE.as_millis() as u64;
    assert!(
        delivery.lease_deadline_ms < due_ms + lease_ms + 250,
        "lease ends {} ms after due",
        delivery.lease_deadline_ms - due_ms
    );
}

#[tokio::test]
async fn a_look_ahead_longer_than_the_most_is_refused() {
    let server = RedisServer::start();
    let too_long = MAX_LOOK_AHEAD + Duration::from_millis(1);
    let refused = DelayQ::connect_with(&server.url(), Config::default().look_ahead(too_long)).await;
    assert!(
        matches!(refused, Err(Error::Invalid(_))),
        "a look-ahead of {too_long:?} was accepted"
    );
}

/// The client settings of a test that looks ahead as far as allowed, so that what it
/// checks happens well within the look-ahead.
fn looking_ahead() -> Config {
    Config::default().look_ahead(MAX_LOOK_AHEAD)
}
