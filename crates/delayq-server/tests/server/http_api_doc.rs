//! `docs/http-api.md` cannot drift from the server: its route table lists every route of
//! `/openapi.json` by its full path and methods, and nothing else; the role it gives each
//! route is the one the server enforces (each role's token is let in, or answered 403, over
//! real HTTP, before any body is read); and its error table lists exactly the codes the
//! server answers with.

use std::collections::BTreeSet;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};

use crate::common::*;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/http-api.md");

const SEND: &str = "send-token-0123456789";
const CONSUME: &str = "consume-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";
const MONITOR: &str = "monitor-token-0123456789";

/// The rows of the markdown table whose header row starts with `header`.
fn table_rows(doc: &str, header: &str) -> Vec<Vec<String>> {
    doc.lines()
        .skip_while(|l| !l.starts_with(header))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            // Cells split at " | "; an escaped pipe (`\|`) stays in its cell.
            let inner = l.trim().trim_start_matches('|').trim_end_matches('|');
            inner
                .replace("\\|", "\u{1}")
                .split(" | ")
                .map(|c| c.trim().replace('\u{1}', "|"))
                .collect()
        })
        .collect()
}

/// One documented route: its methods, path and role.
struct Route {
    methods: Vec<String>,
    path: String,
    role: String,
}

fn documented_routes() -> Vec<Route> {
    let doc = std::fs::read_to_string(DOC).expect("docs/http-api.md");
    let rows = table_rows(&doc, "| route | does | role |");
    assert!(rows.len() > 20, "the route table: {}", rows.len());
    rows.into_iter()
        .map(|cells| {
            let route = cells[0].trim_matches('`');
            let (methods, path) = route.rsplit_once(' ').expect("METHODS /path");
            Route {
                methods: methods.split(", ").map(str::to_owned).collect(),
                path: path.to_owned(),
                role: cells.last().expect("a role").clone(),
            }
        })
        .collect()
}

#[tokio::test]
async fn the_route_table_lists_every_route_of_the_openapi_document_and_nothing_else() {
    let s = TestServer::start().await;
    let (status, api) = s.get("/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    let mut served = BTreeSet::new();
    for (path, ops) in api["paths"].as_object().expect("paths") {
        for method in ops.as_object().expect("operations").keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                served.insert(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    // Served beside the document it serves.
    served.insert("GET /openapi.json".into());
    let documented: BTreeSet<String> = documented_routes()
        .iter()
        .flat_map(|r| r.methods.iter().map(|m| format!("{m} {}", r.path)))
        .collect();
    let missing: Vec<_> = served.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&served).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "not in docs/http-api.md: {missing:?}; documented but not served: {extra:?}"
    );
}

/// The tokens a role's row lets in (the others are answered 403; none is 401).
fn allowed(role: &str) -> &'static [&'static str] {
    match role {
        "send" => &[SEND, ADMIN],
        "consume" => &[CONSUME, ADMIN],
        "monitor" => &[MONITOR, ADMIN],
        "admin" => &[ADMIN],
        "any but monitor" => &[SEND, CONSUME, ADMIN],
        "any" | "none" => &[SEND, CONSUME, ADMIN, MONITOR],
        other => panic!("a role the table's legend does not name: {other:?}"),
    }
}

#[tokio::test]
async fn each_route_lets_in_the_roles_the_table_gives_it_and_refuses_the_others() {
    let tokens = Tokens::parse(&format!(
        "send:{SEND}\nconsume:{CONSUME}\nadmin:{ADMIN}\nmonitor:{MONITOR}"
    ))
    .expect("tokens");
    let s = TestServer::start_with(Limits::default(), tokens).await;
    let http = http_client();
    for route in documented_routes() {
        let path = route
            .path
            .replace("{queue}", "doc-q")
            .replace("{id}", "m1")
            .replace("{name}", "nightly")
            .replace("{group}", "g1");
        for method in &route.methods {
            let method: Method = method.parse().expect("a method");
            let url = format!("{}{path}", s.base);
            // No body: a role is checked before one is read, and a route that lets the
            // token in answers what it answers to an empty request (400, 404, 415, ...).
            let call = |token: Option<&str>| {
                let mut req = http.request(method.clone(), &url);
                if let Some(t) = token {
                    req = req.bearer_auth(t);
                }
                async move { req.send().await.expect("request").status() }
            };
            let without = call(None).await;
            if route.role == "none" {
                assert_eq!(without, StatusCode::OK, "{method} {path} without a token");
            } else {
                assert_eq!(
                    without,
                    StatusCode::UNAUTHORIZED,
                    "{method} {path} without a token"
                );
            }
            for token in [SEND, CONSUME, ADMIN, MONITOR] {
                let status = call(Some(token)).await;
                let who = token.split('-').next().unwrap_or_default();
                if allowed(&route.role).contains(&token) {
                    assert!(
                        status != StatusCode::FORBIDDEN && status != StatusCode::UNAUTHORIZED,
                        "{method} {path} ({}) refused a {who} token: {status}",
                        route.role
                    );
                } else {
                    assert_eq!(
                        status,
                        StatusCode::FORBIDDEN,
                        "{method} {path} ({}) with a {who} token",
                        route.role
                    );
                }
            }
        }
    }
}

#[test]
fn the_error_table_lists_exactly_the_codes_the_server_answers_with() {
    let doc = std::fs::read_to_string(DOC).expect("docs/http-api.md");
    let rows = table_rows(&doc, "| code | status | when |");
    let documented: BTreeSet<String> = rows
        .iter()
        .map(|cells| cells[0].trim_matches('`').to_owned())
        .collect();
    let codes: BTreeSet<String> = delayq_server::error::CODES
        .iter()
        .map(|c| (*c).to_owned())
        .collect();
    assert_eq!(documented, codes, "docs/http-api.md's error table");
    for cells in &rows {
        let status: u16 = cells[1].parse().expect("a status");
        assert!((400..600).contains(&status), "{}: {status}", cells[0]);
    }
    // Every code literal the source hands to an error is one of them (a debug build also
    // refuses any other when it is made).
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let mut found = BTreeSet::new();
    let mut dirs = vec![std::path::PathBuf::from(src)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source");
                // The first string literal of each call that makes an error.
                for pattern in [
                    "bad_request(",
                    "too_large(",
                    "ApiError::new(",
                    "check_addresses(",
                    "\"code\": ",
                ] {
                    for (at, _) in text.match_indices(pattern) {
                        let call = &text[at + pattern.len()..];
                        let call = &call[..call.len().min(120)];
                        let Some(open) = call.find('"') else { continue };
                        if pattern.starts_with('"') && open != 0 {
                            continue; // "code": self.code
                        }
                        let literal = &call[open + 1..];
                        let code = &literal[..literal.find('"').unwrap_or(0)];
                        if !code.is_empty()
                            && code.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                        {
                            found.insert(code.to_owned());
                        }
                    }
                }
            }
        }
    }
    let unknown: Vec<_> = found.difference(&codes).collect();
    assert!(unknown.is_empty(), "codes not in CODES: {unknown:?}");
    assert!(found.len() > 30, "read the source's codes: {found:?}");
}

/// A path parameter that cannot be read, other than a queue name or an id, has its own
/// documented code (it was missing from the list: a debug build now refuses such a gap).
#[tokio::test]
async fn an_unreadable_path_parameter_is_invalid_path() {
    let s = TestServer::start().await;
    let answer = s.get("/v1/queues/q/schedules/%FF").await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_path");
}
