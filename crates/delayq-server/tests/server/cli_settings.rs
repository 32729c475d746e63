//! The CLI's settings of groups and expiry against a real Redis: sends with a group or a
//! deadline, `configure`'s group and expiry settings, `delayq groups`, and `delete-queue`.

use serde_json::json;

use crate::cli::{fails, json, ok};
use crate::common::*;

#[test]
fn send_takes_a_group_and_configure_a_group_concurrency() {
    let redis = RedisServer::start();
    json(
        &redis,
        &["send", "tenants", "x", "--id", "g1", "--group", "acme"],
    );
    assert_eq!(json(&redis, &["get", "tenants", "g1"])["group"], "acme");
    let set = json(
        &redis,
        &["configure", "tenants", "--group-concurrency", "1"],
    );
    assert_eq!(
        (set["groups"].as_u64(), set["group_concurrency"].as_u64()),
        (Some(1), Some(1))
    );
    let lifted = json(&redis, &["configure", "tenants", "--no-group-concurrency"]);
    assert!(lifted["group_concurrency"].is_null(), "{lifted}");
    let paced = json(
        &redis,
        &[
            "configure",
            "tenants",
            "--group-rate-limit",
            "10",
            "--group-burst",
            "3",
        ],
    );
    assert_eq!(
        paced["group_rate_limit"],
        serde_json::json!({ "per_second": 10, "burst": 3 })
    );
    let lifted = json(&redis, &["configure", "tenants", "--no-group-rate-limit"]);
    assert!(lifted["group_rate_limit"].is_null(), "{lifted}");
    let refused = fails(&redis, &["send", "tenants", "x", "--group", "a b"]);
    assert!(refused.contains("group"), "{refused}");
}

#[test]
fn send_takes_a_ttl_and_configure_sets_expiry() {
    let redis = RedisServer::start();
    json(
        &redis,
        &["send", "orders", "x", "--id", "o1", "--ttl", "15m"],
    );
    let got = json(&redis, &["get", "orders", "o1"]);
    let (due, expires) = (got["due_ms"].as_u64(), got["expires_at_ms"].as_u64());
    assert_eq!(expires, due.map(|d| d + 900_000), "{got}");
    json(
        &redis,
        &[
            "send",
            "orders",
            "y",
            "--id",
            "o2",
            "--expires-at",
            "2099-01-01T00:00:00Z",
        ],
    );
    assert_eq!(
        json(&redis, &["get", "orders", "o2"])["expires_at_ms"],
        4_070_908_800_000u64
    );
    let set = json(
        &redis,
        &[
            "configure",
            "orders",
            "--default-ttl",
            "10m",
            "--on-expire",
            "drop",
        ],
    );
    assert_eq!(
        (&set["default_ttl_ms"], &set["on_expire"]),
        (&serde_json::json!(600_000), &serde_json::json!("drop"))
    );
    let lifted = json(&redis, &["configure", "orders", "--no-default-ttl"]);
    assert!(lifted["default_ttl_ms"].is_null(), "{lifted}");
    let bounded = json(&redis, &["configure", "orders", "--max-delay", "1d"]);
    assert_eq!(bounded["max_delay_ms"], 86_400_000);
    let refused = fails(&redis, &["send", "orders", "x", "--delay", "2d"]);
    assert!(refused.contains("max delay"), "{refused}");
    let lifted = json(&redis, &["configure", "orders", "--no-max-delay"]);
    assert!(lifted["max_delay_ms"].is_null(), "{lifted}");
    let refused = fails(&redis, &["send", "orders", "x", "--ttl", "0s"]);
    assert!(refused.contains("ttl"), "{refused}");
}

#[test]
fn groups_are_listed_shown_paused_and_set() {
    let redis = RedisServer::start();
    for id in ["a1", "a2"] {
        json(
            &redis,
            &["send", "saas", "x", "--id", id, "--group", "acme"],
        );
    }
    json(
        &redis,
        &["send", "saas", "y", "--id", "b1", "--group", "globex"],
    );
    let list = json(&redis, &["groups", "list", "saas"]);
    assert_eq!(list["total"], 2);
    assert_eq!(
        list["groups"][0],
        serde_json::json!({ "name": "acme", "messages": 2 })
    );
    let paused = json(&redis, &["groups", "pause", "saas", "acme"]);
    assert_eq!(
        (paused["paused"].as_bool(), paused["ready"].as_u64()),
        (Some(true), Some(2))
    );
    let set = json(
        &redis,
        &[
            "groups",
            "set",
            "saas",
            "acme",
            "--concurrency",
            "1",
            "--weight",
            "4",
        ],
    );
    assert_eq!(
        (set["own_concurrency"].as_u64(), set["weight"].as_u64()),
        (Some(1), Some(4))
    );
    let back = json(
        &redis,
        &["groups", "set", "saas", "acme", "--queue-concurrency"],
    );
    assert!(back["own_concurrency"].is_null(), "{back}");
    let paced = json(
        &redis,
        &["groups", "set", "saas", "acme", "--rate-limit", "2"],
    );
    assert_eq!(
        paced["own_rate_limit"],
        serde_json::json!({ "per_second": 2, "burst": 1 })
    );
    assert!(ok(&redis, &["groups", "show", "saas", "acme"])
        .contains("rate limit  2/s, burst 1 (its own)"));
    let back = json(
        &redis,
        &["groups", "set", "saas", "acme", "--queue-rate-limit"],
    );
    assert!(back["own_rate_limit"].is_null(), "{back}");
    let resumed = json(&redis, &["groups", "resume", "saas", "acme"]);
    assert_eq!(resumed["paused"], false);
    let table = ok(&redis, &["groups", "show", "saas", "acme"]);
    assert!(table.contains("ready       2"), "{table}");
    assert!(fails(&redis, &["groups", "set", "saas", "acme"]).contains("nothing to change"));
}

/// `delayq delete-queue`: refused while the queue holds messages, --force deletes them too,
/// and what the server keeps of a queue (its webhooks, its push index entry) goes with it.
#[test]
fn delete_queue_refuses_a_queue_with_messages_unless_forced() {
    let redis = RedisServer::start();
    ok(&redis, &["send", "leaving", "bye"]);
    redis.cli(&["SADD", "dq:pushed", "leaving"]);
    let refused = fails(&redis, &["delete-queue", "leaving"]);
    assert!(refused.contains("holds 1 messages"), "{refused}");
    assert_eq!(json(&redis, &["stats", "leaving"])["ready"], 1);
    let deleted = json(&redis, &["delete-queue", "leaving", "--force"]);
    assert_eq!(
        (&deleted["queue"], &deleted["messages"], &deleted["raced"]),
        (&json!("leaving"), &json!(1), &json!(false))
    );
    let queues = json(&redis, &["queues"]);
    assert!(!queues.to_string().contains("leaving"), "{queues}");
    assert!(!redis.cli(&["SMEMBERS", "dq:pushed"]).contains("leaving"));
    let again = fails(&redis, &["delete-queue", "leaving"]);
    assert!(again.contains("no queue leaving"), "{again}");
}

/// A CLI run leaves no announcement behind in `dq:processes` (an upgrade would otherwise
/// wait out its lease, and `delayq format processes` would list a command that ended).
#[test]
fn cli_runs_leave_nothing_in_the_process_registry() {
    let redis = RedisServer::start();
    ok(&redis, &["send", "audit", "x"]);
    ok(&redis, &["stats", "audit"]);
    let left = redis.cli(&["ZRANGE", "dq:processes", "0", "-1"]);
    assert!(left.trim().is_empty(), "left behind: {left}");
}
