//! Input checks: bad names, ids, schedules, options and payloads are rejected with a typed
//! error before anything reaches Redis, so nothing is written.

use std::time::Duration;

use delayq::{
    Backoff, CancelOutcome, Config, DelayQ, Error, InvalidInput, Message, Queue, ReceiveOptions,
    Schedule, SendOptions, State, MAX_BATCH, MAX_DELAY,
};

use crate::common::*;

const TEN_YEARS_AND_A_BIT: Duration = MAX_DELAY.saturating_add(Duration::from_millis(1));
const ONE_MIB: usize = 1024 * 1024;

/// The input error of `result`; panics if it succeeded or failed some other way.
fn invalid<T>(what: &str, result: delayq::Result<T>) -> InvalidInput {
    match result {
        Err(Error::Invalid(e)) => e,
        Err(other) => panic!("{what}: expected invalid input, got {other:?}"),
        Ok(_) => panic!("{what}: accepted"),
    }
}

fn assert_option_error<T>(what: &str, result: delayq::Result<T>) {
    let e = invalid(what, result);
    assert!(matches!(e, InvalidInput::Option(_)), "{what}: {e:?}");
}

fn assert_schedule_error<T>(what: &str, result: delayq::Result<T>) {
    let e = invalid(what, result);
    assert!(matches!(e, InvalidInput::Schedule(_)), "{what}: {e:?}");
}

fn assert_id_error<T>(what: &str, result: delayq::Result<T>, id: &str) {
    match invalid(what, result) {
        InvalidInput::MessageId { id: rejected, .. } => assert_eq!(rejected, id, "{what}"),
        other => panic!("{what}: expected a message id error, got {other:?}"),
    }
}

/// Nothing at all was written to the server (but the client's announcement of itself in
/// the registry of processes, made by any call that reaches Redis).
fn assert_nothing_written(server: &RedisServer) {
    let keys = server.cli(&["KEYS", "*"]);
    let written: Vec<&str> = keys.lines().filter(|k| *k != "dq:processes").collect();
    assert!(written.is_empty(), "keys were written: {written:?}");
}

fn bad_ids() -> Vec<String> {
    vec![
        String::new(),
        "x".repeat(129),
        "a b".into(),
        "x{y}".into(),
        "line\n".into(),
    ]
}

async fn empty_queue() -> (RedisServer, Queue) {
    let (server, dq) = setup().await;
    let q = queue(&dq, "input");
    (server, q)
}

#[tokio::test]
async fn bad_queue_names_are_rejected() {
    let (_server, dq) = setup().await;
    let long = "x".repeat(65);
    for name in ["", long.as_str(), "a b", "x{y}", "a:b", "ünï"] {
        match invalid(&format!("queue {name:?}"), dq.queue(name)) {
            InvalidInput::QueueName { name: rejected, .. } => assert_eq!(rejected, name),
            other => panic!("queue {name:?}: {other:?}"),
        }
    }
    let longest = "x".repeat(64);
    for name in [longest.as_str(), "a.b_c-1"] {
        assert_eq!(queue(&dq, name).name().as_str(), name);
    }
}

#[tokio::test]
async fn bad_caller_ids_are_rejected_and_nothing_is_written() {
    let (server, q) = empty_queue().await;
    let mut ids = bad_ids();
    ids.push("123-456".into()); // reserved for generated ids
    for id in &ids {
        let options = SendOptions::new().id(id.as_str());
        assert_id_error("send", q.send(b"x", &options).await, id);
        let batch = [
            Message::new("ok", SendOptions::new()),
            Message::new("x", options),
        ];
        assert_id_error("send_batch", q.send_batch(&batch).await, id);
    }
    assert_nothing_written(&server);

    let longest = "x".repeat(128);
    let sent = q
        .send(b"x", &SendOptions::new().id(longest.as_str()))
        .await
        .expect("a 128-byte id is fine");
    assert_eq!(sent.id, longest);
}

#[tokio::test]
async fn absurd_schedules_are_rejected() {
    let (server, q) = empty_queue().await;
    let eleven_years_ms = 11 * 366 * 24 * 3600 * 1000;
    let absurd = [
        SendOptions::new().delay(TEN_YEARS_AND_A_BIT),
        SendOptions::new().delay(Duration::MAX),
        SendOptions::new().deliver_at(u64::MAX),
        SendOptions::new().deliver_at(now_ms() + eleven_years_ms),
        SendOptions::new().backoff(Backoff::fixed(Duration::MAX)),
        SendOptions::new().backoff(Backoff::exponential(Duration::from_secs(1), Duration::MAX)),
    ];
    for options in &absurd {
        assert_schedule_error(&format!("{options:?}"), q.send(b"x", options).await);
    }
    assert_nothing_written(&server);

    // Ten years is the limit, and a message held there cannot be moved past it either.
    let sent = q
        .send(b"x", &SendOptions::new().delay(MAX_DELAY).id("far"))
        .await
        .expect("a delay of MAX_DELAY is fine");
    let due = sent.due_ms.expect("due");
    for schedule in [Schedule::After(Duration::MAX), Schedule::At(u64::MAX)] {
        assert_schedule_error("reschedule", q.reschedule("far", schedule).await);
    }
    assert_eq!(
        q.get("far").await.expect("get").expect("exists").due_ms,
        due
    );

    // Leases and retry delays are held to the same limit; the delivery is left as it was.
    q.reschedule("far", Schedule::Now)
        .await
        .expect("reschedule");
    let mut consumer = q.consumer().await.expect("consumer");
    let too_long = receiving(1, Duration::MAX, Duration::ZERO);
    assert_schedule_error("receive", consumer.receive(&too_long).await);
    let mut d = receive_one(&mut consumer, Duration::from_secs(30)).await;
    assert_schedule_error("nack", q.nack(&d, "x", Some(Duration::MAX)).await);
    assert_schedule_error("extend", q.extend(&mut d, Duration::MAX).await);
    let info = q.get("far").await.expect("get").expect("exists");
    assert_eq!(info.state, State::InFlight);
    assert_eq!(info.lease_deadline_ms, Some(d.lease_deadline_ms));
    q.ack(&d).await.expect("ack");
}

#[tokio::test]
async fn out_of_range_options_are_rejected() {
    let (server, q) = empty_queue().await;
    let exp = Backoff::exponential(Duration::from_secs(1), Duration::from_secs(60));
    let bad = [
        SendOptions::new().max_attempts(0),
        SendOptions::new().backoff(exp.with_factor(0)),
        SendOptions::new().backoff(exp.with_jitter(101)),
    ];
    for options in &bad {
        assert_option_error(&format!("{options:?}"), q.send(b"x", options).await);
    }
    assert_option_error("empty batch", q.send_batch(&[]).await);
    let too_many = vec![Message::new("x", SendOptions::new()); MAX_BATCH + 1];
    assert_option_error("batch over the limit", q.send_batch(&too_many).await);
    assert_nothing_written(&server);

    // The edges of each range are accepted.
    let edges = [
        SendOptions::new().max_attempts(u16::MAX),
        SendOptions::new().backoff(exp.with_factor(1).with_jitter(100)),
    ];
    for options in &edges {
        q.send(b"x", options).await.expect("send at the edge");
    }
    let full = vec![Message::new("x", SendOptions::new()); MAX_BATCH];
    let sent = q.send_batch(&full).await.expect("a full batch");
    assert_eq!(sent.len(), MAX_BATCH);
}

#[tokio::test]
async fn bad_receive_and_batch_arguments_are_rejected() {
    let (_server, q) = empty_queue().await;
    q.send(b"x", &SendOptions::new()).await.expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let lease = Duration::from_secs(30);
    for options in [
        receiving(0, lease, Duration::ZERO),
        receiving(MAX_BATCH + 1, lease, Duration::ZERO),
        receiving(1, Duration::ZERO, Duration::ZERO),
    ] {
        assert_option_error(&format!("{options:?}"), consumer.receive(&options).await);
    }
    assert_eq!(counts(&q).await, [0, 1, 0, 0], "nothing was claimed");

    let most = ReceiveOptions {
        max: MAX_BATCH,
        ..ReceiveOptions::default()
    };
    let got = consumer.receive(&most).await.expect("receive");
    assert_eq!(got.len(), 1);
    assert_option_error("ack_many", q.ack_many(&[]).await);
    assert_option_error("extend_many", q.extend_many(&mut [], lease).await);
    assert_option_error("release", q.release(&[]).await);
    for limit in [0, MAX_BATCH + 1] {
        assert_option_error("list", q.dead_letters().list(0, limit).await);
    }
    q.ack(&got[0]).await.expect("ack");
}

#[tokio::test]
async fn oversized_payloads_are_rejected_and_nothing_is_written() {
    let (server, q) = empty_queue().await;
    let too_big = vec![7u8; ONE_MIB + 1];
    let rejected = [
        invalid("send", q.send(&too_big, &SendOptions::new()).await),
        invalid(
            "send_batch",
            q.send_batch(&[
                Message::new("small", SendOptions::new()),
                Message::new(too_big.clone(), SendOptions::new()),
            ])
            .await,
        ),
    ];
    for e in rejected {
        assert_eq!(
            e,
            InvalidInput::PayloadTooLarge {
                size: ONE_MIB + 1,
                limit: ONE_MIB
            }
        );
    }
    assert!(is_empty(&q).await);
    assert_nothing_written(&server);

    // The limit is configurable.
    let small = DelayQ::connect_with(&server.url(), Config::default().max_payload_bytes(16))
        .await
        .expect("connect");
    let sq = queue(&small, "input");
    let e = invalid("send", sq.send([0u8; 17], &SendOptions::new()).await);
    assert_eq!(
        e,
        InvalidInput::PayloadTooLarge {
            size: 17,
            limit: 16
        }
    );
    assert_nothing_written(&server);
    let sent = sq.send([0u8; 16], &SendOptions::new()).await.expect("send");
    let info = sq.get(&sent.id).await.expect("get").expect("exists");
    assert_eq!(info.payload, [0u8; 16]);
}

#[tokio::test]
async fn one_bad_message_fails_the_whole_batch() {
    let (server, q) = empty_queue().await;
    let bad = [
        Message::new("x", SendOptions::new().id("a b")),
        Message::new("x", SendOptions::new().max_attempts(0)),
        Message::new("x", SendOptions::new().delay(Duration::MAX)),
        Message::new(vec![0u8; ONE_MIB + 1], SendOptions::new()),
    ];
    for last in bad {
        let mut batch: Vec<Message> = (0..5)
            .map(|i| Message::new(format!("good {i}"), SendOptions::new().id(format!("g{i}"))))
            .collect();
        batch.push(last.clone());
        invalid(
            &format!("batch ending in {:?}", last.options),
            q.send_batch(&batch).await,
        );
    }
    assert!(is_empty(&q).await);
    assert_nothing_written(&server);
}

#[tokio::test]
async fn malformed_lookup_ids_are_rejected() {
    let (server, q) = empty_queue().await;
    let dead = q.dead_letters();
    for id in &bad_ids() {
        assert_id_error("cancel", q.cancel(id).await, id);
        assert_id_error("get", q.get(id).await, id);
        assert_id_error("reschedule", q.reschedule(id, Schedule::Now).await, id);
        assert_id_error("requeue", dead.requeue(id).await, id);
        assert_id_error("purge", dead.purge(id).await, id);
    }
    assert_nothing_written(&server);
}

#[tokio::test]
async fn unknown_ids_are_not_found() {
    let (_server, q) = empty_queue().await;
    // Some real messages around, and one that came and went.
    q.send(b"x", &SendOptions::new().id("known"))
        .await
        .expect("send");
    q.send(b"x", &SendOptions::new().delay(Duration::from_secs(60)))
        .await
        .expect("send");
    let gone = q.send(b"x", &SendOptions::new()).await.expect("send");
    assert_eq!(
        q.cancel(&gone.id).await.expect("cancel"),
        CancelOutcome::Cancelled(State::Ready)
    );

    let dead = q.dead_letters();
    let unknown = [
        "unknown",
        "123-456",
        "0-0",
        "99999999999999999999-1",
        "1-99999999999999999999",
        gone.id.as_str(),
    ];
    for id in unknown {
        assert_eq!(q.get(id).await.expect("get"), None, "{id}");
        assert_eq!(
            q.cancel(id).await.expect("cancel"),
            CancelOutcome::NotFound,
            "{id}"
        );
        match q.reschedule(id, Schedule::Now).await {
            Err(Error::NotFound { id: missing }) => assert_eq!(missing, id),
            other => panic!("reschedule {id}: {other:?}"),
        }
        assert!(!dead.requeue(id).await.expect("requeue"), "{id}");
        assert!(!dead.purge(id).await.expect("purge"), "{id}");
    }
    assert_eq!(counts(&q).await, [1, 1, 0, 0], "nothing changed");
}

#[tokio::test]
async fn a_wait_of_duration_max_means_wait_as_long_as_it_takes() {
    let (_server, q) = empty_queue().await;
    let sent = q.send(b"x", &SendOptions::new()).await.expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let forever = receiving(1, Duration::from_secs(30), Duration::MAX);
    let got = consumer.receive(&forever).await.expect("receive");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, sent.id);
}

#[tokio::test]
async fn worker_concurrency_beyond_the_limit_is_rejected() {
    let (_server, q) = empty_queue().await;
    let build = |n: usize| {
        delayq::worker::WorkerBuilder::new(q.clone())
            .concurrency(n)
            .build(|_d| async { Ok::<(), String>(()) })
            .map(drop)
    };
    assert_option_error("concurrency usize::MAX", build(usize::MAX));
    assert_option_error("concurrency 0", build(0));
    build(delayq::worker::MAX_CONCURRENCY).expect("the largest concurrency is accepted");
}

#[tokio::test]
async fn a_backoff_list_of_none_or_too_many_delays_is_rejected() {
    let (_server, q) = empty_queue().await;
    let send = |backoff: Backoff| {
        let q = q.clone();
        async move {
            q.send(b"x", &SendOptions::new().backoff(backoff))
                .await
                .map(drop)
        }
    };
    let nine = [Duration::from_secs(1); delayq::MAX_BACKOFF_STEPS + 1];
    assert_option_error("no delays", send(Backoff::steps(&[])).await);
    assert_option_error("nine delays", send(Backoff::steps(&nine)).await);
    assert_option_error(
        "jitter 101 %",
        send(Backoff::linear(Duration::from_secs(1), Duration::from_secs(9)).with_jitter(101))
            .await,
    );
    send(Backoff::steps(&nine[..delayq::MAX_BACKOFF_STEPS]))
        .await
        .expect("eight delays are accepted");
    assert_eq!(counts(&q).await, [0, 1, 0, 0], "only the valid send wrote");
}

#[tokio::test]
async fn a_handler_timeout_under_a_millisecond_is_rejected() {
    let (_server, q) = empty_queue().await;
    let build = |timeout: Duration| {
        delayq::worker::WorkerBuilder::new(q.clone())
            .handler_timeout(timeout)
            .build(|_d| async { Ok::<(), String>(()) })
            .map(drop)
    };
    assert_option_error("timeout 0", build(Duration::ZERO));
    assert_option_error("timeout 500 µs", build(Duration::from_micros(500)));
    let too_long = build(Duration::MAX);
    assert!(
        matches!(too_long, Err(delayq::Error::Invalid(_))),
        "timeout Duration::MAX: {too_long:?}"
    );
    build(Duration::from_millis(1)).expect("1 ms is accepted");
}

#[tokio::test]
async fn an_extend_shorter_than_a_millisecond_is_rejected() {
    let (_server, q) = empty_queue().await;
    q.send(b"x", &SendOptions::new()).await.expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let mut d = receive_one(&mut consumer, Duration::from_secs(30)).await;
    let deadline = d.lease_deadline_ms;
    for lease in [Duration::ZERO, Duration::from_micros(999)] {
        assert_option_error(&format!("extend({lease:?})"), q.extend(&mut d, lease).await);
        let mut many = [d.clone()];
        assert_option_error("extend_many", q.extend_many(&mut many, lease).await);
    }
    assert_eq!(d.lease_deadline_ms, deadline, "the lease is as it was");
    q.ack(&d).await.expect("the lease is still valid");
}

#[tokio::test]
async fn a_zero_base_exponential_backoff_retries_at_once_however_many_attempts() {
    let (_server, q) = empty_queue().await;
    // 255^attempt overflows a double after 128 attempts; 0 * infinity must not become NaN.
    let backoff = Backoff::exponential(Duration::ZERO, Duration::from_secs(1)).with_factor(255);
    let options = SendOptions::new().backoff(backoff).max_attempts(200);
    q.send(b"x", &options).await.expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let wait = receiving(1, Duration::from_secs(30), Duration::from_secs(5));
    for attempt in 1..=150 {
        let got = consumer.receive(&wait).await.expect("receive");
        assert_eq!(got.len(), 1, "attempt {attempt} delivered within the wait");
        assert_eq!(got[0].attempt, attempt);
        let due_now = now_ms();
        assert!(
            got[0].due_ms.abs_diff(due_now) < 5_000,
            "attempt {attempt} due at {} ms, now {due_now} ms",
            got[0].due_ms
        );
        q.nack(&got[0], "again", None).await.expect("nack");
    }
}

#[tokio::test]
async fn a_batch_over_the_byte_budget_is_rejected_and_nothing_is_written() {
    let (server, q) = empty_queue().await;
    let per_call = delayq::MAX_BATCH_BYTES;
    let count = per_call / ONE_MIB + 1;
    let huge: Vec<Message> = (0..count)
        .map(|i| {
            Message::new(
                vec![1u8; ONE_MIB],
                SendOptions::new().id(format!("big-{i}")),
            )
        })
        .collect();
    assert_option_error("a batch with caller ids", q.send_batch(&huge).await);
    let generated: Vec<Message> = (0..count)
        .map(|_| Message::new(vec![1u8; ONE_MIB], SendOptions::new()))
        .collect();
    assert_option_error("a batch with generated ids", q.send_batch(&generated).await);
    assert_nothing_written(&server);
    q.send_batch(&generated[..count - 1])
        .await
        .expect("a batch within the budget");
}

#[tokio::test]
async fn a_generated_id_with_a_leading_zero_names_no_message() {
    let (_server, q) = empty_queue().await;
    let sent = q.send(b"x", &SendOptions::new()).await.expect("send");
    let pending = q
        .send(b"y", &SendOptions::new().delay(Duration::from_secs(60)))
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let d = receive_one(&mut consumer, Duration::from_secs(30)).await;
    assert_eq!(d.id, sent.id);
    for id in [&sent.id, &pending.id] {
        let alias = format!("0{id}");
        assert_eq!(q.get(&alias).await.expect("get"), None, "{alias}");
        assert_eq!(
            q.cancel(&alias).await.expect("cancel"),
            CancelOutcome::NotFound,
            "{alias}"
        );
        assert!(
            matches!(
                q.reschedule(&alias, Schedule::Now).await,
                Err(Error::NotFound { .. })
            ),
            "{alias}"
        );
    }
    q.ack(&d).await.expect("ack");
}

#[tokio::test]
async fn a_dead_letter_page_far_beyond_the_end_is_empty() {
    let (_server, q) = empty_queue().await;
    q.send(b"x", &SendOptions::new().max_attempts(1))
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let d = receive_one(&mut consumer, Duration::from_secs(30)).await;
    q.nack(&d, "boom", None).await.expect("nack");
    for offset in [1, 1 << 53, i64::MAX as u64, u64::MAX] {
        let page = q.dead_letters().list(offset, 10).await.expect("a page");
        assert!(page.is_empty(), "offset {offset}");
    }
    assert_eq!(q.dead_letters().list(0, 10).await.expect("page").len(), 1);
}

/// A receipt is the client's to keep, and to edit: its id and its explicit-id flag must
/// agree with the message it holds, or the ack is refused and changes nothing. Taking them
/// on trust let an edited receipt delete another pending message's index entry (it could no
/// longer be found or cancelled) or leave its own behind (its id a duplicate for ever).
#[tokio::test]
async fn an_edited_receipt_acks_nothing_and_touches_no_other_message() {
    let server = redis_fixture::RedisServer::start();
    let dq = DelayQ::connect(&server.url()).await.expect("connect");
    let q = queue(&dq, "forged");
    for id in ["a", "b"] {
        let delay = if id == "a" {
            Duration::ZERO
        } else {
            Duration::from_secs(3600)
        };
        q.send(id, &SendOptions::new().id(id).delay(delay))
            .await
            .expect("send");
    }
    let mut consumer = q.consumer().await.expect("consumer");
    let got = consumer
        .receive(&receiving(1, Duration::from_secs(60), Duration::ZERO))
        .await
        .expect("receive");
    let real = got[0].receipt().to_string();
    assert_eq!(&real[24..], "ea", "token, seq, explicit flag, id");
    let other_id: delayq::Receipt = format!("{}b", &real[..25]).parse().expect("parses");
    let generated: delayq::Receipt = format!("{}ga", &real[..24]).parse().expect("parses");
    for forged in [&other_id, &generated] {
        assert_eq!(
            q.ack_receipts(std::slice::from_ref(forged))
                .await
                .expect("ack"),
            [false],
            "{forged} acked"
        );
    }
    let a = q.get("a").await.expect("get").expect("a is still there");
    assert_eq!(a.state, State::InFlight, "a's lease untouched");
    assert!(
        matches!(
            q.cancel("b").await.expect("cancel"),
            CancelOutcome::Cancelled(_)
        ),
        "b can still be found and cancelled"
    );
    // The real receipt still acks; then "a" is gone and may be sent again.
    let real: delayq::Receipt = real.parse().expect("parses");
    assert_eq!(q.ack_receipts(&[real]).await.expect("ack"), [true]);
    let again = q
        .send("a2", &SendOptions::new().id("a"))
        .await
        .expect("send");
    assert!(!again.duplicate, "a's index entry went with its ack");
}
