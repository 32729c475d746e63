//! The operations kit in `deploy/` cannot drift from the server: every metric that its
//! Prometheus alert rules and its Grafana dashboard use is one a running server exports,
//! under that name and shape (a histogram's `_bucket` series, say), once the server has
//! done what the metric counts: sends, a push, a webhook, a dead letter, an expiry, a lease
//! that ran out (a queue's series are made when it first counts something).

use std::collections::BTreeSet;
use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::*;
use crate::receiver::{now_ms, Receiver};

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");

/// Every `delayq_…` name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("delayq_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.insert(name);
    }
    names
}

/// The names the kit's queries use: the alert rules' and the dashboard's expressions.
fn names_the_kit_uses() -> BTreeSet<String> {
    let rules = std::fs::read_to_string(format!("{DEPLOY}/prometheus/delayq-alerts.yml"))
        .expect("alert rules");
    let expressions: String = rules
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{DEPLOY}/grafana/delayq-dashboard.json"))
            .expect("dashboard"),
    )
    .expect("the dashboard is JSON");
    let mut used = metric_names(&expressions);
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            used.extend(metric_names(target["expr"].as_str().expect("expr")));
        }
    }
    // Words of the rules' texts, not metrics.
    used.retain(|n| n != "delayq_" && !n.ends_with('_'));
    used
}

#[tokio::test]
async fn every_metric_the_alerts_and_the_dashboard_use_is_exported() {
    let limits = Limits {
        push_allow: vec!["127.0.0.0/8".parse().expect("network")],
        ..Limits::default()
    };
    let s = TestServer::start_with(limits, Tokens::default()).await;
    let receiver = Receiver::start().await;
    let push = json!({ "url": format!("{}/hook", receiver.url) });
    let (status, body) = s
        .call(Method::PUT, "/v1/queues/pushed/push", Some(push))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let hooks =
        json!({ "webhooks": [{ "url": format!("{}/events", receiver.url), "kinds": ["sent"] }] });
    let (status, body) = s
        .call(Method::PUT, "/v1/queues/hooked/webhooks", Some(hooks))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    s.post(
        "/v1/queues/pushed/messages",
        json!({ "payload": 1, "id": "p" }),
    )
    .await;
    s.post(
        "/v1/queues/hooked/messages",
        json!({ "payload": 1, "id": "h" }),
    )
    .await;
    s.post(
        "/v1/queues/dying/messages",
        json!({ "payload": 1, "id": "d", "max_attempts": 1 }),
    )
    .await;
    let got = receive(&s, "dying", 1, "5s").await;
    let nack = json!({ "receipt": got[0]["receipt"], "error": "for the dead letter metrics" });
    s.post("/v1/queues/dying/nack", nack).await;
    // A message whose deadline passes before anything claims it (the claim after expires
    // it), and a lease that runs out.
    s.post(
        "/v1/queues/late/messages",
        json!({ "payload": 1, "id": "x", "ttl": "20ms" }),
    )
    .await;
    let (_, x) = s.get("/v1/queues/late/messages/x").await;
    let deadline = x["expires_at_ms"].as_u64().expect("a deadline");
    wait_until(Duration::from_secs(5), "the deadline to pass", || async {
        now_ms() > deadline + 5
    })
    .await;
    assert!(receive(&s, "late", 1, "0s").await.is_empty(), "x expired");
    s.post(
        "/v1/queues/leased/messages",
        json!({ "payload": 2, "id": "l" }),
    )
    .await;
    let (_, held) = s
        .post(
            "/v1/queues/leased/receive",
            json!({ "max": 1, "wait": "5s", "lease": "50ms" }),
        )
        .await;
    assert_eq!(held["deliveries"][0]["id"], "l", "{held}");
    wait_until(
        Duration::from_secs(10),
        "the lease to be reclaimed",
        || async { !receive(&s, "leased", 1, "0s").await.is_empty() },
    )
    .await;

    let used = names_the_kit_uses();
    assert!(used.len() >= 10, "read the kit's queries: {used:?}");
    let scrape = || async {
        let (_, text) = s.get_text("/metrics").await;
        let exported: BTreeSet<String> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split(['{', ' ']).next())
            .map(str::to_owned)
            .collect();
        used.difference(&exported).cloned().collect::<Vec<_>>()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let missing = scrape().await;
        if missing.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the kit uses metrics the server does not export: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
