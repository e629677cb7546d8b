//! What the runner tells the person running it: one log line per item (which negotiation or
//! request, which turn, what was done, how long it took) and, when it stops, a summary of
//! everything it did. `--json-logs` writes the same lines as JSON objects for machines.

use std::{
    fmt,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

/// Counts of what the runner did, kept while it runs.
#[derive(Debug, Default)]
pub struct Tally {
    turns_answered: AtomicU64,
    turns_released: AtomicU64,
    turns_handed_back: AtomicU64,
    turns_lost: AtomicU64,
    turns_given_back: AtomicU64,
    delegations_completed: AtomicU64,
    delegations_rejected: AtomicU64,
    delegations_failed: AtomicU64,
    delegations_given_back: AtomicU64,
    delegations_lost: AtomicU64,
    worker_failures: AtomicU64,
}

/// One thing the runner did with an item, for the tally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    /// A turn was answered.
    TurnAnswered,
    /// A turn was given back after the worker failed on it.
    TurnReleased,
    /// A turn was handed to the system negotiator after the worker failed on it again.
    TurnHandedBack,
    /// The claim was lost before the turn was answered (expired, taken over, negotiation ended).
    TurnLost,
    /// A turn was given back because the runner stopped.
    TurnGivenBack,
    /// A delegation was completed.
    DelegationCompleted,
    /// A delegation was declined (by the worker's answer).
    DelegationRejected,
    /// A delegation was reported failed (by the worker, or because the worker failed).
    DelegationFailed,
    /// A delegation was declined because the runner stopped.
    DelegationGivenBack,
    /// A delegation's answer was not taken (its attempt ended first, or the service could not
    /// be reached in time).
    DelegationLost,
    /// The worker failed on an item (non-zero exit, bad answer, timeout...).
    WorkerFailed,
}

impl Tally {
    /// Counts one more `done`.
    pub fn count(&self, done: Done) {
        let counter = match done {
            Done::TurnAnswered => &self.turns_answered,
            Done::TurnReleased => &self.turns_released,
            Done::TurnHandedBack => &self.turns_handed_back,
            Done::TurnLost => &self.turns_lost,
            Done::TurnGivenBack => &self.turns_given_back,
            Done::DelegationCompleted => &self.delegations_completed,
            Done::DelegationRejected => &self.delegations_rejected,
            Done::DelegationFailed => &self.delegations_failed,
            Done::DelegationGivenBack => &self.delegations_given_back,
            Done::DelegationLost => &self.delegations_lost,
            Done::WorkerFailed => &self.worker_failures,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts as they stand.
    pub fn summary(&self) -> Summary {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Summary {
            turns_answered: get(&self.turns_answered),
            turns_released: get(&self.turns_released),
            turns_handed_back: get(&self.turns_handed_back),
            turns_lost: get(&self.turns_lost),
            turns_given_back: get(&self.turns_given_back),
            delegations_completed: get(&self.delegations_completed),
            delegations_rejected: get(&self.delegations_rejected),
            delegations_failed: get(&self.delegations_failed),
            delegations_given_back: get(&self.delegations_given_back),
            delegations_lost: get(&self.delegations_lost),
            worker_failures: get(&self.worker_failures),
        }
    }
}

/// What the runner did, from its start to its stop.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Turns answered.
    pub turns_answered: u64,
    /// Turns given back after the worker failed on them.
    pub turns_released: u64,
    /// Turns handed to the system negotiator after repeated failures.
    pub turns_handed_back: u64,
    /// Turns whose claim was lost before they were answered.
    pub turns_lost: u64,
    /// Turns given back because the runner stopped.
    pub turns_given_back: u64,
    /// Delegations completed.
    pub delegations_completed: u64,
    /// Delegations declined by the worker.
    pub delegations_rejected: u64,
    /// Delegations reported failed.
    pub delegations_failed: u64,
    /// Delegations declined because the runner stopped.
    pub delegations_given_back: u64,
    /// Delegations whose answer was not taken.
    pub delegations_lost: u64,
    /// Times the worker failed on an item.
    pub worker_failures: u64,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "turns: {} answered, {} released, {} handed back, {} lost, {} given back at stop; \
             delegations: {} completed, {} rejected, {} failed, {} lost, {} given back at stop; \
             worker failures: {}",
            self.turns_answered,
            self.turns_released,
            self.turns_handed_back,
            self.turns_lost,
            self.turns_given_back,
            self.delegations_completed,
            self.delegations_rejected,
            self.delegations_failed,
            self.delegations_lost,
            self.delegations_given_back,
            self.worker_failures,
        )
    }
}

/// A duration as a person reads it in a log line: `850ms`, `2.4s`, `3m05s`.
pub fn took(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d < Duration::from_secs(60) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

/// The last `max` characters of `text`, trimmed, for a log line or a reason.
pub use crate::llm::tail;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(took(Duration::from_millis(850)), "850ms");
        assert_eq!(took(Duration::from_millis(2_440)), "2.4s");
        assert_eq!(took(Duration::from_secs(185)), "3m05s");
    }

    #[test]
    fn tails_keep_the_end() {
        assert_eq!(tail("  short\n", 10), "short");
        assert_eq!(tail("0123456789abc", 3), "...abc");
    }

    #[test]
    fn the_summary_counts_each_kind() {
        let t = Tally::default();
        t.count(Done::TurnAnswered);
        t.count(Done::TurnAnswered);
        t.count(Done::DelegationCompleted);
        let s = t.summary();
        assert_eq!((s.turns_answered, s.delegations_completed, s.worker_failures), (2, 1, 0));
        assert!(s.to_string().starts_with("turns: 2 answered"), "{s}");
    }
}
