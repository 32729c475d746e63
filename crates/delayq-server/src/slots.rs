//! Counted places: how many of something each key holds at once, under a cap per key and,
//! if given, one on them all; a place is given back when its [`Slot`] is dropped. Server
//! connections per peer (`server.rs`) and event streams per token (`api/stream_slots.rs`)
//! are counted so.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// The places held, by key, and in all.
pub struct SlotCounts<K>(Mutex<(HashMap<K, usize>, usize)>);

impl<K> Default for SlotCounts<K> {
    fn default() -> Self {
        SlotCounts(Mutex::new((HashMap::new(), 0)))
    }
}

/// Which cap a refused place met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The key's own.
    Key,
    /// The one on them all.
    Total,
}

/// One place of `key`, given back when dropped.
pub struct Slot<K: Hash + Eq> {
    counts: Arc<SlotCounts<K>>,
    key: K,
}

impl<K: Hash + Eq + Clone> SlotCounts<K> {
    /// A place for `key`, if it holds fewer than `per_key` and all hold fewer than `total`.
    pub fn take(
        counts: &Arc<SlotCounts<K>>,
        key: K,
        per_key: usize,
        total: Option<usize>,
    ) -> Result<Slot<K>, Full> {
        let mut held = counts.0.lock().unwrap_or_else(|p| p.into_inner());
        let (by_key, all) = &mut *held;
        if total.is_some_and(|cap| *all >= cap) {
            return Err(Full::Total);
        }
        let n = by_key.entry(key.clone()).or_insert(0);
        if *n >= per_key {
            return Err(Full::Key);
        }
        *n += 1;
        *all += 1;
        Ok(Slot {
            counts: counts.clone(),
            key,
        })
    }
}

impl<K: Hash + Eq> Drop for Slot<K> {
    fn drop(&mut self) {
        let mut held = self.counts.0.lock().unwrap_or_else(|p| p.into_inner());
        let (by_key, all) = &mut *held;
        *all -= 1;
        if let Some(n) = by_key.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                // Only keys with places held are kept: the map cannot grow with the number
                // of keys ever seen.
                by_key.remove(&self.key);
            }
        }
    }
}
