//! The servers delayq runs on: each says which it is on connect, and one older than the
//! minimum is refused then, with nothing written. The older Redis and Valkey come from
//! `.ci/servers.sh` (`redis_fixture::tested_server`).

use delayq::{Config, DelayQ, Error, ServerKind};
use redis_fixture::{cannot_run, tested_server, RedisServer, ServerConfig};

use crate::common::receive_one;

fn server_of(binary: std::path::PathBuf) -> RedisServer {
    let mut config = ServerConfig::default();
    config.binary = Some(binary);
    RedisServer::start_with(config)
}

#[tokio::test]
async fn a_redis_older_than_7_0_is_refused_on_connect_with_nothing_written() {
    let Some(binary) = tested_server("redis-6.2.14/redis-server") else {
        return cannot_run(
            "a_redis_older_than_7_0_is_refused_on_connect_with_nothing_written",
            "Redis 6.2.14 is not in target/servers (run .ci/servers.sh)",
        );
    };
    let server = server_of(binary);
    let refused = DelayQ::connect_with(&server.url(), Config::default()).await;
    let err = match refused {
        Err(e) => e,
        Ok(_) => panic!("delayq connected to Redis 6.2"),
    };
    assert!(matches!(err, Error::ServerTooOld { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("Redis 6.2.14") && text.contains("Redis 7.0.0"),
        "the error names the version found and the one needed: {text}"
    );
    assert_eq!(server.cli(&["DBSIZE"]), "0", "nothing was written");
}

#[tokio::test]
async fn valkey_is_named_as_valkey_with_its_own_version() {
    let Some(binary) = tested_server("valkey-9.1.2/valkey-server") else {
        return cannot_run(
            "valkey_is_named_as_valkey_with_its_own_version",
            "Valkey 9.1.2 is not in target/servers (run .ci/servers.sh)",
        );
    };
    let server = server_of(binary);
    let dq = DelayQ::connect_with(&server.url(), Config::default())
        .await
        .expect("connect to Valkey");
    assert_eq!(dq.server().kind, ServerKind::Valkey);
    assert_eq!(dq.server().to_string(), "Valkey 9.1.2");
    // And it works: a message goes round.
    let q = dq.queue("on-valkey").expect("queue");
    q.send(b"hello".to_vec(), &delayq::SendOptions::new())
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let got = receive_one(&mut consumer, std::time::Duration::from_secs(30)).await;
    assert_eq!(got.payload, b"hello");
}

#[tokio::test]
async fn the_server_every_test_runs_on_is_named() {
    let server = RedisServer::start();
    let dq = DelayQ::connect_with(&server.url(), Config::default())
        .await
        .expect("connect");
    let info = dq.server();
    assert!(info.is_supported());
    // What the server says of itself, as delayq reads it.
    let said = server.cli(&["INFO", "server"]);
    assert!(
        said.contains(&format!(":{}", info.version)),
        "{info} not in: {said}"
    );
}
