//! A queue's payloads encrypted at rest, as its handles meet them (`values/sealing.rs` says
//! how a payload is sealed): which sends seal, and what a reader is given for a sealed
//! payload.

use std::sync::Arc;

use crate::handles::queue_core::QueueCore;
use crate::store::keys::Keys;
use crate::values::error::{Error, Result};
use crate::values::message::Sealed;
use crate::values::options::SendOptions;
use crate::values::record;
use crate::values::sealing::{key_id_of, Keyring, Undecryptable};

/// This client's keys ([`Config::keys`](crate::Config::keys)); [`Error::NoKey`] when it
/// holds none.
pub(crate) fn keyring(core: &QueueCore) -> Result<&Keyring> {
    core.config().keys.as_ref().ok_or_else(|| Error::NoKey {
        queue: core.name().to_string(),
    })
}

/// The keys a send to partitions `parts` seals with: `None` when no partition's queue
/// encrypts (as last read); [`Error::NoKey`] when one does and this client holds none.
pub(crate) async fn keys_for_send(
    core: &QueueCore,
    parts: &[&Arc<Keys>],
) -> Result<Option<Keyring>> {
    for keys in parts {
        if core.encrypts(keys).await? {
            return keyring(core).cloned().map(Some);
        }
    }
    Ok(None)
}

/// The options and payload a message sent with `options` and `payload` goes with, sealed
/// with the newest of `keys`.
pub(crate) fn seal(
    core: &QueueCore,
    keys: &Keyring,
    payload: &[u8],
    options: &SendOptions,
) -> Result<(SendOptions, Vec<u8>)> {
    let sealed = keys.seal(core.name().as_str(), payload)?;
    let mut options = options.clone();
    options.sealed = true;
    Ok((options, sealed))
}

/// Record body `body` as it goes to partition `keys`: sealed when the queue encrypts and
/// it is not yet (a schedule's message body, defined before its queue began to encrypt).
pub(crate) async fn sealed_body(
    core: &QueueCore,
    keys: &Arc<Keys>,
    body: Vec<u8>,
) -> Result<Vec<u8>> {
    let Some(keyring) = keys_for_send(core, &[keys]).await? else {
        return Ok(body);
    };
    let bad = || Error::Protocol("a message body that does not decode".into());
    let rec = record::decode(record::with_sort_key(0, 0, &body))?;
    if rec.sealed {
        return Ok(body);
    }
    let sealed = keyring.seal(core.name().as_str(), &rec.payload)?;
    record::with_sealed_payload(&body, &sealed).ok_or_else(bad)
}

/// Whether `e` is the send script's refusal of a payload that is not sealed, on a queue
/// that began to encrypt since this client read its settings: nothing was written, and
/// the send may go again, sealed, once the settings are read again ([`forget`]).
pub(crate) fn refused_unsealed(e: &Error) -> bool {
    matches!(e, Error::Redis(r) if r.to_string().contains(UNSEALED))
        || matches!(e, Error::EncryptionChanged { .. })
}

/// What the send script says when it refuses a payload that is not sealed.
pub(crate) const UNSEALED: &str = "delayq: unsealed payload on a queue that encrypts";

/// The refusal a send gets when it was refused as unsealed a second time.
pub(crate) fn changed(core: &QueueCore) -> Error {
    Error::EncryptionChanged {
        queue: core.name().to_string(),
    }
}

/// Forgets what this client read of every partition's settings, so that a send reads
/// whether the queue encrypts again.
pub(crate) async fn forget(core: &QueueCore) -> Result<()> {
    let layout = core.layout().await?;
    for keys in layout.parts() {
        core.forget_reading(keys);
    }
    Ok(())
}

/// The payload that stored payload `stored` holds: itself when it is not `sealed`, else
/// opened with this client's keys.
pub(crate) fn open(
    core: &QueueCore,
    sealed: bool,
    stored: Vec<u8>,
) -> std::result::Result<Vec<u8>, Undecryptable> {
    if !sealed {
        return Ok(stored);
    }
    match &core.config().keys {
        Some(keys) => keys.open(core.name().as_str(), &stored),
        None => Err(Undecryptable::NoKey(
            key_id_of(&stored).unwrap_or("?").to_owned(),
        )),
    }
}

/// A new payload for the next attempts of a message whose stored payload is sealed (a
/// nack's [`Amend`](crate::Amend)): sealed too, with the newest key.
pub(crate) fn amend_payload(core: &QueueCore, payload: &[u8]) -> Result<Vec<u8>> {
    keyring(core)?.seal(core.name().as_str(), payload)
}

/// A sealed payload as a reader is given it: opened, with what became of it, or empty when
/// it could not be opened.
pub(crate) fn open_for_reader(core: &QueueCore, stored: Vec<u8>) -> (Vec<u8>, Sealed) {
    let key = key_id_of(&stored).map(str::to_owned);
    match open(core, true, stored) {
        Ok(payload) => (
            payload,
            Sealed::Opened {
                key: key.unwrap_or_default(),
            },
        ),
        Err(e) => (Vec::new(), Sealed::Undecryptable(e)),
    }
}

/// A sealed payload's head, as a listing returns it, as what a listing shows: nothing, and
/// the key's id.
pub(crate) fn listed(head: &[u8]) -> Sealed {
    match key_id_of(head) {
        Some(key) => Sealed::Listed {
            key: key.to_owned(),
        },
        None => Sealed::Undecryptable(Undecryptable::Malformed),
    }
}
