//! The negotiation task's lifecycle: A2A task states plus Parley's two polling extensions.
//!
//! ```text
//! submitted -> working -> waiting_for_agent <-> claimed -> working -> ... -> completed
//!                                                         (any non-terminal) -> canceled
//!                          waiting_for_agent <- waiting_for_person <- claimed  (ask_person)
//!                                    working <-> waiting_for_person             (the system asks)
//! ```
//!
//! `waiting_for_person`: the claim holder asked its person (`ask_person`); the turn waits for the
//! answer or the end of the answer window, then goes back to `waiting_for_agent` (same turn).
//! The system negotiator of a user who opted in asks from `working` and, once answered (or
//! not), takes the same turn from `working` again.
//!
//! `failed` belongs to the A2A vocabulary a stored task may carry; nothing moves a task there.
//! The moves the turn statements make in SQL (park, claim, respond) are in the table for the
//! tests that pin the SQL to it (`store::turn_delivery::TRANSITIONS`): the service makes them
//! only in SQL, so outside tests the events do not exist.

use serde::{Deserialize, Serialize};

use super::TransitionError;

/// Where a negotiation task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Created, no turn taken yet.
    Submitted,
    /// A turn is being taken in process (or the task is between turns).
    Working,
    /// Parked for the personal agent of the awaiting user.
    WaitingForAgent,
    /// One agent holds the turn under a claim token.
    Claimed,
    /// The agent asked its person; the turn waits for the answer (or the answer window's end).
    WaitingForPerson,
    /// Ended with an outcome.
    Completed,
    /// Ended by the platform.
    Canceled,
    /// Ended by an internal failure.
    Failed,
}

/// What can happen to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskEvent {
    /// The engine starts running turns.
    Start,
    /// The next speaker is a personal agent: park the turn (in SQL only: `parley_park`).
    #[cfg(test)]
    Park,
    /// An agent picks the parked turn up (in SQL only: `parley_pickup`).
    #[cfg(test)]
    Claim,
    /// The claim holder answers (in SQL only: `parley_respond`).
    #[cfg(test)]
    Respond,
    /// The holder gives the turn back, or its claim expires.
    Unclaim,
    /// The holder asks its person (`ask_person`): the claim is released and the turn waits.
    AskPerson,
    /// The person answered, or the answer window ran out: the turn is parked for the agent again.
    PersonReplied,
    /// The system negotiator asks the person it plays for, before it takes its turn.
    SystemAsks,
    /// The person answered the system negotiator, or the window ran out: it takes its turn.
    SystemResumes,
    /// The park timeout passed: the system negotiator takes the parked turn.
    FallBack,
    /// The negotiation ended (accept, reject, cap or deadline).
    Finish,
    /// The platform canceled it.
    Cancel,
}

impl TaskState {
    /// Every state, for tables and tests.
    pub const ALL: [TaskState; 8] = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::WaitingForAgent,
        TaskState::Claimed,
        TaskState::WaitingForPerson,
        TaskState::Completed,
        TaskState::Canceled,
        TaskState::Failed,
    ];

    /// The stored/wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::WaitingForAgent => "waiting_for_agent",
            TaskState::Claimed => "claimed",
            TaskState::WaitingForPerson => "waiting_for_person",
            TaskState::Completed => "completed",
            TaskState::Canceled => "canceled",
            TaskState::Failed => "failed",
        }
    }

    /// Parses a stored name.
    #[cfg(test)]
    pub fn parse(s: &str) -> Option<TaskState> {
        TaskState::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Completed, canceled or failed: nothing more happens.
    pub fn is_terminal(self) -> bool {
        matches!(self, TaskState::Completed | TaskState::Canceled | TaskState::Failed)
    }

    /// The transition table. Anything not listed is an error.
    pub fn transition(self, event: TaskEvent) -> Result<TaskState, TransitionError> {
        use TaskEvent as E;
        use TaskState as S;
        let next = match (self, event) {
            (S::Submitted, E::Start) => S::Working,
            #[cfg(test)]
            (S::Working, E::Park) => S::WaitingForAgent,
            #[cfg(test)]
            (S::WaitingForAgent, E::Claim) => S::Claimed,
            #[cfg(test)]
            (S::Claimed, E::Respond) => S::Working,
            (S::Claimed, E::Unclaim) => S::WaitingForAgent,
            (S::Claimed, E::AskPerson) => S::WaitingForPerson,
            (S::WaitingForPerson, E::PersonReplied) => S::WaitingForAgent,
            (S::Working, E::SystemAsks) => S::WaitingForPerson,
            (S::WaitingForPerson, E::SystemResumes) => S::Working,
            (S::WaitingForAgent, E::FallBack) => S::Working,
            // Accept/reject/cap end from `working`; the personal-vs-personal deadline ends a
            // negotiation wherever it waits.
            (S::Working | S::WaitingForAgent | S::Claimed | S::WaitingForPerson, E::Finish) => S::Completed,
            (S::Submitted | S::Working | S::WaitingForAgent | S::Claimed | S::WaitingForPerson, E::Cancel) => {
                S::Canceled
            }
            (from, event) => {
                return Err(TransitionError { machine: "task", from: from.as_str(), event: event.name() });
            }
        };
        Ok(next)
    }
}

impl TaskEvent {
    /// Every event.
    #[cfg(test)]
    pub const ALL: [TaskEvent; 12] = [
        TaskEvent::Start,
        TaskEvent::Park,
        TaskEvent::Claim,
        TaskEvent::Respond,
        TaskEvent::Unclaim,
        TaskEvent::AskPerson,
        TaskEvent::PersonReplied,
        TaskEvent::SystemAsks,
        TaskEvent::SystemResumes,
        TaskEvent::FallBack,
        TaskEvent::Finish,
        TaskEvent::Cancel,
    ];

    /// The event's name, for errors and logs.
    pub fn name(self) -> &'static str {
        match self {
            TaskEvent::Start => "start",
            #[cfg(test)]
            TaskEvent::Park => "park",
            #[cfg(test)]
            TaskEvent::Claim => "claim",
            #[cfg(test)]
            TaskEvent::Respond => "respond",
            TaskEvent::Unclaim => "unclaim",
            TaskEvent::AskPerson => "ask_person",
            TaskEvent::PersonReplied => "person_replied",
            TaskEvent::SystemAsks => "system_asks",
            TaskEvent::SystemResumes => "system_resumes",
            TaskEvent::FallBack => "fall_back",
            TaskEvent::Finish => "finish",
            TaskEvent::Cancel => "cancel",
        }
    }
}

impl std::fmt::Display for TaskState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::{TaskEvent as E, TaskState as S};

    /// Every (state, event) pair and its expected result; `None` = refused.
    #[test]
    fn the_transition_table_is_exactly_this() {
        let expected = |s: S, e: E| -> Option<S> {
            match (s, e) {
                (S::Submitted, E::Start) => Some(S::Working),
                (S::Working, E::Park) => Some(S::WaitingForAgent),
                (S::WaitingForAgent, E::Claim) => Some(S::Claimed),
                (S::Claimed, E::Respond) => Some(S::Working),
                (S::Claimed, E::Unclaim) => Some(S::WaitingForAgent),
                (S::Claimed, E::AskPerson) => Some(S::WaitingForPerson),
                (S::WaitingForPerson, E::PersonReplied) => Some(S::WaitingForAgent),
                (S::Working, E::SystemAsks) => Some(S::WaitingForPerson),
                (S::WaitingForPerson, E::SystemResumes) => Some(S::Working),
                (S::WaitingForAgent, E::FallBack) => Some(S::Working),
                (S::Working | S::WaitingForAgent | S::Claimed | S::WaitingForPerson, E::Finish) => Some(S::Completed),
                (s, E::Cancel) if !s.is_terminal() => Some(S::Canceled),
                _ => None,
            }
        };
        let mut allowed = 0;
        for s in S::ALL {
            for e in E::ALL {
                assert_eq!(s.transition(e).ok(), expected(s, e), "{s} on {}", e.name());
                allowed += usize::from(expected(s, e).is_some());
            }
        }
        assert_eq!(allowed, 19);
    }

    #[test]
    fn terminal_states_accept_nothing() {
        for s in S::ALL.into_iter().filter(|s| s.is_terminal()) {
            for e in E::ALL {
                let err = s.transition(e).unwrap_err();
                assert_eq!(err.from, s.as_str());
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for s in S::ALL {
            assert_eq!(S::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(S::parse("done"), None);
    }
}
