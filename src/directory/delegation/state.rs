//! The states of a delegation attempt and the moves between them, as one explicit table.
//!
//! An attempt is offered (`request`), taken (`accepted`), and ends `completed`, `rejected`,
//! `timeout`, `error`, or `canceled` when its requester cancels the delegation (the one end that
//! comes from the requester's side: no fallback follows it and it counts neither for nor
//! against the target). A delegation's status is its last attempt's, so the same names serve
//! both. Each status also has the A2A task state an attempt shows at `GET /api/tasks/{id}`
//! ([`Status::a2a_state`]). Pure: no IO.

use crate::domain::TransitionError;

/// Where an attempt (and its delegation) stands. Stored as its name in `TEXT`; a stored name
/// that is none of these fails the read (`sqlx::Type`), never reads as another status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, sqlx::Type, serde::Deserialize, serde::Serialize)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Offered to the target, not yet taken.
    Request,
    /// Taken by the target, being worked on.
    Accepted,
    /// Done; the output matched the capability's output schema.
    Completed,
    /// Declined by the target (or skipped).
    Rejected,
    /// Not accepted, or not finished, in time.
    Timeout,
    /// The target reported that it failed, or was deleted.
    Error,
    /// The requester canceled the delegation while this attempt was live.
    Canceled,
}

/// What happens to an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// The target takes it.
    Accept,
    /// The target hands back a valid output.
    Complete,
    /// The target declines.
    Reject,
    /// The target reports a failure.
    Fail,
    /// Its deadline passed.
    TimeOut,
    /// Its target was deleted.
    TargetGone,
    /// The requester cancels the delegation.
    Cancel,
}

impl Event {
    /// The name, for errors.
    pub fn name(self) -> &'static str {
        match self {
            Event::Accept => "accept",
            Event::Complete => "complete",
            Event::Reject => "reject",
            Event::Fail => "fail",
            Event::TimeOut => "time_out",
            Event::TargetGone => "target_gone",
            Event::Cancel => "cancel",
        }
    }
}

impl Status {
    /// Every status.
    pub const ALL: [Status; 7] = [
        Status::Request,
        Status::Accepted,
        Status::Completed,
        Status::Rejected,
        Status::Timeout,
        Status::Error,
        Status::Canceled,
    ];

    /// The wire (and database) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Request => "request",
            Status::Accepted => "accepted",
            Status::Completed => "completed",
            Status::Rejected => "rejected",
            Status::Timeout => "timeout",
            Status::Error => "error",
            Status::Canceled => "canceled",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether nothing more happens to it.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Status::Request | Status::Accepted)
    }

    /// Whether an attempt that ended so may be followed by another target's (never after a
    /// cancel: the requester no longer wants the work done).
    pub fn falls_back(self) -> bool {
        matches!(self, Status::Rejected | Status::Timeout | Status::Error)
    }

    /// The state of the attempt's A2A task: offered is `submitted`, taken is `working`, a timeout
    /// or a reported failure is `failed`; `completed`, `rejected` and `canceled` keep their
    /// names.
    pub fn a2a_state(self) -> &'static str {
        match self {
            Status::Request => "submitted",
            Status::Accepted => "working",
            Status::Completed => "completed",
            Status::Rejected => "rejected",
            Status::Timeout => "failed",
            Status::Error => "failed",
            Status::Canceled => "canceled",
        }
    }

    /// The transition table: every allowed move, nothing else.
    pub fn transition(self, event: Event) -> Result<Status, TransitionError> {
        use Event as E;
        use Status as S;
        match (self, event) {
            (S::Request, E::Accept) => Ok(S::Accepted),
            (S::Request | S::Accepted, E::Reject) => Ok(S::Rejected),
            (S::Request | S::Accepted, E::TimeOut) => Ok(S::Timeout),
            (S::Accepted, E::Complete) => Ok(S::Completed),
            (S::Accepted, E::Fail) => Ok(S::Error),
            (S::Request | S::Accepted, E::TargetGone) => Ok(S::Error),
            (S::Request | S::Accepted, E::Cancel) => Ok(S::Canceled),
            (from, event) => Err(TransitionError { machine: "delegation", from: from.as_str(), event: event.name() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_allows_exactly_the_documented_moves() {
        let events = [
            Event::Accept,
            Event::Complete,
            Event::Reject,
            Event::Fail,
            Event::TimeOut,
            Event::TargetGone,
            Event::Cancel,
        ];
        let mut allowed = Vec::new();
        for from in Status::ALL {
            for event in events {
                if let Ok(to) = from.transition(event) {
                    allowed.push((from.as_str(), event, to.as_str()));
                }
            }
        }
        assert_eq!(
            allowed,
            vec![
                ("request", Event::Accept, "accepted"),
                ("request", Event::Reject, "rejected"),
                ("request", Event::TimeOut, "timeout"),
                ("request", Event::TargetGone, "error"),
                ("request", Event::Cancel, "canceled"),
                ("accepted", Event::Complete, "completed"),
                ("accepted", Event::Reject, "rejected"),
                ("accepted", Event::Fail, "error"),
                ("accepted", Event::TimeOut, "timeout"),
                ("accepted", Event::TargetGone, "error"),
                ("accepted", Event::Cancel, "canceled"),
            ]
        );
    }

    #[test]
    fn every_status_has_its_a2a_task_state() {
        let table: Vec<(&str, &str)> = Status::ALL.iter().map(|s| (s.as_str(), s.a2a_state())).collect();
        assert_eq!(
            table,
            vec![
                ("request", "submitted"),
                ("accepted", "working"),
                ("completed", "completed"),
                ("rejected", "rejected"),
                ("timeout", "failed"),
                ("error", "failed"),
                ("canceled", "canceled"),
            ]
        );
        // A live attempt is a live task; an ended one an ended task.
        for s in Status::ALL {
            assert_eq!(s.is_terminal(), !matches!(s.a2a_state(), "submitted" | "working"), "{}", s.as_str());
        }
    }

    #[test]
    fn names_round_trip_and_terminal_states_end() {
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(s));
            assert_eq!(s.is_terminal(), s.transition(Event::TimeOut).is_err());
        }
        assert!(Status::Rejected.falls_back() && Status::Timeout.falls_back() && Status::Error.falls_back());
        assert!(!Status::Completed.falls_back());
        assert!(!Status::Canceled.falls_back(), "a cancel never moves the work to another target");
    }

    #[test]
    fn a_cancel_ends_a_live_attempt_and_nothing_else() {
        for s in Status::ALL {
            let canceled = s.transition(Event::Cancel);
            if s.is_terminal() {
                let refused = canceled.expect_err(s.as_str());
                assert_eq!((refused.from, refused.event), (s.as_str(), "cancel"));
            } else {
                assert_eq!(canceled.ok(), Some(Status::Canceled), "{}", s.as_str());
            }
        }
        assert!(Status::Canceled.is_terminal());
        for event in [Event::Accept, Event::Complete, Event::Reject, Event::Fail, Event::TimeOut, Event::Cancel] {
            assert!(Status::Canceled.transition(event).is_err(), "a canceled attempt stays canceled: {event:?}");
        }
    }
}
