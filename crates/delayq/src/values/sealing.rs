//! Payloads encrypted at rest: the keys ([`Keyring`]), and how a payload is sealed before
//! it reaches Redis and opened when it comes back.
//!
//! A sealed payload is AES-256-GCM (ring's, never our own) of the payload as the sender gave
//! it (a push envelope and all), after the id of the key that sealed it:
//!
//! ```text
//! key id length (1 byte) | key id | nonce (12 random bytes) | ciphertext | tag (16 bytes)
//! ```
//!
//! with the queue's name as associated data, so a payload copied into another queue does
//! not open there. A payload names its own key, so a new payload for a message's next
//! attempts, or a payload sealed again with a newer key, changes nothing else of its
//! record. The record marks a sealed payload in its extension area (`extension.rs`, tag 7),
//! which is how a reader knows it is sealed; the key itself never reaches Redis.
//!
//! A key file holds one key a line, `<id>:<32 bytes in base64>`, oldest first: the last
//! line's key seals, every line's opens. Rotation is a new last line (`delayq keys new`),
//! then `delayq keys rotate` to seal what is stored with it, then, once nothing names the
//! old key, its line can go.

use std::fmt;
use std::sync::Arc;

use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

use crate::values::error::{Error, InvalidInput, Result};

/// Longest key id.
pub const MAX_KEY_ID_LEN: usize = 32;

/// What a sealed payload adds to the payload, besides its key's id and the id's length
/// byte: its nonce and its tag.
pub const SEAL_OVERHEAD: usize = NONCE_LEN + 16;

/// The keys a client seals and opens payloads with: see the module's docs for the file.
/// Cloning shares them. Its `Debug` names the key ids, never a key.
#[derive(Clone)]
pub struct Keyring {
    keys: Arc<Vec<Key>>,
}

struct Key {
    id: String,
    key: LessSafeKey,
}

/// Why a sealed payload could not be opened. Its text is the error a dead letter carries
/// when a consumer met it (`undecryptable: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Undecryptable {
    /// The record names a key this client does not hold.
    #[error("undecryptable: no key {0}")]
    NoKey(String),
    /// The key of that id does not open it: the key under that id changed, or the payload
    /// was altered or moved from another queue.
    #[error("undecryptable: key {0} does not open it")]
    Rejected(String),
    /// The record says its payload is sealed, and it is not a sealed payload.
    #[error("undecryptable: not a sealed payload")]
    Malformed,
}

/// The id of the key that sealed `sealed`, a sealed payload; `None` when it is not one.
pub fn key_id_of(sealed: &[u8]) -> Option<&str> {
    let (&len, rest) = sealed.split_first()?;
    let id = std::str::from_utf8(rest.get(..usize::from(len))?).ok()?;
    check_key_id(id).ok()?;
    Some(id)
}

impl Keyring {
    /// The keys of a key file's text. Blank lines and lines that start with `#` are skipped.
    pub fn parse(text: &str) -> std::result::Result<Keyring, InvalidInput> {
        let mut keys: Vec<Key> = Vec::new();
        for (n, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| InvalidInput::Option(format!("key file line {n}: {why}"));
            let (id, encoded) = line
                .split_once(':')
                .ok_or_else(|| bad("not <id>:<key in base64>"))?;
            check_key_id(id).map_err(|why| bad(&why))?;
            if keys.iter().any(|k| k.id == id) {
                return Err(bad(&format!("key id {id} appears twice")));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .map_err(|_| bad("the key is not base64"))?;
            let key = UnboundKey::new(&AES_256_GCM, &bytes)
                .map_err(|_| bad(&format!("a key is 32 bytes, not {}", bytes.len())))?;
            keys.push(Key {
                id: id.to_owned(),
                key: LessSafeKey::new(key),
            });
        }
        if keys.is_empty() {
            return Err(InvalidInput::Option("a key file holds no key".into()));
        }
        Ok(Keyring {
            keys: Arc::new(keys),
        })
    }

    /// The keys of the key file at `path`.
    pub fn load(path: &std::path::Path) -> Result<Keyring> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| InvalidInput::Option(format!("key file {}: {e}", path.display())))?;
        Ok(Keyring::parse(&text)?)
    }

    /// A key file line of a new random key named `id`.
    pub fn new_key_line(id: &str) -> std::result::Result<String, InvalidInput> {
        check_key_id(id).map_err(InvalidInput::Option)?;
        let mut key = [0u8; 32];
        SystemRandom::new()
            .fill(&mut key)
            .map_err(|_| InvalidInput::Option("the system's random source failed".into()))?;
        let encoded = base64::engine::general_purpose::STANDARD.encode(key);
        Ok(format!("{id}:{encoded}"))
    }

    /// The id of the key that seals: the file's last.
    pub fn newest(&self) -> &str {
        self.keys.last().map_or("", |k| k.id.as_str())
    }

    /// Whether it holds the key `id`.
    pub fn holds(&self, id: &str) -> bool {
        self.key(id).is_ok()
    }

    /// Every key id, oldest first.
    pub fn ids(&self) -> Vec<&str> {
        self.keys.iter().map(|k| k.id.as_str()).collect()
    }

    /// `payload` sealed for queue `queue` with the newest key.
    pub(crate) fn seal(&self, queue: &str, payload: &[u8]) -> Result<Vec<u8>> {
        let key = self
            .keys
            .last()
            .ok_or_else(|| Error::Protocol("a keyring without keys".into()))?;
        seal_with(key, queue, payload)
    }

    /// The payload that `sealed` (sealed for queue `queue`) holds.
    pub(crate) fn open(
        &self,
        queue: &str,
        sealed: &[u8],
    ) -> std::result::Result<Vec<u8>, Undecryptable> {
        let id = key_id_of(sealed).ok_or(Undecryptable::Malformed)?;
        let key = self.key(id)?;
        let rejected = || Undecryptable::Rejected(id.to_owned());
        let body = &sealed[1 + id.len()..];
        let (nonce, body) = body.split_at_checked(NONCE_LEN).ok_or_else(rejected)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| rejected())?;
        let mut buf = body.to_vec();
        let plain_len = key
            .key
            .open_in_place(nonce, Aad::from(aad(queue)), &mut buf)
            .map_err(|_| rejected())?
            .len();
        buf.truncate(plain_len);
        Ok(buf)
    }

    fn key(&self, id: &str) -> std::result::Result<&Key, Undecryptable> {
        self.keys
            .iter()
            .find(|k| k.id == id)
            .ok_or_else(|| Undecryptable::NoKey(id.to_owned()))
    }
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring").field("ids", &self.ids()).finish()
    }
}

fn seal_with(key: &Key, queue: &str, payload: &[u8]) -> Result<Vec<u8>> {
    // A random 96-bit nonce per payload: a key may seal about 2^32 payloads before a
    // repeat grows likely enough to matter (NIST SP 800-38D); rotate well before. It comes
    // from the thread's CSPRNG (rand's ChaCha12, seeded and reseeded from the system's
    // source), not a system call per payload.
    let nonce: [u8; NONCE_LEN] = rand::random();
    let mut out = Vec::with_capacity(1 + key.id.len() + payload.len() + SEAL_OVERHEAD);
    // A key id is at most MAX_KEY_ID_LEN bytes (check_key_id).
    out.push(key.id.len() as u8);
    out.extend_from_slice(key.id.as_bytes());
    out.extend_from_slice(&nonce);
    let sealed_from = out.len();
    out.extend_from_slice(payload);
    let tag = key
        .key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad(queue)),
            &mut out[sealed_from..],
        )
        .map_err(|_| Error::Protocol("sealing a payload failed".into()))?;
    out.extend_from_slice(tag.as_ref());
    Ok(out)
}

/// The associated data of a queue's payloads.
fn aad(queue: &str) -> Vec<u8> {
    let mut aad = b"delayq payload of queue ".to_vec();
    aad.extend_from_slice(queue.as_bytes());
    aad
}

/// A key id: 1 to [`MAX_KEY_ID_LEN`] of `A-Za-z0-9._-`.
fn check_key_id(id: &str) -> std::result::Result<(), String> {
    let fits = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if id.is_empty() || id.len() > MAX_KEY_ID_LEN || !id.chars().all(fits) {
        return Err(format!(
            "a key id is 1 to {MAX_KEY_ID_LEN} of A-Za-z0-9._-, not {id:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(lines: &[&str]) -> Keyring {
        Keyring::parse(&lines.join("\n")).expect("a valid key file")
    }

    #[test]
    fn the_newest_key_seals_and_every_key_opens() {
        let (one, two) = (
            Keyring::new_key_line("k1").expect("line"),
            Keyring::new_key_line("k2").expect("line"),
        );
        let old = ring(&[&one]);
        let both = ring(&["# rotated in March", &one, "", &two]);
        assert_eq!((old.newest(), both.newest()), ("k1", "k2"));
        let sealed = old.seal("orders", b"close order 7").expect("sealed");
        assert_eq!(key_id_of(&sealed), Some("k1"));
        assert_eq!(sealed.len(), 3 + 13 + SEAL_OVERHEAD);
        assert!(!sealed.windows(5).any(|w| w == b"order"));
        assert_eq!(
            both.open("orders", &sealed).as_deref(),
            Ok(&b"close order 7"[..])
        );
        let again = both.seal("orders", b"close order 7").expect("sealed");
        assert_eq!(key_id_of(&again), Some("k2"));
        assert_ne!(again[3..15], sealed[3..15], "a fresh nonce each time");
        assert_eq!(
            old.open("orders", &again),
            Err(Undecryptable::NoKey("k2".into()))
        );
        assert_eq!(old.open("orders", b"plain"), Err(Undecryptable::Malformed));
    }

    #[test]
    fn a_payload_opens_only_in_its_queue_and_unaltered() {
        let keys = ring(&[&Keyring::new_key_line("k1").expect("line")]);
        let mut sealed = keys.seal("a", b"secret").expect("sealed");
        let rejected = Err(Undecryptable::Rejected("k1".into()));
        assert_eq!(keys.open("b", &sealed), rejected);
        assert_eq!(keys.open("a", &sealed[..8]), rejected);
        sealed[17] ^= 1;
        assert_eq!(keys.open("a", &sealed), rejected);
        let other = ring(&[&Keyring::new_key_line("k1").expect("line")]);
        sealed[17] ^= 1;
        assert_eq!(other.open("a", &sealed), rejected, "another key of that id");
    }

    #[test]
    fn a_bad_key_file_says_which_line() {
        let good = Keyring::new_key_line("k1").expect("line");
        for (text, says) in [
            ("", "holds no key"),
            ("# only a comment", "holds no key"),
            ("k1", "line 1: not <id>:<key in base64>"),
            ("k 1:AAAA", "line 1: a key id"),
            ("k1:not base64!", "line 1: the key is not base64"),
            ("k1:AAAA", "line 1: a key is 32 bytes, not 3"),
        ] {
            let e = Keyring::parse(text).expect_err(text).to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let twice = format!("{good}\n{good}");
        let e = Keyring::parse(&twice).expect_err("twice").to_string();
        assert!(e.contains("line 2: key id k1 appears twice"), "{e}");
        let debug = format!("{:?}", ring(&[&good]));
        assert_eq!(debug, "Keyring { ids: [\"k1\"] }", "no key in Debug");
    }
}
