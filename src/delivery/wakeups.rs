//! Waking long-polls when a turn is parked: one LISTEN connection per process, fanned out in
//! memory to the pickups waiting for that user.
//!
//! Parking sends `NOTIFY parley_turns, '<user id>'` inside its transaction, so PostgreSQL
//! delivers it only once the park is committed, to every Parley process, whose single listener
//! (`crate::live`) calls [`Wakeups::wake`]. Waiters hold no database connection, only a `Notify`.
//! When the listener's connection drops it reconnects and wakes every waiter, since a
//! notification may have been missed meanwhile; a woken waiter just tries to claim again.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
};

use tokio::sync::Notify;

/// The channel parks notify on (`parley_park` in the migrations uses this name too).
pub const TURNS_CHANNEL: &str = "parley_turns";

/// In-process registry of waiting pickups, per user.
#[derive(Default)]
pub struct Wakeups {
    waiters: Mutex<HashMap<String, Weak<Notify>>>,
}

impl Wakeups {
    /// The `Notify` for a user's waiters; hold the `Arc` while waiting.
    pub fn subscribe(&self, user_id: &str) -> Arc<Notify> {
        let mut map = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = map.get(user_id).and_then(Weak::upgrade) {
            return existing;
        }
        if map.len() > 1024 {
            map.retain(|_, w| w.strong_count() > 0);
        }
        let fresh = Arc::new(Notify::new());
        map.insert(user_id.to_owned(), Arc::downgrade(&fresh));
        fresh
    }

    /// Wakes the waiters of one user.
    pub fn wake(&self, user_id: &str) {
        let map = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get(user_id).and_then(Weak::upgrade) {
            n.notify_waiters();
        }
    }

    /// Wakes everyone (after a lost listener connection).
    pub fn wake_all(&self) {
        let map = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        for n in map.values().filter_map(Weak::upgrade) {
            n.notify_waiters();
        }
    }

    /// Number of users with live waiters (for metrics and tests).
    pub fn waiting_users(&self) -> usize {
        let map = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        map.values().filter(|w| w.strong_count() > 0).count()
    }
}
