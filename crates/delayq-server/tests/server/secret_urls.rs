//! Admin-only URLs stay the admin's (issue 49, item 2): a push target's URL and its failure
//! callback, webhook URLs and a message's own push URL often carry a secret in their path or
//! query. What a lower role reads (a message's errors, lists, events, the dashboard) names
//! their scheme and host only.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::*;
use crate::ui::{page_as, session_cookie};

const SEND: &str = "send-token-secret-urls";
const ADMIN: &str = "admin-token-secret-urls";
const SECRET_PATH: &str = "T0P-SECRET-PATH";
const SECRET_KEY: &str = "K3Y-IN-QUERY";

/// A loopback port that refuses connections for as long as the socket lives: bound, never
/// listening. (A port freed by a dropped listener can be taken by another test's server while
/// this test runs, which then answers the push with its own 404.)
fn refusing_port() -> (tokio::net::TcpSocket, u16) {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let port = socket.local_addr().expect("addr").port();
    (socket, port)
}

fn assert_no_secret(what: &str, text: &str) {
    assert!(
        !text.contains(SECRET_PATH) && !text.contains(SECRET_KEY),
        "{what} shows the URL's path or query: {text}"
    );
}

#[tokio::test]
async fn errors_lists_events_and_pages_name_only_the_scheme_and_host_to_lower_roles() {
    let limits = Limits {
        push_allow: vec!["127.0.0.0/8".parse().expect("network")],
        ..Limits::default()
    };
    let tokens = Tokens::parse(&format!("send:{SEND}\nadmin:{ADMIN}")).expect("tokens");
    let mut s = TestServer::start_with(limits, tokens).await;
    let (_held, port) = refusing_port();
    let url = format!("http://127.0.0.1:{port}/hooks/{SECRET_PATH}?code={SECRET_KEY}");
    s.token = Some(ADMIN.into());
    let (status, body) = s
        .call(
            Method::PUT,
            "/v1/queues/hooks/push",
            Some(json!({ "url": url, "failure_callback": url })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = s
        .call(
            Method::PUT,
            "/v1/queues/hooks/webhooks",
            Some(json!({ "webhooks": [{ "url": url }] })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // One message is retried (its error in the history), one dies at its first failure.
    s.token = Some(SEND.into());
    for (id, attempts) in [("retried", 2), ("died", 1)] {
        let sent = s
            .post(
                "/v1/queues/hooks/messages",
                json!({ "payload": 1, "id": id, "max_attempts": attempts,
                        "backoff": { "fixed": { "delay": "1h" } } }),
            )
            .await;
        assert_eq!(sent.0, StatusCode::CREATED, "{}", sent.1);
    }
    wait_until(Duration::from_secs(20), "both pushes to fail", || async {
        let retried = s.get("/v1/queues/hooks/messages/retried").await.1;
        let died = s.get("/v1/queues/hooks/messages/died").await.1;
        retried["last_error"].is_string() && died["state"] == "dead"
    })
    .await;

    for id in ["retried", "died"] {
        let (_, message) = s.get(&format!("/v1/queues/hooks/messages/{id}")).await;
        let error = message["last_error"].as_str().unwrap_or_default();
        assert!(
            error.contains(&format!("http://127.0.0.1:{port}")),
            "the error names where it failed: {message}"
        );
        assert_no_secret("a message's errors", &message.to_string());
    }
    for state in ["delayed", "dead"] {
        let (status, list) = s
            .get(&format!("/v1/queues/hooks/messages?state={state}"))
            .await;
        assert_eq!(status, StatusCode::OK, "{list}");
        assert_no_secret("a list", &list.to_string());
    }
    let (_, events) = s.get("/v1/queues/hooks/events?from=oldest").await;
    assert!(
        events.to_string().contains("cannot connect"),
        "the events hold the errors: {events}"
    );
    assert_no_secret("the events", &events.to_string());

    // The dashboard: a send session sees scheme and host; an admin session the whole URL.
    let http = crate::ui::form_client();
    let send_session = session_cookie(&s, SEND).await;
    let admin_session = session_cookie(&s, ADMIN).await;
    for page in [
        "/ui",
        "/ui/queues/hooks",
        "/ui/queues/hooks/messages/died",
        "/ui/queues/hooks/messages/retried",
    ] {
        let html = page_as(&http, &s, &send_session, page).await;
        assert!(html.contains("127.0.0.1"), "{page}: {html}");
        assert_no_secret(page, &html);
    }
    let html = page_as(&http, &s, &admin_session, "/ui/queues/hooks").await;
    assert!(html.contains(SECRET_PATH), "an admin sees the whole URL");
}
