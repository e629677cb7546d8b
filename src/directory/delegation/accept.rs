//! The target's calls that take an attempt and finish it: accept (`request -> accepted`, one
//! statement that hands out a fenced claim token) and complete (the output checked against the
//! attempt's output schema before one statement that ends the attempt and the delegation).
//!
//! A complete for an attempt this process accepted checks the output against the schema the
//! accept kept ([`super::recent`]) and is one statement; otherwise, or when that statement
//! refuses what was remembered, it reads the attempt first and answers as that path answers.
//! A claim token is `crate::runtime::tokens`' with the delegation's id and the attempt's number.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::{
    DelegationError,
    outcomes::{AcceptOutcome, CompleteOutcome},
    recent::AcceptedAttempt,
    service::Delegations,
    state::Status,
    store::{self, Record},
};
use crate::{directory::schema::CheckError, runtime::AgentKey, store::turn_delivery::KeyCheck};

/// What an accept hands the target.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// The fenced token of this attempt's acceptance.
    pub claim_token: String,
    /// When the attempt times out.
    pub deadline: DateTime<Utc>,
}

/// The status an `invalid_state` refusal names: the live attempt's, as the statement read it.
fn status_name(status: Option<Status>) -> &'static str {
    status.map_or("unknown", Status::as_str)
}

impl Delegations {
    /// Checks that attempt `attempt` of `delegation_id`, in `status`, is accepted, that a claim
    /// token (when one was sent) is its, and that its deadline has not passed.
    pub(super) fn check_claim(
        &self,
        delegation_id: Uuid,
        attempt: i32,
        status: Status,
        deadline: DateTime<Utc>,
        token: Option<&str>,
    ) -> Result<(), DelegationError> {
        if status != Status::Accepted {
            return Err(DelegationError::InvalidState(status.as_str()));
        }
        if token.is_some()
            && self.runtime.tokens.claim_proof(delegation_id, token).generation() != Some(i64::from(attempt))
        {
            return Err(DelegationError::ClaimStale("the claim token is not this attempt's"));
        }
        if deadline <= Utc::now() {
            return Err(DelegationError::ClaimStale("the attempt's deadline has passed"));
        }
        Ok(())
    }

    /// Accept, for the agent of `key`: `request -> accepted` for the attempt addressed to it,
    /// once; one statement.
    pub async fn accept_delegation(&self, key: &AgentKey, request_id: Uuid) -> Result<Accepted, DelegationError> {
        let moved = {
            let mut conn = self.runtime.pool.acquire().await?;
            store::accept(&mut conn, &key.key_hash, key.agent_id, request_id).await?
        };
        let target = moved.key.clone().identity()?;
        self.runtime.seen(target.agent_id).await;
        match (moved.outcome, moved.delegation_id, moved.attempt, moved.deadline) {
            (Some(AcceptOutcome::Accepted), Some(delegation_id), Some(attempt), Some(deadline)) => {
                // Only the event streams: the requester's waits are for the end.
                self.runtime.wakeups.events_written();
                if let Some(schema) = moved.output_schema {
                    let remembered = AcceptedAttempt {
                        delegation_id,
                        attempt,
                        deadline,
                        output_schema: Arc::new(schema),
                        owner: target.owner_user_id.clone(),
                    };
                    self.recent.accepted(target.agent_id, request_id, remembered);
                }
                Ok(Accepted {
                    claim_token: self.runtime.tokens.claim_token(delegation_id, i64::from(attempt)),
                    deadline,
                })
            }
            (Some(AcceptOutcome::PastDeadline), ..) => Err(DelegationError::InvalidState("past its accept deadline")),
            (Some(AcceptOutcome::NotFound), ..) => Err(DelegationError::NotFound),
            (Some(AcceptOutcome::NotAddressed), ..) => Err(DelegationError::NotAddressed),
            (Some(AcceptOutcome::InvalidState), ..) => Err(DelegationError::InvalidState(status_name(moved.status))),
            (outcome @ (Some(AcceptOutcome::Accepted) | None), ..) => {
                Err(DelegationError::Unexpected(anyhow::anyhow!("an accept answered {outcome:?} without its attempt")))
            }
        }
    }

    /// Complete, for the agent of `key`: the output, checked against the attempt's output
    /// schema, ends the delegation. A refused output leaves the attempt `accepted`, to be fixed.
    /// One statement that completes the attempt only if it is still that attempt, accepted and
    /// in time; before it, the attempt and its schema as this process accepted it, or else as
    /// read (see [`super::recent`]). When the statement refuses what was remembered, the
    /// complete is answered as the path that reads first answers it.
    pub async fn complete_delegation(
        &self,
        key: &AgentKey,
        request_id: Uuid,
        output: &Value,
        token: Option<&str>,
    ) -> Result<(), DelegationError> {
        let remembered = key.agent_id.and_then(|agent| self.recent.accepted_by(agent, request_id));
        let mut checked_here = None;
        if let Some(a) = remembered
            && self.check_claim(a.delegation_id, a.attempt, Status::Accepted, a.deadline, token).is_ok()
            && matches!(self.schemas.check(&a.owner, &a.output_schema, output, "output").await, Ok(Ok(())))
        {
            checked_here = Some(a);
        }
        if let Some(a) = checked_here {
            let moved = self.complete_statement(key, request_id, a.delegation_id, a.attempt, output).await?;
            if moved.outcome == Some(CompleteOutcome::Completed) || !matches!(moved.key, KeyCheck::Ok { .. }) {
                return self.answer_complete(moved, request_id, a.delegation_id);
            }
            if let Some(agent) = key.agent_id {
                self.recent.forget_accepted(agent, request_id);
            }
        }
        let (delegation_id, attempt) = self.check_completion(key, request_id, output, token).await?;
        let moved = self.complete_statement(key, request_id, delegation_id, attempt, output).await?;
        self.answer_complete(moved, request_id, delegation_id)
    }

    /// The complete's one statement, on a pooled connection.
    async fn complete_statement(
        &self,
        key: &AgentKey,
        request_id: Uuid,
        delegation_id: Uuid,
        attempt: i32,
        output: &Value,
    ) -> Result<store::Moved<CompleteOutcome>, DelegationError> {
        let mut conn = self.runtime.pool.acquire().await?;
        let per_requester = i32::try_from(self.runtime.config.trust_per_requester).unwrap_or(i32::MAX);
        Ok(store::complete(
            &mut conn,
            &key.key_hash,
            key.agent_id,
            request_id,
            delegation_id,
            attempt,
            output,
            per_requester,
        )
        .await?)
    }

    /// The answer to a complete's statement: once completed, the delegation's waiters are woken
    /// (a waiter of this process handed the final record).
    fn answer_complete(
        &self,
        moved: store::Moved<CompleteOutcome>,
        request_id: Uuid,
        delegation_id: Uuid,
    ) -> Result<(), DelegationError> {
        let target = moved.key.clone().identity()?;
        match moved.outcome {
            Some(CompleteOutcome::Completed) => {
                self.recent.forget_accepted(target.agent_id, request_id);
                let key = store::delegation_key(delegation_id);
                if let Some((delegation, attempts)) = moved.record.filter(|_| self.runtime.wakeups.has_waiters(&key)) {
                    self.recent.ended(Record { delegation, attempts });
                }
                self.wake_delegation(delegation_id, &[]);
                Ok(())
            }
            Some(CompleteOutcome::PastDeadline) => {
                Err(DelegationError::ClaimStale("the attempt's deadline has passed"))
            }
            Some(CompleteOutcome::NotFound) => Err(DelegationError::NotFound),
            Some(CompleteOutcome::NotAddressed) => Err(DelegationError::NotAddressed),
            Some(CompleteOutcome::InvalidState) => Err(DelegationError::InvalidState(status_name(moved.status))),
            None => Err(DelegationError::Unexpected(anyhow::anyhow!("a complete answered no outcome for a valid key"))),
        }
    }

    /// What a complete checks when this process did not accept the attempt (or a check on what
    /// it remembered failed): the attempt as read now, in the order its refusals are answered
    /// (the key, the delegation, whom it is addressed to, its state, the token, the deadline,
    /// the output). Returns the delegation and the attempt's number.
    async fn check_completion(
        &self,
        key: &AgentKey,
        request_id: Uuid,
        output: &Value,
        token: Option<&str>,
    ) -> Result<(Uuid, i32), DelegationError> {
        let (checked, view) = {
            let mut conn = self.runtime.pool.acquire().await?;
            store::target_view(&mut conn, &key.key_hash, key.agent_id, request_id).await?
        };
        let target = checked.identity()?;
        self.runtime.seen(target.agent_id).await;
        let view = view.ok_or(DelegationError::NotFound)?;
        if view.target_agent_id != target.agent_id {
            return Err(DelegationError::NotAddressed);
        }
        self.check_claim(view.delegation_id, view.attempt, view.status, view.deadline, token)?;
        match self.schemas.check(&target.owner_user_id, &view.output_schema, output, "output").await {
            Ok(verdict) => verdict.map_err(DelegationError::OutputInvalid)?,
            Err(CheckError::OverBudget(wait)) => return Err(DelegationError::CheckBudget(wait)),
            Err(CheckError::Busy) => return Err(DelegationError::Overloaded),
            Err(slow) => {
                return Err(DelegationError::OutputInvalid(format!("the output could not be checked: {slow}")));
            }
        }
        Ok((view.delegation_id, view.attempt))
    }
}
