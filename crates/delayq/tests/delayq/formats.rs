//! Data formats and the rule for a rolling upgrade (`formats.rs` in the crate): a queue's
//! partitions name the format of their data; data of a newer format than this delayq reads
//! is refused with an error that names both formats, and nothing is written; an upgrade
//! stamps the newest format only while no process that reads only older ones is announced.

use std::time::Duration;

use delayq::{DelayQ, Error, Message, ReceiveOptions, SendOptions, DATA_FORMAT, FIRST_FORMAT};
use redis_fixture::RedisServer;

use crate::common::*;

/// The keys of every queue (not the registry of processes, renewed meanwhile).
const QUEUE_KEYS: &str = "dq:{*";

#[track_caller]
fn assert_newer(result: Result<impl std::fmt::Debug, Error>, what: &str) {
    match result {
        Err(Error::NewerFormat { found, supported }) => {
            let newer = (DATA_FORMAT + 1).to_string();
            assert_eq!(
                (found.as_str(), supported),
                (newer.as_str(), DATA_FORMAT),
                "{what}"
            );
            let text = Error::NewerFormat {
                found: found.clone(),
                supported,
            }
            .to_string();
            assert!(text.contains("upgrade this process"), "{what}: {text}");
        }
        other => panic!("{what}: {other:?}"),
    }
}

/// Announces a process that reads only format 1 in `server`'s registry, as a delayq of the
/// release before would (lease: 30 s from now).
fn announce_an_older_process(server: &RedisServer) {
    let deadline = (now_ms() + 30_000).to_string();
    server.cli(&[
        "ZADD",
        "dq:processes",
        &deadline,
        "1 old-host:4242:0000beef",
    ]);
}

fn stamp(server: &RedisServer, control: &str, format: u32) {
    server.cli(&["HSET", control, "format", &format.to_string()]);
}

const RECEIVE: ReceiveOptions = ReceiveOptions {
    max: 1,
    lease: Duration::from_secs(60),
    wait: Duration::ZERO,
};

#[tokio::test]
async fn data_of_a_newer_format_is_refused_and_nothing_is_written() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "orders");
    for id in ["a", "b"] {
        q.send(id.as_bytes(), &SendOptions::new().id(id))
            .await
            .expect("send");
    }
    let held = q
        .consumer()
        .await
        .expect("consumer")
        .receive(&RECEIVE)
        .await
        .expect("receive");
    assert_eq!(held.len(), 1);

    // A newer delayq upgraded the queue's data, and this process starts after.
    stamp(&server, "dq:{orders}:control", DATA_FORMAT + 1);
    let before = server.every_key_dumped(QUEUE_KEYS);
    let dq = DelayQ::connect(&server.url()).await.expect("connect");
    let q = queue(&dq, "orders");
    assert_newer(q.send(b"c", &SendOptions::new()).await, "send");
    let batch = [Message::new(b"x".to_vec(), SendOptions::new())];
    assert_newer(
        q.send_batch(&batch).await,
        "a batch without ids (no script)",
    );
    assert_newer(q.get("b").await, "get");
    assert_newer(q.cancel("b").await, "cancel");
    assert_newer(q.stats().await, "stats");
    assert_newer(q.pause().await, "pause");
    assert_newer(q.ack(&held[0]).await, "ack");
    let mut consumer = q.consumer().await.expect("consumer");
    assert_newer(consumer.receive(&RECEIVE).await, "receive");
    assert_newer(q.dead_letters().requeue_all().await, "requeue");
    assert_newer(q.upgrade_format().await, "upgrade");
    assert_eq!(
        server.every_key_dumped(QUEUE_KEYS),
        before,
        "something was written"
    );

    // Format 1 named, as a newer delayq leaves it for older processes: all goes on.
    stamp(&server, "dq:{orders}:control", FIRST_FORMAT);
    let dq = DelayQ::connect(&server.url()).await.expect("connect");
    let q = queue(&dq, "orders");
    q.ack(&held[0]).await.expect("ack");
    q.send_batch(&batch).await.expect("a batch");
}

#[tokio::test]
async fn a_process_that_announces_anew_reads_every_format_afresh() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "orders");
    q.send(b"a", &SendOptions::new()).await.expect("send");
    // This process read the format while its announcement stood; it goes by what it read
    // until it announces again (an upgrade waits for it meanwhile: the next test).
    stamp(&server, "dq:{orders}:control", DATA_FORMAT + 1);
    q.send(b"b", &SendOptions::new())
        .await
        .expect("read before");
    // Its lease runs out (here: taken back), so its next call announces anew.
    dq.withdraw().await.expect("withdraw");
    let before = server.every_key_dumped(QUEUE_KEYS);
    assert_newer(q.send(b"c", &SendOptions::new()).await, "send");
    let batch = [Message::new(b"x".to_vec(), SendOptions::new())];
    assert_newer(q.send_batch(&batch).await, "a batch");
    assert_eq!(
        server.every_key_dumped(QUEUE_KEYS),
        before,
        "something was written"
    );
}

#[tokio::test]
async fn an_upgrade_waits_for_every_process_that_reads_only_older_formats() {
    let (server, dq) = setup().await;
    // A queue of the release before: nothing names its format.
    server.cli(&["SET", "dq:{orders}:partitions", "4"]);
    let q = queue(&dq, "orders");
    for i in 0..40 {
        q.send(format!("m{i}").as_bytes(), &SendOptions::new())
            .await
            .expect("send");
    }
    let format = q.data_format().await.expect("format");
    assert_eq!(format.partitions, vec![FIRST_FORMAT; 4]);
    assert_eq!((format.format(), format.upgraded()), (FIRST_FORMAT, 0));

    announce_an_older_process(&server);
    let processes = dq.processes().await.expect("processes");
    assert!(
        processes
            .iter()
            .any(|p| p.newest_format == DATA_FORMAT && p.lease_left_ms > 0),
        "this process is announced: {processes:?}"
    );
    match q.upgrade_format().await {
        Err(Error::OlderProcesses { newest, processes }) => {
            assert_eq!(newest, DATA_FORMAT);
            assert_eq!(
                processes,
                vec!["old-host:4242:0000beef (reads up to format 1)".to_owned()]
            );
        }
        other => panic!("an upgrade with an older process running: {other:?}"),
    }
    assert_eq!(q.data_format().await.expect("format").upgraded(), 0);

    // The older process stops (its announcement goes), and the upgrade goes ahead.
    server.cli(&["ZREM", "dq:processes", "1 old-host:4242:0000beef"]);
    let format = q.upgrade_format().await.expect("upgrade");
    assert_eq!(format.partitions, vec![DATA_FORMAT; 4]);
    assert!(format.is_current());
    // Again: nothing left to do.
    assert_eq!(q.upgrade_format().await.expect("again"), format);

    // Nothing was rewritten, and every message is delivered once.
    let mut consumer = q.consumer().await.expect("consumer");
    let mut seen = std::collections::BTreeSet::new();
    let options = ReceiveOptions { max: 10, ..RECEIVE };
    loop {
        let got = consumer.receive(&options).await.expect("receive");
        if got.is_empty() {
            break;
        }
        for d in &got {
            assert!(seen.insert(d.payload.clone()), "twice: {d:?}");
            q.ack(d).await.expect("ack");
        }
    }
    assert_eq!(seen.len(), 40);
}

#[tokio::test]
async fn a_new_queue_is_stamped_unless_an_older_process_is_running() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "fresh");
    assert!(
        q.data_format().await.expect("format").partitions.is_empty(),
        "not used yet"
    );
    q.send(b"a", &SendOptions::new()).await.expect("send");
    assert_eq!(
        q.data_format().await.expect("format").partitions,
        vec![DATA_FORMAT]
    );
    let wide = dq.create_queue("wide", 3).await.expect("create");
    assert_eq!(
        wide.data_format().await.expect("format").partitions,
        vec![DATA_FORMAT; 3]
    );

    // With an older process running, a new queue starts in the format it reads.
    announce_an_older_process(&server);
    let other = DelayQ::connect(&server.url()).await.expect("connect");
    let q = queue(&other, "during-the-deploy");
    q.send(b"a", &SendOptions::new()).await.expect("send");
    assert_eq!(
        q.data_format().await.expect("format").partitions,
        vec![FIRST_FORMAT]
    );
}

/// The registry lists each process's role when it says one (`Config::process_role`), and
/// still reads the members of an older delayq, which have none; a role that would not fit in
/// a member is refused before anything is written.
#[tokio::test]
async fn processes_carry_their_role_and_older_members_still_read() {
    let server = RedisServer::start();
    announce_an_older_process(&server);
    let config = delayq::Config::default().process_role("worker");
    let dq = DelayQ::connect_with(&server.url(), config)
        .await
        .expect("connect");
    // It announces with its first call.
    queue(&dq, "orders")
        .send(b"a", &SendOptions::new())
        .await
        .expect("send");
    let processes = dq.processes().await.expect("processes");
    let mut seen: Vec<(String, Option<String>)> = processes
        .iter()
        .map(|p| (p.name.clone(), p.role.clone()))
        .collect();
    let mut expected = vec![
        (dq.process_name().to_owned(), Some("worker".to_owned())),
        ("old-host:4242:0000beef".to_owned(), None),
    ];
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected);
    for bad in ["", "two words", "UPPER", &"x".repeat(33)] {
        let config = delayq::Config::default().process_role(bad);
        let refused = DelayQ::connect_with(&server.url(), config).await;
        assert!(
            matches!(refused, Err(Error::Invalid(_))),
            "{bad:?}: {:?}",
            refused.err()
        );
    }
}
