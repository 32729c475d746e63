//! Bearer tokens: their names, roles and scopes. A token is `send` (produce and read
//! messages), `consume` (receive and settle), `admin` (everything) or `monitor` (`/metrics`
//! and `/readyz` only: what a scraper or a load balancer needs, without an admin secret);
//! `/readyz` takes any token, `/openapi.json` and the lists and events any but a monitor's,
//! `/healthz` none. A token may be scoped to some queues (`scope.rs`): it then acts on and
//! sees those only. With no tokens configured every request is allowed; the server then
//! binds loopback only unless told otherwise (`cmd/serve.rs`). The tokens file's forms are
//! in `tokens_file.rs`.

mod scope;
mod tokens_file;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};

use crate::error::{ApiError, ApiResult};

pub use scope::Scope;
pub use tokens_file::{hashed_line, new_secret};

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

    /// As the tokens file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Send => "send",
            Role::Consume => "consume",
            Role::Admin => "admin",
            Role::Monitor => "monitor",
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

/// Who a request (or a dashboard session) is: its token's name (in logs, never the
/// secret), role and queues.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's name: its `name=`, or made from its role and digest.
    pub name: Arc<str>,
    /// What it may do.
    pub role: Role,
    /// The queues it may touch.
    pub scope: Arc<Scope>,
    /// Which token it is, across reloads.
    pub id: TokenId,
}

/// Whether `caller` (`None`: auth is off, every queue) may touch queue `name`.
pub fn in_scope(caller: Option<&Caller>, name: &str) -> bool {
    caller.is_none_or(|c| c.scope.allows(name))
}

/// The answer to a request for a queue outside its token's scope: the same whether the queue
/// exists or not, and whatever its name, so that it reveals nothing.
pub fn out_of_scope() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "out_of_scope",
        "this token may not use that queue",
    )
}

/// The queue the request's path names (`{queue}`, as the client wrote it, percent-decoded)
/// if `caller`'s scope does not take it: what a route of a queue refuses. A path whose
/// parameters cannot be read is refused too (named ""): a scoped token gets no queue
/// it cannot be checked for. `None`: the path names no queue, or one in scope.
pub(crate) async fn queue_out_of_scope(parts: &mut Parts, caller: &Caller) -> Option<String> {
    if caller.scope.is_every_queue() {
        return None;
    }
    let Ok(params) = RawPathParams::from_request_parts(parts, &()).await else {
        return Some(String::new());
    };
    params
        .iter()
        .find(|(key, value)| *key == "queue" && !caller.scope.allows(value))
        .map(|(_, queue)| queue.to_owned())
}

/// The configured tokens. Never printed: `Debug` shows only how many there are.
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<Entry>,
    /// Each entry's place by its secret's digest, so that a request finds its token in one
    /// lookup however many there are. (A lookup by digest reveals through its timing no more
    /// than the answer does: a client cannot steer a SHA-256 towards a stored one byte by
    /// byte, as it could a secret compared byte by byte.)
    by_digest: HashMap<[u8; 32], usize>,
    /// Each entry's place by its id (a dashboard cookie names its token's id).
    by_id: HashMap<TokenId, usize>,
}

#[derive(Clone)]
struct Entry {
    caller: Caller,
    /// SHA-256 of the secret: all the server needs of it.
    digest: [u8; 32],
    /// The secret, when the file gives it in clear (`role:secret`): what `delayq health`
    /// can present.
    clear: Option<String>,
}

/// Which token a request or a session holds, the same across reloads of the tokens file
/// (a token's place in the file is not): the first 8 bytes of its secret's SHA-256. It
/// counts a token's open streams, and ends them when a reload removes the token.
pub type TokenId = u64;

fn id_of(digest: &[u8; 32]) -> TokenId {
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tokens({} configured)", self.entries.len())
    }
}

impl Tokens {
    /// Reads the tokens file's entries (`tokens_file.rs`).
    pub fn parse(text: &str) -> Result<Tokens, String> {
        let lines = tokens_file::parse(text)?;
        let entries: Vec<Entry> = lines
            .into_iter()
            .map(|l| Entry {
                caller: Caller {
                    name: l.name.into(),
                    role: l.role,
                    scope: Arc::new(l.scope),
                    id: id_of(&l.digest),
                },
                digest: l.digest,
                clear: l.clear,
            })
            .collect();
        let by_digest = entries
            .iter()
            .enumerate()
            .map(|(n, e)| (e.digest, n))
            .collect();
        let by_id = entries
            .iter()
            .enumerate()
            .map(|(n, e)| (e.caller.id, n))
            .collect();
        Ok(Tokens {
            entries,
            by_digest,
            by_id,
        })
    }

    /// Who `presented` is, if it is one of these tokens: found by its SHA-256.
    pub fn find(&self, presented: &[u8]) -> Option<&Caller> {
        Some(self.find_with_digest(presented)?.0)
    }

    /// The token of id `id` and its secret's digest, if it is one of these.
    pub fn by_id(&self, id: TokenId) -> Option<(&Caller, &[u8; 32])> {
        let e = &self.entries[*self.by_id.get(&id)?];
        Some((&e.caller, &e.digest))
    }

    /// Which token the request's bearer token is, `None` when auth is off or it is none of
    /// them: what counts a token's open streams.
    pub fn holder_of(&self, headers: &HeaderMap) -> Option<TokenId> {
        Some(self.find(bearer(headers)?.as_bytes())?.id)
    }

    /// Whether the token `id` is one of these.
    pub fn has(&self, id: TokenId) -> bool {
        self.by_id.contains_key(&id)
    }

    /// A secret given in clear to present to `/readyz` (a monitor's first), if any: the
    /// file's hashed entries keep none.
    pub fn probe_secret(&self) -> Option<&str> {
        let clear = || self.entries.iter().filter(|e| e.clear.is_some());
        clear()
            .find(|e| e.caller.role == Role::Monitor)
            .or_else(|| clear().next())
            .and_then(|e| e.clear.as_deref())
    }

    /// The token `presented` is and its digest, if any.
    pub fn find_with_digest(&self, presented: &[u8]) -> Option<(&Caller, [u8; 32])> {
        let digest = tokens_file::digest_of(presented);
        let n = self.by_digest.get(&digest)?;
        Some((&self.entries[*n].caller, digest))
    }

    /// How many tokens of each role, and which are scoped, as a log line says it:
    /// `admin 1, send 2 (1 scoped)`.
    pub fn summary(&self) -> String {
        let mut counts: Vec<(&str, usize, usize)> = Vec::new();
        for entry in &self.entries {
            let role = entry.caller.role.as_str();
            let scoped = usize::from(!entry.caller.scope.is_every_queue());
            match counts.iter_mut().find(|(r, _, _)| *r == role) {
                Some((_, n, s)) => {
                    *n += 1;
                    *s += scoped;
                }
                None => counts.push((role, 1, scoped)),
            }
        }
        counts.sort();
        let parts: Vec<String> = counts
            .iter()
            .map(|(r, n, s)| match s {
                0 => format!("{r} {n}"),
                s => format!("{r} {n} ({s} scoped)"),
            })
            .collect();
        parts.join(", ")
    }

    /// True when no token is configured (auth is off).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Checks the request's bearer token against `needed`: 401 when it is missing or
    /// unknown, 403 when its role does not allow the route. Returns who it is (`None` when
    /// auth is off).
    pub fn authorize(&self, headers: &HeaderMap, needed: Role) -> ApiResult<Option<Caller>> {
        let caller = self.authenticate(headers)?;
        match &caller {
            Some(c) if !c.role.allows(needed) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!(
                    "a {:?} token cannot do this; it needs {needed:?} or Admin",
                    c.role
                ),
            )),
            _ => Ok(caller),
        }
    }

    /// Who the request's bearer token is (`None` when auth is off); 401 when it is missing
    /// or unknown.
    pub fn authenticate(&self, headers: &HeaderMap) -> ApiResult<Option<Caller>> {
        if self.is_empty() {
            return Ok(None);
        }
        let Some(presented) = bearer(headers) else {
            return Err(unauthorized("missing bearer token"));
        };
        match self.find(presented.as_bytes()) {
            None => Err(unauthorized("unknown token")),
            Some(c) => Ok(Some(c.clone())),
        }
    }
}

/// The request's bearer token, as presented.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
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
    fn finds_a_token_by_its_secret_and_never_prints_one() {
        let t = Tokens::parse(
            "admin:aaaaaaaaaaaaaaaa # on call\nsend:bbbbbbbbbbbbbbbb, consume:cccccccccccccccc",
        )
        .expect("valid");
        assert_eq!(t.entries.len(), 3);
        let found = t.find(b"bbbbbbbbbbbbbbbb").expect("known");
        assert_eq!(found.role, Role::Send);
        assert!(t.find(b"bbbbbbbbbbbbbbb").is_none());
        assert!(!format!("{t:?}").contains("aaaa"), "tokens never printed");
        assert_eq!(t.summary(), "admin 1, consume 1, send 1");
    }

    #[test]
    fn compares_whole_tokens() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
