//! What this process learned lately about delegations it served, so that the calls that follow
//! need not read it again:
//!
//! - an attempt it accepted for an agent: its delegation, number, deadline and output schema,
//!   which that agent's complete checks its output against (off the async workers) before its
//!   one statement (instead of reading the attempt first). An attempt's number, deadline and output schema never change;
//!   whether it is still the live one, accepted, in time and addressed to the caller, and
//!   whether the key is still good, `parley_delegation_complete` checks itself, given the
//!   delegation and attempt remembered (so it never completes another delegation that took the
//!   same request id since). An entry that is out of date costs that statement's refusal; then,
//!   as when any check fails in the service, the complete goes down the path that reads first,
//!   so its answer is the one that path gives.
//! - a delegation it ended, with its final record, kept only while a long-poll of this process
//!   waits for it: the woken wait takes it instead of reading it. A record that ended never
//!   changes again.
//!
//! Both maps are bounded; the least recently used entries are forgotten first.

use std::{
    num::NonZeroUsize,
    sync::{Arc, Mutex, MutexGuard},
};

use chrono::{DateTime, Utc};
use lru::LruCache;
use uuid::Uuid;

use super::store::Record;

/// How many accepted attempts are remembered.
const ACCEPTED: usize = 1024;
/// How many ended delegations are kept for their waiters.
const ENDED: usize = 256;

/// An attempt this process accepted.
#[derive(Clone)]
pub struct AcceptedAttempt {
    /// Its delegation.
    pub delegation_id: Uuid,
    /// Its number.
    pub attempt: i32,
    /// When it times out.
    pub deadline: DateTime<Utc>,
    /// What its output must match (compiled once per process, see `directory::schema`).
    pub output_schema: Arc<serde_json::Value>,
    /// The target's owner, on whose behalf its output is checked.
    pub owner: String,
}

/// See the module docs.
pub struct RecentDelegations {
    accepted: Mutex<LruCache<(Uuid, Uuid), AcceptedAttempt>>,
    ended: Mutex<LruCache<Uuid, Record>>,
}

impl Default for RecentDelegations {
    fn default() -> Self {
        RecentDelegations {
            accepted: Mutex::new(LruCache::new(NonZeroUsize::new(ACCEPTED).expect("non-zero"))),
            ended: Mutex::new(LruCache::new(NonZeroUsize::new(ENDED).expect("non-zero"))),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RecentDelegations {
    /// Remembers that `target` accepted the attempt of `request_id`.
    pub fn accepted(&self, target: Uuid, request_id: Uuid, attempt: AcceptedAttempt) {
        lock(&self.accepted).put((target, request_id), attempt);
    }

    /// The attempt of `request_id` that `target` accepted through this process, if remembered.
    pub fn accepted_by(&self, target: Uuid, request_id: Uuid) -> Option<AcceptedAttempt> {
        lock(&self.accepted).get(&(target, request_id)).cloned()
    }

    /// Forgets the accepted attempt of `request_id` (it ended).
    pub fn forget_accepted(&self, target: Uuid, request_id: Uuid) {
        lock(&self.accepted).pop(&(target, request_id));
    }

    /// Keeps the record of a delegation that just ended, for a waiter of this process.
    pub fn ended(&self, record: Record) {
        lock(&self.ended).put(record.delegation.delegation_id, record);
    }

    /// Takes the record of an ended delegation, if one was kept.
    pub fn take_ended(&self, delegation_id: Uuid) -> Option<Record> {
        lock(&self.ended).pop(&delegation_id)
    }
}
