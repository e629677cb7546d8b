//! How an attempt ends, other than by its target's complete: the target's reject or fail, the
//! delegation's timer, the deletion of the target, and the requester's cancel; and what follows
//! each end.
//!
//! [`end_attempt`] is the one path by which an attempt ends (reject, fail, timeout, a deleted
//! target, a cancel): it writes the attempt's end and its trust counts, then either makes the
//! next attempt (fallback, through [`super::offer`]) or ends the delegation, re-arms or cancels
//! the timer, and queues the wake-ups, all in the caller's transaction. (A complete ends its
//! attempt and its delegation in one statement of its own, `parley_delegation_complete`, which
//! moves and counts the attempt through the same `parley_delegation_move`; see
//! [`super::accept`].) Each caller here is one transaction that holds the delegation's row
//! lock, so that concurrent calls (a fail racing its timeout, an accept racing a cancel)
//! serialise and each sees what the previous one committed; before it opens, the input is
//! screened against the targets a fallback may pick (`screen_fallback`).
//!
//! A cancel ([`Delegations::cancel`]) is the requester's: its delegation, if it has not ended,
//! ends `canceled` with its live attempt (offered or accepted). `canceled` never falls back and
//! is never counted for or against the target, so the same path ends the delegation at once and
//! cancels its timer; the target's later accept, complete, reject or fail finds the attempt
//! `canceled` (409 `invalid_state`), and its inbox no longer lists it.
//!
//! The timer of a delegation is one job (`parley_jobs::DelegationTimeout`, key
//! `delegation:{id}`), always set to when its live attempt times out from where it stands: the
//! accept deadline (or the execution deadline, if sooner) while in `request`, the execution
//! deadline once accepted. Its handler ([`Delegations::time_out_delegation`]) acts only when
//! that attempt is still live and due.

use chrono::Utc;
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{
    DelegationError,
    screen::{Screened, Work},
    service::Delegations,
    state::{Event, Status},
    store::{self, Attempt, Delegation, Record},
};
use crate::{
    directory::anonymity::{self, AgentId},
    runtime::{AgentIdentity, AgentKey},
};

/// The reason an attempt ends with when its target is deleted.
pub const TARGET_DELETED: &str = "the target was deleted";

/// The reason an attempt ends with when its requester cancels the delegation.
pub const CANCELED_BY_REQUESTER: &str = "canceled by the requester";

impl Delegations {
    /// Locks the delegation of `request_id` whose newest attempt addressed to `target` is the
    /// live one; 404 when none ever was, 409 when it is addressed elsewhere now.
    async fn lock_addressed(
        &self,
        conn: &mut PgConnection,
        target: Uuid,
        request_id: Uuid,
    ) -> Result<(Delegation, Attempt), DelegationError> {
        let d = store::lock_addressed(conn, target, request_id).await?.ok_or(DelegationError::NotFound)?;
        let id = d.delegation_id;
        let attempt = store::attempt(conn, id, d.current_attempt())
            .await?
            .ok_or_else(|| anyhow::anyhow!("delegation {id} has no live attempt"))?;
        if attempt.target_agent_id != target {
            return Err(DelegationError::NotAddressed);
        }
        Ok((d, attempt))
    }

    /// Reject (from `request` or `accepted`) or fail (from `accepted`): the attempt ends and the
    /// fallback, if any, is offered in the same transaction.
    pub async fn refuse_delegation(
        &self,
        target: &AgentIdentity,
        request_id: Uuid,
        event: Event,
        reason: Option<&str>,
        token: Option<&str>,
    ) -> Result<(), DelegationError> {
        let addressed = {
            let mut conn = self.runtime.pool.acquire().await?;
            store::addressed(&mut conn, target.agent_id, request_id).await?
        };
        let screened = match addressed {
            Some(d) => self.screen_fallback(&d).await?,
            None => Screened::none(),
        };
        let mut tx = self.runtime.pool.begin().await?;
        let (d, a) = self.lock_addressed(&mut tx, target.agent_id, request_id).await?;
        let claim = |token| self.check_claim(d.delegation_id, a.attempt, a.status, a.deadline, token);
        match (event, a.status) {
            (Event::Reject, Status::Request) => {}
            (Event::Reject, Status::Accepted) if token.is_some() => claim(token)?,
            (Event::Reject, Status::Accepted) => {}
            (Event::Fail, _) => claim(token)?,
            (_, other) => return Err(DelegationError::InvalidState(other.as_str())),
        }
        let next = end_attempt(self, &mut tx, &d, &a, event, None, reason, &screened).await?;
        tx.commit().await?;
        self.wake_delegation(d.delegation_id, &next);
        Ok(())
    }

    /// The screen for an attempt's end: the input against the candidates a fallback may pick
    /// (the targets not tried yet), on behalf of the requester's owner, when `d` may still fall
    /// back; nothing otherwise, nor when that owner's checking time is used up (the attempt
    /// still ends; the delegation then ends with it).
    pub(super) async fn screen_fallback(&self, d: &Delegation) -> Result<Screened, DelegationError> {
        if d.status.is_terminal() || !d.fallback_enabled || d.retries_used >= d.max_retries {
            return Ok(Screened::none());
        }
        let (owner, tried) = {
            let mut conn = self.runtime.pool.acquire().await?;
            let owner = store::owner_of(&mut conn, d.requester_agent_id).await?;
            let tried: Vec<Uuid> =
                store::attempts(&mut conn, d.delegation_id).await?.iter().map(|a| a.target_agent_id).collect();
            (owner, tried)
        };
        let Some(owner) = owner else { return Ok(Screened::none()) };
        let work = Work {
            task_type: &d.task_type,
            custom_type: d.custom_type.as_deref(),
            input: &d.input,
            target: None,
            requester: d.requester_agent_id,
            owner: &owner,
            tried: &tried,
        };
        match self.screen(work).await {
            Err(DelegationError::CheckBudget(_)) => Ok(Screened::none()),
            other => other,
        }
    }

    /// The delegation timer: the attempt it was armed for times out if it is still the live one
    /// and its deadline (from where it stands) has passed. Anything else is a stale or early
    /// delivery and changes nothing.
    pub async fn time_out_delegation(&self, t: parley_jobs::DelegationTimeout) -> Result<bool, DelegationError> {
        let found = {
            let mut conn = self.runtime.pool.acquire().await?;
            store::get(&mut conn, t.delegation_id).await?
        };
        let screened = match found {
            Some(d) => self.screen_fallback(&d).await?,
            None => return Ok(false),
        };
        let mut tx = self.runtime.pool.begin().await?;
        let Some(d) = store::lock(&mut tx, t.delegation_id).await? else {
            return Ok(false);
        };
        if d.status.is_terminal() || d.current_attempt() != t.attempt {
            return Ok(false);
        }
        let Some(a) = store::attempt(&mut tx, d.delegation_id, t.attempt).await? else {
            return Ok(false);
        };
        if a.status.is_terminal() || a.due_at() > Utc::now() {
            return Ok(false);
        }
        let reason = match a.status {
            Status::Request => "not accepted in time",
            _ => "not finished in time",
        };
        let next = end_attempt(self, &mut tx, &d, &a, Event::TimeOut, None, Some(reason), &screened).await?;
        tx.commit().await?;
        self.wake_delegation(d.delegation_id, &next);
        tracing::info!(delegation.id = %d.delegation_id, delegation.attempt = t.attempt, "{reason}");
        Ok(true)
    }

    /// The requester's cancel, for the agent of `key` (the delegation must be one it asked for:
    /// anyone else's, or an unknown request id, is [`DelegationError::NotFound`]; a refused key
    /// is `Unauthorized` or `Forbidden`). A delegation that has not ended ends `canceled`, and its
    /// live attempt (offered or accepted) with it, with the reason [`CANCELED_BY_REQUESTER`]:
    /// no fallback to another target, no count for or against the target, the timer cancelled;
    /// one transaction holding the delegation's row lock, through [`end_attempt`]. Answers the
    /// delegation's final record, and wakes its waiters. A delegation that had ended already
    /// (canceled before, too) is [`DelegationError::Ended`], and nothing changes.
    pub async fn cancel(&self, key: &AgentKey, request_id: Uuid) -> Result<Record, DelegationError> {
        let mut tx = self.runtime.pool.begin().await?;
        let (checked, found) = store::lock_requested(&mut tx, &key.key_hash, key.agent_id, request_id).await?;
        let requester = checked.identity()?;
        let canceled = match found {
            None => Err(DelegationError::NotFound),
            Some(d) if d.status.is_terminal() => Err(DelegationError::Ended),
            Some(d) => self.cancel_live(&mut tx, &d).await,
        };
        let (record, target) = match canceled {
            Ok(canceled) => {
                tx.commit().await?;
                canceled
            }
            Err(refused) => {
                tx.rollback().await?;
                self.runtime.seen(requester.agent_id).await;
                return Err(refused);
            }
        };
        self.runtime.seen(requester.agent_id).await;
        self.recent.forget_accepted(target, request_id);
        let id = record.delegation.delegation_id;
        if self.runtime.wakeups.has_waiters(&store::delegation_key(id)) {
            self.recent.ended(record.clone());
        }
        self.wake_delegation(id, &[]);
        tracing::info!(delegation.id = %id, delegation.attempt = record.delegation.current_attempt(), "{CANCELED_BY_REQUESTER}");
        Ok(record)
    }

    /// The cancel of `d` (locked, not ended) in `conn`'s transaction: its live attempt ends
    /// `canceled` through [`end_attempt`], which, `canceled` never falling back, ends the
    /// delegation too and cancels its timer. Returns the final record and the attempt's target.
    async fn cancel_live(&self, conn: &mut PgConnection, d: &Delegation) -> Result<(Record, Uuid), DelegationError> {
        let id = d.delegation_id;
        let a = store::attempt(conn, id, d.current_attempt())
            .await?
            .ok_or_else(|| anyhow::anyhow!("delegation {id} has no live attempt"))?;
        end_attempt(self, conn, d, &a, Event::Cancel, None, Some(CANCELED_BY_REQUESTER), &Screened::none()).await?;
        let (delegation, attempts) =
            store::record(conn, id).await?.ok_or_else(|| anyhow::anyhow!("delegation {id} vanished"))?;
        Ok((Record { delegation, attempts }, a.target_agent_id))
    }

    /// After an agent was deleted (its row kept, its capabilities gone): every attempt still
    /// open at it ends `error` with the reason [`TARGET_DELETED`], one transaction each, so
    /// that its delegation falls back to another target as after a failure (never counted for
    /// or against the deleted agent). Returns how many ended. An attempt offered to it by a
    /// transaction that read it before its deletion committed is left to its timer.
    pub async fn end_attempts_at_deleted(&self, agent_id: Uuid) -> Result<usize, DelegationError> {
        let open = {
            let mut conn = self.runtime.pool.acquire().await?;
            store::open_at(&mut conn, agent_id).await?
        };
        let mut ended = 0;
        for request_id in open {
            let addressed = {
                let mut conn = self.runtime.pool.acquire().await?;
                store::addressed(&mut conn, agent_id, request_id).await?
            };
            let Some(d) = addressed else { continue };
            let screened = self.screen_fallback(&d).await?;
            let mut tx = self.runtime.pool.begin().await?;
            let (d, a) = match self.lock_addressed(&mut tx, agent_id, request_id).await {
                Ok(found) => found,
                Err(DelegationError::NotFound | DelegationError::NotAddressed) => continue,
                Err(e) => return Err(e),
            };
            if a.status.is_terminal() {
                continue;
            }
            let next =
                end_attempt(self, &mut tx, &d, &a, Event::TargetGone, None, Some(TARGET_DELETED), &screened).await?;
            tx.commit().await?;
            self.wake_delegation(d.delegation_id, &next);
            ended += 1;
        }
        Ok(ended)
    }
}

/// Ends the live attempt `a` of `d` by `event` (output or reason with it), counts it for its
/// target (as `parley_delegation_move` decides), and then offers the next attempt (fallback,
/// to a target `screened` says accepts the input) or ends the delegation, re-arming or
/// cancelling the timer; all in `conn`'s transaction. Returns the targets to wake.
#[allow(clippy::too_many_arguments)]
pub(super) async fn end_attempt(
    delegations: &Delegations,
    conn: &mut PgConnection,
    d: &Delegation,
    a: &Attempt,
    event: Event,
    output: Option<&Value>,
    reason: Option<&str>,
    screened: &Screened,
) -> Result<Vec<Uuid>, DelegationError> {
    let from = a.status;
    let to = from.transition(event).map_err(|_| DelegationError::InvalidState(from.as_str()))?;
    let reason = super::reason_text(reason);
    let may_fall_back = to.falls_back() && d.fallback_enabled && d.retries_used < d.max_retries;
    // Without a fallback to look for, the attempt's end settles the delegation in the same statement.
    let ended = store::AttemptMove {
        attempt: a.attempt,
        from,
        to,
        output,
        reason: reason.as_deref(),
        delegation: (!may_fall_back).then_some((d.retries_used, to)),
    };
    let per_requester = i32::try_from(delegations.runtime.config.trust_per_requester).unwrap_or(i32::MAX);
    if !store::move_attempt(conn, d, ended, per_requester).await? {
        return Err(DelegationError::InvalidState(from.as_str()));
    }
    if matches!(event, Event::Cancel | Event::TimeOut | Event::TargetGone) {
        // An agent Parley calls hears of it at once: the attempt's pending push step (which
        // then sends the cancel) runs now. Nothing is pending for any other target.
        let subject = parley_jobs::A2aSubject::Delegation { delegation_id: d.delegation_id, attempt: a.attempt };
        parley_jobs::hurry_a2a_call(conn, &subject).await?;
    }
    if may_fall_back {
        let tried: Vec<Uuid> =
            store::attempts(conn, d.delegation_id).await?.iter().map(|a| a.target_agent_id).collect();
        if let Some(target) = delegations.next_target(conn, d, &tried, screened).await? {
            store::set_delegation(conn, d, d.retries_used + 1, Status::Request, None).await?;
            let asked = Delegation { status: Status::Request, retries_used: d.retries_used + 1, ..d.clone() };
            let requester_anonymous_id =
                anonymity::current(conn, AgentId(d.requester_agent_id), delegations.runtime.config.anonymous_id_ttl)
                    .await?
                    .0;
            let live = delegations.place(conn, &asked, a.attempt + 1, target, requester_anonymous_id, screened).await?;
            return Ok(live.into_iter().collect());
        }
        store::set_delegation(conn, d, d.retries_used, to, output).await?;
    }
    parley_jobs::cancel_delegation_timeout(conn, d.delegation_id).await?;
    Ok(Vec::new())
}
