//! Waiting after failures, so that the runner never spins: exponential backoff with jitter for
//! calls that may work later (network errors, 5xx, 429), and the book of items the worker failed
//! on, which says when each may be tried again.
//!
//! Jitter spreads the retries of many runners that failed at the same moment (a restarting
//! service) instead of having them all come back together.

use std::{collections::HashMap, time::Duration};

use rand::Rng;
use tokio::time::Instant;

/// First wait after a failed call to the service.
pub const CALL_BASE: Duration = Duration::from_millis(500);
/// Longest wait between two calls to the service.
pub const CALL_MAX: Duration = Duration::from_secs(30);
/// First wait before an item the worker failed on is tried again.
pub const ITEM_BASE: Duration = Duration::from_secs(1);
/// Longest wait before an item the worker failed on is tried again.
pub const ITEM_MAX: Duration = Duration::from_secs(300);
/// A failed item not seen again for this long is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// The wait after the `n`-th failure in a row (1-based): `base * 2^(n-1)`, at most `max`, of
/// which a random half is taken off ("equal jitter": never less than half the step).
pub fn delay(base: Duration, max: Duration, n: u32) -> Duration {
    let step = base.saturating_mul(1u32 << n.saturating_sub(1).min(20)).min(max);
    let half = step / 2;
    half + half.mul_f64(rand::rng().random_range(0.0..=1.0))
}

/// Backoff for one kind of call: grows with each failure, starts over after a success.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    /// Backoff for calls to the service.
    pub fn calls() -> Backoff {
        Backoff { base: CALL_BASE, max: CALL_MAX, failures: 0 }
    }

    /// The wait after one more failure.
    pub fn after_failure(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        delay(self.base, self.max, self.failures)
    }

    /// The last call worked; returns how many failed in a row before it.
    pub fn reset(&mut self) -> u32 {
        std::mem::take(&mut self.failures)
    }
}

#[derive(Debug, Clone)]
struct Entry {
    /// Which stage of the item failed: a turn's number (a new turn starts the count again).
    stage: u32,
    failures: u32,
    retry_at: Instant,
    last: Instant,
}

/// The items (negotiations, delegation requests) the worker or a call failed on lately: how many
/// times in a row, and when each may be tried again.
#[derive(Debug, Default)]
pub struct FailureBook {
    entries: HashMap<String, Entry>,
}

impl FailureBook {
    /// Records a failure of `item` at `stage`; returns how many times in a row it failed there.
    /// The item is not to be tried again before [`delay`] after that many failures.
    pub fn failed(&mut self, item: &str, stage: u32) -> u32 {
        let now = Instant::now();
        self.entries.retain(|_, e| now.duration_since(e.last) < FORGET_AFTER);
        let entry =
            self.entries.entry(item.to_owned()).or_insert(Entry { stage, failures: 0, retry_at: now, last: now });
        if entry.stage != stage {
            *entry = Entry { stage, failures: 0, retry_at: now, last: now };
        }
        entry.failures += 1;
        entry.last = now;
        entry.retry_at = now + delay(ITEM_BASE, ITEM_MAX, entry.failures);
        entry.failures
    }

    /// The item is done with (answered, handed back): forget its failures.
    pub fn forget(&mut self, item: &str) {
        self.entries.remove(item);
    }

    /// Whether `item` must not be tried yet.
    pub fn is_waiting(&self, item: &str) -> bool {
        self.entries.get(item).is_some_and(|e| e.retry_at > Instant::now())
    }

    /// The items that must not be tried yet, at most `limit` of them: those that must wait
    /// longest.
    pub fn waiting(&self, limit: usize) -> Vec<String> {
        let now = Instant::now();
        let mut items: Vec<(&String, Instant)> =
            self.entries.iter().filter(|(_, e)| e.retry_at > now).map(|(k, e)| (k, e.retry_at)).collect();
        items.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        items.into_iter().take(limit).map(|(k, _)| k.clone()).collect()
    }

    /// When the first waiting item may be tried again.
    pub fn next_retry(&self) -> Option<Instant> {
        let now = Instant::now();
        self.entries.values().map(|e| e.retry_at).filter(|at| *at > now).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_never_fall_below_half_a_step() {
        for n in 1..=12 {
            let step = ITEM_BASE.saturating_mul(1 << (n - 1)).min(ITEM_MAX);
            for _ in 0..50 {
                let d = delay(ITEM_BASE, ITEM_MAX, n);
                assert!(d >= step / 2 && d <= step, "failure {n}: {d:?} outside [{:?}, {step:?}]", step / 2);
            }
        }
        assert!(delay(CALL_BASE, CALL_MAX, 1000) <= CALL_MAX);
    }

    #[test]
    fn the_book_counts_failures_per_stage_and_holds_items_back() {
        let mut book = FailureBook::default();
        assert_eq!(book.failed("n1", 0), 1);
        assert_eq!(book.failed("n1", 0), 2);
        assert!(book.is_waiting("n1"));
        assert_eq!(book.waiting(10), vec!["n1".to_owned()]);
        // Over the limit, the ones that wait longest are named.
        book.failed("n2", 0);
        assert_eq!(book.waiting(1), vec!["n1".to_owned()]);
        book.forget("n2");
        assert!(book.next_retry().is_some());
        // A later turn of the same negotiation starts the count again.
        assert_eq!(book.failed("n1", 2), 1);
        book.forget("n1");
        assert!(!book.is_waiting("n1"));
        assert!(book.waiting(10).is_empty());
    }

    #[test]
    fn call_backoff_grows_and_starts_over_after_a_success() {
        let mut b = Backoff::calls();
        let first = b.after_failure();
        assert!(first <= CALL_BASE);
        for _ in 0..20 {
            b.after_failure();
        }
        assert!(b.after_failure() >= CALL_MAX / 2);
        b.reset();
        assert!(b.after_failure() <= CALL_BASE);
    }
}
