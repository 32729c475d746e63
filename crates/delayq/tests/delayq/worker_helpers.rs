//! What the worker runtime's tests share: flags and counters that a handler's future sets
//! or counts when it is dropped, and the attempts handlers started.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Sets a flag when dropped: tells whether a handler future was cancelled.
pub(crate) struct DropFlag(pub(crate) Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Attempts that handlers started, in order, shared with the test.
#[derive(Clone, Default)]
pub(crate) struct Attempts(pub(crate) Arc<Mutex<Vec<u32>>>);

impl Attempts {
    pub(crate) fn push(&self, attempt: u32) {
        self.0.lock().expect("attempts lock").push(attempt);
    }

    pub(crate) fn get(&self) -> Vec<u32> {
        self.0.lock().expect("attempts lock").clone()
    }
}

pub(crate) struct Decrement(pub(crate) Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Decrement {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Counts one when dropped armed (the handler was cancelled before it finished).
pub(crate) struct CountUnlessDisarmed(
    pub(crate) Arc<std::sync::atomic::AtomicUsize>,
    pub(crate) bool,
);

impl CountUnlessDisarmed {
    pub(crate) fn disarm(mut self) {
        self.1 = false;
    }
}

impl Drop for CountUnlessDisarmed {
    fn drop(&mut self) {
        if self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}
