//! The tokens file (and `--tokens`): one token per line, in either of two forms; `#` starts a
//! comment.
//!
//! * `name=<name> role=<role> [queues=<patterns>] sha256=<hex>`: a named token, stored as the
//!   SHA-256 of its secret, so that the file is no credential. `queues` scopes it (`scope.rs`);
//!   without it, every queue. `delayq token create` makes a secret and prints its line.
//! * `role:secret`, entries also separated by commas: the form from before names and scopes,
//!   the secret in clear, every queue; named `<role>-<first 8 hex digits of its SHA-256>`.
//!
//! Roles: `send`, `consume`, `admin`, `monitor` (`auth/mod.rs`).

use sha2::{Digest, Sha256};

use super::scope::Scope;
use super::Role;

/// One token of the file.
pub(super) struct Line {
    pub(super) name: String,
    pub(super) role: Role,
    pub(super) scope: Scope,
    /// SHA-256 of the secret.
    pub(super) digest: [u8; 32],
    /// The secret itself, of an entry that gives it in clear (`role:secret`).
    pub(super) clear: Option<String>,
}

/// The shortest secret taken (a clear one; a hashed one is checked when it is made).
const MIN_SECRET: usize = 16;

/// Reads every token of `text`; an error names the entry at fault, never a secret.
pub(super) fn parse(text: &str) -> Result<Vec<Line>, String> {
    let mut lines: Vec<Line> = Vec::new();
    let mut n = 0;
    for line in text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
    {
        let entries: Vec<&str> = match line.contains("sha256=") {
            true => vec![line],
            false => line.split(',').map(str::trim).collect(),
        };
        for entry in entries.into_iter().filter(|e| !e.is_empty()) {
            n += 1;
            let parsed = match entry.contains("sha256=") {
                true => named(entry),
                false => clear(entry),
            }
            .map_err(|why| format!("token entry {n}: {why}"))?;
            if lines.iter().any(|l| l.name == parsed.name) {
                return Err(format!(
                    "token entry {n}: the name {} is taken",
                    parsed.name
                ));
            }
            if lines.iter().any(|l| l.digest == parsed.digest) {
                return Err(format!("token entry {n}: the same secret as another entry"));
            }
            lines.push(parsed);
        }
    }
    Ok(lines)
}

fn named(entry: &str) -> Result<Line, String> {
    let (mut name, mut role, mut scope, mut digest) = (None, None, Scope::default(), None);
    for field in entry.split_whitespace() {
        let (key, value) = field
            .split_once('=')
            .ok_or_else(|| format!("expected key=value, not {field:?}"))?;
        match key {
            "name" => name = Some(check_name(value)?),
            "role" => role = Some(role_of(value)?),
            "queues" => scope = Scope::parse(value)?,
            "sha256" => digest = Some(digest_of_hex(value)?),
            other => return Err(format!("unknown field {other:?}")),
        }
    }
    Ok(Line {
        name: name.ok_or("a name= is needed")?,
        role: role.ok_or("a role= is needed")?,
        scope,
        digest: digest.ok_or("a sha256= is needed")?,
        clear: None,
    })
}

fn clear(entry: &str) -> Result<Line, String> {
    let (role, secret) = entry.split_once(':').ok_or("expected role:token")?;
    let role = role_of(role.trim())?;
    let secret = secret.trim();
    if secret.len() < MIN_SECRET {
        return Err(format!("a token needs at least {MIN_SECRET} characters"));
    }
    let digest = digest_of(secret.as_bytes());
    Ok(Line {
        name: format!("{}-{}", role.as_str(), &hex(&digest)[..8]),
        role,
        scope: Scope::default(),
        digest,
        clear: Some(secret.to_owned()),
    })
}

fn role_of(text: &str) -> Result<Role, String> {
    Role::parse(text).ok_or_else(|| "role must be send, consume, admin or monitor".to_owned())
}

/// A token's name: 1 to 64 of `A-Z a-z 0-9 . _ -`; it appears in logs and the audit log.
pub(super) fn check_name(name: &str) -> Result<String, String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    match ok {
        true => Ok(name.to_owned()),
        false => Err(format!(
            "name {name:?}: 1 to 64 of A-Z, a-z, 0-9, '.', '_', '-'"
        )),
    }
}

fn digest_of_hex(text: &str) -> Result<[u8; 32], String> {
    let bad = || "sha256= takes 64 hex digits".to_owned();
    if text.len() != 64 {
        return Err(bad());
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
            .map_err(|_| bad())?;
    }
    Ok(digest)
}

/// SHA-256 of a secret.
pub(super) fn digest_of(secret: &[u8]) -> [u8; 32] {
    Sha256::digest(secret).into()
}

/// Lower-case hex.
pub(super) fn hex(bytes: &[u8]) -> String {
    crate::push::signature::hex(bytes)
}

/// The line of the tokens file for a token `secret` with these name, role and scope (what
/// `delayq token create` prints); the name and the secret are checked.
pub fn hashed_line(name: &str, role: &str, scope: &Scope, secret: &str) -> Result<String, String> {
    let name = check_name(name)?;
    let role = role_of(role)?;
    if secret.len() < MIN_SECRET {
        return Err(format!("a token needs at least {MIN_SECRET} characters"));
    }
    let queues = match scope.is_every_queue() {
        true => String::new(),
        false => format!(" queues={scope}"),
    };
    Ok(format!(
        "name={name} role={}{queues} sha256={}",
        role.as_str(),
        hex(&digest_of(secret.as_bytes()))
    ))
}

/// A new secret: 32 random bytes, hex, after `dq_`.
pub fn new_secret() -> String {
    format!("dq_{}", hex(&rand::random::<[u8; 32]>()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_read_and_a_made_line_reads_back() {
        let line = hashed_line(
            "billing",
            "send",
            &Scope::parse("billing.*").expect("scope"),
            "a-secret-of-enough-length",
        )
        .expect("line");
        assert!(line.starts_with("name=billing role=send queues=billing.* sha256="));
        assert!(!line.contains("a-secret"), "the secret is not in the line");
        let text =
            format!("{line} # billing's sender\nadmin:aaaaaaaaaaaaaaaa, consume:cccccccccccccccc");
        let lines = parse(&text).expect("valid");
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].name, "billing");
        assert!(lines[0].scope.allows("billing.eu") && !lines[0].scope.allows("b.x"));
        assert_eq!(lines[0].digest, digest_of(b"a-secret-of-enough-length"));
        assert!(lines[1].name.starts_with("admin-") && lines[1].scope.is_every_queue());
    }

    #[test]
    fn bad_entries_name_their_place_and_never_a_secret() {
        let h = "0".repeat(64);
        for (text, why) in [
            ("root:aaaaaaaaaaaaaaaa", "role"),
            ("admin:short", "16"),
            ("admin", "role:token"),
            (
                &format!("name=a role=send sha256={}", &h[..10]) as &str,
                "64 hex",
            ),
            (&format!("role=send sha256={h}"), "name="),
            (&format!("name=a sha256={h}"), "role="),
            (&format!("name=a b role=send sha256={h}"), "key=value"),
            (
                &format!("name=a role=send owner=x sha256={h}"),
                "unknown field",
            ),
            (
                &format!("name=a role=send queues=a*b sha256={h}"),
                "pattern",
            ),
            (&format!("name=a/b role=send sha256={h}"), "name"),
        ] {
            let e = parse(text)
                .err()
                .unwrap_or_else(|| panic!("{text} is refused"));
            assert!(e.contains(why), "{text}: {e}");
            assert!(e.starts_with("token entry 1"), "{e}");
        }
        let twice = format!(
            "name=a role=send sha256={h}\nname=a role=admin sha256={}",
            "1".repeat(64)
        );
        assert!(parse(&twice).err().is_some_and(|e| e.contains("taken")));
        let same = "send:aaaaaaaaaaaaaaaa\nadmin:aaaaaaaaaaaaaaaa";
        assert!(parse(same).err().is_some_and(|e| e.contains("same secret")));
    }
}
