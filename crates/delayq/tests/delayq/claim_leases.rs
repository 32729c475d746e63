//! A lease per claim (data format 6): a claim that takes several messages due now holds
//! them under one lease, yet each is still settled, extended, listed, counted and taken back
//! on its own, exactly; a partition of an older format keeps a lease per message until it is
//! upgraded.

use std::time::Duration;

use delayq::{
    Backoff, Config, DelayQ, Delivery, Error, Queue, SendOptions, State, CLAIM_LEASE_FORMAT,
};

use crate::common::*;

const LONG: Duration = Duration::from_secs(30);

/// Messages due now that a reclaim retries at once (no backoff), so a test sees them again.
fn at_once() -> SendOptions {
    SendOptions::new().backoff(Backoff::fixed(Duration::ZERO))
}

async fn send_n(q: &Queue, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let sent = q.send(format!("m{i}"), &at_once()).await.expect("send");
        ids.push(sent.id);
    }
    ids
}

/// Leases of queue `name` (its own and claims'), and claims with messages still held.
fn leases_and_claims(server: &RedisServer, name: &str) -> (u64, u64) {
    let count = |command: &str, key: &str| -> u64 {
        let text = server.cli(&[command, &format!("dq:{{{name}}}:{key}")]);
        text.trim().parse().expect("a count")
    };
    (count("ZCARD", "leases"), count("HLEN", "claims"))
}

/// Ends every claim's lease of queue `name` now, leaving leases of their own as they are.
fn expire_claim_leases(server: &RedisServer, name: &str) {
    server.cli(&[
        "EVAL",
        "local m = redis.call('ZRANGE', KEYS[1], 0, -1) local n = 0 \
         for _, x in ipairs(m) do if #x == 6 then n = n + 1 \
         redis.call('ZADD', KEYS[1], 'XX', 1, x) end end return n",
        "1",
        &format!("dq:{{{name}}}:leases"),
    ]);
}

fn ids(deliveries: &[Delivery]) -> Vec<String> {
    let mut ids: Vec<String> = deliveries.iter().map(|d| d.id.clone()).collect();
    ids.sort();
    ids
}

#[track_caller]
fn assert_lease_lost<T: std::fmt::Debug>(what: &str, result: delayq::Result<T>) {
    assert!(
        matches!(result, Err(Error::LeaseLost { .. })),
        "{what}: {result:?}"
    );
}

#[tokio::test]
async fn a_claim_of_several_holds_them_under_one_lease_settled_one_by_one() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "one-lease");
    send_n(&q, 5).await;
    let got = claim(&q, 5).await;
    assert_eq!(got.len(), 5);
    assert_eq!(leases_and_claims(&server, "one-lease"), (1, 1));
    assert_eq!(q.stats().await.expect("stats").in_flight, 5);
    for d in &got {
        let info = q.get(&d.id).await.expect("get").expect("exists");
        assert_eq!(info.state, State::InFlight);
        assert_eq!(
            info.lease_deadline_ms,
            Some(d.lease_deadline_ms),
            "{}",
            d.id
        );
    }

    q.ack(&got[0]).await.expect("ack");
    q.ack(&got[1]).await.expect("ack");
    assert_lease_lost("a second ack", q.ack(&got[0]).await);
    assert_eq!(leases_and_claims(&server, "one-lease"), (1, 1));
    q.nack(&got[2], "failed", Some(Duration::ZERO))
        .await
        .expect("nack");
    assert_eq!(q.release(&got[3..4]).await.expect("release"), [true]);
    assert_eq!(counts(&q).await, [0, 2, 1, 0]);
    q.ack(&got[4]).await.expect("ack");
    assert_eq!(leases_and_claims(&server, "one-lease"), (0, 0));
    assert_eq!(counts(&q).await, [0, 2, 0, 0]);
    let again = claim(&q, 5).await;
    assert_eq!(ids(&again), ids(&got[2..4]));
}

#[tokio::test]
async fn an_expired_claim_gives_back_exactly_what_it_still_held() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "expired-claim");
    send_n(&q, 4).await;
    let got = claim(&q, 4).await;
    q.ack(&got[0]).await.expect("ack");
    expire_all_leases(&server, "expired-claim");
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.in_flight, stats.overdue), (3, 3), "{stats:?}");
    assert_lease_lost("an ack after the lease", q.ack(&got[1]).await);

    let again = claim(&q, 10).await;
    assert_eq!(ids(&again), ids(&got[1..]), "the three it still held");
    assert!(again.iter().all(|d| d.attempt == 2), "{again:?}");
    assert_eq!(leases_and_claims(&server, "expired-claim"), (1, 1));
    for stale in &got[1..] {
        assert_lease_lost("the old holder", q.ack(stale).await);
    }
    assert_eq!(q.ack_many(&again).await.expect("ack"), [true; 3]);
    assert_eq!(counts(&q).await, [0, 0, 0, 0]);
    assert_eq!(leases_and_claims(&server, "expired-claim"), (0, 0));
}

#[tokio::test]
async fn a_message_extended_alone_leaves_its_claim_and_all_extended_keep_one_lease() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "extended");
    send_n(&q, 3).await;
    let mut got = claim(&q, 3).await;
    let deadline = q.extend(&mut got[0], LONG * 2).await.expect("extend");
    assert_eq!(got[0].lease_deadline_ms, deadline);
    assert_eq!(leases_and_claims(&server, "extended"), (2, 1));
    let info = q.get(&got[0].id).await.expect("get").expect("exists");
    assert_eq!(info.lease_deadline_ms, Some(deadline));

    // The claim's lease ends; the message extended alone is still held.
    expire_claim_leases(&server, "extended");
    let again = claim(&q, 10).await;
    assert_eq!(ids(&again), ids(&got[1..]));
    q.ack(&got[0])
        .await
        .expect("the extended one is still held");

    // Every message a claim holds, extended together: still one lease.
    let mut again = again;
    let deadlines = q.extend_many(&mut again, LONG * 2).await.expect("extend");
    assert!(deadlines.iter().all(Option::is_some), "{deadlines:?}");
    assert_eq!(leases_and_claims(&server, "extended"), (1, 1));
    for d in &again {
        let info = q.get(&d.id).await.expect("get").expect("exists");
        assert_eq!(info.lease_deadline_ms, Some(d.lease_deadline_ms));
    }
    assert_eq!(q.ack_many(&again).await.expect("ack"), [true, true]);
    assert_eq!(leases_and_claims(&server, "extended"), (0, 0));
}

#[tokio::test]
async fn a_list_of_in_flight_messages_pages_through_claims_and_own_leases() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "listed");
    send_n(&q, 6).await;
    let mut held = claim(&q, 4).await;
    held.extend(claim(&q, 1).await);
    held.extend(claim(&q, 1).await);
    let mut seen = Vec::new();
    let mut cursor = None;
    for _ in 0..10 {
        let page = q
            .list(State::InFlight, cursor.as_ref(), 2)
            .await
            .expect("list");
        assert!(page.messages.len() <= 2);
        seen.extend(page.messages.iter().map(|m| m.id.clone()));
        cursor = page.next;
        if cursor.is_none() {
            break;
        }
    }
    seen.sort();
    assert_eq!(seen, ids(&held), "each once");
    assert_eq!(q.stats().await.expect("stats").in_flight, 6);
}

#[tokio::test]
async fn a_partition_of_format_5_keeps_a_lease_per_message_until_it_is_upgraded() {
    let server = RedisServer::start();
    let (q, _) = queue_of_format(&server, "older", CLAIM_LEASE_FORMAT - 1).await;
    send_n(&q, 2).await;
    let before = claim(&q, 3).await;
    assert_eq!(before.len(), 3);
    assert_eq!(leases_and_claims(&server, "older"), (3, 0));

    let format = q.upgrade_format().await.expect("upgrade");
    assert_eq!(format.format(), delayq::DATA_FORMAT);
    send_n(&q, 3).await;
    let after = claim(&q, 3).await;
    assert_eq!(leases_and_claims(&server, "older"), (4, 1));
    assert_eq!(q.ack_many(&before).await.expect("ack"), [true; 3]);
    assert_eq!(q.ack_many(&after).await.expect("ack"), [true; 3]);
    assert_eq!(leases_and_claims(&server, "older"), (0, 0));
    assert_eq!(counts(&q).await, [0, 0, 0, 0]);
}

#[tokio::test]
async fn messages_taken_ahead_are_leased_alone_beside_their_claims() {
    let server = RedisServer::start();
    let config = Config::default().look_ahead(Duration::from_millis(500));
    let dq = DelayQ::connect_with(&server.url(), config)
        .await
        .expect("connect");
    let q = queue(&dq, "ahead");
    send_n(&q, 2).await;
    q.send("later", &at_once().delay(Duration::from_millis(300)))
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let now = consumer
        .receive(&receiving(3, LONG, Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(now.len(), 2, "the two due now: {now:?}");
    // The claim took all three: two under its lease, the one due later under its own.
    assert_eq!(leases_and_claims(&server, "ahead"), (2, 1));
    let later = consumer
        .receive(&receiving(3, LONG, Duration::from_secs(5)))
        .await
        .expect("receive");
    assert_eq!(payloads(&later), ["later"]);
    assert!(later[0].due_ms <= now_ms());
    assert_eq!(q.ack_many(&now).await.expect("ack"), [true, true]);
    assert_eq!(q.ack_many(&later).await.expect("ack"), [true]);
    assert_eq!(leases_and_claims(&server, "ahead"), (0, 0));
}
