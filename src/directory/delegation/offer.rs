//! Offering an attempt: attempt `n` of a delegation, made for its target with its deadlines,
//! is stored as `request` when the target's inbound window has room for it; otherwise it is
//! recorded `rejected` (`rate_limited`) and the next target not yet tried gets the next attempt,
//! while retries are left, and so on. A new delegation's first attempt and every fallback after
//! an attempt ended come through here, in the caller's transaction.

use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{
    DelegationError,
    screen::Screened,
    service::Delegations,
    state::Status,
    store::{self, Attempt, Delegation},
    targets::Target,
};

/// `start + d`, to the microsecond PostgreSQL keeps.
pub(super) fn after(start: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    (start + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)).trunc_subsecs(6)
}

impl Delegations {
    /// Attempt `number` of `d` to `target`, as it is offered now (in `request`).
    pub(super) fn attempt_for(
        &self,
        d: &Delegation,
        number: i32,
        target: Target,
        requester_anonymous_id: Uuid,
    ) -> Attempt {
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
            accept_deadline: after(now, self.runtime.config.delegation_accept_timeout),
            deadline: after(now, timeout),
            accepted_at: None,
            ended_at: None,
        }
    }

    /// Offers attempt `number` of `d` (stored as `request`, with `number - 1` retries used) to
    /// `target`, the requester named to it as `requester_anonymous_id`, with the delegation's
    /// timer; a target at its inbound limit is skipped (see [`Delegations::after_skip`]). All in
    /// the caller's transaction; returns the live attempt's target, if any (whose inbox to wake
    /// after the commit).
    pub(super) async fn place(
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
    pub(super) fn inbound_limit(&self) -> i32 {
        i32::try_from(self.runtime.config.inbound_rate).unwrap_or(i32::MAX)
    }

    /// After attempt `number` of `d` was skipped (recorded `rejected`, `rate_limited`: its
    /// target's inbound window had no room for it): the next target not yet tried gets the next
    /// attempt, while retries are left, and so on; when no attempt stays live, the delegation
    /// ends `rejected` and its timer is cancelled.
    pub(super) async fn after_skip(
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
}
