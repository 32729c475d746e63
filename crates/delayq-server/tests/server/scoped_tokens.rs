//! Tokens scoped to some queues (issue 54): a token of `a.*` acts on and sees `a.*` only.
//! Every other queue is 403 `out_of_scope`, the same whether it exists or not, and nothing is
//! written or shown. Over real HTTP, through the API, `/metrics` and the dashboard; and the
//! user's path: `delayq token create` makes the line a server takes.

use delayq_server::auth::{hashed_line, Scope, Tokens};
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;
use crate::ui::{form_client, page_as, session_cookie};

const ADMIN: &str = "admin-token-0123456789";
const A_SEND: &str = "a-send-secret-0123456789";
const A_CONSUME: &str = "a-consume-secret-0123456789";
const A_ADMIN: &str = "a-admin-secret-0123456789";
const A_MONITOR: &str = "a-monitor-secret-0123456789";

fn line(name: &str, role: &str, secret: &str) -> String {
    let scope = Scope::parse("a.*").expect("scope");
    hashed_line(name, role, &scope, secret).expect("line")
}

/// A server with an admin of every queue and four tokens of `a.*`, stored as hashes; `b.x`
/// holds a message, `a.x` one.
async fn scoped() -> TestServer {
    let text = [
        format!("admin:{ADMIN}"),
        line("a-send", "send", A_SEND),
        line("a-consume", "consume", A_CONSUME),
        line("a-admin", "admin", A_ADMIN),
        line("a-monitor", "monitor", A_MONITOR),
    ]
    .join("\n");
    assert!(!text.contains(A_SEND), "the file holds no scoped secret");
    let tokens = Tokens::parse(&text).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some(ADMIN.into());
    for q in ["a.x", "b.x"] {
        let body =
            json!({ "payload": format!("{q}-payload"), "id": format!("{q}-id"), "delay": "1h" });
        let (status, _) = s.post(&format!("/v1/queues/{q}/messages"), body).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    s
}

/// Every route that names a queue, as `q`: (method, path, body).
fn routes_of(q: &str) -> Vec<(Method, String, Option<Value>)> {
    let p = |rest: &str| format!("/v1/queues/{q}{rest}");
    vec![
        (Method::POST, p("/messages"), Some(json!({ "payload": 1 }))),
        (
            Method::POST,
            p("/batch"),
            Some(json!({ "messages": [{ "payload": 2 }] })),
        ),
        (Method::GET, p("/messages/b.x-id"), None),
        (Method::GET, p("/messages?state=delayed"), None),
        (Method::DELETE, p("/messages/b.x-id"), None),
        (
            Method::POST,
            p("/messages/b.x-id/reschedule"),
            Some(json!({ "delay": 0 })),
        ),
        (
            Method::POST,
            p("/cancel"),
            Some(json!({ "state": "delayed" })),
        ),
        (Method::POST, p("/receive"), Some(json!({ "max": 1 }))),
        (Method::POST, p("/ack"), Some(json!({ "receipt": "x" }))),
        (Method::GET, p("/events"), None),
        (Method::GET, p(""), None),
        (Method::PUT, p(""), Some(json!({ "partitions": 1 }))),
        (Method::DELETE, p(""), None),
        (Method::POST, p("/pause"), None),
        (Method::POST, p("/purge"), Some(json!({}))),
        (Method::GET, p("/dead"), None),
        (Method::GET, p("/push"), None),
        (Method::GET, p("/webhooks"), None),
        (Method::GET, p("/schedules"), None),
        (Method::GET, p("/groups"), None),
        (Method::GET, p("/format"), None),
    ]
}

#[tokio::test]
async fn a_token_of_a_queues_cannot_touch_another_queue_and_learns_nothing_of_it() {
    let mut s = scoped().await;
    let before = all_keys(&s.redis);
    for token in [A_ADMIN, A_SEND, A_CONSUME] {
        s.token = Some(token.into());
        let routes: Vec<_> = ["b.x", "b.never-used", "b%20bad"].map(routes_of).into();
        for i in 0..routes[0].len() {
            let mut answers = Vec::new();
            for of_queue in &routes {
                let (method, path, body) = of_queue[i].clone();
                let answer = s.call(method.clone(), &path, body).await;
                assert_eq!(
                    answer.0,
                    StatusCode::FORBIDDEN,
                    "{method} {path}: {}",
                    answer.1
                );
                answers.push(answer.1);
            }
            // An admin of a.* may use every route: its scope refuses. The others' role may
            // refuse first. Either way the answer is the same for a queue that exists, one
            // that does not, and a name that is not one.
            if token == A_ADMIN {
                assert_eq!(
                    answers[0]["error"]["code"], "out_of_scope",
                    "{:?}",
                    routes[0][i]
                );
            }
            assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
        }
        if token != A_SEND {
            let both = json!({ "queues": ["a.x", "b.x"], "max": 1 });
            let answer = s.post("/v1/receive", both).await;
            assert_error(&answer, StatusCode::FORBIDDEN, "out_of_scope");
        }
    }
    assert_eq!(all_keys(&s.redis), before, "nothing was written");
    s.token = Some(ADMIN.into());
    let (status, b) = s.get("/v1/queues/b.x/messages/b.x-id").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(b["payload"], "b.x-payload", "b.x's message is whole");
}

#[tokio::test]
async fn a_token_of_a_queues_works_on_them_and_lists_only_them() {
    let mut s = scoped().await;
    s.token = Some(A_SEND.into());
    let (status, _) = s
        .post("/v1/queues/a.y/messages", json!({ "payload": "now" }))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    s.token = Some(A_CONSUME.into());
    let got = receive(&s, "a.y", 1, "5s").await;
    assert_eq!(got[0]["payload"], "now");
    let ack = json!({ "receipt": got[0]["receipt"] });
    assert_eq!(
        s.post("/v1/queues/a.y/ack", ack).await.0,
        StatusCode::NO_CONTENT
    );

    s.token = Some(A_ADMIN.into());
    let (status, listed) = s.get("/v1/queues").await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = listed["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .filter_map(|q| q["name"].as_str())
        .collect();
    assert!(
        names.contains(&"a.x") && names.contains(&"a.y"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.starts_with("b.")), "{names:?}");
    assert_eq!(s.get("/v1/queues/a.x").await.0, StatusCode::OK);
    assert_error(
        &s.get("/v1/processes").await,
        StatusCode::FORBIDDEN,
        "out_of_scope",
    );

    // The scrapers: a monitor of a.* sees a.*'s series only; the admin of every queue all.
    s.token = Some(A_MONITOR.into());
    let (status, text) = s.get_text("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(text.contains("queue=\"a.x\""), "{text}");
    assert!(!text.contains("b.x"), "no series of b.x");
    assert!(
        text.contains("delayq_redis_up"),
        "the server's own series stay"
    );
    assert_error(
        &s.get("/v1/queues/a.x").await,
        StatusCode::FORBIDDEN,
        "forbidden",
    );
    s.token = Some(ADMIN.into());
    assert!(s.get_text("/metrics").await.1.contains("queue=\"b.x\""));
}

#[tokio::test]
async fn the_dashboard_of_a_scoped_token_shows_its_queues_only() {
    let s = scoped().await;
    let cookie = session_cookie(&s, A_ADMIN).await;
    let http = form_client();
    let overview = page_as(&http, &s, &cookie, "/ui").await;
    assert!(overview.contains("a.x"), "{overview}");
    assert!(!overview.contains("b.x"), "the overview lists no b.x");
    let page = |path: &str| {
        let http = http.clone();
        let url = format!("{}{path}", s.base);
        let cookie = cookie.clone();
        async move {
            let resp = http
                .get(url)
                .header("cookie", cookie)
                .send()
                .await
                .expect("page");
            (resp.status(), resp.text().await.expect("body"))
        }
    };
    assert_eq!(page("/ui/queues/a.x").await.0, StatusCode::OK);
    for path in [
        "/ui/queues/b.x",
        "/ui/queues/b.never-used",
        "/ui/queues/b.x/messages/b.x-id",
        "/ui/queues/b.x/events",
    ] {
        let (status, body) = page(path).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
        assert!(!body.contains("b.x-payload"), "{path}");
    }
}

/// The user's path: `delayq token create` prints a secret and a line; a server given the line
/// takes the secret, within its scope only.
#[tokio::test]
async fn a_created_token_works_within_its_queues() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["token", "create", "--name", "billing", "--role", "send"])
        .args(["--queues", "billing.*"])
        .output()
        .expect("run delayq token create");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    let secret = printed
        .lines()
        .find_map(|l| l.strip_prefix("token: "))
        .expect("a token: line")
        .trim();
    let file_line = printed
        .lines()
        .find_map(|l| l.strip_prefix("line:"))
        .expect("a line: line")
        .trim();
    assert!(file_line.starts_with("name=billing role=send queues=billing.* sha256="));
    assert!(!file_line.contains(secret));
    let tokens = Tokens::parse(file_line).expect("the server takes the line");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some(secret.to_owned());
    let sent = s
        .post("/v1/queues/billing.eu/messages", json!({ "payload": 1 }))
        .await;
    assert_eq!(sent.0, StatusCode::CREATED);
    let refused = s
        .post("/v1/queues/orders/messages", json!({ "payload": 1 }))
        .await;
    assert_error(&refused, StatusCode::FORBIDDEN, "out_of_scope");
}
