//! Delegation: one agent hands a piece of work to another through the directory, durably.
//!
//! A requester asks (`POST /api/agents/delegate`); the delegation is a list of attempts, one per
//! target, at most one live at a time. The target sees its attempts in its inbox (long-polled,
//! woken by NOTIFY like turn pickups), accepts one (a compare-and-set that hands out a fenced
//! claim token), and completes, rejects or fails it. An attempt not accepted within the accept
//! timeout, or not finished within the delegation's `timeoutMs` from its start, times out.
//! An attempt that ends rejected, timed out or in error is followed, in the same transaction,
//! by one to the best-ranked eligible target not yet tried whose input schema accepts the
//! input, while retries are left; otherwise the delegation ends with its last attempt's status.
//! The requester may cancel a delegation that has not ended: it ends `canceled` with its live
//! attempt, and no other target is tried.
//!
//! [`Delegations`] ([`service`]) is the service every delegation call goes through (HTTP, MCP,
//! the timer dispatcher): it owns what one process keeps for delegations and shares the rest
//! with the turn engine through `crate::runtime`. Its operations, one file per concern:
//!
//! - [`delegate`]: a new delegation, from the key's check to its commit;
//! - [`offer`]: offering an attempt to a target, skipping the targets whose inbound window is
//!   full;
//! - [`accept`]: the target's accept and complete;
//! - [`flow`]: every other end of an attempt (reject, fail, timeout, a deleted target, the
//!   requester's cancel) through the one end path, `flow::end_attempt`, and the fallback that
//!   follows it (never after a cancel);
//! - [`pushed`]: the same moves made for a target Parley calls over A2A (registered by its
//!   AgentCard), from what its endpoint answered;
//! - [`reads`]: reads of a delegation and of an inbox, and their long polls;
//! - [`outcomes`]: the words its accept and complete statements answer, one enum each;
//! - [`screen`]: the input checked against the schemas of the targets a transaction may pick,
//!   before it opens;
//! - [`targets`]: which of them the transaction picks;
//! - [`recent`]: what this process learned of the attempts it accepted and the delegations it
//!   ended, so that the calls that follow need not read them again;
//! - [`state`]: the attempt statuses and their transition table (pure);
//! - [`numbers`]: numbers as clients send them (an integral double is an integer), in a
//!   request's fields and inside its input;
//! - [`store`]: the SQL (delegations, attempts, inbox, trust counters).
//!
//! Unlike the rest of the directory, the service owns its transactions (like
//! `crate::delivery`): an attempt's end, its trust counts, the next attempt and the timers
//! commit together, each state change in one transaction that holds the delegation's row lock.
//! No schema check runs inside a transaction: a delegation's input is checked against the
//! targets it may go to before its transaction opens, and the transaction looks the verdicts up
//! ([`screen`]); a complete's output is checked before its statement.
//!
//! The calls on the usual path cost few round trips to PostgreSQL, each authenticating the
//! caller's key inside its own statement (see [`store`]): a delegation is a key check and a read
//! of what the named target offers (or the process's discovery snapshot), then one transaction
//! of two statements, an accept one statement, a complete one statement when this process
//! accepted the attempt and otherwise a read first, an inbox read one statement.
//!
//! Neither side sees the other's id or owner: the target sees the requester's anonymous id,
//! the requester sees each target's.

pub mod accept;
pub mod delegate;
pub mod flow;
pub mod numbers;
pub mod offer;
pub mod outcomes;
pub mod pushed;
pub mod reads;
pub mod recent;
pub mod screen;
pub mod service;
pub mod state;
pub mod store;
pub mod targets;

use serde_json::Value;
use uuid::Uuid;

use super::capabilities::{CapabilityError, TaskType, custom_type_for};
use crate::runtime::KeyRefused;
pub use service::Delegations;
pub use state::{Event, Status};
pub use store::{Attempt, Delegation, InboxItem, Record};

/// `timeoutMs` when none is given.
pub const DEFAULT_TIMEOUT_MS: i64 = 30_000;
/// Longest `timeoutMs`: 24 hours.
pub const MAX_TIMEOUT_MS: i64 = 24 * 3600 * 1000;
/// `maxRetries` when none is given.
pub const DEFAULT_MAX_RETRIES: i32 = 3;
/// Largest `maxRetries`.
pub const MAX_RETRIES: i32 = 10;
/// Longest reason or error text kept.
pub const MAX_REASON: usize = 2000;

/// Why a delegation call was refused.
#[derive(Debug, thiserror::Error)]
pub enum DelegationError {
    /// A field of the request is wrong (400 `invalid_body`).
    #[error("{field} {message}")]
    Invalid {
        /// The field, as the API names it.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The API key is unknown, revoked or expired (401).
    #[error("the API key is unknown, revoked or expired")]
    Unauthorized,
    /// The key may not do this (403).
    #[error("{0}")]
    Forbidden(&'static str),
    /// No such delegation for this caller (404).
    #[error("delegation not found")]
    NotFound,
    /// The named target is unknown or its anonymous id expired (404 `unknown_target`).
    #[error("the target anonymous id is unknown or expired")]
    UnknownTarget,
    /// The target may not take this work (400 `target_not_eligible`).
    #[error("{0}")]
    NotEligible(String),
    /// The input does not match the target's input schema (400 `input_invalid`).
    #[error("{0}")]
    InputInvalid(String),
    /// The output does not match the capability's output schema (400 `output_invalid`).
    #[error("{0}")]
    OutputInvalid(String),
    /// The request id was used before with another body (409 `request_id_reused`).
    #[error("this requestId was already used with a different body")]
    RequestIdReused,
    /// The request id belongs to another requester's delegation (409 `request_id_taken`).
    #[error("this requestId is already taken; choose another")]
    RequestIdTaken,
    /// The attempt is addressed to another agent now (409 `not_addressed`).
    #[error("this delegation is no longer addressed to this agent")]
    NotAddressed,
    /// The delegation has ended already (completed, rejected, timed out, failed or canceled), so
    /// its requester can no longer cancel it (409 `delegation_ended`).
    #[error("the delegation has already ended")]
    Ended,
    /// The attempt is not in a state that allows this (409 `invalid_state`).
    #[error("the delegation attempt is {0}")]
    InvalidState(&'static str),
    /// The claim token is not the accepted attempt's, or its deadline passed (409 `claim_stale`).
    #[error("{0}")]
    ClaimStale(&'static str),
    /// The requester sent more delegations in the last minute than its outbound limit (429
    /// `rate_limited`); retry after the duration.
    #[error("more than {0} delegations in the last 60 s; retry later")]
    RateLimited(i32, std::time::Duration),
    /// The requester sent too many delegations whose input the target's schema refused (429
    /// `rate_limited`); retry after the duration.
    #[error("too many delegations with an input the target's schema refuses; retry later")]
    TooManyInvalid(std::time::Duration),
    /// The named target's capability changed between the screen and the transaction (409
    /// `invalid_state` when it happens again at once).
    #[error("the target's capability changed while the delegation was being made; send it again")]
    Rescreen,
    /// The owner of the agent whose schema checks these are used up its checking time (429
    /// `rate_limited`); retry after the duration.
    #[error(
        "the schema-checking time of this agent's owner is used up for now (PARLEY_SCHEMA_CHECK_BUDGET per minute); retry later"
    )]
    CheckBudget(std::time::Duration),
    /// The schema checks are overloaded (503 `unavailable`).
    #[error("the schema checks are overloaded; retry shortly")]
    Overloaded,
    /// Anything else.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

impl From<sqlx::Error> for DelegationError {
    fn from(e: sqlx::Error) -> Self {
        // Two requesters' first delegations under one new request id, at the same moment: the
        // one that commits second finds the id taken.
        if e.as_database_error().and_then(|d| d.constraint()) == Some("delegations_request_id_key") {
            return DelegationError::RequestIdTaken;
        }
        DelegationError::Unexpected(e.into())
    }
}

impl From<KeyRefused> for DelegationError {
    fn from(e: KeyRefused) -> Self {
        match e {
            KeyRefused::Unauthorized => DelegationError::Unauthorized,
            KeyRefused::Forbidden(why) => DelegationError::Forbidden(why),
        }
    }
}

impl From<parley_jobs::JobsError> for DelegationError {
    fn from(e: parley_jobs::JobsError) -> Self {
        DelegationError::Unexpected(e.into())
    }
}

impl From<CapabilityError> for DelegationError {
    fn from(e: CapabilityError) -> Self {
        DelegationError::Invalid { field: e.field, message: e.message }
    }
}

/// A delegation request as it arrived (numbers still raw, so a wrong one can be named).
#[derive(Debug, Clone)]
pub struct RawRequest<'a> {
    /// `requestId`.
    pub request_id: Option<Uuid>,
    /// `agentId` (optional: the key's own agent).
    pub agent_id: Option<Uuid>,
    /// `targetAnonymousId`.
    pub target_anonymous_id: Option<Uuid>,
    /// `taskType`.
    pub task_type: &'a str,
    /// `customType`.
    pub custom_type: Option<&'a str>,
    /// `input`.
    pub input: &'a Value,
    /// `timeoutMs`.
    pub timeout_ms: Option<i64>,
    /// `fallbackEnabled`.
    pub fallback_enabled: Option<bool>,
    /// `maxRetries`.
    pub max_retries: Option<i64>,
}

/// A checked delegation request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The requester's id for it (issued when it gave none).
    pub request_id: Uuid,
    /// The requesting agent, when the body names it (it must be the key's).
    pub agent_id: Option<Uuid>,
    /// The target, when named.
    pub target_anonymous_id: Option<Uuid>,
    /// The kind of work.
    pub task_type: TaskType,
    /// Set exactly for `custom`.
    pub custom_type: Option<String>,
    /// The work.
    pub input: Value,
    /// Per attempt, from the configured minimum to [`MAX_TIMEOUT_MS`].
    pub timeout_ms: i64,
    /// Whether failed attempts are followed by others.
    pub fallback_enabled: bool,
    /// 0 to [`MAX_RETRIES`].
    pub max_retries: i32,
    /// The A2A context it is asked in (the message's `contextId`), kept with it; not part of
    /// what makes two requests the same.
    pub context_id: Option<String>,
}

impl Request {
    /// Checks every field; the first one at fault is named. `min_timeout_ms` is the shortest
    /// `timeoutMs` accepted (`PARLEY_DELEGATION_MIN_TIMEOUT`): a timeout no target could meet
    /// would only make its attempts fail. The input's integral doubles are read as integers
    /// ([`numbers::integral_doubles_as_integers`]) before anything checks or stores it.
    pub fn parse(raw: &RawRequest<'_>, min_timeout_ms: i64) -> Result<Request, DelegationError> {
        let invalid = |field, message: String| DelegationError::Invalid { field, message };
        let task_type = TaskType::parse(raw.task_type)
            .ok_or_else(|| invalid("taskType", format!("must be one of {}", TaskType::names())))?;
        let custom_type = custom_type_for(task_type, raw.custom_type)?;
        let timeout_ms = raw.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        let min_timeout_ms = min_timeout_ms.clamp(1, MAX_TIMEOUT_MS);
        if !(min_timeout_ms..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
            return Err(invalid(
                "timeoutMs",
                format!("must be from {min_timeout_ms} to {MAX_TIMEOUT_MS} milliseconds"),
            ));
        }
        let max_retries = raw.max_retries.unwrap_or(i64::from(DEFAULT_MAX_RETRIES));
        if !(0..=i64::from(MAX_RETRIES)).contains(&max_retries) {
            return Err(invalid("maxRetries", format!("must be from 0 to {MAX_RETRIES}")));
        }
        Ok(Request {
            request_id: raw.request_id.unwrap_or_else(Uuid::new_v4),
            agent_id: raw.agent_id,
            target_anonymous_id: raw.target_anonymous_id,
            task_type,
            custom_type,
            input: numbers::integral_doubles_as_integers(raw.input.clone()),
            timeout_ms,
            fallback_enabled: raw.fallback_enabled.unwrap_or(true),
            max_retries: max_retries as i32,
            context_id: None,
        })
    }

    /// Whether a stored delegation was made from this same body (a retry). The stored input is
    /// read as a new one is (a delegation stored before integral doubles were read as integers
    /// still matches its retry).
    pub fn same_as(&self, d: &Delegation) -> bool {
        d.task_type == self.task_type.as_str()
            && d.custom_type == self.custom_type
            && numbers::integral_doubles_as_integers(d.input.clone()) == self.input
            && d.requested_target == self.target_anonymous_id
            && d.timeout_ms == self.timeout_ms
            && d.fallback_enabled == self.fallback_enabled
            && d.max_retries == self.max_retries
    }
}

/// Trims a reason to [`MAX_REASON`] characters; blank is none.
pub fn reason_text(reason: Option<&str>) -> Option<String> {
    reason.map(str::trim).filter(|r| !r.is_empty()).map(|r| r.chars().take(MAX_REASON).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn raw<'a>(input: &'a Value) -> RawRequest<'a> {
        RawRequest {
            request_id: None,
            agent_id: None,
            target_anonymous_id: None,
            task_type: "code-review",
            custom_type: None,
            input,
            timeout_ms: None,
            fallback_enabled: None,
            max_retries: None,
        }
    }

    #[test]
    fn defaults_and_bounds() {
        let input = json!({"code": "x"});
        let r = Request::parse(&raw(&input), 1000).unwrap();
        assert_eq!((r.timeout_ms, r.max_retries, r.fallback_enabled), (30_000, 3, true));
        let field = |f: &dyn Fn(&mut RawRequest<'_>)| {
            let mut r = raw(&input);
            f(&mut r);
            match Request::parse(&r, 1000) {
                Err(DelegationError::Invalid { field, .. }) => field,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(field(&|r| r.timeout_ms = Some(0)), "timeoutMs");
        assert_eq!(field(&|r| r.timeout_ms = Some(999)), "timeoutMs", "below the configured minimum");
        assert_eq!(field(&|r| r.timeout_ms = Some(MAX_TIMEOUT_MS + 1)), "timeoutMs");
        assert_eq!(field(&|r| r.max_retries = Some(11)), "maxRetries");
        assert_eq!(field(&|r| r.max_retries = Some(-1)), "maxRetries");
        assert_eq!(field(&|r| r.task_type = "cooking"), "taskType");
        assert_eq!(field(&|r| r.custom_type = Some("x")), "customType");
    }

    #[test]
    fn an_inputs_integral_doubles_are_read_as_integers() {
        let input: Value = serde_json::from_str(r#"{"code": "x", "lines": 5.0, "ratio": 0.5}"#).unwrap();
        let r = Request::parse(&raw(&input), 1000).unwrap();
        assert_eq!(r.input, json!({"code": "x", "lines": 5, "ratio": 0.5}));
        assert!(r.input["lines"].is_i64());
    }
}
