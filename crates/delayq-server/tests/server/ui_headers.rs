//! What the dashboard's answers tell the browser (issue 49, item 17): a Content Security
//! Policy that lets only the dashboard's own script run, and a session cookie marked
//! `Secure` when the dashboard is reached over HTTPS (through a proxy that says so).

use base64::Engine;
use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::StatusCode;
use sha2::{Digest, Sha256};

use crate::common::*;
use crate::ui::form_client;

const ADMIN: &str = "admin-token-ui-headers";

#[tokio::test]
async fn only_the_dashboards_own_script_may_run() {
    let tokens = Tokens::parse(&format!("admin:{ADMIN}")).expect("tokens");
    let s = TestServer::start_with(Limits::default(), tokens).await;
    let resp = s
        .http
        .get(format!("{}/ui/login", s.base))
        .send()
        .await
        .expect("page");
    assert_eq!(resp.status(), StatusCode::OK);
    let csp = resp
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .expect("a CSP")
        .to_owned();
    let html = resp.text().await.expect("html");
    let script = html
        .split("<script>")
        .nth(1)
        .and_then(|rest| rest.split("</script>").next())
        .expect("the page's script");
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(script));
    for directive in [
        "default-src 'none'".to_owned(),
        format!("script-src 'sha256-{hash}'"),
        "frame-ancestors 'none'".to_owned(),
        "form-action 'self'".to_owned(),
        "base-uri 'none'".to_owned(),
    ] {
        assert!(csp.contains(&directive), "{directive} is not in {csp}");
    }
    assert!(!csp.contains("unsafe-eval"), "{csp}");
}

#[tokio::test]
async fn the_session_cookie_is_secure_when_the_dashboard_is_reached_over_https() {
    let tokens = Tokens::parse(&format!("admin:{ADMIN}")).expect("tokens");
    let s = TestServer::start_with(Limits::default(), tokens).await;
    let login = |proto: Option<&'static str>| {
        let http = form_client();
        let mut req = http
            .post(format!("{}/ui/login", s.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={ADMIN}"));
        if let Some(p) = proto {
            req = req.header("x-forwarded-proto", p);
        }
        async move {
            let resp = req.send().await.expect("login");
            assert_eq!(resp.status(), StatusCode::SEE_OTHER);
            resp.headers()
                .get("set-cookie")
                .and_then(|v| v.to_str().ok())
                .expect("a cookie")
                .to_owned()
        }
    };
    let behind_https = login(Some("https")).await;
    assert!(behind_https.contains("; Secure"), "{behind_https}");
    // Plain HTTP on loopback (the default) keeps working: a Secure cookie would not be sent.
    let plain = login(None).await;
    assert!(!plain.contains("Secure"), "{plain}");
}
