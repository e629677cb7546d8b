//! The engine: start a negotiation, take system turns, park personal turns, and finalize.
//!
//! Every state change is one transaction that holds the task's row lock (`store::tasks::lock`),
//! so concurrent callers (an HTTP respond, a timer, the recovery pass) serialise on the task and
//! each sees the state the previous one committed. There is exactly one way a negotiation ends:
//! [`finalize()`]. Turn delivery to personal agents (pickup, respond) lives in later modules and
//! re-enters the same [`Engine::advance`] loop.
//!
//! The engine knows nothing of the directory: what it shares with the delegations (the pool,
//! the wake-ups, the seen-throttle, the key that claim tokens come from) is `crate::runtime`,
//! below both, and the durable timers reach it through the dispatcher above both
//! (`crate::services`).

mod ask;
mod claims;
mod commands;
mod decisions;
mod engine;
mod finalize;
pub mod model_turns;
pub mod negotiator_model;
mod reactivate;
mod recent_claims;
mod respond;
mod start;
mod system_asks;
mod timers;

pub use ask::MAX_QUESTIONS;
pub use claims::Claim;
pub use commands::{
    ASK_PERSON, Checked, MAX_SKIP, PickupQuery, RespondCommand, parse_skip, wait_from_secs, wait_from_text,
};
pub use decisions::decide;
pub use engine::Engine;
pub use finalize::finalize;
pub use reactivate::Reactivation;
pub use respond::{Responded, TurnAnswer};
pub use start::{NewNegotiation, Started};
pub use timers::AfterWait;

use crate::{domain::TransitionError, runtime::KeyRefused};

/// How every agent API key begins (`pk_`): a bearer token that starts so is a key, not a JWT.
pub const KEY_PREFIX: &str = "pk_";

/// Why an engine operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// The API key is unknown, revoked or expired.
    #[error("the API key is unknown, revoked or expired")]
    Unauthorized,
    /// The API key is valid but may not do this (another agent's path, an inactive agent).
    #[error("{0}")]
    Forbidden(&'static str),
    /// No such negotiation.
    #[error("negotiation not found")]
    NotFound,
    /// No such opportunity.
    #[error("opportunity not found")]
    OpportunityNotFound,
    /// A create repeated an `opportunityId` with another request.
    #[error(
        "this opportunityId was used before for another request; repeat that same request to read its \
         negotiation, or give the new match an opportunityId of its own"
    )]
    OpportunityIdReused,
    /// A decision on an opportunity that is not pending.
    #[error("the opportunity is {0}, not pending")]
    NotPending(crate::domain::OpportunityStatus),
    /// The person decided on this opportunity already.
    #[error("you have already decided")]
    AlreadyDecided,
    /// Only a stalled or expired opportunity can be negotiated again.
    #[error("the opportunity is {0}; only a stalled or expired opportunity can be reactivated")]
    NotReactivatable(crate::domain::OpportunityStatus),
    /// The negotiation already ended.
    #[error("the negotiation has already ended")]
    AlreadyCompleted,
    /// The agent holds no claim on this negotiation.
    #[error("this agent holds no claim on the negotiation")]
    NotClaimed,
    /// Another agent holds the claim.
    #[error("another agent holds the claim on this turn")]
    ClaimedByOther,
    /// The token is not the current claim's, or the claim expired.
    #[error("the claim token is stale: its claim expired or was given back, or the turn was claimed again")]
    ClaimStale,
    /// The token's turn was answered already, with another body than this one.
    #[error(
        "this turn was already answered with this claim token, with another body; a repeat must send \
         the same body (it then gets the same answer)"
    )]
    TurnAlreadyAnswered,
    /// The token was never issued for this negotiation.
    #[error(
        "this claim token was never issued for this negotiation: send the claimToken its pickup answered \
         (or none, to answer with the agent's current claim)"
    )]
    UnknownClaimToken,
    /// A hand-back in a negotiation that has no system negotiator (personal vs personal).
    #[error(
        "this negotiation is personal vs personal: there is no system negotiator to hand the turn to; \
         release it without handBack"
    )]
    NoSystemNegotiator,
    /// A side asked its person as often as it may in this negotiation.
    #[error("your agent has asked its person {max} questions in this negotiation, as many as it may; decide with what you know", max = ask::MAX_QUESTIONS)]
    QuestionLimit,
    /// The person's question was answered already, or its window ran out.
    #[error("the question is closed: {}", match .0 {
        crate::store::person_questions::QuestionStatus::Answered => "it was answered already",
        crate::store::person_questions::QuestionStatus::Withdrawn => "its negotiation ended",
        _ => "its answer window ran out",
    })]
    QuestionClosed(crate::store::person_questions::QuestionStatus),
    /// The action is not allowed at this turn.
    #[error("{0}")]
    ActionNotAllowed(String),
    /// A command is malformed (a respond's fields, a pickup's wait or skip): the message names
    /// the field.
    #[error("{0}")]
    Invalid(String),
    /// The state machine refused (a race lost or a bug).
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// Anything else (database, corrupt rows).
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

impl From<KeyRefused> for DeliveryError {
    fn from(e: KeyRefused) -> Self {
        match e {
            KeyRefused::Unauthorized => DeliveryError::Unauthorized,
            KeyRefused::Forbidden(why) => DeliveryError::Forbidden(why),
        }
    }
}

impl From<sqlx::Error> for DeliveryError {
    fn from(e: sqlx::Error) -> Self {
        DeliveryError::Unexpected(e.into())
    }
}
