//! Tests against a real multi-node Redis Cluster.

use std::net::{Ipv4Addr, TcpStream};
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use redis_fixture::{key_slot, redis_cli_binary, RedisCluster, Reply};

const FAILOVER_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `redis-cli -c` (follow redirects) against `port` and returns its
/// trimmed output.
fn redis_cli_c(port: u16, args: &[&str]) -> String {
    let out = Command::new(redis_cli_binary())
        .args(["-c", "-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("cannot run redis-cli");
    assert!(out.status.success(), "redis-cli {args:?} failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn three_masters_with_replicas_form_a_cluster() {
    let started = Instant::now();
    let cluster = RedisCluster::start(3, 1);
    eprintln!("3 masters + 3 replicas ready in {:?}", started.elapsed());

    assert_eq!(cluster.nodes().len(), 6);
    let masters = cluster.masters();
    let replicas = cluster.replicas();
    assert_eq!(masters.len(), 3, "masters: {masters:?}");
    assert_eq!(replicas.len(), 3, "replicas: {replicas:?}");
    assert!(masters.iter().all(|m| !replicas.contains(m)));
    let urls = cluster.urls();
    assert_eq!(urls.len(), 6);
    for (url, node) in urls.iter().zip(cluster.nodes()) {
        assert_eq!(*url, format!("redis://127.0.0.1:{}/", node.port()));
        assert!(node.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"));
    }

    // Every slot belongs to one of the masters, and each master serves some.
    let owners: Vec<usize> = [0, 5460, 5461, 10922, 10923, 16383]
        .into_iter()
        .map(|slot| cluster.node_for_slot(slot))
        .collect();
    assert!(owners.iter().all(|o| masters.contains(o)), "{owners:?}");
    for m in &masters {
        assert!(owners.contains(m), "master {m} serves none of {owners:?}");
    }

    // key_slot agrees with the server.
    let node = &cluster.nodes()[0];
    for key in [
        "foo",
        "bar",
        "",
        "{user1000}.following",
        "{user1000}.followers",
        "foo{}{bar}",
        "foo{{bar}}zap",
        "foo{bar}{zap}",
        "delayq:{orders}:ready",
        "ключ",
    ] {
        assert_eq!(
            node.cli(&["CLUSTER", "KEYSLOT", key]),
            key_slot(key).to_string(),
            "key {key:?}"
        );
    }

    // A key written through a node that does not own it (redis-cli follows
    // the MOVED) is readable on its owner and redirected elsewhere.
    let key = "fixture-key";
    let owner = cluster.node_for_key(key);
    let other = masters
        .iter()
        .copied()
        .find(|&m| m != owner)
        .expect("another master");
    let other_port = cluster.nodes()[other].port();
    assert_eq!(redis_cli_c(other_port, &["SET", key, "hello"]), "OK");
    assert_eq!(cluster.nodes()[owner].cli(&["GET", key]), "hello");
    let moved = cluster.nodes()[other]
        .command(&["GET", key])
        .expect("connection works");
    let owner_port = cluster.nodes()[owner].port();
    assert_eq!(
        moved,
        Reply::Error(format!("MOVED {} 127.0.0.1:{owner_port}", key_slot(key)))
    );
    assert_eq!(redis_cli_c(other_port, &["GET", key]), "hello");
}

#[test]
fn killed_master_fails_over_to_its_replica_and_rejoins() {
    let mut cluster = RedisCluster::start(3, 1);
    let key = "{failover}k";
    let old = cluster.node_for_key(key);
    let master = &cluster.nodes()[old];
    assert_eq!(master.cli(&["SET", key, "v"]), "OK");
    // The write must reach the replica before the crash to survive it.
    // (WAIT would not do: it only counts its own connection's writes.)
    cluster.wait_for_replicas(FAILOVER_TIMEOUT);

    cluster.kill(old);
    let killed = Instant::now();
    cluster.wait_for_state_ok(FAILOVER_TIMEOUT);
    eprintln!("failover took {:?}", killed.elapsed());
    let new = cluster.node_for_key(key);
    assert_ne!(new, old);
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3, "masters after failover: {masters:?}");
    assert!(masters.contains(&new));
    assert!(!masters.contains(&old));
    assert_eq!(cluster.nodes()[new].cli(&["GET", key]), "v");

    // The old master comes back as a replica of the one that took over.
    cluster.restart(old);
    let restarted = Instant::now();
    cluster.wait_for_state_ok(FAILOVER_TIMEOUT);
    eprintln!("rejoin took {:?}", restarted.elapsed());
    assert_eq!(cluster.node_for_key(key), new);
    assert_eq!(cluster.masters().len(), 3);
    assert!(cluster.replicas().contains(&old));
    let replication = cluster.nodes()[old].cli(&["INFO", "replication"]);
    let new_port = cluster.nodes()[new].port();
    assert!(
        replication.contains(&format!("master_port:{new_port}")),
        "{replication}"
    );
}

#[test]
fn drop_kills_every_node() {
    let cluster = RedisCluster::start(3, 0);
    assert_eq!(cluster.masters(), [0, 1, 2]);
    assert!(cluster.replicas().is_empty());
    let nodes: Vec<_> = cluster
        .nodes()
        .iter()
        .map(|n| (n.port(), n.dir().to_path_buf()))
        .collect();
    drop(cluster);
    let deadline = Instant::now() + Duration::from_secs(5);
    for (port, dir) in nodes {
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
            assert!(
                Instant::now() < deadline,
                "port {port} still accepts connections"
            );
            sleep(Duration::from_millis(10));
        }
        assert!(!dir.exists(), "directory {} not removed", dir.display());
    }
}

#[test]
#[should_panic(expected = "at least 3 masters")]
fn fewer_than_three_masters_is_refused() {
    RedisCluster::start(2, 1);
}

#[test]
#[should_panic(expected = "which is not a running master")]
fn killed_master_without_replica_is_not_ok() {
    let mut cluster = RedisCluster::start(3, 0);
    cluster.kill(0);
    // The other nodes still say cluster_state:ok until the node timeout,
    // but node 0's slots have no running master.
    cluster.wait_for_state_ok(Duration::from_secs(1));
}
