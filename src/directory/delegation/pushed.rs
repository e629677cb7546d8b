//! Attempts pushed to agents Parley calls (registered by their AgentCard) instead of waiting for
//! them to poll: the same moves a polling target makes with its accept, complete, reject and
//! fail, made on the agent's behalf from what its A2A endpoint answered.
//!
//! The pushing itself (the calls, the steps that follow the agent's task) is `crate::a2a_push`'s;
//! this file holds only what changes a delegation, each a transaction that holds the
//! delegation's row lock, through the paths polled attempts take: the accept moves the attempt
//! and its timer as `parley_delegation_accept` does, and every end goes through
//! [`super::flow::end_attempt`], so trust counts a pushed attempt exactly as a polled one, and a
//! failed attempt falls back to the next target the same way. An output is checked against the
//! capability's `outputSchema` before its transaction; one it does not match fails the attempt
//! with why (a polling target may fix and resend its output; a pushed agent's answer is final).

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::{
    DelegationError,
    flow::end_attempt,
    screen::Screened,
    service::Delegations,
    state::{Event, Status},
    store::{self, Attempt, AttemptMove, Delegation},
};
use crate::directory::schema::CheckError;

/// An attempt as a push step reads it.
#[derive(Debug, Clone)]
pub struct PushedAttempt {
    /// Its delegation.
    pub delegation: Delegation,
    /// The attempt.
    pub attempt: Attempt,
    /// The agent's task, once its send was answered.
    pub remote_task_id: Option<String>,
}

impl PushedAttempt {
    /// Whether the attempt is still its delegation's live one and open (offered or accepted).
    pub fn is_live(&self) -> bool {
        self.delegation.current_attempt() == self.attempt.attempt && !self.attempt.status.is_terminal()
    }
}

impl Delegations {
    /// Attempt `attempt` of `delegation_id` as it stands, with the agent's task id; `None` when
    /// there is no such attempt.
    pub async fn pushed_attempt(
        &self,
        delegation_id: Uuid,
        attempt: i32,
    ) -> Result<Option<PushedAttempt>, DelegationError> {
        let mut conn = self.runtime.pool.acquire().await?;
        let Some(delegation) = store::get(&mut conn, delegation_id).await? else { return Ok(None) };
        let Some(a) = store::attempt(&mut conn, delegation_id, attempt).await? else { return Ok(None) };
        let remote_task_id = store::remote_task(&mut conn, delegation_id, attempt).await?;
        Ok(Some(PushedAttempt { delegation, attempt: a, remote_task_id }))
    }

    /// The agent took attempt `attempt` (its send was answered): `request -> accepted`, the
    /// agent's task id kept, the timer moved to the execution deadline, and `then` (the next
    /// step's arming) run, all in one transaction. False, having changed nothing, when the
    /// attempt is no longer live and offered, or its accept deadline has passed.
    pub async fn pushed_accepted(
        &self,
        delegation_id: Uuid,
        attempt: i32,
        remote_task_id: Option<&str>,
        then: Option<(&parley_jobs::A2aCall, DateTime<Utc>)>,
    ) -> Result<bool, DelegationError> {
        let mut tx = self.runtime.pool.begin().await?;
        let Some(d) = store::lock(&mut tx, delegation_id).await? else { return Ok(false) };
        let Some(a) = store::attempt(&mut tx, delegation_id, attempt).await? else { return Ok(false) };
        let now = Utc::now();
        if d.current_attempt() != attempt || a.status != Status::Request || a.accept_deadline.min(a.deadline) <= now {
            return Ok(false);
        }
        let to = Status::Request.transition(Event::Accept).map_err(|_| DelegationError::InvalidState("request"))?;
        let per_requester = i32::try_from(self.runtime.config.trust_per_requester).unwrap_or(i32::MAX);
        let moved = AttemptMove {
            attempt,
            from: Status::Request,
            to,
            output: None,
            reason: None,
            delegation: Some((d.retries_used, to)),
        };
        if !store::move_attempt(&mut tx, &d, moved, per_requester).await? {
            return Ok(false);
        }
        if a.accept_deadline < a.deadline {
            let timer = parley_jobs::DelegationTimeout { delegation_id, attempt };
            parley_jobs::schedule_delegation_timeout(&mut tx, &timer, a.deadline).await?;
        }
        if let Some(remote) = remote_task_id {
            store::set_remote_task(&mut tx, delegation_id, attempt, remote).await?;
        }
        if let Some((next, at)) = then {
            parley_jobs::schedule_a2a_call(&mut tx, next, at).await?;
        }
        tx.commit().await?;
        self.wake_delegation(delegation_id, &[]);
        Ok(true)
    }

    /// The agent's task for attempt `attempt` completed with `output`: checked against the
    /// attempt's output schema (on behalf of the target's owner), then the attempt completes and
    /// the delegation with it; an output the schema refuses fails the attempt with why (and the
    /// delegation falls back as after any failure). `done_at` is when the work was done (the
    /// agent's word, never later than now): work done after the attempt's deadline completes
    /// nothing, however soon it is read, and work done by then completes it even when read after
    /// (the attempt's timer reads once more before it times the attempt out). An attempt that
    /// had moved on is left as it is. True when the attempt ended here.
    pub async fn pushed_output(
        &self,
        delegation_id: Uuid,
        attempt: i32,
        output: &Value,
        done_at: DateTime<Utc>,
    ) -> Result<bool, DelegationError> {
        // An agent built on protobuf's Value sends every number as a double.
        let output = &super::numbers::integral_doubles_as_integers(output.clone());
        let Some(read) = self.pushed_attempt(delegation_id, attempt).await? else {
            return Ok(false);
        };
        if !read.is_live() || read.attempt.status != Status::Accepted || done_at > read.attempt.deadline {
            return Ok(false);
        }
        let owner = {
            let mut conn = self.runtime.pool.acquire().await?;
            store::owner_of(&mut conn, read.attempt.target_agent_id).await?.unwrap_or_default()
        };
        let refused = match self.schemas.check(&owner, &read.attempt.output_schema, output, "output").await {
            Ok(Ok(())) => None,
            Ok(Err(why)) => Some(format!("the agent's output was refused: {why}")),
            Err(CheckError::OverBudget(_) | CheckError::Busy) => return Err(DelegationError::Overloaded),
            Err(other) => Some(format!("the agent's output could not be checked: {other}")),
        };
        if let Some(why) = refused {
            return self.pushed_ended(delegation_id, attempt, Event::Fail, &why).await;
        }
        let mut tx = self.runtime.pool.begin().await?;
        let Some((d, a)) = lock_live(&mut tx, delegation_id, attempt).await? else {
            return Ok(false);
        };
        if a.status != Status::Accepted || done_at > a.deadline {
            return Ok(false);
        }
        end_attempt(self, &mut tx, &d, &a, Event::Complete, Some(output), None, &Screened::none()).await?;
        tx.commit().await?;
        self.wake_delegation(delegation_id, &[]);
        Ok(true)
    }

    /// The agent refused (`Event::Reject`) or failed (`Event::Fail`) attempt `attempt`, or could
    /// not be called, with `reason`: the attempt ends through the one end path, and the
    /// delegation falls back or ends. False when the attempt had moved on already.
    pub async fn pushed_ended(
        &self,
        delegation_id: Uuid,
        attempt: i32,
        event: Event,
        reason: &str,
    ) -> Result<bool, DelegationError> {
        let screened = {
            let found = {
                let mut conn = self.runtime.pool.acquire().await?;
                store::get(&mut conn, delegation_id).await?
            };
            match found {
                Some(d) => self.screen_fallback(&d).await?,
                None => return Ok(false),
            }
        };
        let mut tx = self.runtime.pool.begin().await?;
        let Some((d, a)) = lock_live(&mut tx, delegation_id, attempt).await? else { return Ok(false) };
        if a.status.transition(event).is_err() {
            return Ok(false);
        }
        let next = end_attempt(self, &mut tx, &d, &a, event, None, Some(reason), &screened).await?;
        tx.commit().await?;
        self.wake_delegation(delegation_id, &next);
        let reason = crate::quote::logged(reason);
        tracing::info!(delegation.id = %delegation_id, delegation.attempt = attempt, %reason, "pushed attempt ended");
        Ok(true)
    }
}

/// Locks `delegation_id` and reads attempt `attempt` when it is still the live one and open.
async fn lock_live(
    conn: &mut sqlx::PgConnection,
    delegation_id: Uuid,
    attempt: i32,
) -> Result<Option<(Delegation, Attempt)>, DelegationError> {
    let Some(d) = store::lock(conn, delegation_id).await? else { return Ok(None) };
    if d.status.is_terminal() || d.current_attempt() != attempt {
        return Ok(None);
    }
    let Some(a) = store::attempt(conn, delegation_id, attempt).await? else { return Ok(None) };
    Ok((!a.status.is_terminal()).then_some((d, a)))
}
