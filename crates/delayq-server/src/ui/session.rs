//! Dashboard sessions: the login form takes an API token and sets a cookie that proves it
//! without holding it, and every action carries a CSRF token derived from the same key.
//!
//! The cookie is `<expiry unix s>.<token id, hex>.<signature>`. The signature is the hex
//! HMAC-SHA256 of `"delayq-ui-session." + expiry` under the token's key, which is
//! HMAC-SHA256(the servers' session secret, the token's secret's SHA-256). So a request
//! checks one signature however many tokens there are, nothing is stored per session, any
//! server on the same Redis with the same tokens accepts it, and removing a token from the
//! configuration ends its sessions. The session secret is random, made once and kept in
//! Redis (`AppState::session_secret`): the tokens file holds only SHA-256s of secrets, and
//! with it alone no cookie can be made. The CSRF token is the HMAC of `"delayq-ui-csrf." +
//! expiry` under the same key, so a page from another site can neither read nor guess it.
//! With no tokens configured (the server then listens on loopback only) everyone is admin,
//! and the key is a random one of this process.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::auth::{constant_time_eq, Caller, Role, Tokens};
use crate::push::signature::hex;

/// The session cookie's name.
pub const COOKIE: &str = "delayq_session";

/// How long a login lasts.
pub const LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// A logged-in visitor: what they may do, and the CSRF token their forms carry.
#[derive(Debug, Clone)]
pub struct Session {
    /// The role of the token logged in with (admin when auth is off).
    pub role: Role,
    /// The CSRF token of this session's forms.
    pub csrf: String,
    /// False when auth is off: there is nothing to log out of.
    pub logged_in: bool,
    /// The token logged in with: what the session's event streams count against, and what
    /// ends them when a reload removes it.
    pub token: Option<crate::auth::TokenId>,
    /// Who logged in (`None` when auth is off): its name and the queues it may see.
    pub caller: Option<Caller>,
}

impl Session {
    /// True when the visitor may act (requeue, cancel, pause...), not only look.
    pub fn can_act(&self) -> bool {
        self.role == Role::Admin
    }

    /// An admin-only URL (a push target's, a callback's, a webhook's, a message's own) as
    /// this session may see it: whole for an admin, else its scheme and host, since its path
    /// and query are often the receiver's credential (`redact.rs`).
    pub fn url_shown(&self, url: &str) -> String {
        match self.can_act() {
            true => url.to_owned(),
            false => crate::redact::origin_of(url),
        }
    }

    /// Whether this session may see and act on queue `name` (its token's scope).
    pub fn may_use(&self, name: &str) -> bool {
        crate::auth::in_scope(self.caller.as_ref(), name)
    }

    /// True when `presented` is this session's CSRF token.
    pub fn csrf_matches(&self, presented: &str) -> bool {
        constant_time_eq(self.csrf.as_bytes(), presented.as_bytes())
    }
}

/// The cookie value for a login with `token`, or `None` when it is not a configured token;
/// `secret` is the servers' session secret.
pub fn issue(tokens: &Tokens, secret: &[u8], token: &str) -> Option<String> {
    let (caller, digest) = tokens.find_with_digest(token.trim().as_bytes())?;
    if !caller.role.reads_messages() {
        // The dashboard shows messages; a monitor's token reads metrics only.
        return None;
    }
    let expiry = unix_now() + LIFETIME.as_secs();
    let key = key_of(secret, &digest);
    Some(format!(
        "{expiry}.{:016x}.{}",
        caller.id,
        mac(&key, "session", expiry)
    ))
}

/// The session a request's cookie proves, if any; `secret` is the servers' session secret.
/// With no tokens configured, every request has an admin session.
pub fn verify(tokens: &Tokens, secret: &[u8], cookie: Option<&str>) -> Option<Session> {
    if tokens.is_empty() {
        return Some(Session {
            role: Role::Admin,
            csrf: mac(open_key(), "csrf", 0),
            logged_in: false,
            token: None,
            caller: None,
        });
    }
    let mut parts = cookie?.split('.');
    let (expiry, id, signature) = (parts.next()?, parts.next()?, parts.next()?);
    let expiry: u64 = expiry.parse().ok()?;
    if parts.next().is_some() || expiry <= unix_now() {
        return None;
    }
    // The cookie names its token (by id, not a secret): one signature to check.
    let (caller, digest) = tokens.by_id(u64::from_str_radix(id, 16).ok()?)?;
    let key = key_of(secret, digest);
    let valid = caller.role.reads_messages()
        && constant_time_eq(
            mac(&key, "session", expiry).as_bytes(),
            signature.as_bytes(),
        );
    valid.then(|| Session {
        role: caller.role,
        csrf: mac(&key, "csrf", expiry),
        logged_in: true,
        token: Some(caller.id),
        caller: Some(caller.clone()),
    })
}

/// A token's session key: HMAC-SHA256(the servers' session secret, its secret's SHA-256).
fn key_of(secret: &[u8], digest: &[u8; 32]) -> [u8; 32] {
    // HMAC takes a key of any length; the error case cannot happen.
    let Ok(mut m) = Hmac::<Sha256>::new_from_slice(secret) else {
        return [0; 32];
    };
    m.update(digest);
    m.finalize().into_bytes().into()
}

/// The `Cookie` header's value of `name`.
pub fn cookie_value<'h>(header: Option<&'h str>, name: &str) -> Option<&'h str> {
    header?.split(';').find_map(|pair| {
        let (n, v) = pair.trim().split_once('=')?;
        (n == name).then_some(v)
    })
}

fn mac(key: &[u8], purpose: &str, expiry: u64) -> String {
    // HMAC takes a key of any length; the error case cannot happen.
    let Ok(mut m) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    m.update(format!("delayq-ui-{purpose}.{expiry}").as_bytes());
    hex(&m.finalize().into_bytes())
}

/// The key of sessions when no tokens are configured: random, this process's own.
fn open_key() -> &'static [u8] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(rand::random)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_proves_its_token_until_it_expires_or_the_token_goes() {
        let secret = b"the servers' session secret";
        let tokens = Tokens::parse("admin:admin-token-0123456789\nsend:send-token-0123456789")
            .expect("tokens");
        assert!(issue(&tokens, secret, "wrong-token-0123456789").is_none());
        let cookie = issue(&tokens, secret, "send-token-0123456789").expect("cookie");
        let session = verify(&tokens, secret, Some(&cookie)).expect("valid");
        assert_eq!(session.role, Role::Send);
        assert!(!session.can_act());
        assert!(session.csrf_matches(&session.csrf.clone()));
        assert!(!session.csrf_matches("0"));
        // Tampered, expired, made without the session secret, or its token removed: no
        // session.
        let (expiry, rest) = cookie.split_once('.').expect("dot");
        let later = expiry.parse::<u64>().expect("n") + 1;
        assert!(verify(&tokens, secret, Some(&format!("{later}.{rest}"))).is_none());
        let (id, sig) = rest.split_once('.').expect("two dots");
        let admin = tokens.find(b"admin-token-0123456789").expect("admin").id;
        let as_admin = format!("{expiry}.{admin:016x}.{sig}");
        assert!(
            verify(&tokens, secret, Some(&as_admin)).is_none(),
            "another token's id"
        );
        assert!(id.len() == 16);
        assert!(verify(&tokens, b"another secret", Some(&cookie)).is_none());
        let digest: [u8; 32] = <Sha256 as sha2::Digest>::digest(b"send-token-0123456789").into();
        let far = unix_now() + 60;
        let send = tokens.find(b"send-token-0123456789").expect("send").id;
        for key in [&b"send-token-0123456789"[..], &digest[..]] {
            let forged = format!("{far}.{send:016x}.{}", mac(key, "session", far));
            assert!(verify(&tokens, secret, Some(&forged)).is_none());
        }
        let fewer = Tokens::parse("admin:admin-token-0123456789").expect("tokens");
        assert!(verify(&fewer, secret, Some(&cookie)).is_none());
        assert!(verify(&tokens, secret, None).is_none());
        assert_eq!(
            cookie_value(Some("a=1; delayq_session=x.y; b=2"), COOKIE),
            Some("x.y")
        );
    }
}
