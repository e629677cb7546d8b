//! A new delegation (`POST /api/agents/delegate`, MCP's `delegate`): the key checked, the
//! requester's budget of refused inputs, the input screened against the targets it may go to
//! (before any transaction opens), then one transaction of two statements: its reads under the
//! requester's lock, and the row with its first attempt and timer, answering the record. With
//! `wait`, the call then follows the delegation until it ends (see [`super::reads`]); it
//! subscribes to the delegation's wake-ups before the commit, so it needs no read before
//! waiting.

use std::time::Duration;

use chrono::{SubsecRound, Utc};
use sqlx::PgConnection;
use tokio::sync::Notify;
use uuid::Uuid;

use super::{
    DelegationError, Request,
    screen::{Screened, Work},
    service::Delegations,
    state::Status,
    store::{self, Delegation, Record},
};
use crate::{
    directory::anonymity::{self, AgentId},
    runtime::{AgentIdentity, AgentKey},
};

impl Delegations {
    /// `POST /api/agents/delegate`, for the agent of `key`: makes the delegation and its first
    /// attempt, or returns the one this request id already made when the body is the same. With
    /// `wait`, then holds until the delegation ends or the time passes (no connection held).
    ///
    /// Before the transaction: the key (so that nothing is checked for an unknown caller), the
    /// requester's budget of refused inputs, and the input against the schemas of the targets
    /// the transaction may pick ([`Delegations::screen`]), unless the request id was used
    /// already (a retry is answered from what it made, and is never checked again). A requester
    /// whose inputs keep being refused is answered 429 for a while, like a client whose
    /// credentials keep failing.
    pub async fn delegate(
        &self,
        key: &AgentKey,
        req: &Request,
        wait: Option<Duration>,
    ) -> Result<Record, DelegationError> {
        let (requester, used) = {
            let mut conn = self.runtime.pool.acquire().await?;
            let (key, used) = store::check_key_for_request(&mut conn, &key.key_hash, req.request_id).await?;
            (key.identity()?, used)
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

    /// [`Delegations::delegate`]'s transaction, once the input has been screened.
    async fn delegate_screened(
        &self,
        key: &AgentKey,
        req: &Request,
        wait: Option<Duration>,
        screened: &Screened,
    ) -> Result<Record, DelegationError> {
        let mut tx = self.runtime.pool.begin().await?;
        let opened = store::open(
            &mut tx,
            &key.key_hash,
            req.agent_id,
            req.request_id,
            req.target_anonymous_id,
            req.task_type.as_str(),
            req.custom_type.as_deref(),
            i32::try_from(self.runtime.config.outbound_rate).unwrap_or(i32::MAX),
        )
        .await?;
        let requester = opened.key.clone().identity()?;
        let made = self.make_delegation(&mut tx, &requester, req, &opened, screened).await;
        let made = match made {
            Ok(made) => made,
            Err(e) => {
                drop(tx);
                self.runtime.seen(requester.agent_id).await;
                return Err(e);
            }
        };
        // Subscribed before the commit: an end committed right after it still wakes this wait.
        let deadline = wait.map(|w| tokio::time::Instant::now() + w);
        let notify = deadline
            .map(|_| self.runtime.wakeups.subscribe(&store::delegation_key(made.record.delegation.delegation_id)));
        let mut notified = std::pin::pin!(notify.as_deref().map(Notify::notified));
        if let Some(n) = notified.as_mut().as_pin_mut() {
            n.enable();
        }
        tx.commit().await?;
        self.runtime.seen(requester.agent_id).await;
        if made.fresh {
            // Nobody waits on a delegation that did not exist before this commit (this call's
            // own wait is subscribed already): only its target's inbox and the event streams.
            if let Some(target) = made.live {
                self.runtime.wakeups.announce(&store::inbox_key(target));
            }
            self.runtime.wakeups.events_written();
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
            context_id: req.context_id.clone(),
        };
        let target = self.first_target(conn, &d, opened, screened).await?;
        let requester_anonymous_id = match opened.requester_anonymous_id {
            Some(id) => id,
            None => {
                anonymity::current(conn, AgentId(requester.agent_id), self.runtime.config.anonymous_id_ttl).await?.0
            }
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
        if let Some(context_id) = &req.context_id {
            store::set_context(conn, d.delegation_id, context_id).await?;
        }
        let delegation = Delegation { context_id: req.context_id.clone(), ..delegation };
        if live {
            return Ok(Made { record: Record { delegation, attempts }, live: Some(target_id), fresh: true });
        }
        let live = self.after_skip(conn, &d, 1, requester_anonymous_id, screened).await?;
        let (delegation, attempts) =
            store::record(conn, d.delegation_id).await?.ok_or_else(|| anyhow::anyhow!("the delegation just made"))?;
        Ok(Made { record: Record { delegation, attempts }, live, fresh: true })
    }
}

/// A delegation as [`Delegations::make_delegation`] left it, before the commit.
struct Made {
    /// The delegation with its attempts.
    record: Record,
    /// The target of its live attempt, whose inbox to wake.
    live: Option<Uuid>,
    /// False when the request id had made it already (nothing was written).
    fresh: bool,
}
