//! A limiter of failures per key: a key (a client address, a requesting agent) that keeps
//! failing is refused for a while, before its next attempt costs anything.
//!
//! A keyed GCRA limiter (`governor`) gives each key a burst of failures, then one more per
//! refill period. The failure that overflows the budget is refused, and until the budget has
//! room again what failed is refused at the door ([`FailureLimiter::blocked_for`]). What is
//! refused at the door may be narrower than the key the budget counts: the failed-authentication
//! limiter counts failures per client address but refuses only the credential that failed
//! (`D`, the door's key), so that a valid credential from the same address is never refused.
//! Successes consume nothing. Kept in process: each instance limits what it serves.

use std::{
    collections::HashMap,
    hash::Hash,
    num::NonZeroU32,
    sync::Mutex,
    time::{Duration, Instant},
};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter, clock::Clock};

/// Above this many tracked keys, keys whose budget is full again are forgotten.
const TRACKED_KEYS: usize = 10_000;

/// Failures per key `K`; what failed past the budget is refused at the door by its key `D`.
pub struct FailureLimiter<K: Hash + Eq + Clone, D: Hash + Eq = K> {
    failures: DefaultKeyedRateLimiter<K>,
    /// What failed past its key's budget, and until when it is refused.
    blocked: Mutex<HashMap<D, Instant>>,
}

impl<K: Hash + Eq + Clone, D: Hash + Eq> FailureLimiter<K, D> {
    /// A burst of `burst` failures, then one more per `refill`.
    pub fn new(burst: u32, refill: Duration) -> FailureLimiter<K, D> {
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        let quota =
            Quota::with_period(refill.max(Duration::from_nanos(1))).expect("a non-zero period").allow_burst(burst);
        FailureLimiter { failures: RateLimiter::keyed(quota), blocked: Mutex::new(HashMap::new()) }
    }

    /// How long `door` is still refused, if it is.
    pub fn blocked_for(&self, door: &D) -> Option<Duration> {
        let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        let until = *blocked.get(door)?;
        let now = Instant::now();
        if until > now {
            Some(until - now)
        } else {
            blocked.remove(door);
            None
        }
    }

    /// Counts a failure against `key`'s budget; `Err(wait)` when it is one too many, and then
    /// `door` is refused for `wait`.
    pub fn failed_at(&self, key: &K, door: D) -> Result<(), Duration> {
        if self.failures.len() > TRACKED_KEYS {
            self.failures.retain_recent();
        }
        match self.failures.check_key(key) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
                let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                blocked.retain(|_, until| *until > now);
                // A flood of ever new doors cannot grow the map without bound: past the limit,
                // the failure is still refused, only not remembered at the door.
                if blocked.len() < TRACKED_KEYS {
                    blocked.insert(door, now + wait);
                }
                Err(wait)
            }
        }
    }
}

impl<K: Hash + Eq + Clone> FailureLimiter<K, K> {
    /// Counts a failure of `key`; `Err(wait)` when it is one too many, and then `key` itself is
    /// refused for `wait`.
    pub fn failed(&self, key: &K) -> Result<(), Duration> {
        self.failed_at(key, key.clone())
    }
}
