//! Pure types and rules of a negotiation, with no IO: turns, people, the task and opportunity
//! state machines, turn caps, how an outcome is derived, and who reads whose reasoning. Everything here is unit-tested
//! exhaustively; the store and the engine only ever change state through these tables.

pub mod opportunity;
pub mod outcome;
pub mod task;
pub mod turn;
pub mod user;
pub mod viewer;

pub use opportunity::{Decision, OpportunityEvent, OpportunityStatus};
pub use outcome::{AgreedRole, EndReason, Outcome, Pairing, PreviousRound, RoleView, derive_outcome};
pub use task::{TaskEvent, TaskState};
pub use turn::{
    Action, DecidedBy, FallbackReason, Played, PlayedBy, Role, Side, SideKind, SuggestedRoles, Turn, action_allowed,
};
pub use user::{SeedActor, SeedAssessment, UserContext};
pub use viewer::Viewer;

/// A transition that the state machine's table does not contain. Always a bug or a race lost;
/// never written to the database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{machine}: no transition from {from} on {event}")]
pub struct TransitionError {
    /// Which machine refused.
    pub machine: &'static str,
    /// The state it was in.
    pub from: &'static str,
    /// The event it was given.
    pub event: &'static str,
}
