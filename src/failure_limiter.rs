//! A limiter of failures per key: a key (a client address, a requesting agent) that keeps
//! failing is refused for a while, before its next attempt costs anything.
//!
//! A keyed GCRA limiter (`governor`) gives each key a burst of failures, then one more per
//! refill period. The failure that overflows the budget is refused, and until the budget has
//! room again the key is refused at the door ([`FailureLimiter::blocked_for`]). Successes
//! consume nothing. Kept in process: each instance limits what it serves.

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

/// Failures per key.
pub struct FailureLimiter<K: Hash + Eq + Clone> {
    failures: DefaultKeyedRateLimiter<K>,
    /// Keys over their budget, and until when.
    blocked: Mutex<HashMap<K, Instant>>,
}

impl<K: Hash + Eq + Clone> FailureLimiter<K> {
    /// A burst of `burst` failures, then one more per `refill`.
    pub fn new(burst: u32, refill: Duration) -> FailureLimiter<K> {
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::with_period(refill.max(Duration::from_nanos(1)))
            .expect("a non-zero period")
            .allow_burst(burst);
        FailureLimiter { failures: RateLimiter::keyed(quota), blocked: Mutex::new(HashMap::new()) }
    }

    /// How long `key` is still refused, if it is.
    pub fn blocked_for(&self, key: &K) -> Option<Duration> {
        let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        let until = *blocked.get(key)?;
        let now = Instant::now();
        if until > now {
            Some(until - now)
        } else {
            blocked.remove(key);
            None
        }
    }

    /// Counts a failure of `key`; `Err(wait)` when it is one too many.
    pub fn failed(&self, key: &K) -> Result<(), Duration> {
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
                blocked.insert(key.clone(), now + wait);
                Err(wait)
            }
        }
    }
}
