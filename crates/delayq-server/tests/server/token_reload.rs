//! Tokens reload without a restart: `delayq serve` (the real binary) re-reads its tokens file
//! on SIGHUP and when the file changes. A removed token stops working at once, everywhere:
//! its requests are 401, its dashboard sessions end and its open event streams close. A
//! reload that fails keeps the tokens before and says why in the log.

use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;

use crate::common::*;
use crate::serve::Serve;
use crate::ui::{form_client, post_form};

const OLD: &str = "old-admin-token-0123456789";
const NEW: &str = "new-admin-token-0123456789";
const THIRD: &str = "third-admin-token-0123456789";
const WAIT: Duration = Duration::from_secs(10);

/// GET `path` with `token`: the status.
async fn status_with(serve: &Serve, path: &str, token: &str) -> StatusCode {
    serve
        .http
        .get(format!("{}{path}", serve.base))
        .bearer_auth(token)
        .send()
        .await
        .expect("request")
        .status()
}

fn write_tokens(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write the tokens file");
}

async fn start(dir: &Path, redis: &redis_fixture::RedisServer) -> (Serve, std::path::PathBuf) {
    let tokens = dir.join("tokens");
    write_tokens(&tokens, &format!("admin:{OLD}\n"));
    let log = dir.join("serve.log");
    let file = tokens.display().to_string();
    let args = ["--redis-url", &redis.url(), "--tokens-file", &file];
    (Serve::start_logged(&args, &[], &log).await, log)
}

#[tokio::test]
async fn sighup_reloads_the_tokens_and_a_removed_token_loses_requests_sessions_and_streams() {
    let redis = redis_fixture::RedisServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let (serve, log) = start(dir.path(), &redis).await;
    assert_eq!(status_with(&serve, "/v1/queues", OLD).await, StatusCode::OK);
    assert_eq!(
        status_with(&serve, "/v1/queues", NEW).await,
        StatusCode::UNAUTHORIZED
    );

    // What OLD holds: a dashboard session and an open event stream.
    let http = form_client();
    let login = post_form(
        &http,
        &format!("{}/ui/login", serve.base),
        None,
        &[("token", OLD)],
    )
    .await;
    assert_eq!(login.status(), StatusCode::SEE_OTHER);
    let cookie = login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .to_owned();
    let page = |cookie: String| {
        let (http, url) = (http.clone(), format!("{}/ui", serve.base));
        async move {
            let resp = http.get(url).header("cookie", cookie).send().await;
            resp.expect("page").status()
        }
    };
    assert_eq!(page(cookie.clone()).await, StatusCode::OK);
    let enabled = serve
        .http
        .patch(format!("{}/v1/queues/watched", serve.base))
        .bearer_auth(OLD)
        .json(&serde_json::json!({ "events": {} }))
        .send()
        .await
        .expect("patch");
    assert_eq!(enabled.status(), StatusCode::OK);
    let stream = serve
        .http
        .get(format!("{}/v1/queues/watched/events", serve.base))
        .bearer_auth(OLD)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("stream");
    assert_eq!(stream.status(), StatusCode::OK);
    let mut frames = stream;
    let opening = tokio::time::timeout(WAIT, frames.chunk()).await;
    assert!(matches!(opening, Ok(Ok(Some(_)))), "the stream opens");

    // OLD out, NEW in, told by SIGHUP.
    write_tokens(&dir.path().join("tokens"), &format!("admin:{NEW}\n"));
    serve.signal("HUP");
    wait_until(WAIT, "NEW to be let in", || async {
        status_with(&serve, "/v1/queues", NEW).await == StatusCode::OK
    })
    .await;
    assert_eq!(
        status_with(&serve, "/v1/queues", OLD).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        page(cookie).await,
        StatusCode::SEE_OTHER,
        "OLD's session ended"
    );
    let ended = tokio::time::timeout(WAIT, async {
        while let Ok(Some(_)) = frames.chunk().await {}
    })
    .await;
    assert!(ended.is_ok(), "OLD's event stream was not closed");

    // A reload that fails keeps what was there, and says why.
    write_tokens(&dir.path().join("tokens"), "admin:too-short\n");
    serve.signal("HUP");
    wait_until(WAIT, "the failed reload in the log", || async {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("tokens not reloaded"))
    })
    .await;
    assert_eq!(status_with(&serve, "/v1/queues", NEW).await, StatusCode::OK);
    write_tokens(&dir.path().join("tokens"), "# every token removed\n");
    serve.signal("HUP");
    wait_until(WAIT, "the empty file refused in the log", || async {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("the file has no tokens"))
    })
    .await;
    assert_eq!(status_with(&serve, "/v1/queues", NEW).await, StatusCode::OK);
    assert_eq!(
        status_with(&serve, "/v1/queues", "anything-at-all-0123456789").await,
        StatusCode::UNAUTHORIZED,
        "authentication stays on"
    );
    // The audit log has each reload: the one that took, then the two refused, newest first.
    let audit = serve
        .http
        .get(format!("{}/v1/audit", serve.base))
        .bearer_auth(NEW)
        .send()
        .await
        .expect("audit");
    let entries: serde_json::Value = audit.json().await.expect("json");
    let reloads: Vec<&str> = entries["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["action"] == "tokens_reloaded")
        .filter_map(|e| e["outcome"].as_str())
        .collect();
    // (The file's watcher may also have seen a change before its SIGHUP: a reload more.)
    assert_eq!(reloads.first(), Some(&"failed"), "{entries}");
    assert!(
        reloads.iter().filter(|o| **o == "failed").count() >= 2,
        "{entries}"
    );
    assert!(reloads.contains(&"ok"), "{entries}");
    let log = serve.terminate();
    for secret in [OLD, NEW] {
        assert!(!log.contains(secret), "a token in the log: {log}");
    }
}

#[tokio::test]
async fn a_changed_tokens_file_is_reloaded_without_a_signal() {
    let redis = redis_fixture::RedisServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let (serve, _log) = start(dir.path(), &redis).await;
    write_tokens(
        &dir.path().join("tokens"),
        &format!("admin:{OLD}\nadmin:{THIRD}\n"),
    );
    // The file is looked at every 5 s.
    wait_until(Duration::from_secs(20), "THIRD to be let in", || async {
        status_with(&serve, "/v1/queues", THIRD).await == StatusCode::OK
    })
    .await;
    assert_eq!(status_with(&serve, "/v1/queues", OLD).await, StatusCode::OK);
}
