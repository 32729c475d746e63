//! Redis does not undo a script's writes when it fails half-way, so each script checks
//! its arguments before its first write. These calls are malformed on purpose; each must
//! fail with delayq's own error and leave every key exactly as it was.

use std::time::Duration;

use redis_fixture::RedisServer;

use crate::store::scripts::*;
use crate::values::options::ReceiveOptions;
use crate::values::record::lease_member;
use crate::{Backoff, DelayQ, SendOptions};

/// The keys of every queue: not the registry of processes, whose announcements are renewed
/// meanwhile.
const QUEUE_KEYS: &str = "dq:{*";

#[tokio::test]
async fn a_malformed_call_fails_before_its_first_write() {
    let server = RedisServer::start();
    let dq = DelayQ::connect(&server.url()).await.expect("connect");
    let q = dq.queue("lua").expect("queue");
    // Something in every state: pending, in flight (two), dead.
    let jittery = SendOptions::new()
        .backoff(Backoff::fixed(Duration::from_secs(60)).with_jitter(50))
        .max_attempts(5);
    for i in 0..3 {
        q.send(format!("m{i}").as_bytes(), &jittery)
            .await
            .expect("send");
    }
    let mut consumer = q.consumer().await.expect("consumer");
    let options = ReceiveOptions {
        max: 2,
        lease: Duration::from_secs(60),
        wait: Duration::ZERO,
    };
    let held = consumer.receive(&options).await.expect("receive");
    assert_eq!(held.len(), 2);
    let doomed = SendOptions::new().max_attempts(1).id("doomed");
    q.send(b"d", &doomed.delay(Duration::ZERO))
        .await
        .expect("send");
    let dead = consumer.receive(&options).await.expect("receive");
    q.nack(&dead[0], "boom", None).await.expect("nack");

    let m1 = lease_member(held[0].seq, held[0].token).to_vec();
    let m2 = lease_member(held[1].seq, held[1].token).to_vec();
    let keys = crate::store::keys::Keys::new("lua");
    let claim_record = keys.claim_record("test");
    let s = &*SCRIPTS;
    let b = |s: &str| s.as_bytes().to_vec();
    let cases: Vec<(&str, &crate::store::scripts::QueueScript, Vec<Vec<u8>>)> = vec![
        (
            "send: a bad due time",
            &s.send,
            vec![b("1"), b("0"), b(""), b("soon"), b("body")],
        ),
        (
            "send: a valid message, then a bad due time",
            &s.send,
            vec![
                b("1"),
                b("0"),
                b(""),
                b("0"),
                b("body"),
                b(""),
                b("@x"),
                b("body"),
            ],
        ),
        (
            "send: no partition count",
            &s.send,
            vec![
                b("x"),
                b("0"),
                b(""),
                b(""),
                b(""),
                b("0"),
                b("5"),
                b("body"),
            ],
        ),
        (
            "add_history: a field it does not keep, after a good one",
            &s.add_history,
            vec![b("p2"), b("1"), b("s"), b("5")],
        ),
        (
            "add_history: a count that is not one, after a good one",
            &s.add_history,
            vec![b("p2"), b("1"), b("p5"), b("-1")],
        ),
        ("add_history: not a pair", &s.add_history, vec![b("p2")]),
        (
            "send: not a group of four",
            &s.send,
            vec![b("1"), b("0"), b(""), b(""), b(""), b("0"), b("5")],
        ),
        (
            "send: a priority out of range",
            &s.send,
            vec![
                b("1"),
                b("0"),
                b(""),
                b(""),
                b(""),
                b("0"),
                b("12"),
                b("body"),
            ],
        ),
        (
            "send: a tick guard on a field that is not a tick's",
            &s.send,
            vec![
                b("1"),
                b("0"),
                b("paused"),
                b("5"),
                b(""),
                b("0"),
                b("5"),
                b("body"),
            ],
        ),
        (
            "send: a tick that is not a number",
            &s.send,
            vec![
                b("1"),
                b("0"),
                b("tick:x"),
                b("soon"),
                b(""),
                b("0"),
                b("5"),
                b("body"),
            ],
        ),
        (
            "ack: a lease member, then an argument too short for one",
            &s.ack,
            vec![m1.clone(), b("id")],
        ),
        (
            "nack: a valid failure, then a bad random number",
            &s.nack,
            vec![
                m1.clone(),
                b("f"),
                b("e"),
                b(""),
                b("0.5"),
                m2.clone(),
                b("f"),
                b("e"),
                b(""),
                b("x"),
            ],
        ),
        (
            "nack: a valid failure, then an unknown mode",
            &s.nack,
            vec![
                m1.clone(),
                b("f"),
                b("e"),
                b(""),
                b("0.5"),
                m2.clone(),
                b("z"),
                b("e"),
                b(""),
                b("0"),
            ],
        ),
        (
            "nack: a bad retry delay",
            &s.nack,
            vec![m1.clone(), b("f"), b("e"), b("soon"), b("0")],
        ),
        ("nack: not five values", &s.nack, vec![m1.clone(), b("f")]),
        (
            "extend: a bad lease",
            &s.extend,
            vec![b("long"), m1.clone()],
        ),
        ("bury: not a pair", &s.bury, vec![m1.clone()]),
        (
            "claim: a bad random number",
            &s.claim,
            vec![b("1"), b("1000"), b("x"), b("10"), b("5"), b("0")],
        ),
        (
            "claim: a carried ack too short for a lease member",
            &s.claim,
            vec![
                b("1"),
                b("1000"),
                b("0.5"),
                b("10"),
                b("5"),
                b("0"),
                b("0"),
                b("1"),
                m1.clone(),
                b("id"),
            ],
        ),
        (
            "requeue: a bad count",
            &s.dead_requeue,
            vec![b("oldest"), b("many")],
        ),
        ("requeue: an unknown mode", &s.dead_requeue, vec![b("all")]),
        (
            "purge: a bad count",
            &s.dead_purge,
            vec![b("oldest"), b("x")],
        ),
        (
            "control: a bad value after a good one",
            &s.control,
            vec![b("paused"), b("1"), b("window_ms"), b("-5")],
        ),
        (
            "control: no such setting",
            &s.control,
            vec![b("speed"), b("1")],
        ),
        ("control: not pairs", &s.control, vec![b("paused")]),
        (
            "push_target: an unknown operation",
            &s.push_target,
            vec![b("replace"), b("{}")],
        ),
        (
            "push_target: set, to nothing",
            &s.push_target,
            vec![b("set")],
        ),
        (
            "push_target: set, to an empty target",
            &s.push_target,
            vec![b("set"), b("")],
        ),
        (
            "group_control: no such setting",
            &s.group_control,
            vec![b("g"), b("speed"), b("1")],
        ),
        (
            "group_control: a bad value after a good one",
            &s.group_control,
            vec![b("g"), b("p"), b("1"), b("l"), b("0")],
        ),
        (
            "group_control: a weight over 1000",
            &s.group_control,
            vec![b("g"), b("w"), b("1001")],
        ),
        ("group_control: no group", &s.group_control, vec![b("")]),
        (
            "group_list: a page too long",
            &s.group_list,
            vec![b("0"), b("11001")],
        ),
    ];
    for (what, script, args) in cases {
        let before = server.every_key_dumped(QUEUE_KEYS);
        let mut inv = crate::handles::queue_core::invocation(&keys, script);
        if std::ptr::eq(script, &s.claim) {
            inv.key(&claim_record);
        }
        if std::ptr::eq(script, &s.push_target) {
            inv.key(crate::store::keys::Keys::push_target(q.name()));
        }
        for arg in &args {
            inv.arg(&arg[..]);
        }
        let result = q.core().invoke(&inv).await;
        let error = match result {
            Err(e) => e.to_string(),
            Ok(v) => panic!("{what}: accepted, answered {v:?}"),
        };
        assert!(error.contains("delayq:"), "{what}: {error}");
        assert_eq!(
            server.every_key_dumped(QUEUE_KEYS),
            before,
            "{what}: changed something"
        );
    }

    // A dead letter that cannot be read fails a requeue before it moves any other.
    server.cli(&["HSET", "dq:{lua}:dead:msgs", "bad", "xx"]);
    // Dead after the real one: the old script moved that one, then failed.
    server.cli(&["ZADD", "dq:{lua}:dead", "99999999999999", "bad"]);
    let before = server.every_key_dumped(QUEUE_KEYS);
    let error = q.dead_letters().requeue_all().await.expect_err("refused");
    assert!(error.to_string().contains("cannot be read"), "{error}");
    assert_eq!(
        server.every_key_dumped(QUEUE_KEYS),
        before,
        "requeue changed something"
    );
}
