//! Reading delegations and waiting on them: a requester's read of one delegation, its wait
//! until the delegation ends, and a target's inbox, with or without a long poll.
//!
//! A wait holds no database connection: it subscribes to the delegation's (or the inbox's)
//! wake-up key before it looks, then looks again after each wake-up and at least every
//! `crate::runtime::wakeups::RECHECK`. A delegation that a complete of this process ended is
//! handed to its waiters here ([`super::recent`]) instead of being read again. Each look at an
//! inbox is one statement, the key's check included.

use std::{pin::Pin, time::Duration};

use tokio::sync::{Notify, futures::Notified};
use uuid::Uuid;

use super::{
    DelegationError,
    service::Delegations,
    store::{self, InboxItem, Record},
};
use crate::runtime::{AgentKey, wakeups::wait_or_recheck};

impl Delegations {
    /// The delegation of `request_id` visible to the caller, with its attempts.
    pub async fn read_delegation(
        &self,
        request_id: Uuid,
        requesters: Option<&[Uuid]>,
    ) -> Result<Record, DelegationError> {
        let mut conn = self.runtime.pool.acquire().await?;
        let d = store::find_visible(&mut conn, request_id, requesters).await?.ok_or(DelegationError::NotFound)?;
        let (delegation, attempts) =
            store::record(&mut conn, d.delegation_id).await?.ok_or(DelegationError::NotFound)?;
        Ok(Record { delegation, attempts })
    }

    /// Delegation `delegation_id` with its attempts, when `requester` asked for it; to anyone
    /// else it does not exist (`NotFound`). What the A2A endpoint reads a task by.
    pub async fn requested_by(&self, delegation_id: Uuid, requester: Uuid) -> Result<Record, DelegationError> {
        let record = self.read_record(delegation_id).await?;
        if record.delegation.requester_agent_id != requester {
            return Err(DelegationError::NotFound);
        }
        Ok(record)
    }

    /// A page of `requester`'s delegations with their attempts, newest first: at most `limit`,
    /// older than `before` when given. Two statements, whatever the page's size.
    pub async fn requested_page(
        &self,
        requester: Uuid,
        before: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<Record>, DelegationError> {
        let mut conn = self.runtime.pool.acquire().await?;
        let rows = store::outbound(&mut conn, requester, None, before, limit).await?;
        let ids: Vec<Uuid> = rows.iter().map(|d| d.delegation_id).collect();
        let mut attempts = store::attempts_of(&mut conn, &ids).await?;
        Ok(rows
            .into_iter()
            .map(|delegation| {
                let attempts = attempts.remove(&delegation.delegation_id).unwrap_or_default();
                Record { delegation, attempts }
            })
            .collect())
    }

    /// A delegation and its attempts as committed now.
    async fn read_record(&self, delegation_id: Uuid) -> Result<Record, DelegationError> {
        let mut conn = self.runtime.pool.acquire().await?;
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
        let notify = self.runtime.wakeups.subscribe(&store::delegation_key(delegation_id));
        let mut notified = std::pin::pin!(notify.notified());
        notified.as_mut().enable();
        let record = self.read_record(delegation_id).await?;
        self.follow(&notify, notified, record, deadline).await
    }

    /// From `record`, read after `notified` was enabled: waits until the delegation has ended or
    /// `deadline` passes, reading it again after each wake-up (and at least every
    /// [`crate::runtime::wakeups::RECHECK`]); returns the last record read.
    pub(super) async fn follow<'a>(
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
            record = match self.recent.take_ended(id) {
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
            let mut conn = self.runtime.pool.acquire().await?;
            let (checked, items, total) = store::inbox_for_key(&mut conn, &key.key_hash, key.agent_id, 100).await?;
            Ok::<_, DelegationError>((checked.identity()?, items, total))
        };
        let Some(wait) = wait else {
            let (target, items, total) = read().await?;
            self.runtime.seen(target.agent_id).await;
            return Ok((items, total));
        };
        let agent = key.agent_id.ok_or_else(|| anyhow::anyhow!("an inbox is read for a named agent"))?;
        let deadline = tokio::time::Instant::now() + wait;
        let notify = self.runtime.wakeups.subscribe(&store::inbox_key(agent));
        let mut first = true;
        loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (target, items, total) = read().await?;
            if first {
                // Marked at the start: a long-poll counts as seen while it waits.
                self.runtime.seen(target.agent_id).await;
                first = false;
            }
            if !items.is_empty() || !wait_or_recheck(deadline, notified).await {
                return Ok((items, total));
            }
        }
    }
}
