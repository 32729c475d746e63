//! Tests against real `redis-server` processes.

use std::net::{Ipv4Addr, TcpStream};
use std::thread::sleep;
use std::time::{Duration, Instant};

use redis_fixture::{RedisServer, Reply, ServerConfig};

#[test]
fn start_ping_set_get() {
    let server = RedisServer::start();
    assert_ne!(server.port(), 6379);
    assert_eq!(
        server.url(),
        format!("redis://127.0.0.1:{}/", server.port())
    );
    assert_eq!(server.cli(&["PING"]), "PONG");
    assert_eq!(server.cli(&["SET", "k", "hello world"]), "OK");
    assert_eq!(server.cli(&["GET", "k"]), "hello world");
    assert_eq!(server.cli(&["GET", "missing"]), "(nil)");
    assert_eq!(server.cli(&["RPUSH", "l", "a", "b"]), "2");
    assert_eq!(server.cli(&["LRANGE", "l", "0", "-1"]), "a\nb");
    assert!(server.used_memory() > 0);
    assert!(server.log().contains("Ready to accept connections"));
}

#[test]
fn command_returns_structured_replies() {
    let server = RedisServer::start();
    let reply = server
        .command(&["NOSUCHCOMMAND"])
        .expect("connection works");
    assert!(matches!(reply, Reply::Error(e) if e.starts_with("ERR")));
    let reply = server
        .command(&["MGET", "a", "b"])
        .expect("connection works");
    assert_eq!(
        reply,
        Reply::Array(Some(vec![Reply::Bulk(None), Reply::Bulk(None)]))
    );
}

#[test]
#[should_panic(expected = "--- end of log ---")]
fn cli_panics_with_log_on_error_reply() {
    RedisServer::start().cli(&["NOSUCHCOMMAND"]);
}

#[test]
fn kill_and_restart_with_appendonly_keeps_data() {
    let mut server = RedisServer::start_with(ServerConfig::appendonly());
    let port = server.port();
    server.cli(&["SET", "durable", "yes"]);
    server.kill();
    server.kill(); // idempotent
    assert!(!server.is_running());
    server.restart();
    assert!(server.is_running());
    assert_eq!(server.port(), port);
    assert_eq!(server.cli(&["GET", "durable"]), "yes");
}

#[test]
fn cluster_mode_reaches_ok_and_survives_restart() {
    let mut server = RedisServer::start_with(ServerConfig::cluster());
    assert!(server
        .cli(&["CLUSTER", "INFO"])
        .contains("cluster_state:ok"));
    assert_eq!(server.cli(&["SET", "{q}k", "v"]), "OK");
    server.kill();
    server.restart();
    assert!(server
        .cli(&["CLUSTER", "INFO"])
        .contains("cluster_state:ok"));
    assert_eq!(server.cli(&["SET", "other", "v"]), "OK");
}

#[test]
fn drop_kills_the_server() {
    let server = RedisServer::start();
    let port = server.port();
    let dir = server.dir().to_path_buf();
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
        assert!(
            Instant::now() < deadline,
            "port {port} still accepts connections"
        );
        sleep(Duration::from_millis(10));
    }
    assert!(
        !dir.exists(),
        "temporary directory {} not removed",
        dir.display()
    );
}
