//! A queue's groups over HTTP and on the dashboard: the list (most messages first), one
//! group's counts and settings, its pause and its own concurrency; admins only (a group is a
//! tenant's name), and a dashboard action needs an admin session and its CSRF token.

use reqwest::{Method, StatusCode};
use serde_json::json;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;

use crate::common::*;
use crate::ui::{csrf_in, page_as, post_form, session_cookie};

const ADMIN: &str = "admin-token-0123456789";
const SEND: &str = "send-token-0123456789";

async fn secured() -> TestServer {
    let tokens = Tokens::parse(&format!("admin:{ADMIN}\nsend:{SEND}")).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some(ADMIN.into());
    s
}

async fn send(s: &TestServer, group: &str, n: usize) {
    for i in 0..n {
        let (status, body) = s
            .post(
                "/v1/queues/saas/messages",
                json!({ "payload": i, "group": group }),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
}

#[tokio::test]
async fn groups_are_listed_shown_paused_and_given_their_own_limit() {
    let mut s = secured().await;
    send(&s, "acme", 3).await;
    send(&s, "globex", 1).await;
    let (status, list) = s.get("/v1/queues/saas/groups?limit=10").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(
        list,
        json!({ "total": 2, "groups": [
            { "name": "acme", "messages": 3 }, { "name": "globex", "messages": 1 }
        ] })
    );

    let (status, acme) = s
        .call(
            Method::PATCH,
            "/v1/queues/saas/groups/acme",
            Some(json!({ "paused": true, "concurrency": 2, "weight": 3 })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{acme}");
    assert_eq!(
        acme,
        json!({ "name": "acme", "delayed": 0, "ready": 3, "in_flight": 0, "paused": true,
                "concurrency": 2, "own_concurrency": 2, "weight": 3,
                "rate_limit": null, "own_rate_limit": null })
    );
    // Paused: only globex is delivered.
    let got = receive(&s, "saas", 10, "0s").await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["group"], "globex");
    // Resumed: acme gives two, its own limit.
    let (status, _) = s
        .call(
            Method::PATCH,
            "/v1/queues/saas/groups/acme",
            Some(json!({ "paused": false })),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(receive(&s, "saas", 10, "0s").await.len(), 2);
    let (_, acme) = s.get("/v1/queues/saas/groups/acme").await;
    assert_eq!(
        (acme["in_flight"].as_u64(), acme["ready"].as_u64()),
        (Some(2), Some(1))
    );

    let bad = s
        .call(
            Method::PATCH,
            "/v1/queues/saas/groups/acme",
            Some(json!({ "weight": 0 })),
        )
        .await;
    assert_error(&bad, StatusCode::BAD_REQUEST, "invalid_option");
    let bad = s.get("/v1/queues/saas/groups/not%20a%20group").await;
    assert_error(&bad, StatusCode::BAD_REQUEST, "invalid_group");

    // A send token sees no group, and changes none.
    s.token = Some(SEND.into());
    let refused = s.get("/v1/queues/saas/groups").await;
    assert_eq!(refused.0, StatusCode::FORBIDDEN);
    let refused = s
        .call(
            Method::PATCH,
            "/v1/queues/saas/groups/acme",
            Some(json!({ "paused": true })),
        )
        .await;
    assert_eq!(refused.0, StatusCode::FORBIDDEN);
    s.token = Some(ADMIN.into());
    let (_, acme) = s.get("/v1/queues/saas/groups/acme").await;
    assert_eq!(acme["paused"], false);
    s.shutdown().await;
}

#[tokio::test]
async fn the_dashboard_shows_a_group_and_only_an_admin_session_pauses_it() {
    let s = secured().await;
    send(&s, "acme", 2).await;
    let http = crate::ui::form_client();
    let admin = session_cookie(&s, ADMIN).await;
    let queue_page = page_as(&http, &s, &admin, "/ui/queues/saas").await;
    assert!(queue_page.contains("Top groups"), "{queue_page}");
    assert!(queue_page.contains("/ui/queues/saas/groups/acme"));
    let group_page = page_as(&http, &s, &admin, "/ui/queues/saas/groups/acme").await;
    assert!(group_page.contains("Group acme"), "{group_page}");
    let csrf = csrf_in(&group_page);

    let act = format!("{}/ui/queues/saas/groups/acme/act", s.base);
    let sender = session_cookie(&s, SEND).await;
    for (cookie, form) in [
        (
            Some(&sender),
            vec![("action", "pause"), ("csrf", csrf.as_str())],
        ),
        (Some(&admin), vec![("action", "pause")]),
    ] {
        let resp = post_form(&http, &act, cookie.map(String::as_str), &form).await;
        assert!(
            matches!(
                resp.status(),
                StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED
            ),
            "{form:?}: {}",
            resp.status()
        );
    }
    let (_, acme) = s.get("/v1/queues/saas/groups/acme").await;
    assert_eq!(acme["paused"], false, "a refused action acted");
    let resp = post_form(
        &http,
        &act,
        Some(&admin),
        &[("action", "pause"), ("csrf", &csrf)],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let (_, acme) = s.get("/v1/queues/saas/groups/acme").await;
    assert_eq!(acme["paused"], true);
    let resp = post_form(
        &http,
        &act,
        Some(&admin),
        &[
            ("action", "settings"),
            ("csrf", &csrf),
            ("limit", "1"),
            ("weight", "2"),
            ("rate", "5"),
            ("burst", ""),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let (_, acme) = s.get("/v1/queues/saas/groups/acme").await;
    assert_eq!(
        (
            acme["own_concurrency"].as_u64(),
            acme["weight"].as_u64(),
            &acme["own_rate_limit"]
        ),
        (Some(1), Some(2), &json!({ "per_second": 5, "burst": 1 }))
    );
    let group_page = page_as(&http, &s, &admin, "/ui/queues/saas/groups/acme").await;
    assert!(group_page.contains("5/s, burst 1"), "{group_page}");

    // The queue page sets the rate limit of each group.
    let queue_page = page_as(&http, &s, &admin, "/ui/queues/saas").await;
    let resp = post_form(
        &http,
        &format!("{}/ui/queues/saas/act", s.base),
        Some(&admin),
        &[
            ("action", "group_rate_limit"),
            ("csrf", &csrf_in(&queue_page)),
            ("rate", "20"),
            ("burst", "4"),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let (_, stats) = s.get("/v1/queues/saas").await;
    assert_eq!(
        stats["group_rate_limit"],
        json!({ "per_second": 20, "burst": 4 })
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_groups_rate_limit_is_set_over_http_and_paces_only_that_group() {
    let mut s = secured().await;
    send(&s, "acme", 5).await;
    send(&s, "globex", 5).await;
    let (status, stats) = s
        .call(
            Method::PATCH,
            "/v1/queues/saas",
            Some(json!({ "group_rate_limit": { "per_second": 1, "burst": 2 } })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(
        stats["group_rate_limit"],
        json!({ "per_second": 1, "burst": 2 })
    );
    let (status, globex) = s
        .call(
            Method::PATCH,
            "/v1/queues/saas/groups/globex",
            Some(json!({ "rate_limit": { "per_second": 1000, "burst": 10 } })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{globex}");
    assert_eq!(
        (&globex["rate_limit"], &globex["own_rate_limit"]),
        (
            &json!({ "per_second": 1000, "burst": 10 }),
            &json!({ "per_second": 1000, "burst": 10 })
        )
    );
    let (_, acme) = s.get("/v1/queues/saas/groups/acme").await;
    assert_eq!(
        (&acme["rate_limit"], &acme["own_rate_limit"]),
        (&json!({ "per_second": 1, "burst": 2 }), &json!(null))
    );

    // acme gives its burst of 2; globex, by its own limit, all 5.
    let got = receive(&s, "saas", 100, "0s").await;
    let of = |g: &str| got.iter().filter(|m| m["group"] == g).count();
    assert_eq!((of("acme"), of("globex")), (2, 5));

    for bad in [
        json!({ "rate_limit": { "per_second": 0 } }),
        json!({ "rate_limit": { "per_second": 1, "burst": 0 } }),
        json!({ "rate_limit": "fast" }),
    ] {
        let refused = s
            .call(Method::PATCH, "/v1/queues/saas/groups/acme", Some(bad))
            .await;
        assert_eq!(refused.0, StatusCode::BAD_REQUEST, "{}", refused.1);
    }
    // A send token changes no limit.
    s.token = Some(SEND.into());
    let refused = s
        .call(
            Method::PATCH,
            "/v1/queues/saas/groups/acme",
            Some(json!({ "rate_limit": null })),
        )
        .await;
    assert_eq!(refused.0, StatusCode::FORBIDDEN);
    s.token = Some(ADMIN.into());
    let (status, acme) = s
        .call(
            Method::PATCH,
            "/v1/queues/saas/groups/globex",
            Some(json!({ "rate_limit": null })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{acme}");
    assert_eq!(acme["own_rate_limit"], json!(null));
    s.shutdown().await;
}
