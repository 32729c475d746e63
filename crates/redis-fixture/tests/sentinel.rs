//! Tests against a real Redis Sentinel deployment.

use std::net::{Ipv4Addr, TcpStream};
use std::thread::sleep;
use std::time::{Duration, Instant};

use redis_fixture::{RedisSentinel, Reply};

const FAILOVER_TIMEOUT: Duration = Duration::from_secs(60);

#[test]
fn a_killed_master_is_failed_over_to_its_replica_and_rejoins_as_a_replica() {
    let started = Instant::now();
    let mut deployment = RedisSentinel::start();
    eprintln!(
        "master, replica and 3 sentinels ready in {:?}",
        started.elapsed()
    );
    assert_eq!(deployment.nodes().len(), 2);
    assert_eq!(deployment.sentinel_urls().len(), 3);
    for (url, sentinel) in deployment
        .sentinel_urls()
        .iter()
        .zip(deployment.sentinels())
    {
        assert_eq!(*url, format!("redis://127.0.0.1:{}/", sentinel.port()));
        let Ok(Reply::Array(Some(role))) = sentinel.command(&["ROLE"]) else {
            panic!("ROLE of a sentinel");
        };
        assert_eq!(role[0], Reply::Bulk(Some(b"sentinel".to_vec())));
    }
    assert_eq!(deployment.master_index(), 0);
    assert_eq!(
        deployment.master_url(),
        format!("redis://127.0.0.1:{}/", deployment.nodes()[0].port())
    );

    deployment.nodes()[0].cli(&["SET", "k", "v"]);
    deployment.wait_for_replicas(FAILOVER_TIMEOUT);
    assert_eq!(deployment.kill_master(), 0);
    let killed = Instant::now();
    let promoted = deployment.wait_for_failover(FAILOVER_TIMEOUT);
    eprintln!("failover took {:?}", killed.elapsed());
    assert_eq!(promoted, 1);
    assert_eq!(deployment.master_index(), 1);
    assert_eq!(deployment.nodes()[1].cli(&["GET", "k"]), "v");

    // The old master comes back and is made a replica of the new one.
    deployment.restart(0);
    let restarted = Instant::now();
    deployment.wait_for_replicas(FAILOVER_TIMEOUT);
    eprintln!("rejoin took {:?}", restarted.elapsed());
    let replication = deployment.nodes()[0].cli(&["INFO", "replication"]);
    let new_port = deployment.nodes()[1].port();
    assert!(
        replication.contains(&format!("master_port:{new_port}")),
        "{replication}"
    );
    assert_eq!(deployment.master_index(), 1);
}

#[test]
fn drop_kills_every_process() {
    let deployment = RedisSentinel::start();
    let processes: Vec<_> = deployment
        .nodes()
        .iter()
        .chain(deployment.sentinels())
        .map(|n| (n.port(), n.dir().to_path_buf()))
        .collect();
    assert_eq!(processes.len(), 5);
    drop(deployment);
    let deadline = Instant::now() + Duration::from_secs(5);
    for (port, dir) in processes {
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
