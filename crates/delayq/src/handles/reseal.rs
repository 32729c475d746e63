//! Sealing what a queue stores again with the newest key ([`Queue::rotate_keys`]): each
//! partition's pending messages, grouped ones, far-future buckets and dead letters, walked
//! a bounded step at a time (`reseal_scan.lua`), and its schedules' message bodies. Each
//! record whose payload is not sealed with the newest key (or, on a queue that encrypts,
//! not sealed at all) is opened here, sealed again, and put in place of the one it was made
//! from only while that one is still as it was read (`reseal.lua`): the queue runs on
//! meanwhile, and a message that moved is left to a later run.
//!
//! [`Queue::rotate_keys`]: crate::Queue::rotate_keys

use crate::handles::queue_core::{invocation, QueueCore};
use crate::handles::schedules::Schedules;
use crate::handles::sealed;
use crate::store::keys::Keys;
use crate::store::scripts::SCRIPTS;
use crate::values::error::Result;
use crate::values::record;
use crate::values::reply::Reply;
use crate::values::sealing::{key_id_of, Keyring};

/// Most records one step of a rotation reads, and one call puts back.
pub const RESEAL_BATCH: usize = 100;

/// What a rotation ([`Queue::rotate_keys`](crate::Queue::rotate_keys)) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resealed {
    /// The id of the key everything is now sealed with.
    pub key: String,
    /// Messages (pending or dead) and schedules sealed again with it.
    pub resealed: u64,
    /// Left as they were because they moved, changed or ended while the rotation ran: a
    /// second run takes them.
    pub changed: u64,
    /// Sealed with a key this client does not hold: left as they were.
    pub unopened: u64,
    /// Messages in flight as the rotation ended, which it does not touch: once settled, a
    /// retry or a dead letter is taken by the next run.
    pub in_flight: u64,
}

/// The parts of a partition a rotation walks, in order (`reseal_scan.lua`).
const PARTS: [&str; 5] = ["p", "gd", "g", "b", "d"];

/// [`Queue::rotate_keys`](crate::Queue::rotate_keys).
pub(crate) async fn rotate(core: &QueueCore) -> Result<Resealed> {
    let keys = sealed::keyring(core)?.clone();
    // Not `layout()`: that would record a partition count for a queue never used.
    let layout = core.known_layout().await?;
    let mut done = Resealed {
        key: keys.newest().to_owned(),
        ..Resealed::default()
    };
    for part in layout.parts() {
        // Read again: whether the queue encrypts decides what happens to a payload in clear.
        core.forget_reading(part);
        let seal_plain = core.encrypts(part).await?;
        for walked in PARTS {
            let mut from = String::new().into_bytes();
            loop {
                let (next, found) = scan(core, part, walked, &from, &keys, seal_plain).await?;
                reseal_found(core, part, &keys, found, &mut done).await?;
                match next {
                    Some(next) => from = next,
                    None => break,
                }
            }
        }
    }
    reseal_schedules(core, &keys, &mut done).await?;
    done.in_flight = crate::handles::stats::stats(core).await?.in_flight;
    Ok(done)
}

/// A record a step found: its state (`p` or `d`), its message's id, the record.
type Found = (String, String, Vec<u8>);

async fn scan(
    core: &QueueCore,
    keys: &Keys,
    part: &str,
    from: &[u8],
    keyring: &Keyring,
    seal_plain: bool,
) -> Result<(Option<Vec<u8>>, Vec<Found>)> {
    let mut inv = invocation(keys, &SCRIPTS.reseal_scan);
    inv.arg(part)
        .arg(from)
        .arg(RESEAL_BATCH)
        .arg(keyring.newest())
        .arg(if seal_plain { "1" } else { "" });
    let mut r = Reply::new(core.invoke(&inv).await?)?;
    let next = r.opt_bytes()?;
    let mut found = Vec::new();
    while r.remaining() > 0 {
        found.push((r.string()?, r.string()?, r.bytes()?));
    }
    Ok((next, found))
}

/// Seals `found` again and puts each back where it still is as it was read.
async fn reseal_found(
    core: &QueueCore,
    keys: &Keys,
    keyring: &Keyring,
    found: Vec<Found>,
    done: &mut Resealed,
) -> Result<()> {
    if found.is_empty() {
        return Ok(());
    }
    let mut inv = invocation(keys, &SCRIPTS.reseal);
    let mut sent = 0;
    for (state, id, rec) in &found {
        let Some(new) = sealed_again(core, keyring, rec.get(13..).unwrap_or_default()) else {
            done.unopened += 1;
            continue;
        };
        let mut new_rec = rec[..13.min(rec.len())].to_vec();
        new_rec.extend(new);
        inv.arg(state).arg(id).arg(&rec[..]).arg(new_rec);
        sent += 1;
    }
    if sent == 0 {
        return Ok(());
    }
    let put = Reply::new(core.invoke(&inv).await?)?.flags()?;
    let resealed = put.iter().filter(|p| **p).count() as u64;
    done.resealed += resealed;
    done.changed += put.len() as u64 - resealed;
    Ok(())
}

/// Record body `body` (without its sort key) with its payload sealed with the newest key:
/// `None` when it is sealed with a key `keyring` lacks, or is not a record.
fn sealed_again(core: &QueueCore, keyring: &Keyring, body: &[u8]) -> Option<Vec<u8>> {
    let rec = record::decode(record::with_sort_key(0, 0, body)).ok()?;
    let queue = core.name().as_str();
    let payload = match rec.sealed {
        true => keyring.open(queue, &rec.payload).ok()?,
        false => rec.payload,
    };
    let sealed = keyring.seal(queue, &payload).ok()?;
    record::with_sealed_payload(body, &sealed)
}

/// Seals each schedule's message body again, as the records (the walk cannot reach them:
/// they are the queue's, not a partition's).
async fn reseal_schedules(core: &QueueCore, keyring: &Keyring, done: &mut Resealed) -> Result<()> {
    let schedules = Schedules::new(core);
    let seal_plain = match core.known_layout().await?.parts().first() {
        Some(part) => core.encrypts(part).await?,
        None => false,
    };
    for def in schedules.definitions().await? {
        let rec = record::decode(record::with_sort_key(0, 0, &def.body))?;
        let current = rec.sealed.then(|| key_id_of(&rec.payload)).flatten();
        if current == Some(keyring.newest()) || (!rec.sealed && !seal_plain) {
            continue;
        }
        let Some(new) = sealed_again(core, keyring, &def.body) else {
            done.unopened += 1;
            continue;
        };
        let key = Keys::schedule(core.name(), &def.name);
        let mut conn = core.connection();
        let put: i64 = SCRIPTS
            .schedule_reseal
            .key(&key)
            .arg(&def.body[..])
            .arg(new)
            .invoke_async(&mut conn)
            .await?;
        match put {
            1 => done.resealed += 1,
            _ => done.changed += 1,
        }
    }
    Ok(())
}
