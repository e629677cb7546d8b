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

use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{
    DelegationError, Request, check_against,
    state::{Event, Status},
    store::{self, Attempt, Delegation, InboxItem},
};
use crate::{
    delivery::{AgentIdentity, Engine},
    directory::{
        anonymity, capabilities,
        discovery::{self, Query},
        trust,
    },
};

/// The target an attempt goes to.
#[derive(Debug, Clone)]
struct Target {
    agent_id: Uuid,
    anonymous_id: Uuid,
    capability_id: Uuid,
    output_schema: Value,
}

/// A delegation with its attempts, as just committed or read.
#[derive(Debug, Clone)]
pub struct Record {
    /// The delegation.
    pub delegation: Delegation,
    /// Its attempts, first first.
    pub attempts: Vec<Attempt>,
}

/// What an accept hands the target.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// The fenced token of this attempt's acceptance.
    pub claim_token: String,
    /// When the attempt times out.
    pub deadline: DateTime<Utc>,
}

fn after(start: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    (start + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)).trunc_subsecs(6)
}

/// The capability an eligible target offers for the work.
#[derive(Debug, Clone)]
struct Offered {
    capability_id: Uuid,
    input_schema: Value,
    output_schema: Value,
}

/// Why an agent may not take `kind` work from `requester`, if it may not.
async fn ineligible(
    conn: &mut PgConnection,
    agent_id: Uuid,
    requester: Uuid,
    task_type: &str,
    custom_type: Option<&str>,
    floor: u32,
) -> Result<Result<Offered, String>, DelegationError> {
    if agent_id == requester {
        return Ok(Err("the target is the requesting agent itself".into()));
    }
    let offer = store::target_offer(conn, agent_id, task_type, custom_type).await?;
    let Some(offer) = offer.filter(|o| o.active) else {
        return Ok(Err("the target agent is not active".into()));
    };
    let (Some(capability_id), Some(input_schema), Some(output_schema)) =
        (offer.capability_id, offer.input_schema, offer.output_schema)
    else {
        return Ok(Err(format!("the target has no {task_type} capability")));
    };
    if !offer.enabled {
        return Ok(Err("the target's capability is disabled".into()));
    }
    if !offer.accept_delegations {
        return Ok(Err("the target does not accept delegations".into()));
    }
    let capability = Offered { capability_id, input_schema, output_schema };
    // Every percentile is at least 0, so without a minimum there is nothing to read.
    if floor > 0 {
        let percentile = trust::percentile(conn, agent_id).await?;
        if percentile < i32::try_from(floor).unwrap_or(i32::MAX) {
            return Ok(Err(format!("the target's trust percentile {percentile} is below the minimum {floor}")));
        }
    }
    Ok(Ok(capability))
}

impl Engine {
    /// The directory's discovery for this delegation's kind of work, best first.
    async fn candidates(
        &self,
        conn: &mut PgConnection,
        d: &Delegation,
    ) -> Result<Vec<discovery::Found>, DelegationError> {
        let task_type =
            capabilities::TaskType::parse(&d.task_type).ok_or_else(|| anyhow::anyhow!("stored task type"))?;
        let q = Query {
            task_type,
            custom_type: d.custom_type.clone(),
            min_trust_score: 0.0,
            max_cost_usd: None,
            max_latency_ms: None,
            limit: discovery::MAX_LIMIT,
        };
        Ok(discovery::discover(conn, &q, self.config.min_trust, self.config.anonymous_id_ttl).await?)
    }

    /// The first target of a new delegation: the named one, or the top discovery result.
    async fn first_target(&self, conn: &mut PgConnection, d: &Delegation) -> Result<Target, DelegationError> {
        let floor = self.config.min_trust;
        let (agent_id, anonymous_id) = match d.requested_target {
            Some(named) => {
                let resolved =
                    anonymity::resolve(conn, named).await?.filter(|r| r.live).ok_or(DelegationError::UnknownTarget)?;
                (resolved.agent_id, named)
            }
            None => {
                let mut chosen = None;
                for found in self.candidates(conn, d).await? {
                    let Some(r) = anonymity::resolve(conn, found.anonymous_agent_id).await? else {
                        continue;
                    };
                    if ineligible(conn, r.agent_id, d.requester_agent_id, &d.task_type, d.custom_type.as_deref(), floor)
                        .await?
                        .is_ok()
                    {
                        chosen = Some((r.agent_id, found.anonymous_agent_id));
                        break;
                    }
                }
                chosen.ok_or_else(|| {
                    DelegationError::NotEligible(format!("no eligible agent offers {} work", d.task_type))
                })?
            }
        };
        let capability =
            ineligible(conn, agent_id, d.requester_agent_id, &d.task_type, d.custom_type.as_deref(), floor)
                .await?
                .map_err(DelegationError::NotEligible)?;
        check_against(&capability.input_schema, &d.input, "input").map_err(DelegationError::InputInvalid)?;
        Ok(Target {
            agent_id,
            anonymous_id,
            capability_id: capability.capability_id,
            output_schema: capability.output_schema,
        })
    }

    /// The next target of a fallback: the best-ranked eligible one not yet tried whose input
    /// schema accepts the input.
    async fn next_target(
        &self,
        conn: &mut PgConnection,
        d: &Delegation,
        tried: &[Uuid],
    ) -> Result<Option<Target>, DelegationError> {
        for found in self.candidates(conn, d).await? {
            let Some(r) = anonymity::resolve(conn, found.anonymous_agent_id).await? else {
                continue;
            };
            if tried.contains(&r.agent_id) {
                continue;
            }
            let eligible = ineligible(
                conn,
                r.agent_id,
                d.requester_agent_id,
                &d.task_type,
                d.custom_type.as_deref(),
                self.config.min_trust,
            )
            .await?;
            let Ok(capability) = eligible else { continue };
            if check_against(&capability.input_schema, &d.input, "input").is_err() {
                continue;
            }
            return Ok(Some(Target {
                agent_id: r.agent_id,
                anonymous_id: found.anonymous_agent_id,
                capability_id: capability.capability_id,
                output_schema: capability.output_schema,
            }));
        }
        Ok(None)
    }

    /// Offers attempt `number` of `d` (stored as `request`, with `number - 1` retries used) to
    /// `target`. A target that already received its inbound limit of attempts in the last 60 s
    /// is skipped: the attempt is recorded `rejected` (`rate_limited`) and the next target not
    /// yet tried gets the next one, while retries are left. The attempt that stays live gets the
    /// delegation's timer and wakes its target's inbox; when none does, the delegation ends
    /// `rejected`. All in the caller's transaction; returns the live attempt's target, if any.
    async fn place(
        &self,
        conn: &mut PgConnection,
        d: &Delegation,
        first_number: i32,
        first: Target,
    ) -> Result<Option<Uuid>, DelegationError> {
        let requester_anonymous_id =
            anonymity::current(conn, d.requester_agent_id, self.config.anonymous_id_ttl).await?;
        let timeout = Duration::from_millis(u64::try_from(d.timeout_ms).unwrap_or(0));
        let (mut number, mut target) = (first_number, first);
        loop {
            let over = store::inbound_full(conn, target.agent_id, target.capability_id).await?;
            let now = Utc::now().trunc_subsecs(6);
            let target_id = target.agent_id;
            let attempt = Attempt {
                delegation_id: d.delegation_id,
                attempt: number,
                task_id: Uuid::now_v7(),
                target_agent_id: target.agent_id,
                target_anonymous_id: target.anonymous_id,
                requester_anonymous_id,
                capability_id: target.capability_id,
                output_schema: target.output_schema,
                status: Status::Request.as_str().to_owned(),
                output: None,
                reason: None,
                created_at: now,
                accept_deadline: after(now, self.config.delegation_accept_timeout),
                deadline: after(now, timeout),
                accepted_at: None,
                ended_at: None,
            };
            store::insert_attempt(conn, &attempt).await?;
            if !over {
                let timer = parley_jobs::DelegationTimeout { delegation_id: d.delegation_id, attempt: number };
                parley_jobs::schedule_delegation_timeout(conn, &timer, attempt.due_at()).await?;
                return Ok(Some(target_id));
            }
            store::set_attempt(
                conn,
                d.delegation_id,
                number,
                Status::Request,
                Status::Rejected,
                None,
                Some("rate_limited"),
            )
            .await?;
            if d.fallback_enabled && number - 1 < d.max_retries {
                let tried: Vec<Uuid> =
                    store::attempts(conn, d.delegation_id).await?.iter().map(|a| a.target_agent_id).collect();
                if let Some(next) = self.next_target(conn, d, &tried).await? {
                    store::set_retries(conn, d.delegation_id, number).await?;
                    number += 1;
                    target = next;
                    continue;
                }
            }
            let asked = Delegation { status: Status::Request.as_str().to_owned(), ..d.clone() };
            store::set_delegation(conn, &asked, number - 1, Status::Rejected, None).await?;
            parley_jobs::cancel_delegation_timeout(conn, d.delegation_id).await?;
            return Ok(None);
        }
    }

    /// After a commit: wakes the waiters of the delegation and the inboxes of `targets` (this
    /// process's at once, the others' through the wake-up sender), and pokes the event log's
    /// reader for the `delegation.status` events.
    fn wake_delegation(&self, d: &Delegation, targets: &[Uuid]) {
        self.wakeups.announce(&store::delegation_key(d.delegation_id));
        for t in targets {
            self.wakeups.announce(&store::inbox_key(*t));
        }
        self.wakeups.events_written();
    }

    /// `POST /api/agents/delegate`: makes the delegation and its first attempt, or returns the
    /// one this request id already made (`false`) when the body is the same.
    pub async fn delegate(&self, requester: &AgentIdentity, req: &Request) -> Result<(Record, bool), DelegationError> {
        if req.agent_id != requester.agent_id {
            return Err(DelegationError::Forbidden("agentId must be the API key's own agent"));
        }
        let mut tx = self.pool.begin().await?;
        // One requester's delegations wait for each other here, so that a second request with
        // the same id sees the first, and the outbound count is exact.
        sqlx::query!(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            format!("delegation-outbound:{}", requester.agent_id)
        )
        .execute(&mut *tx)
        .await?;
        let window =
            store::outbound_window(&mut tx, requester.agent_id, req.request_id, super::DEFAULT_OUTBOUND_RATE_LIMIT).await?;
        if let Some(existing) = window.existing {
            let (existing, attempts) =
                store::record(&mut tx, existing).await?.ok_or_else(|| anyhow::anyhow!("a delegation just found"))?;
            if !req.same_as(&existing) {
                return Err(DelegationError::RequestIdReused);
            }
            return Ok((Record { delegation: existing, attempts }, false));
        }
        if window.sent >= i64::from(window.limit) {
            let wait =
                window.frees_at.map_or(Duration::from_secs(60), |t| (t - Utc::now()).to_std().unwrap_or_default());
            return Err(DelegationError::RateLimited(window.limit, wait));
        }
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
            status: Status::Request.as_str().to_owned(),
            output: None,
            created_at: Utc::now().trunc_subsecs(6),
            ended_at: None,
        };
        let target = self.first_target(&mut tx, &d).await?;
        store::insert(&mut tx, &d).await?;
        let live = self.place(&mut tx, &d, 1, target).await?;
        let (d, attempts) =
            store::record(&mut tx, d.delegation_id).await?.ok_or_else(|| anyhow::anyhow!("the delegation just made"))?;
        tx.commit().await?;
        self.wake_delegation(&d, &live.into_iter().collect::<Vec<_>>());
        tracing::info!(delegation.id = %d.delegation_id, delegation.task_type = %d.task_type, "delegated");
        Ok((Record { delegation: d, attempts }, true))
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

    /// Checks a claim token against the accepted attempt (when one was sent) and its deadline.
    fn check_claim(&self, d: &Delegation, a: &Attempt, token: Option<&str>) -> Result<(), DelegationError> {
        if a.status() != Status::Accepted {
            return Err(DelegationError::InvalidState(a.status().as_str()));
        }
        if token.is_some() && self.claim_proof(d.delegation_id, token).generation() != Some(i64::from(a.attempt)) {
            return Err(DelegationError::ClaimStale("the claim token is not this attempt's"));
        }
        if a.deadline <= Utc::now() {
            return Err(DelegationError::ClaimStale("the attempt's deadline has passed"));
        }
        Ok(())
    }

    /// Accept: `request -> accepted` for the attempt addressed to `target`, once.
    pub async fn accept_delegation(
        &self,
        target: &AgentIdentity,
        request_id: Uuid,
    ) -> Result<Accepted, DelegationError> {
        let mut tx = self.pool.begin().await?;
        let (d, a) = self.lock_addressed(&mut tx, target.agent_id, request_id).await?;
        let next =
            a.status().transition(Event::Accept).map_err(|_| DelegationError::InvalidState(a.status().as_str()))?;
        if a.due_at() <= Utc::now() {
            return Err(DelegationError::InvalidState("past its accept deadline"));
        }
        let accepted = store::AttemptMove {
            attempt: a.attempt,
            from: Status::Request,
            to: next,
            output: None,
            reason: None,
            delegation: Some((d.retries_used, next)),
        };
        if !store::move_attempt(&mut tx, &d, accepted).await? {
            return Err(DelegationError::InvalidState(a.status().as_str()));
        }
        // The timer moves to the execution deadline, unless it is already set for it (an accept
        // window no shorter than the execution's).
        if a.due_at() != a.deadline {
            let timer = parley_jobs::DelegationTimeout { delegation_id: d.delegation_id, attempt: a.attempt };
            parley_jobs::schedule_delegation_timeout(&mut tx, &timer, a.deadline).await?;
        }
        tx.commit().await?;
        // Only the event streams: the requester's waits are for the end.
        self.wakeups.events_written();
        Ok(Accepted { claim_token: self.claim_token(d.delegation_id, i64::from(a.attempt)), deadline: a.deadline })
    }

    /// Complete: the output, checked against the attempt's output schema, ends the delegation.
    /// A refused output leaves the attempt `accepted`, to be fixed.
    pub async fn complete_delegation(
        &self,
        target: &AgentIdentity,
        request_id: Uuid,
        output: &Value,
        token: Option<&str>,
    ) -> Result<(), DelegationError> {
        let mut tx = self.pool.begin().await?;
        let (d, a) = self.lock_addressed(&mut tx, target.agent_id, request_id).await?;
        self.check_claim(&d, &a, token)?;
        check_against(&a.output_schema, output, "output").map_err(DelegationError::OutputInvalid)?;
        end_attempt(self, &mut tx, &d, &a, Event::Complete, Some(output), None).await?;
        tx.commit().await?;
        self.wake_delegation(&d, &[]);
        Ok(())
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
        let mut tx = self.pool.begin().await?;
        let (d, a) = self.lock_addressed(&mut tx, target.agent_id, request_id).await?;
        match (event, a.status()) {
            (Event::Reject, Status::Request) => {}
            (Event::Reject, Status::Accepted) if token.is_some() => self.check_claim(&d, &a, token)?,
            (Event::Reject, Status::Accepted) => {}
            (Event::Fail, _) => self.check_claim(&d, &a, token)?,
            (_, other) => return Err(DelegationError::InvalidState(other.as_str())),
        }
        let next = end_attempt(self, &mut tx, &d, &a, event, None, reason).await?;
        tx.commit().await?;
        self.wake_delegation(&d, &next);
        Ok(())
    }

    /// The delegation timer: the attempt it was armed for times out if it is still the live one
    /// and its deadline (from where it stands) has passed. Anything else is a stale or early
    /// delivery and changes nothing.
    pub async fn time_out_delegation(&self, t: parley_jobs::DelegationTimeout) -> Result<bool, DelegationError> {
        let mut tx = self.pool.begin().await?;
        let Some(d) = store::lock(&mut tx, t.delegation_id).await? else {
            return Ok(false);
        };
        if d.status().is_terminal() || d.current_attempt() != t.attempt {
            return Ok(false);
        }
        let Some(a) = store::attempt(&mut tx, d.delegation_id, t.attempt).await? else {
            return Ok(false);
        };
        if a.status().is_terminal() || a.due_at() > Utc::now() {
            return Ok(false);
        }
        let reason = match a.status() {
            Status::Request => "not accepted in time",
            _ => "not finished in time",
        };
        let next = end_attempt(self, &mut tx, &d, &a, Event::TimeOut, None, Some(reason)).await?;
        tx.commit().await?;
        self.wake_delegation(&d, &next);
        tracing::info!(delegation.id = %d.delegation_id, delegation.attempt = t.attempt, "{reason}");
        Ok(true)
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

    /// Reads a delegation, waiting up to `wait` for it to end (no connection held meanwhile).
    pub async fn await_delegation(
        &self,
        delegation_id: Uuid,
        wait: Option<Duration>,
    ) -> Result<Record, DelegationError> {
        let read = |this: &Engine| {
            let pool = this.pool.clone();
            async move {
                let mut conn = pool.acquire().await?;
                let (delegation, attempts) =
                    store::record(&mut conn, delegation_id).await?.ok_or(DelegationError::NotFound)?;
                Ok::<_, DelegationError>(Record { delegation, attempts })
            }
        };
        let Some(wait) = wait else {
            return read(self).await;
        };
        let deadline = tokio::time::Instant::now() + wait;
        let notify = self.wakeups.subscribe(&store::delegation_key(delegation_id));
        loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let record = read(self).await?;
            if record.delegation.status().is_terminal() || !crate::delivery::wakeups::wait_or_recheck(deadline, notified).await {
                return Ok(record);
            }
        }
    }

    /// The attempts waiting for `target`, oldest first, and how many; with `wait`, holds until
    /// one arrives or the time passes (woken after the commit that offers one, no connection held
    /// meanwhile).
    pub async fn delegation_inbox(
        &self,
        target: Uuid,
        wait: Option<Duration>,
    ) -> Result<(Vec<InboxItem>, i64), DelegationError> {
        let read = || async {
            let mut conn = self.pool.acquire().await?;
            Ok::<_, DelegationError>(store::inbox(&mut conn, target, 100).await?)
        };
        let Some(wait) = wait else {
            return read().await;
        };
        let deadline = tokio::time::Instant::now() + wait;
        let notify = self.wakeups.subscribe(&store::inbox_key(target));
        loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let found = read().await?;
            if !found.0.is_empty() || !crate::delivery::wakeups::wait_or_recheck(deadline, notified).await {
                return Ok(found);
            }
        }
    }
}

/// Ends the live attempt `a` of `d` by `event` (output or reason with it), counts it for its
/// target, and then offers the next attempt (fallback) or ends the delegation, re-arming or
/// cancelling the timer; all in `conn`'s transaction. Returns the targets to wake.
async fn end_attempt(
    engine: &Engine,
    conn: &mut PgConnection,
    d: &Delegation,
    a: &Attempt,
    event: Event,
    output: Option<&Value>,
    reason: Option<&str>,
) -> Result<Vec<Uuid>, DelegationError> {
    let from = a.status();
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
    if !store::move_attempt(conn, d, ended).await? {
        return Err(DelegationError::InvalidState(from.as_str()));
    }
    if may_fall_back {
        let tried: Vec<Uuid> =
            store::attempts(conn, d.delegation_id).await?.iter().map(|a| a.target_agent_id).collect();
        if let Some(target) = engine.next_target(conn, d, &tried).await? {
            store::set_delegation(conn, d, d.retries_used + 1, Status::Request, None).await?;
            let asked = Delegation {
                status: Status::Request.as_str().to_owned(),
                retries_used: d.retries_used + 1,
                ..d.clone()
            };
            let live = engine.place(conn, &asked, a.attempt + 1, target).await?;
            return Ok(live.into_iter().collect());
        }
        store::set_delegation(conn, d, d.retries_used, to, output).await?;
    }
    parley_jobs::cancel_delegation_timeout(conn, d.delegation_id).await?;
    Ok(Vec::new())
}
