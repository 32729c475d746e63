//! The page shell every dashboard page shares: head, header with the visitor's role and a
//! logout button, the stylesheet and the script, both inline (nothing to fetch, no CDN).

use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::session::Session;

const STYLE: &str = include_str!("assets/style.css");
const SCRIPT: &str = include_str!("assets/app.js");

/// The Content Security Policy of every dashboard answer: nothing loads but what the page
/// carries; the one script that may run is the page's own, by its hash (no other inline
/// script, injected or not, runs); the inline styles (the stylesheet, the charts' colours)
/// may apply; fetches and the event stream go to this server only; forms post to it only.
pub fn content_security_policy() -> &'static str {
    static POLICY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    POLICY.get_or_init(|| {
        use base64::Engine;
        use sha2::{Digest, Sha256};
        let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT));
        format!(
            "default-src 'none'; script-src 'sha256-{hash}'; style-src 'unsafe-inline'; \
             img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; \
             frame-ancestors 'none'"
        )
    })
}

/// How often a page marked for it refreshes itself, ms.
pub const REFRESH_MS: u32 = 5_000;

/// A whole page: `title`, then `body` in `<main>`. `refresh` makes it refresh itself.
pub fn page(title: &str, session: Option<&Session>, refresh: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                // No icon to fetch: an empty one keeps the browser from asking for /favicon.ico.
                link rel="icon" href="data:,";
                title { (title) " · delayq" }
                style { (PreEscaped(STYLE)) }
            }
            body data-refresh=(if refresh { REFRESH_MS } else { 0 }) {
                header {
                    a.brand href="/ui" { "delayq" }
                    @if let Some(s) = session {
                        @if s.can_act() { a href="/ui/audit" { "Audit log" } }
                        span.who {
                            (format!("{:?}", s.role).to_lowercase())
                            @if !s.can_act() { " · read-only" }
                        }
                        @if s.logged_in {
                            form.inline method="post" action="/ui/logout" {
                                input type="hidden" name="csrf" value=(s.csrf);
                                button #logout type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main { (body) }
                script { (PreEscaped(SCRIPT)) }
            }
        }
    }
}

/// A hidden CSRF field and the session's forms' other fields.
pub fn csrf(session: &Session) -> Markup {
    html! { input type="hidden" name="csrf" value=(session.csrf); }
}

/// A notice after an action (`?done=` on the page it returns to).
pub fn notice(text: Option<&str>) -> Markup {
    html! {
        @if let Some(t) = text {
            p.notice role="status" { (t) }
        }
    }
}
