//! A record with fields of a later delayq (data format 2's extension area, `record.rs`) goes
//! through every state under this one: read, retried by its backoff, dead-lettered,
//! requeued and acked, with the fields it does not know carried unchanged at every step.

use std::time::Duration;

use redis::AsyncCommands;
use redis_fixture::RedisServer;

use crate::store::keys::Keys;
use crate::values::options::ReceiveOptions;
use crate::values::record::with_extension;
use crate::{Backoff, DelayQ, SendOptions, State};

const FIELD: &[u8] = b"a field of a later delayq";

/// Replaces the one pending message of `keys` with the same record given an extension area.
async fn extend_the_pending_record(conn: &mut redis::aio::MultiplexedConnection, keys: &Keys) {
    let members: Vec<Vec<u8>> = conn.zrange(keys.pending(), 0, -1).await.expect("zrange");
    let [plain] = &members[..] else {
        panic!("one pending message, not {}", members.len())
    };
    let extended = [&plain[..13], &with_extension(&plain[13..], &[(200, FIELD)])].concat();
    let _: () = redis::pipe()
        .atomic()
        .zrem(keys.pending(), plain)
        .zadd(keys.pending(), &extended, 0)
        .query_async(conn)
        .await
        .expect("swap");
}

/// Every record of the queue's keys that holds the later field: pending, held and dead.
async fn records_with_the_field(
    conn: &mut redis::aio::MultiplexedConnection,
    keys: &Keys,
) -> usize {
    let pending: Vec<Vec<u8>> = conn.zrange(keys.pending(), 0, -1).await.expect("zrange");
    let held: Vec<Vec<u8>> = conn.hvals(&keys.all()[3]).await.expect("hvals");
    let dead: Vec<Vec<u8>> = conn.hvals(&keys.all()[5]).await.expect("hvals");
    let has = |r: &Vec<u8>| r.windows(FIELD.len()).any(|w| w == FIELD);
    pending
        .iter()
        .chain(&held)
        .chain(&dead)
        .filter(|r| has(r))
        .count()
}

#[tokio::test]
async fn fields_of_a_later_delayq_go_through_every_state_unchanged() {
    let server = RedisServer::start();
    let dq = DelayQ::connect(&server.url()).await.expect("connect");
    let client = redis::Client::open(server.url()).expect("url");
    let mut raw = client
        .get_multiplexed_async_connection()
        .await
        .expect("raw");
    let keys = Keys::new("later");
    let q = dq.queue("later").expect("queue");
    let options = SendOptions::new()
        .id("order-7")
        .max_attempts(2)
        .backoff(Backoff::steps(&[Duration::from_millis(1)]))
        .handler_timeout(Duration::from_secs(30));
    q.send(b"close order 7", &options).await.expect("send");
    extend_the_pending_record(&mut raw, &keys).await;

    let info = q.get("order-7").await.expect("get").expect("found by id");
    assert_eq!(
        (info.state, &info.payload[..]),
        (State::Ready, &b"close order 7"[..])
    );
    let mut consumer = q.consumer().await.expect("consumer");
    let receive = ReceiveOptions {
        max: 1,
        lease: Duration::from_secs(30),
        wait: Duration::from_secs(5),
    };
    for attempt in 1..=2 {
        let got = consumer.receive(&receive).await.expect("receive");
        let [d] = &got[..] else {
            panic!("attempt {attempt}: {got:?}")
        };
        assert_eq!(
            (d.id.as_str(), &d.payload[..]),
            ("order-7", &b"close order 7"[..])
        );
        assert_eq!(d.attempt, attempt);
        assert_eq!(d.handler_timeout, Some(Duration::from_secs(30)));
        assert_eq!(records_with_the_field(&mut raw, &keys).await, 1, "held");
        q.nack(d, "upstream down", None).await.expect("nack");
        assert_eq!(
            records_with_the_field(&mut raw, &keys).await,
            1,
            "after nack {attempt}"
        );
    }
    let dead = q.dead_letters().list(0, 10).await.expect("dead letters");
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (dead[0].id.as_str(), &dead[0].payload[..]),
        ("order-7", &b"close order 7"[..])
    );
    assert!(q.dead_letters().requeue("order-7").await.expect("requeue"));
    assert_eq!(records_with_the_field(&mut raw, &keys).await, 1, "requeued");
    let got = consumer.receive(&receive).await.expect("receive");
    assert_eq!(got.len(), 1);
    q.ack(&got[0]).await.expect("ack");
    assert_eq!(records_with_the_field(&mut raw, &keys).await, 0);
    assert!(q.get("order-7").await.expect("get").is_none(), "acked");

    // A generated id is read from the sort key, past the extension area.
    let sent = q.send(b"tick", &SendOptions::new()).await.expect("send");
    extend_the_pending_record(&mut raw, &keys).await;
    let got = consumer.receive(&receive).await.expect("receive");
    assert_eq!(
        (got[0].id.as_str(), &got[0].payload[..]),
        (sent.id.as_str(), &b"tick"[..])
    );
    q.ack(&got[0]).await.expect("ack");
    assert_eq!(q.stats().await.expect("stats").ready, 0);
}
