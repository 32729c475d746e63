//! The queue scripts are one Redis Functions library, loaded by the first call that finds
//! it missing: after a restart that kept nothing, a `FUNCTION FLUSH`, on a cluster master
//! that never had it. `FLUSHALL` keeps it. A server that refuses Functions is served by
//! `EVALSHA`.

use std::time::Duration;

use redis_fixture::RedisCluster;

use crate::cluster::{exercise_all_scripts, exercise_queue};
use crate::common::*;

/// The names of the Functions libraries on `server`.
fn libraries(server: &RedisServer) -> Vec<String> {
    let listed = server.cli(&["FUNCTION", "LIST"]);
    let lines: Vec<&str> = listed.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|w| w[0] == "library_name")
        .map(|w| w[1].to_owned())
        .collect()
}

fn is_delayq_library(name: &str) -> bool {
    name.strip_prefix("delayq_")
        .is_some_and(|hash| hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[tokio::test]
async fn the_queue_scripts_run_as_one_library_loaded_on_first_use_beside_other_versions() {
    let (server, dq) = setup().await;
    // Another delayq version's library: ours must leave it alone.
    server.cli(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=delayq_0000000000000000\n\
         redis.register_function('delayq_0000000000000000_send', function() return 0 end)",
    ]);
    server.cli(&["CONFIG", "RESETSTAT"]);
    exercise_all_scripts(&dq).await;

    let ours: Vec<String> = libraries(&server)
        .into_iter()
        .filter(|name| name != "delayq_0000000000000000")
        .collect();
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert!(is_delayq_library(&ours[0]), "{ours:?}");
    assert!(
        libraries(&server).contains(&"delayq_0000000000000000".to_owned()),
        "the other version's library is gone"
    );
    assert!(command_calls(&server, "fcall") > 0, "no FCALL ran");
    // Loaded once, not per call.
    assert_eq!(command_calls(&server, "function|load"), 1);
}

#[tokio::test]
async fn a_server_that_lost_the_library_gets_it_again() {
    let (mut server, dq) = setup().await;
    let q = queue(&dq, "lost");
    exercise_queue(&q).await;
    assert_eq!(libraries(&server).len(), 1);

    // An administrator's FUNCTION FLUSH.
    server.cli(&["FUNCTION", "FLUSH"]);
    assert!(libraries(&server).is_empty());
    exercise_queue(&queue(&dq, "after-flush")).await;
    assert_eq!(libraries(&server).len(), 1);

    // FLUSHALL empties the data and keeps the library.
    server.cli(&["FLUSHALL"]);
    assert_eq!(libraries(&server).len(), 1);
    exercise_queue(&queue(&dq, "after-flushall")).await;

    // A restart that kept nothing: the same client carries on once the server is back.
    server.restart();
    assert!(libraries(&server).is_empty());
    let q = queue(&dq, "after-restart");
    wait_until(
        Duration::from_secs(10),
        "a send after the restart",
        || async {
            q.send(b"x", &delayq::SendOptions::new().id("x"))
                .await
                .is_ok()
        },
    )
    .await;
    assert_eq!(libraries(&server).len(), 1);
    assert_eq!(payloads(&claim(&q, 1).await), ["x"]);
}

#[tokio::test]
async fn a_server_that_refuses_functions_is_served_by_evalsha() {
    let server = RedisServer::start();
    let mut setuser = vec!["ACL", "SETUSER", "nofunctions"];
    setuser.extend_from_slice(crate::acl::ACL);
    setuser.extend_from_slice(&["-function", "-fcall", "-fcall_ro"]);
    server.cli(&setuser);
    let url = format!(
        "redis://nofunctions:a-long-secret-password@127.0.0.1:{}/",
        server.port()
    );
    let dq = delayq::DelayQ::connect(&url).await.expect("connect");
    server.cli(&["CONFIG", "RESETSTAT"]);
    exercise_all_scripts(&dq).await;
    assert!(libraries(&server).is_empty());
    assert_eq!(command_calls(&server, "fcall"), 0);
    assert!(command_calls(&server, "evalsha") > 0, "no EVALSHA ran");
}

#[tokio::test]
async fn every_cluster_master_without_the_library_gets_it() {
    let cluster = RedisCluster::start(3, 0);
    let dq = cluster_client(&cluster).await;
    let q = dq.create_queue("fn.parts", 6).await.expect("create");
    exercise_queue(&q).await;
    for &i in &cluster.masters() {
        assert_eq!(libraries(&cluster.nodes()[i]).len(), 1, "master {i}");
    }
    // As on masters that joined or were emptied.
    for &i in &cluster.masters() {
        cluster.nodes()[i].cli(&["FUNCTION", "FLUSH"]);
    }
    exercise_queue(&dq.create_queue("fn.again", 6).await.expect("create")).await;
    for &i in &cluster.masters() {
        assert_eq!(libraries(&cluster.nodes()[i]).len(), 1, "master {i}");
    }
}
