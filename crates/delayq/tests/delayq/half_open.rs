//! Half-open connections: a connection that stays established while nothing gets through
//! (a dead router, a frozen NAT entry), found by the chaos run. The client must notice on its
//! own and replace the connection, for ordinary traffic and for wake-up subscriptions alike.

use std::time::{Duration, Instant};

use delayq::{Config, DelayQ, ReceiveOptions, SendOptions};
use redis_fixture::{Proxy, RedisServer};

use crate::common::{listening, queue};

fn quick_timeouts() -> Config {
    Config::default().response_timeout(Duration::from_millis(500))
}

#[tokio::test]
async fn commands_recover_after_the_ordinary_connection_goes_half_open() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let dq = DelayQ::connect_with(&proxy.url(), quick_timeouts())
        .await
        .expect("connect");
    let q = queue(&dq, "half-open");
    q.send(b"before", &SendOptions::new()).await.expect("send");

    // The client's only connection now swallows everything, without closing.
    assert!(proxy.hold_half_open(0));
    let first = q.send(b"during", &SendOptions::new()).await;
    assert!(
        first.as_ref().is_err_and(|e| e.is_retryable()),
        "a command on the silent connection times out, retryably: {first:?}"
    );

    // Within a few response timeouts, commands get through again on a new connection.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match q.send(b"after", &SendOptions::new()).await {
            Ok(_) => break,
            Err(e) if e.is_retryable() && Instant::now() < deadline => continue,
            Err(e) => panic!("commands never recovered from the half-open connection: {e}"),
        }
    }
    assert_eq!(
        q.stats().await.expect("stats").ready,
        2,
        "before and after are queued"
    );
}

#[tokio::test]
async fn a_consumer_hears_sends_again_after_its_wake_subscription_goes_half_open() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let dq = DelayQ::connect_with(&proxy.url(), quick_timeouts())
        .await
        .expect("connect");
    let direct = DelayQ::connect(&server.url()).await.expect("connect");
    let q = queue(&dq, "half-open-wake");
    let mut consumer = q.consumer().await.expect("consumer");
    let wait = ReceiveOptions {
        max: 1,
        lease: Duration::from_secs(30),
        wait: Duration::from_secs(20),
    };

    // An idle consumer subscribes; then its subscription (the second connection through the
    // proxy, after the ordinary one) goes silent.
    let waiting = tokio::spawn(async move {
        let got = consumer.receive(&wait).await;
        (got, Instant::now())
    });
    crate::common::wait_until(Duration::from_secs(5), "the consumer to listen", || async {
        listening(&server, "half-open-wake") >= 1
    })
    .await;
    assert!(proxy.hold_half_open(1));

    // Sent by another client after the subscription went silent: its wake-up is lost on the
    // silent connection, and nothing else is due that a timer would wake the consumer for.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let sent_at = Instant::now();
    queue(&direct, "half-open-wake")
        .send(b"wake me", &SendOptions::new())
        .await
        .expect("send");
    let (got, at) = waiting.await.expect("consumer task");
    let got = got.expect("receive");
    assert_eq!(
        got.len(),
        1,
        "the consumer got the message before its 20 s wait ran out"
    );
    assert!(
        at - sent_at < Duration::from_secs(10),
        "heard within 10 s, not at the end of the wait: {:?}",
        at - sent_at
    );
}
