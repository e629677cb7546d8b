//! Waking long-polls: the pickups waiting for a user's turns, the inboxes waiting for a target's
//! delegations, and the requesters waiting for a delegation to end, each by a key.
//!
//! A change is announced after its transaction commits ([`Wakeups::announce`]): the waiters of
//! this process are woken at once, and the key is queued for the other processes, which one
//! task per process (`crate::live::send_wakeups`) sends in batches, a NOTIFY per millisecond or
//! so in a short transaction of its own, so that no state change's commit waits on
//! PostgreSQL's notification lock. Every process's single listener (`crate::live::listen`)
//! wakes its waiters of the keys it hears. Waiters hold no database connection, only a
//! `Notify`, and look again at least every [`RECHECK`] whatever they hear, so a wake-up lost
//! between a commit and its NOTIFY (the process died in that millisecond, or the database
//! refused the NOTIFY) delays a waiter by at most that long and loses nothing. When the
//! listener's connection drops it reconnects and wakes every waiter; a woken waiter just
//! tries again.
//!
//! Events for the live stream are rows; a commit that wrote some pokes this process's reader of
//! the event log ([`Wakeups::events_written`]), and every process also reads it on a short
//! tick (`crate::live::tail_events`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock, Weak},
    time::Duration,
};

use tokio::sync::{Notify, mpsc};
use uuid::Uuid;

/// The channel of the few wake-ups still sent inside a transaction by SQL (a claim that lapsed
/// and is handed back by the agent's own next pickup): the payload is a user id.
pub const TURNS_CHANNEL: &str = "parley_turns";

/// The channel of wake-ups announced after commit: the payload is a [`WakePayload`].
pub const WAKE_CHANNEL: &str = "parley_wake";

/// How long a waiter goes at most without looking again, woken or not.
pub const RECHECK: Duration = Duration::from_secs(2);

/// Keys queued for the other processes before new ones are dropped (a dropped key delays its
/// waiters by at most [`RECHECK`]).
const OUTBOX_CAPACITY: usize = 65_536;

/// Waits for `notified` until `deadline`, but no longer than [`RECHECK`]; whether the waiter
/// should look again: it was woken, or it timed out before the deadline (a wake-up lost between
/// another process's commit and its NOTIFY costs it at most [`RECHECK`]).
pub async fn wait_or_recheck(
    deadline: tokio::time::Instant,
    notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) -> bool {
    let until = deadline.min(tokio::time::Instant::now() + RECHECK);
    tokio::time::timeout_at(until, notified).await.is_ok() || tokio::time::Instant::now() < deadline
}

/// What one cross-process NOTIFY carries: the sending process and the keys it woke.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct WakePayload {
    /// The process that sent it (its own listener skips it: it woke its waiters already).
    pub origin: Uuid,
    /// The keys.
    pub keys: Vec<String>,
}

/// In-process registry of waiters, per key (a user id for pickups; see the delegation keys).
pub struct Wakeups {
    waiters: Mutex<HashMap<String, Weak<Notify>>>,
    origin: Uuid,
    outbox: OnceLock<mpsc::Sender<String>>,
    events: Notify,
}

impl Default for Wakeups {
    fn default() -> Self {
        Wakeups { waiters: Mutex::default(), origin: Uuid::new_v4(), outbox: OnceLock::new(), events: Notify::new() }
    }
}

impl Wakeups {
    /// This process's id in the wake-ups it sends.
    pub fn origin(&self) -> Uuid {
        self.origin
    }

    /// The queue of keys for the other processes, once (the sending task calls this).
    pub fn open_outbox(&self) -> Option<mpsc::Receiver<String>> {
        let (tx, rx) = mpsc::channel(OUTBOX_CAPACITY);
        self.outbox.set(tx).ok().map(|()| rx)
    }

    /// After a commit: wakes this process's waiters of `key` now, and queues it for the others.
    pub fn announce(&self, key: &str) {
        self.wake(key);
        if let Some(outbox) = self.outbox.get() {
            let _ = outbox.try_send(key.to_owned());
        }
    }

    /// After a commit that wrote events: the event log's reader looks at once.
    pub fn events_written(&self) {
        self.events.notify_one();
    }

    /// What the event log's reader waits on.
    pub fn events_poked(&self) -> &Notify {
        &self.events
    }

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

    /// Whether this process has a waiter of `key` now.
    pub fn has_waiters(&self, key: &str) -> bool {
        let map = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        map.get(key).is_some_and(|w| w.strong_count() > 0)
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
