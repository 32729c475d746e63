//! Leases: what receive hands out, and how ack, nack, extend and release honour (only) a
//! lease that is still valid. Expired leases are reclaimed by the next receive and count as a
//! failed attempt.

use std::time::Duration;

use delayq::{Backoff, Consumer, Delivery, Error, Queue, SendOptions, State};

use crate::common::*;

const LONG: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_millis(150);

/// A queue and a consumer of it on a fresh server.
async fn queue_and_consumer() -> (RedisServer, Queue, Consumer) {
    let (server, dq) = setup().await;
    let q = queue(&dq, "leases");
    let consumer = q.consumer().await.expect("consumer");
    (server, q, consumer)
}

/// Waits (by this host's clock, which the local server shares) until `delivery`'s lease has
/// passed.
async fn wait_for_expiry(delivery: &Delivery) {
    let deadline = delivery.lease_deadline_ms;
    wait_until(Duration::from_secs(5), "the lease to pass", || async move {
        now_ms() > deadline
    })
    .await;
}

fn assert_lease_lost<T: std::fmt::Debug>(what: &str, result: delayq::Result<T>, id: &str) {
    match result {
        Err(Error::LeaseLost { id: lost }) => assert_eq!(lost, id, "{what}"),
        other => panic!("{what}: expected LeaseLost, got {other:?}"),
    }
}

/// Every way of settling `stale` fails with `LeaseLost`.
async fn assert_cannot_settle(q: &Queue, stale: &Delivery) {
    let mut copy = stale.clone();
    assert_lease_lost("ack", q.ack(stale).await, &stale.id);
    assert_lease_lost("nack", q.nack(stale, "late", None).await, &stale.id);
    assert_lease_lost("extend", q.extend(&mut copy, LONG).await, &stale.id);
    assert_eq!(copy.lease_deadline_ms, stale.lease_deadline_ms);
    let released = q.release(std::slice::from_ref(stale)).await;
    assert_eq!(released.expect("release"), [false]);
}

#[tokio::test]
async fn receive_claims_due_messages_under_fresh_leases() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    let mut sent = Vec::new();
    for i in 0..5 {
        sent.push(
            q.send(format!("m{i}"), &SendOptions::new())
                .await
                .expect("send"),
        );
    }
    let before = now_ms();
    let got = consumer
        .receive(&receiving(3, LONG, Duration::ZERO))
        .await
        .expect("receive");
    let after = now_ms();

    assert_eq!(got.len(), 3, "at most max");
    for (d, s) in got.iter().zip(&sent) {
        assert_eq!((&d.id, Some(d.due_ms), d.attempt), (&s.id, s.due_ms, 1));
        let lease = LONG.as_millis() as u64;
        assert!((before + lease..=after + lease).contains(&d.lease_deadline_ms));
        let info = q.get(&d.id).await.expect("get").expect("exists");
        assert_eq!(info.lease_deadline_ms, Some(d.lease_deadline_ms));
    }
    let mut tokens: Vec<u64> = got.iter().map(Delivery::token).collect();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), 3, "each delivery has its own token");
    assert_eq!(counts(&q).await, [0, 2, 3, 0]);

    // Another consumer gets the rest, and then nothing.
    let mut other = q.consumer().await.expect("consumer");
    let rest = other
        .receive(&receiving(10, LONG, Duration::ZERO))
        .await
        .expect("receive");
    let ids: Vec<&str> = rest.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, [sent[3].id.as_str(), sent[4].id.as_str()]);
    let none = other
        .receive(&receiving(10, LONG, Duration::ZERO))
        .await
        .expect("receive");
    assert!(none.is_empty());
    assert_eq!(counts(&q).await, [0, 0, 5, 0]);
}

#[tokio::test]
async fn ack_completes_a_delivery_once() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    q.send(b"x", &SendOptions::new().id("once"))
        .await
        .expect("send");
    let d = receive_one(&mut consumer, LONG).await;
    q.ack(&d).await.expect("ack");
    assert_eq!(q.get("once").await.expect("get"), None);
    assert!(is_empty(&q).await);
    assert_lease_lost("second ack", q.ack(&d).await, "once");
}

#[tokio::test]
async fn a_stale_token_cannot_settle_and_changes_nothing() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    q.send(b"x", &SendOptions::new().id("m"))
        .await
        .expect("send");
    let first = receive_one(&mut consumer, LONG).await;
    assert_eq!(
        q.release(std::slice::from_ref(&first))
            .await
            .expect("release"),
        [true]
    );
    let second = receive_one(&mut consumer, LONG).await;
    assert_eq!(second.id, "m");
    assert_ne!(second.token(), first.token());

    // `first` is stale although the message is in flight under a valid lease.
    assert_cannot_settle(&q, &first).await;
    let info = q.get("m").await.expect("get").expect("exists");
    assert_eq!(info.state, State::InFlight);
    assert_eq!(info.attempts, 1);
    assert_eq!(info.lease_deadline_ms, Some(second.lease_deadline_ms));
    assert_eq!(info.last_error, None);
    q.ack(&second).await.expect("the current holder acks");
}

#[tokio::test]
async fn a_lease_that_has_passed_cannot_be_settled() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    q.send(b"x", &SendOptions::new().id("late"))
        .await
        .expect("send");
    let d = receive_one(&mut consumer, SHORT).await;
    wait_for_expiry(&d).await;

    // Not reclaimed yet (no receive since), but the holder has lost it all the same.
    assert_cannot_settle(&q, &d).await;
    assert_eq!(counts(&q).await, [0, 0, 1, 0]);
    let info = q.get("late").await.expect("get").expect("exists");
    assert_eq!((info.state, info.attempts), (State::InFlight, 1));
    assert_eq!(info.last_error, None);
}

#[tokio::test]
async fn an_expired_lease_is_reclaimed_by_the_next_receive() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    let options = SendOptions::new().backoff(Backoff::fixed(Duration::ZERO));
    q.send(b"x", &options.id("m")).await.expect("send");
    let first = receive_one(&mut consumer, SHORT).await;

    // The second consumer waits for the lease to expire by itself.
    let mut other = q.consumer().await.expect("consumer");
    let second = receive_one(&mut other, LONG).await;
    assert_eq!((second.id.as_str(), second.attempt), ("m", 2));
    assert!(now_ms() >= first.lease_deadline_ms);
    let info = q.get("m").await.expect("get").expect("exists");
    assert_eq!(info.attempts, 2);
    assert_eq!(info.last_error.as_deref(), Some("lease expired"));

    assert_lease_lost("ack by the first holder", q.ack(&first).await, "m");
    q.ack(&second).await.expect("ack by the second holder");
    assert!(is_empty(&q).await);
}

#[tokio::test]
async fn an_expired_lease_is_retried_by_backoff() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    let backoff = Backoff::fixed(Duration::from_secs(10));
    q.send(b"x", &SendOptions::new().id("m").backoff(backoff))
        .await
        .expect("send");
    let d = receive_one(&mut consumer, SHORT).await;
    wait_for_expiry(&d).await;

    let got = consumer
        .receive(&receiving(1, LONG, Duration::ZERO))
        .await
        .expect("receive");
    let after = now_ms();
    assert!(got.is_empty(), "the retry waits for its backoff");
    let info = q.get("m").await.expect("get").expect("exists");
    assert_eq!((info.state, info.attempts), (State::Delayed, 1));
    assert_eq!(info.last_error.as_deref(), Some("lease expired"));
    let low = d.lease_deadline_ms + 10_000;
    assert!(
        (low..=after + 10_000).contains(&info.due_ms),
        "due {} outside [{low}, {}]",
        info.due_ms,
        after + 10_000
    );
}

#[tokio::test]
async fn an_expired_lease_on_the_last_attempt_makes_a_dead_letter() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    q.send(b"x", &SendOptions::new().id("m").max_attempts(1))
        .await
        .expect("send");
    let d = receive_one(&mut consumer, SHORT).await;
    wait_for_expiry(&d).await;

    let got = consumer
        .receive(&receiving(1, LONG, Duration::ZERO))
        .await
        .expect("receive");
    assert!(got.is_empty());
    let info = q.get("m").await.expect("get").expect("exists");
    assert_eq!((info.state, info.attempts), (State::Dead, 1));
    assert_eq!(info.last_error.as_deref(), Some("lease expired"));
    assert_eq!(counts(&q).await, [0, 0, 0, 1]);
}

#[tokio::test]
async fn extend_pushes_the_lease_deadline() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    q.send(b"x", &SendOptions::new().id("m"))
        .await
        .expect("send");
    let mut d = receive_one(&mut consumer, Duration::from_secs(1)).await;
    let original = d.clone();

    let before = now_ms();
    let deadline = q.extend(&mut d, LONG).await.expect("extend");
    let lease = LONG.as_millis() as u64;
    assert!((before + lease..=now_ms() + lease).contains(&deadline));
    assert_eq!(d.lease_deadline_ms, deadline);
    let info = q.get("m").await.expect("get").expect("exists");
    assert_eq!(info.lease_deadline_ms, Some(deadline));

    // Past the original deadline nobody can reclaim it, and the holder still acks.
    wait_for_expiry(&original).await;
    let mut other = q.consumer().await.expect("consumer");
    let got = other
        .receive(&receiving(1, LONG, Duration::ZERO))
        .await
        .expect("receive");
    assert!(got.is_empty(), "an extended lease is not reclaimed");
    q.ack(&d).await.expect("ack after the original deadline");
    assert!(is_empty(&q).await);
}

#[tokio::test]
async fn release_hands_messages_back_without_counting_the_attempt() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    for id in ["r1", "r2"] {
        q.send(id, &SendOptions::new().id(id).max_attempts(1))
            .await
            .expect("send");
    }
    let got = consumer
        .receive(&receiving(2, LONG, Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(got.len(), 2);
    assert_eq!(q.release(&got).await.expect("release"), [true, true]);
    assert_eq!(counts(&q).await, [0, 2, 0, 0]);
    for id in ["r1", "r2"] {
        let info = q.get(id).await.expect("get").expect("exists");
        assert_eq!((info.state, info.attempts), (State::Ready, 0));
    }

    let again = consumer
        .receive(&receiving(2, LONG, Duration::ZERO))
        .await
        .expect("receive");
    let attempts: Vec<(&str, u32)> = again.iter().map(|d| (d.id.as_str(), d.attempt)).collect();
    assert_eq!(attempts, [("r1", 1), ("r2", 1)]);
}

#[tokio::test]
async fn the_smallest_record_does_not_poison_a_claim() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    // Empty payload, generated id, fixed backoff under 128 ms: a 19-byte record.
    let tiny = SendOptions::new().backoff(Backoff::fixed(Duration::ZERO));
    let empty = q.send(b"", &tiny).await.expect("send");
    let victim = q
        .send(b"victim", &SendOptions::new().max_attempts(1))
        .await
        .expect("send");
    let got = consumer
        .receive(&receiving(10, LONG, Duration::ZERO))
        .await
        .expect("receive");
    let ids: Vec<&str> = got.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, [empty.id.as_str(), victim.id.as_str()]);
    assert_eq!(got[0].payload, b"");
    q.ack_many(&got).await.expect("ack");
    assert!(is_empty(&q).await);
}

/// A sort key (due µs, sequence) then a header cut short before its backoff: a record no
/// reader can take apart.
fn undecodable_record(due_us: u64, seq: u64) -> Vec<u8> {
    let mut rec = due_us.to_be_bytes()[1..].to_vec();
    rec.extend_from_slice(&seq.to_be_bytes()[2..]);
    rec.extend_from_slice(&[0, 0, 0, 0, 5]);
    rec
}

#[tokio::test]
async fn an_undecodable_record_is_dead_lettered_and_the_rest_of_its_claim_delivered() {
    let (server, q, mut consumer) = queue_and_consumer().await;
    let good = q.send(b"good", &SendOptions::new()).await.expect("send");
    // Due at 1 µs after the epoch: first in line.
    let bad = undecodable_record(1, 999_999);
    let raw = redis::Client::open(server.url()).expect("client");
    let mut conn = raw
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let _: () = redis::cmd("ZADD")
        .arg("dq:{leases}:pending")
        .arg(0)
        .arg(&bad)
        .query_async(&mut conn)
        .await
        .expect("zadd");

    let got = consumer
        .receive(&receiving(10, LONG, Duration::ZERO))
        .await
        .expect("one bad record does not fail the claim");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, good.id);
    q.ack(&got[0]).await.expect("ack");

    let info = q.get("1-999999").await.expect("get").expect("kept");
    assert_eq!(info.state, State::Dead);
    let error = info.last_error.expect("an error");
    assert!(error.contains("undecodable"), "{error}");
    assert_eq!(info.payload, bad, "the raw bytes are kept for inspection");
    assert_eq!(counts(&q).await, [0, 0, 0, 1]);
}

/// Cuts the (only) held record short, keeping its lease token, attempts and sort key.
fn cut_short_the_held_record(server: &RedisServer) {
    server.cli(&[
        "EVAL",
        "local s = redis.call('HKEYS', KEYS[1])[1] \
         local v = redis.call('HGET', KEYS[1], s) \
         redis.call('HSET', KEYS[1], s, v:sub(1, 21) .. string.char(0, 0, 0, 0, 5)) return 1",
        "1",
        "dq:{leases}:held",
    ]);
}

/// The message `id` is the queue's one dead letter, with an "undecodable" error.
async fn assert_dead_as_undecodable(q: &Queue, id: &str) {
    let info = q.get(id).await.expect("get").expect("not lost");
    assert_eq!(info.state, State::Dead);
    let error = info.last_error.expect("an error");
    assert!(error.contains("undecodable"), "{error}");
    assert_eq!(counts(q).await, [0, 0, 0, 1]);
}

#[tokio::test]
async fn reclaiming_an_undecodable_held_record_loses_nothing() {
    let (server, q, mut consumer) = queue_and_consumer().await;
    let sent = q.send(b"x", &SendOptions::new()).await.expect("send");
    let d = receive_one(&mut consumer, SHORT).await;
    cut_short_the_held_record(&server);
    wait_for_expiry(&d).await;

    let got = consumer
        .receive(&receiving(10, LONG, Duration::ZERO))
        .await
        .expect("reclaiming does not fail");
    assert!(got.is_empty());
    assert_dead_as_undecodable(&q, &sent.id).await;
}

/// A nack used to parse the held record with nothing to catch a failure: an undecodable one
/// failed the call with a Lua error and stayed in flight for the rest of its lease.
#[tokio::test]
async fn nacking_an_undecodable_held_record_dead_letters_it_at_once() {
    let (server, q, mut consumer) = queue_and_consumer().await;
    let sent = q.send(b"x", &SendOptions::new()).await.expect("send");
    let d = receive_one(&mut consumer, LONG).await;
    cut_short_the_held_record(&server);

    let outcome = q.nack(&d, "boom", None).await.expect("nack is answered");
    assert_eq!(outcome, delayq::NackOutcome::Dead);
    assert_dead_as_undecodable(&q, &sent.id).await;
}

#[tokio::test]
async fn a_mass_lease_expiry_retries_each_message_with_its_own_jitter() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    let backoff =
        Backoff::exponential(Duration::from_secs(10), Duration::from_secs(60)).with_jitter(50);
    let batch: Vec<delayq::Message> = (0..20)
        .map(|i| {
            delayq::Message::new(
                format!("m{i}"),
                SendOptions::new().id(format!("m{i}")).backoff(backoff),
            )
        })
        .collect();
    q.send_batch(&batch).await.expect("send");
    let got = consumer
        .receive(&receiving(20, SHORT, Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(got.len(), 20);
    wait_for_expiry(&got[0]).await;
    let none = consumer
        .receive(&receiving(20, LONG, Duration::ZERO))
        .await
        .expect("reclaim");
    assert!(none.is_empty(), "all retried 5-10 s from now");
    let mut dues = Vec::new();
    for i in 0..20 {
        let info = q.get(&format!("m{i}")).await.expect("get").expect("kept");
        assert_eq!(info.state, State::Delayed);
        dues.push(info.due_ms);
    }
    dues.sort_unstable();
    dues.dedup();
    assert!(
        dues.len() >= 10,
        "20 retries share {} due times: {dues:?}",
        dues.len()
    );
}

#[tokio::test]
async fn a_lease_token_is_not_repeated_after_redis_loses_its_last_writes() {
    let (mut server, dq) = setup().await;
    let q = queue(&dq, "rollback");
    let sent = q.send(b"x", &SendOptions::new()).await.expect("send");
    server.cli(&["SAVE"]);
    let mut consumer = q.consumer().await.expect("consumer");
    let stale = receive_one(&mut consumer, LONG).await;
    // Redis comes back from the snapshot taken before the claim, as after a lost AOF tail
    // or a failover to a lagging replica.
    server.restart();
    let dq = delayq::DelayQ::connect(&server.url())
        .await
        .expect("reconnect");
    let q = queue(&dq, "rollback");
    let mut consumer = q.consumer().await.expect("consumer");
    let fresh = receive_one(&mut consumer, LONG).await;
    assert_eq!((fresh.id.as_str(), fresh.attempt), (sent.id.as_str(), 1));
    assert_ne!(
        stale.token(),
        fresh.token(),
        "the token was handed out twice"
    );
    assert_cannot_settle(&q, &stale).await;
    q.ack(&fresh).await.expect("the fresh holder acks");
}

/// A consumer whose traffic runs through a proxy (so its replies can be held back) and
/// gives up on a reply after 200 ms, with one message ready for it.
struct LostClaim {
    proxy: redis_fixture::Proxy,
    /// The queue as the consumer sees it, through the proxy.
    q: Queue,
    /// The same queue over a direct connection, for looking on.
    direct: Queue,
    consumer: Consumer,
    sent: delayq::Sent,
    _server: RedisServer,
}

impl LostClaim {
    async fn new(name: &str) -> LostClaim {
        let server = RedisServer::start();
        let (proxy, dq, direct) = behind_proxy(&server).await;
        let q = queue(&dq, name);
        let mut consumer = q.consumer().await.expect("consumer");
        // Loads the claim script, so that a claim runs at once in Redis.
        consumer
            .receive(&receiving(1, LONG, Duration::ZERO))
            .await
            .expect("receive");
        let sent = q
            .send(b"x", &SendOptions::new().max_attempts(1))
            .await
            .expect("send");
        LostClaim {
            proxy,
            q,
            direct: queue(&direct, name),
            consumer,
            sent,
            _server: server,
        }
    }

    /// The next receive gets the message of the lost claim, at its first attempt, without
    /// waiting out its lease.
    async fn assert_recovered(mut self) {
        wait_until(Duration::from_secs(5), "the claim to run", || async {
            counts(&self.direct).await == [0, 0, 1, 0]
        })
        .await;
        wait_until(Duration::from_secs(5), "the late reply to pass", || async {
            self.q.stats().await.is_ok()
        })
        .await;
        let got = self
            .consumer
            .receive(&receiving(1, LONG, Duration::ZERO))
            .await
            .expect("receive");
        assert_eq!(got.len(), 1, "the lost claim's message");
        assert_eq!(
            (got[0].id.as_str(), got[0].attempt),
            (self.sent.id.as_str(), 1)
        );
        self.q.ack(&got[0]).await.expect("ack");
        assert!(is_empty(&self.direct).await);
    }
}

#[tokio::test]
async fn a_claim_whose_reply_timed_out_is_recovered_by_the_next_receive() {
    let mut t = LostClaim::new("lost-reply").await;
    t.proxy.set_reply_delay(Duration::from_millis(600));
    let lost = t
        .consumer
        .receive(&receiving(1, LONG, Duration::ZERO))
        .await;
    assert!(
        matches!(&lost, Err(e) if e.is_connection_error()),
        "the reply timed out: {lost:?}"
    );
    t.proxy.set_reply_delay(Duration::ZERO);
    t.assert_recovered().await;
}

#[tokio::test]
async fn a_receive_dropped_mid_claim_is_recovered_by_the_next_receive() {
    let mut t = LostClaim::new("dropped-receive").await;
    t.proxy.set_reply_delay(Duration::from_millis(150));
    let dropped = tokio::time::timeout(
        Duration::from_millis(50),
        t.consumer.receive(&receiving(1, LONG, Duration::ZERO)),
    )
    .await;
    assert!(dropped.is_err(), "the receive was dropped before its reply");
    t.proxy.set_reply_delay(Duration::ZERO);
    t.assert_recovered().await;
}
