//! Every state change of a delegation, each one transaction that holds the delegation's row
//! lock, so that concurrent calls (sixteen accepts, a complete racing its timeout) serialise and
//! each sees what the previous one committed.
//!
//! [`end_attempt`] is the one path by which an attempt ends (complete, reject, fail, timeout):
//! it writes the attempt's end and its trust counts, then either makes the next attempt
//! (fallback) or ends the delegation, re-arms or cancels the timer, and queues the wake-ups,
//! all in the caller's transaction.
//!
//! The timer of a delegation is one job (`parley_jobs::DelegationTimeout`, key
//! `delegation:{id}`), always set to when its live attempt times out from where it stands: the
//! accept deadline (or the execution deadline, if sooner) while in `request`, the execution
//! deadline once accepted. Its handler acts only when that attempt is still live and due.
//!
//! No schema check runs inside a transaction: a delegation's input is checked against the
//! targets it may go to before its transaction opens, and the transaction looks the verdicts up
//! (see [`super::screen`]); a complete's output is checked before its statement.
//!
//! The calls on the usual path cost few round trips to PostgreSQL, each authenticating the
//! caller's key inside its own statement (see [`store`]): a delegation is a key check and a read
//! of what the named target offers (or the process's discovery snapshot), then one transaction
//! of two statements (its reads under the requester's lock; the row with its first attempt and
//! timer, answering the record), an accept one statement, a complete one statement when this
//! process accepted the attempt (its output checked against the schema the accept kept, see
//! [`super::recent`]) and otherwise a read first, an inbox read one statement. A requester
//! that waits subscribes to its delegation's wake-ups before the delegation commits, so it
//! needs no read before waiting, and the complete that wakes it through this process hands it
//! the final record.

use std::{pin::Pin, sync::Arc, time::Duration};

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use tokio::sync::{Notify, futures::Notified};
use uuid::Uuid;

pub use super::store::Record;
use super::{
    DelegationError, Request,
    outcomes::{AcceptOutcome, CompleteOutcome},
    recent::AcceptedAttempt,
    screen::{Screened, Work},
    state::{Event, Status},
    store::{self, Attempt, Delegation, InboxItem},
    targets::Target,
};
use crate::{
    delivery::{AgentIdentity, AgentKey, Engine, wakeups::wait_or_recheck},
    directory::{
        anonymity::{self, AgentId},
        schema::CheckError,
    },
    store::turn_delivery::KeyCheck,
};

/// What an accept hands the target.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// The fenced token of this attempt's acceptance.
    pub claim_token: String,
    /// When the attempt times out.
    pub deadline: DateTime<Utc>,
}

/// The reason an attempt ends with when its target is deleted.
pub const TARGET_DELETED: &str = "the target was deleted";

fn after(start: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    (start + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)).trunc_subsecs(6)
}

/// The agent a key speaks for, or why the call is refused (401 or 403).
fn identity(key: KeyCheck) -> Result<AgentIdentity, DelegationError> {
    key.identity().map_err(|e| match e {
        crate::delivery::DeliveryError::Unauthorized => DelegationError::Unauthorized,
        crate::delivery::DeliveryError::Forbidden(why) => DelegationError::Forbidden(why),
        other => DelegationError::Unexpected(other.into()),
    })
}

/// The status an `invalid_state` refusal names: the live attempt's, as the statement read it.
fn status_name(status: Option<Status>) -> &'static str {
    status.map_or("unknown", Status::as_str)
}

impl Engine {
    /// Attempt `number` of `d` to `target`, as it is offered now (in `request`).
    fn attempt_for(&self, d: &Delegation, number: i32, target: Target, requester_anonymous_id: Uuid) -> Attempt {
        let now = Utc::now().trunc_subsecs(6);
        let timeout = Duration::from_millis(u64::try_from(d.timeout_ms).unwrap_or(0));
        Attempt {
            delegation_id: d.delegation_id,
            attempt: number,
            task_id: Uuid::now_v7(),
            target_agent_id: target.agent_id,
            target_anonymous_id: target.anonymous_id,
            requester_anonymous_id,
            capability_id: target.capability_id,
            output_schema: target.output_schema,
            status: Status::Request,
            output: None,
            reason: None,
            created_at: now,
            accept_deadline: after(now, self.config.delegation_accept_timeout),
            deadline: after(now, timeout),
            accepted_at: None,
            ended_at: None,
        }
    }

    /// Offers attempt `number` of `d` (stored as `request`, with `number - 1` retries used) to
    /// `target`, the requester named to it as `requester_anonymous_id`, with the delegation's
    /// timer; a target at its inbound limit is skipped (see [`Engine::after_skip`]). All in the
    /// caller's transaction; returns the live attempt's target, if any (whose inbox to wake
    /// after the commit).
    async fn place(
        &self,
        conn: &mut PgConnection,
        d: &Delegation,
        number: i32,
        target: Target,
        requester_anonymous_id: Uuid,
        screened: &Screened,
    ) -> Result<Option<Uuid>, DelegationError> {
        let target_id = target.agent_id;
        let attempt = self.attempt_for(d, number, target, requester_anonymous_id);
        if store::offer(conn, &attempt, self.inbound_limit()).await? {
            return Ok(Some(target_id));
        }
        self.after_skip(conn, d, number, requester_anonymous_id, screened).await
    }

    /// The service's inbound limit per target and 60 s (`PARLEY_INBOUND_RATE`).
    fn inbound_limit(&self) -> i32 {
        i32::try_from(self.config.inbound_rate).unwrap_or(i32::MAX)
    }

    /// After attempt `number` of `d` was skipped (recorded `rejected`, `rate_limited`: its
    /// target's inbound window had no room for it): the next target not yet tried gets the next
    /// attempt, while retries are left, and so on; when no attempt stays live, the delegation
    /// ends `rejected` and its timer is cancelled.
    async fn after_skip(
        &self,
        conn: &mut PgConnection,
        d: &Delegation,
        mut number: i32,
        requester_anonymous_id: Uuid,
        screened: &Screened,
    ) -> Result<Option<Uuid>, DelegationError> {
        while d.fallback_enabled && number - 1 < d.max_retries {
            let tried: Vec<Uuid> =
                store::attempts(conn, d.delegation_id).await?.iter().map(|a| a.target_agent_id).collect();
            let Some(next) = self.next_target(conn, d, &tried, screened).await? else {
                break;
            };
            store::set_retries(conn, d.delegation_id, number).await?;
            number += 1;
            let target_id = next.agent_id;
            if store::offer(conn, &self.attempt_for(d, number, next, requester_anonymous_id), self.inbound_limit())
                .await?
            {
                return Ok(Some(target_id));
            }
        }
        let asked = Delegation { status: Status::Request, ..d.clone() };
        store::set_delegation(conn, &asked, number - 1, Status::Rejected, None).await?;
        parley_jobs::cancel_delegation_timeout(conn, d.delegation_id).await?;
        Ok(None)
    }

    /// After a commit: wakes the waiters of the delegation and the inboxes of `targets` (this
    /// process's at once, the others' through the wake-up sender), and pokes the event log's
    /// reader for the `delegation.status` events.
    fn wake_delegation(&self, delegation_id: Uuid, targets: &[Uuid]) {
        self.wakeups.announce(&store::delegation_key(delegation_id));
        for t in targets {
            self.wakeups.announce(&store::inbox_key(*t));
        }
        self.wakeups.events_written();
    }

    /// `POST /api/agents/delegate`, for the agent of `key`: makes the delegation and its first
    /// attempt, or returns the one this request id already made when the body is the same. With
    /// `wait`, then holds until the delegation ends or the time passes (no connection held).
    ///
    /// Before the transaction: the key (so that nothing is checked for an unknown caller), the
    /// requester's budget of refused inputs, and the input against the schemas of the targets
    /// the transaction may pick ([`Engine::screen`]), unless the request id was used already (a
    /// retry is answered from what it made, and is never checked again). A requester whose
    /// inputs keep being refused is answered 429 for a while, like a client whose credentials
    /// keep failing.
    pub async fn delegate(
        &self,
        key: &AgentKey,
        req: &Request,
        wait: Option<Duration>,
    ) -> Result<Record, DelegationError> {
        let (requester, used) = {
            let mut conn = self.pool.acquire().await?;
            let (key, used) = store::check_key_for_request(&mut conn, &key.key_hash, req.request_id).await?;
            (identity(key)?, used)
        };
        if req.agent_id.is_some_and(|a| a != requester.agent_id) {
            return Err(DelegationError::Forbidden("agentId must be the API key's own agent"));
        }
        if let Some(wait) = self.input_failures.blocked_for(&requester.agent_id) {
            return Err(DelegationError::TooManyInvalid(wait));
        }
        let work = Work {
            task_type: req.task_type.as_str(),
            custom_type: req.custom_type.as_deref(),
            input: &req.input,
            target: req.target_anonymous_id,
            requester: requester.agent_id,
            owner: &requester.owner_user_id,
            tried: &[],
        };
        // A named target whose capability changed between the screen and the transaction is
        // screened again, once.
        let mut screened = if used { Screened::none() } else { self.screen(work).await? };
        let mut made = self.delegate_screened(key, req, wait, &screened).await;
        if matches!(made, Err(DelegationError::Rescreen)) {
            screened = self.screen(work).await?;
            made = self.delegate_screened(key, req, wait, &screened).await;
        }
        match made {
            Err(DelegationError::InputInvalid(why)) => match self.input_failures.failed(&requester.agent_id) {
                Err(wait) => {
                    tracing::info!(agent.id = %requester.agent_id, "too many delegations with a refused input");
                    Err(DelegationError::TooManyInvalid(wait))
                }
                Ok(()) => Err(DelegationError::InputInvalid(why)),
            },
            other => other,
        }
    }

    /// [`Engine::delegate`]'s transaction, once the input has been screened.
    async fn delegate_screened(
        &self,
        key: &AgentKey,
        req: &Request,
        wait: Option<Duration>,
        screened: &Screened,
    ) -> Result<Record, DelegationError> {
        let mut tx = self.pool.begin().await?;
        let opened = store::open(
            &mut tx,
            &key.key_hash,
            req.agent_id,
            req.request_id,
            req.target_anonymous_id,
            req.task_type.as_str(),
            req.custom_type.as_deref(),
            i32::try_from(self.config.outbound_rate).unwrap_or(i32::MAX),
        )
        .await?;
        let requester = identity(opened.key.clone())?;
        let made = self.make_delegation(&mut tx, &requester, req, &opened, screened).await;
        let made = match made {
            Ok(made) => made,
            Err(e) => {
                drop(tx);
                self.seen(requester.agent_id).await;
                return Err(e);
            }
        };
        // Subscribed before the commit: an end committed right after it still wakes this wait.
        let deadline = wait.map(|w| tokio::time::Instant::now() + w);
        let notify =
            deadline.map(|_| self.wakeups.subscribe(&store::delegation_key(made.record.delegation.delegation_id)));
        let mut notified = std::pin::pin!(notify.as_deref().map(Notify::notified));
        if let Some(n) = notified.as_mut().as_pin_mut() {
            n.enable();
        }
        tx.commit().await?;
        self.seen(requester.agent_id).await;
        if made.fresh {
            // Nobody waits on a delegation that did not exist before this commit (this call's
            // own wait is subscribed already): only its target's inbox and the event streams.
            if let Some(target) = made.live {
                self.wakeups.announce(&store::inbox_key(target));
            }
            self.wakeups.events_written();
            tracing::info!(delegation.id = %made.record.delegation.delegation_id,
                delegation.task_type = %made.record.delegation.task_type, "delegated");
        }
        match (notify.as_deref(), notified.as_mut().as_pin_mut(), deadline) {
            (Some(notify), Some(notified), Some(deadline)) => {
                self.follow(notify, notified, made.record, deadline).await
            }
            _ => Ok(made.record),
        }
    }

    /// The checks and writes of a delegation, in the caller's transaction, from what
    /// [`store::open`] read for it under the requester's lock.
    async fn make_delegation(
        &self,
        conn: &mut PgConnection,
        requester: &AgentIdentity,
        req: &Request,
        opened: &store::Opened,
        screened: &Screened,
    ) -> Result<Made, DelegationError> {
        if !opened.own {
            return Err(DelegationError::Forbidden("agentId must be the API key's own agent"));
        }
        if opened.taken {
            return Err(DelegationError::RequestIdTaken);
        }
        if let Some(existing) = opened.existing {
            let (existing, attempts) =
                store::record(conn, existing).await?.ok_or_else(|| anyhow::anyhow!("a delegation just found"))?;
            if !req.same_as(&existing) {
                return Err(DelegationError::RequestIdReused);
            }
            return Ok(Made { record: Record { delegation: existing, attempts }, live: None, fresh: false });
        }
        let window = opened.window.clone().ok_or_else(|| anyhow::anyhow!("no outbound window read"))?;
        if window.full {
            let wait =
                window.frees_at.map_or(Duration::from_secs(60), |t| (t - Utc::now()).to_std().unwrap_or_default());
            return Err(DelegationError::RateLimited(window.limit, wait));
        }
        let now = Utc::now().trunc_subsecs(6);
        let d = Delegation {
            delegation_id: Uuid::now_v7(),
            request_id: req.request_id,
            requester_agent_id: requester.agent_id,
            task_type: req.task_type.as_str().to_owned(),
            custom_type: req.custom_type.clone(),
            input: req.input.clone(),
            requested_target: req.target_anonymous_id,
            timeout_ms: req.timeout_ms,
            fallback_enabled: req.fallback_enabled,
            max_retries: req.max_retries,
            retries_used: 0,
            status: Status::Request,
            output: None,
            created_at: window.not_before.map_or(now, |t| t.max(now)),
            ended_at: None,
        };
        let target = self.first_target(conn, &d, opened, screened).await?;
        let requester_anonymous_id = match opened.requester_anonymous_id {
            Some(id) => id,
            None => anonymity::current(conn, AgentId(requester.agent_id), self.config.anonymous_id_ttl).await?.0,
        };
        let target_id = target.agent_id;
        let first = self.attempt_for(&d, 1, target, requester_anonymous_id);
        let (live, (delegation, attempts)) = store::make(
            conn,
            store::NewDelegation {
                delegation: &d,
                seq: window.next_seq,
                first: &first,
                inbound_limit: self.inbound_limit(),
            },
        )
        .await?;
        if live {
            return Ok(Made { record: Record { delegation, attempts }, live: Some(target_id), fresh: true });
        }
        let live = self.after_skip(conn, &d, 1, requester_anonymous_id, screened).await?;
        let (delegation, attempts) =
            store::record(conn, d.delegation_id).await?.ok_or_else(|| anyhow::anyhow!("the delegation just made"))?;
        Ok(Made { record: Record { delegation, attempts }, live, fresh: true })
    }

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

    /// Checks that attempt `attempt` of `delegation_id`, in `status`, is accepted, that a claim
    /// token (when one was sent) is its, and that its deadline has not passed.
    fn check_claim(
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
        if token.is_some() && self.claim_proof(delegation_id, token).generation() != Some(i64::from(attempt)) {
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
            let mut conn = self.pool.acquire().await?;
            store::accept(&mut conn, &key.key_hash, key.agent_id, request_id).await?
        };
        let target = identity(moved.key.clone())?;
        self.seen(target.agent_id).await;
        match (moved.outcome, moved.delegation_id, moved.attempt, moved.deadline) {
            (Some(AcceptOutcome::Accepted), Some(delegation_id), Some(attempt), Some(deadline)) => {
                // Only the event streams: the requester's waits are for the end.
                self.wakeups.events_written();
                if let Some(schema) = moved.output_schema {
                    let remembered = AcceptedAttempt {
                        delegation_id,
                        attempt,
                        deadline,
                        output_schema: Arc::new(schema),
                        owner: target.owner_user_id.clone(),
                    };
                    self.recent_delegations.accepted(target.agent_id, request_id, remembered);
                }
                Ok(Accepted { claim_token: self.claim_token(delegation_id, i64::from(attempt)), deadline })
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
        let remembered = key.agent_id.and_then(|agent| self.recent_delegations.accepted_by(agent, request_id));
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
                self.recent_delegations.forget_accepted(agent, request_id);
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
        let mut conn = self.pool.acquire().await?;
        let per_requester = i32::try_from(self.config.trust_per_requester).unwrap_or(i32::MAX);
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
        let target = identity(moved.key.clone())?;
        match moved.outcome {
            Some(CompleteOutcome::Completed) => {
                self.recent_delegations.forget_accepted(target.agent_id, request_id);
                let key = store::delegation_key(delegation_id);
                if let Some((delegation, attempts)) = moved.record.filter(|_| self.wakeups.has_waiters(&key)) {
                    self.recent_delegations.ended(Record { delegation, attempts });
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
            let mut conn = self.pool.acquire().await?;
            store::target_view(&mut conn, &key.key_hash, key.agent_id, request_id).await?
        };
        let target = identity(checked)?;
        self.seen(target.agent_id).await;
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
            let mut conn = self.pool.acquire().await?;
            store::addressed(&mut conn, target.agent_id, request_id).await?
        };
        let screened = match addressed {
            Some(d) => self.screen_fallback(&d).await?,
            None => Screened::none(),
        };
        let mut tx = self.pool.begin().await?;
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
            let mut conn = self.pool.acquire().await?;
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
            let mut conn = self.pool.acquire().await?;
            store::get(&mut conn, t.delegation_id).await?
        };
        let screened = match found {
            Some(d) => self.screen_fallback(&d).await?,
            None => return Ok(false),
        };
        let mut tx = self.pool.begin().await?;
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

    /// After an agent was deleted (its row kept, its capabilities gone): every attempt still
    /// open at it ends `error` with the reason [`TARGET_DELETED`], one transaction each, so
    /// that its delegation falls back to another target as after a failure (never counted for
    /// or against the deleted agent). Returns how many ended. An attempt offered to it by a
    /// transaction that read it before its deletion committed is left to its timer.
    pub async fn end_attempts_at_deleted(&self, agent_id: Uuid) -> Result<usize, DelegationError> {
        let open = {
            let mut conn = self.pool.acquire().await?;
            store::open_at(&mut conn, agent_id).await?
        };
        let mut ended = 0;
        for request_id in open {
            let addressed = {
                let mut conn = self.pool.acquire().await?;
                store::addressed(&mut conn, agent_id, request_id).await?
            };
            let Some(d) = addressed else { continue };
            let screened = self.screen_fallback(&d).await?;
            let mut tx = self.pool.begin().await?;
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

    /// The delegation of `request_id` visible to the caller, with its attempts.
    pub async fn read_delegation(
        &self,
        request_id: Uuid,
        requesters: Option<&[Uuid]>,
    ) -> Result<Record, DelegationError> {
        let mut conn = self.pool.acquire().await?;
        let d = store::find_visible(&mut conn, request_id, requesters).await?.ok_or(DelegationError::NotFound)?;
        let (delegation, attempts) =
            store::record(&mut conn, d.delegation_id).await?.ok_or(DelegationError::NotFound)?;
        Ok(Record { delegation, attempts })
    }

    /// A delegation and its attempts as committed now.
    async fn read_record(&self, delegation_id: Uuid) -> Result<Record, DelegationError> {
        let mut conn = self.pool.acquire().await?;
        let (delegation, attempts) = store::record(&mut conn, delegation_id).await?.ok_or(DelegationError::NotFound)?;
        Ok(Record { delegation, attempts })
    }

    /// Reads a delegation, waiting up to `wait` for it to end (no connection held meanwhile).
    pub async fn await_delegation(
        &self,
        delegation_id: Uuid,
        wait: Option<Duration>,
    ) -> Result<Record, DelegationError> {
        let Some(wait) = wait else {
            return self.read_record(delegation_id).await;
        };
        let deadline = tokio::time::Instant::now() + wait;
        let notify = self.wakeups.subscribe(&store::delegation_key(delegation_id));
        let mut notified = std::pin::pin!(notify.notified());
        notified.as_mut().enable();
        let record = self.read_record(delegation_id).await?;
        self.follow(&notify, notified, record, deadline).await
    }

    /// From `record`, read after `notified` was enabled: waits until the delegation has ended or
    /// `deadline` passes, reading it again after each wake-up (and at least every
    /// [`crate::delivery::wakeups::RECHECK`]); returns the last record read.
    async fn follow<'a>(
        &self,
        notify: &'a Notify,
        mut notified: Pin<&mut Notified<'a>>,
        mut record: Record,
        deadline: tokio::time::Instant,
    ) -> Result<Record, DelegationError> {
        loop {
            if record.delegation.status.is_terminal() || !wait_or_recheck(deadline, notified.as_mut()).await {
                return Ok(record);
            }
            // Registered before reading again, so an end committed in between still wakes us.
            notified.set(notify.notified());
            notified.as_mut().enable();
            let id = record.delegation.delegation_id;
            record = match self.recent_delegations.take_ended(id) {
                Some(ended) => ended,
                None => self.read_record(id).await?,
            };
        }
    }

    /// The attempts waiting for the agent of `key`, oldest first, and how many; with `wait`,
    /// holds until one arrives or the time passes (woken after the commit that offers one, no
    /// connection held meanwhile). Each look is one statement, the key's check included. The
    /// key must name its agent (`key.agent_id`: the path's, or MCP's key's own), whose wake-ups
    /// are subscribed to before the first look.
    pub async fn delegation_inbox(
        &self,
        key: &AgentKey,
        wait: Option<Duration>,
    ) -> Result<(Vec<InboxItem>, i64), DelegationError> {
        let read = || async {
            let mut conn = self.pool.acquire().await?;
            let (checked, items, total) = store::inbox_for_key(&mut conn, &key.key_hash, key.agent_id, 100).await?;
            Ok::<_, DelegationError>((identity(checked)?, items, total))
        };
        let Some(wait) = wait else {
            let (target, items, total) = read().await?;
            self.seen(target.agent_id).await;
            return Ok((items, total));
        };
        let agent = key.agent_id.ok_or_else(|| anyhow::anyhow!("an inbox is read for a named agent"))?;
        let deadline = tokio::time::Instant::now() + wait;
        let notify = self.wakeups.subscribe(&store::inbox_key(agent));
        let mut first = true;
        loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (target, items, total) = read().await?;
            if first {
                // Marked at the start: a long-poll counts as seen while it waits.
                self.seen(target.agent_id).await;
                first = false;
            }
            if !items.is_empty() || !wait_or_recheck(deadline, notified).await {
                return Ok((items, total));
            }
        }
    }
}

/// A delegation as [`Engine::make_delegation`] left it, before the commit.
struct Made {
    /// The delegation with its attempts.
    record: Record,
    /// The target of its live attempt, whose inbox to wake.
    live: Option<Uuid>,
    /// False when the request id had made it already (nothing was written).
    fresh: bool,
}

/// Ends the live attempt `a` of `d` by `event` (output or reason with it), counts it for its
/// target (as `parley_delegation_move` decides), and then offers the next attempt (fallback,
/// to a target `screened` says accepts the input) or ends the delegation, re-arming or
/// cancelling the timer; all in `conn`'s transaction. Returns the targets to wake.
#[allow(clippy::too_many_arguments)]
async fn end_attempt(
    engine: &Engine,
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
    let per_requester = i32::try_from(engine.config.trust_per_requester).unwrap_or(i32::MAX);
    if !store::move_attempt(conn, d, ended, per_requester).await? {
        return Err(DelegationError::InvalidState(from.as_str()));
    }
    if may_fall_back {
        let tried: Vec<Uuid> =
            store::attempts(conn, d.delegation_id).await?.iter().map(|a| a.target_agent_id).collect();
        if let Some(target) = engine.next_target(conn, d, &tried, screened).await? {
            store::set_delegation(conn, d, d.retries_used + 1, Status::Request, None).await?;
            let asked = Delegation { status: Status::Request, retries_used: d.retries_used + 1, ..d.clone() };
            let requester_anonymous_id =
                anonymity::current(conn, AgentId(d.requester_agent_id), engine.config.anonymous_id_ttl).await?.0;
            let live = engine.place(conn, &asked, a.attempt + 1, target, requester_anonymous_id, screened).await?;
            return Ok(live.into_iter().collect());
        }
        store::set_delegation(conn, d, d.retries_used, to, output).await?;
    }
    parley_jobs::cancel_delegation_timeout(conn, d.delegation_id).await?;
    Ok(Vec::new())
}
