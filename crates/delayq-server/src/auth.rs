//! Bearer tokens and their roles. A token is `send` (produce and read messages), `consume`
//! (receive and settle), `admin` (everything) or `monitor` (`/metrics` and `/readyz` only:
//! what a scraper or a load balancer needs, without an admin secret); `/readyz` takes any
//! token, `/openapi.json` and the lists and events any but a monitor's, `/healthz` none. With no tokens configured every request is allowed; the server
//! then binds loopback only unless told otherwise (`cmd/serve.rs`).

use std::fmt;

use axum::http::{header, HeaderMap, StatusCode};

use crate::error::{ApiError, ApiResult};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Send, get, cancel, reschedule.
    Send,
    /// Receive, ack, nack, extend, release.
    Consume,
    /// Everything, including queue stats and dead letters.
    Admin,
    /// `/metrics` and `/readyz`, nothing else.
    Monitor,
}

impl Role {
    fn parse(text: &str) -> Option<Role> {
        match text {
            "send" => Some(Role::Send),
            "consume" => Some(Role::Consume),
            "admin" => Some(Role::Admin),
            "monitor" => Some(Role::Monitor),
            _ => None,
        }
    }

    fn allows(self, needed: Role) -> bool {
        self == Role::Admin || self == needed
    }

    /// Whether it reads messages (their lists, events, the dashboard): every role but a
    /// monitor's.
    pub fn reads_messages(self) -> bool {
        self != Role::Monitor
    }
}

/// The configured tokens. Never printed: `Debug` shows only how many there are.
#[derive(Clone, Default)]
pub struct Tokens(Vec<Entry>);

#[derive(Clone)]
struct Entry {
    role: Role,
    token: Vec<u8>,
    id: TokenId,
}

/// Which token a request or a session holds, the same across reloads of the tokens file
/// (a token's place in the file is not): the first 8 bytes of its SHA-256. It counts a
/// token's open streams, and ends them when a reload removes the token.
pub type TokenId = u64;

fn id_of(token: &[u8]) -> TokenId {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(token);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tokens({} configured)", self.0.len())
    }
}

impl Tokens {
    /// Reads `role:token` entries separated by newlines or commas; `#` starts a comment.
    pub fn parse(text: &str) -> Result<Tokens, String> {
        let mut tokens = Vec::new();
        for (n, entry) in text
            .lines()
            .flat_map(|l| l.split('#').next().unwrap_or("").split(','))
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .enumerate()
        {
            let (role, token) = entry
                .split_once(':')
                .ok_or_else(|| format!("token entry {}: expected role:token", n + 1))?;
            let role = Role::parse(role.trim()).ok_or_else(|| {
                format!(
                    "token entry {}: role must be send, consume, admin or monitor",
                    n + 1
                )
            })?;
            let token = token.trim();
            if token.len() < 16 {
                return Err(format!(
                    "token entry {}: a token needs at least 16 characters",
                    n + 1
                ));
            }
            tokens.push(Entry {
                role,
                token: token.as_bytes().to_vec(),
                id: id_of(token.as_bytes()),
            });
        }
        Ok(Tokens(tokens))
    }

    /// The role of `presented` if it is one of these tokens, and the token itself (the key
    /// of a dashboard session's signature). Every token is compared, in constant time.
    pub fn find(&self, presented: &[u8]) -> Option<(Role, &[u8])> {
        let entry = &self.0[self.position(presented)?];
        Some((entry.role, entry.token.as_slice()))
    }

    /// The place in the list of `presented`, if it is one of these tokens.
    fn position(&self, presented: &[u8]) -> Option<usize> {
        // Every token is compared, each in constant time, so timing reveals nothing.
        let mut found = None;
        for (n, entry) in self.0.iter().enumerate() {
            if constant_time_eq(&entry.token, presented) {
                found = Some(n);
            }
        }
        found
    }

    /// Which token the request's bearer token is, `None` when auth is off or it is none of
    /// them: what counts a token's open streams.
    pub fn holder_of(&self, headers: &HeaderMap) -> Option<TokenId> {
        let n = self.position(bearer(headers)?.as_bytes())?;
        Some(self.0[n].id)
    }

    /// Whether the token `id` is one of these.
    pub fn has(&self, id: TokenId) -> bool {
        self.0.iter().any(|e| e.id == id)
    }

    /// Every token with its role and id.
    pub fn iter(&self) -> impl Iterator<Item = (Role, &[u8], TokenId)> {
        self.0.iter().map(|e| (e.role, e.token.as_slice(), e.id))
    }

    /// How many tokens of each role, as a log line says it: `admin 1, send 2`.
    pub fn summary(&self) -> String {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for entry in &self.0 {
            let role = format!("{:?}", entry.role).to_lowercase();
            match counts.iter_mut().find(|(r, _)| *r == role) {
                Some((_, n)) => *n += 1,
                None => counts.push((role, 1)),
            }
        }
        counts.sort();
        let parts: Vec<String> = counts.iter().map(|(r, n)| format!("{r} {n}")).collect();
        parts.join(", ")
    }

    /// True when no token is configured (auth is off).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Checks the request's bearer token against `needed`: 401 when it is missing or
    /// unknown, 403 when its role does not allow the route.
    pub fn authorize(&self, headers: &HeaderMap, needed: Role) -> ApiResult<()> {
        match self.authenticate(headers)? {
            Some(r) if !r.allows(needed) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("a {r:?} token cannot do this; it needs {needed:?} or Admin"),
            )),
            _ => Ok(()),
        }
    }

    /// The role of the request's bearer token (`None` when auth is off); 401 when it is
    /// missing or unknown.
    pub fn authenticate(&self, headers: &HeaderMap) -> ApiResult<Option<Role>> {
        if self.is_empty() {
            return Ok(None);
        }
        let Some(presented) = bearer(headers) else {
            return Err(unauthorized("missing bearer token"));
        };
        match self.find(presented.as_bytes()) {
            None => Err(unauthorized("unknown token")),
            Some((r, _)) => Ok(Some(r)),
        }
    }
}

/// The request's bearer token, as presented.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

fn unauthorized(why: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", why)
}

/// Equality whose time depends only on the lengths, not on where the bytes differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_and_rejects_bad_ones() {
        let t = Tokens::parse(
            "admin:aaaaaaaaaaaaaaaa # on call\nsend:bbbbbbbbbbbbbbbb, consume:cccccccccccccccc",
        )
        .expect("valid");
        assert_eq!(t.0.len(), 3);
        assert!(Tokens::parse("root:aaaaaaaaaaaaaaaa").is_err());
        assert!(Tokens::parse("admin:short").is_err());
        assert!(Tokens::parse("admin").is_err());
        assert!(!format!("{t:?}").contains("aaaa"), "tokens never printed");
    }

    #[test]
    fn compares_whole_tokens() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
