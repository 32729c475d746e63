//! Queue names a client invents do not grow the server (issue 49, item 3): reads and
//! receives of queues nothing was written to register nothing in Redis and make no metric
//! series; a queue is registered when something is written to it, and its series appear
//! when it first counts something.

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::StatusCode;
use serde_json::json;

use crate::common::*;

const ADMIN: &str = "admin-token-invented";
const CONSUME: &str = "consume-token-invented";
const SEND: &str = "send-token-invented";

#[tokio::test]
async fn reads_of_invented_queues_register_nothing_and_make_no_series() {
    let tokens =
        Tokens::parse(&format!("admin:{ADMIN}\nconsume:{CONSUME}\nsend:{SEND}")).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    let before = all_keys(&s.redis);

    s.token = Some(CONSUME.into());
    for i in 0..30 {
        let q = format!("invented-{i}");
        let (status, body) = s
            .post(
                &format!("/v1/queues/{q}/receive"),
                json!({ "max": 1, "wait": "0s" }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["deliveries"], json!([]));
        for read in [
            format!("/v1/queues/{q}/messages?state=ready"),
            format!("/v1/queues/{q}/messages/some-id"),
            format!("/v1/queues/{q}/events"),
        ] {
            let (status, body) = s.get(&read).await;
            // Answered, found nothing, or refused to this role: none of it registers.
            assert!(
                [StatusCode::OK, StatusCode::NOT_FOUND, StatusCode::FORBIDDEN].contains(&status),
                "{read}: {status} {body}"
            );
        }
    }
    assert_eq!(all_keys(&s.redis), before, "reads wrote to Redis");

    s.token = Some(ADMIN.into());
    let (_, queues) = s.get("/v1/queues").await;
    assert!(
        !queues.to_string().contains("invented-"),
        "invented names were registered: {queues}"
    );
    let (status, metrics) = s.get_text("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !metrics.contains("queue=\"invented-"),
        "invented names have series: {}",
        metrics
            .lines()
            .filter(|l| l.contains("invented-"))
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );

    // A send registers its queue, and its count has a series.
    s.token = Some(SEND.into());
    let sent = s
        .post("/v1/queues/invented-0/messages", json!({ "payload": 1 }))
        .await;
    assert_eq!(sent.0, StatusCode::CREATED, "{}", sent.1);
    s.token = Some(ADMIN.into());
    let (_, queues) = s.get("/v1/queues").await;
    assert!(queues.to_string().contains("invented-0"), "{queues}");
    let (_, metrics) = s.get_text("/metrics").await;
    assert!(
        metrics.contains("delayq_messages_sent_total{queue=\"invented-0\"} 1"),
        "{metrics}"
    );
    assert!(!metrics.contains("queue=\"invented-1\""));
}
