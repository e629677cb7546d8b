//! Claims on parked turns: pickup (with long polling), extend and release (DESIGN.md §5).
//!
//! A claim token is derived, not stored: `HMAC-SHA256(claim key, task id ‖ generation)`. The
//! generation grows with every claim, so every claim gets a fresh unpredictable token, while a
//! retried pickup (whose response was lost) can hand back the very same token. Only the token's
//! SHA-256 is stored, for fencing and for finding a retried respond's turn.

use std::time::Duration;

use base64::Engine as _;
use chrono::{DateTime, SubsecRound, Utc};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{DeliveryError, Engine};
use crate::{
    domain::{TaskEvent, TaskState},
    store::tasks::{self, Task},
};

/// The agent making a call, as its API key identified it.
#[derive(Debug, Clone)]
pub struct AgentIdentity {
    /// The agent.
    pub agent_id: Uuid,
    /// The user it speaks for.
    pub owner_user_id: String,
}

/// A claimed turn.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The task as claimed.
    pub task: Task,
    /// The claim token (only ever shown to the holder).
    pub token: String,
    /// When the claim lapses.
    pub expires_at: DateTime<Utc>,
}

/// SHA-256 of a secret (API key or claim token): what the database stores.
pub fn hash_secret(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

impl Engine {
    /// The claim token of `task` at `generation`.
    pub(crate) fn claim_token(&self, task_id: Uuid, generation: i64) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.claim_key).expect("HMAC takes keys of any length");
        mac.update(task_id.as_bytes());
        mac.update(&generation.to_be_bytes());
        let tag = mac.finalize().into_bytes();
        format!("ct_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag))
    }

    fn claim_deadline(&self) -> Result<DateTime<Utc>, DeliveryError> {
        let timeout = chrono::Duration::from_std(self.config.claim_timeout).map_err(anyhow::Error::from)?;
        // PostgreSQL keeps microseconds: round here so the deadline we report is the one stored.
        Ok((Utc::now() + timeout).trunc_subsecs(6))
    }

    /// One pickup attempt: the agent's live claim, else the oldest turn parked for its user.
    pub async fn try_pickup(&self, agent: &AgentIdentity) -> Result<Option<Claim>, DeliveryError> {
        let mut tx = self.pool.begin().await?;
        if let Some(task) = tasks::lock_live_claim_of(&mut tx, agent.agent_id).await? {
            tx.commit().await?;
            let token = self.claim_token(task.id, task.claim_generation);
            let expires_at = task.claim_expires_at.unwrap_or_else(Utc::now);
            return Ok(Some(Claim { task, token, expires_at }));
        }
        let Some(mut task) = tasks::lock_next_parked_for(&mut tx, &agent.owner_user_id).await? else {
            tx.commit().await?;
            return Ok(None);
        };
        let next = task.state.transition(TaskEvent::Claim)?;
        let generation = task.claim_generation + 1;
        let token = self.claim_token(task.id, generation);
        let expires_at = self.claim_deadline()?;
        tasks::claim(&mut tx, task.id, agent.agent_id, generation, &hash_secret(&token), expires_at).await?;
        self.arm_claim_timer(&mut tx, task.id, generation, expires_at).await?;
        tx.commit().await?;
        tracing::info!(negotiation.id = %task.id, agent.id = %agent.agent_id, claim.generation = generation, "claimed");
        task.state = next;
        task.claim_generation = generation;
        task.claim_agent_id = Some(agent.agent_id);
        task.claim_expires_at = Some(expires_at);
        Ok(Some(Claim { task, token, expires_at }))
    }

    /// Pickup with an optional long poll: waits up to `wait` for a turn to be parked for the
    /// agent's user. Waiting holds no database connection; a wake-up that loses the race to
    /// another agent keeps waiting for the rest of its time.
    pub async fn pickup(&self, agent: &AgentIdentity, wait: Option<Duration>) -> Result<Option<Claim>, DeliveryError> {
        let Some(wait) = wait.filter(|w| !w.is_zero()) else {
            return self.try_pickup(agent).await;
        };
        let deadline = tokio::time::Instant::now() + wait;
        let notify = self.wakeups.subscribe(&agent.owner_user_id);
        loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            // Registered before looking, so a park committed in between still wakes us.
            notified.as_mut().enable();
            if let Some(claim) = self.try_pickup(agent).await? {
                return Ok(Some(claim));
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(None);
            }
        }
    }

    /// Checks that `agent` holds a live claim on a locked task under `token` (when given).
    pub(crate) fn check_holder(task: &Task, agent: &AgentIdentity, token: Option<&str>) -> Result<(), DeliveryError> {
        if task.state.is_terminal() {
            return Err(DeliveryError::AlreadyCompleted);
        }
        if task.state != TaskState::Claimed {
            return Err(if token.is_some() { DeliveryError::ClaimStale } else { DeliveryError::NotClaimed });
        }
        if task.claim_agent_id != Some(agent.agent_id) {
            return Err(if token.is_some() { DeliveryError::ClaimStale } else { DeliveryError::ClaimedByOther });
        }
        if let Some(token) = token
            && task.claim_token_hash.as_deref() != Some(hash_secret(token).as_slice()) {
                return Err(DeliveryError::ClaimStale);
            }
        if task.claim_expires_at.is_none_or(|e| e <= Utc::now()) {
            return Err(DeliveryError::ClaimStale);
        }
        Ok(())
    }

    /// Pushes the holder's claim expiry to now + claim timeout.
    pub async fn extend(&self, agent: &AgentIdentity, task_id: Uuid, token: Option<&str>) -> Result<Claim, DeliveryError> {
        let mut tx = self.pool.begin().await?;
        let mut task = self.lock_visible(&mut tx, agent, task_id).await?;
        Self::check_holder(&task, agent, token)?;
        let expires_at = self.claim_deadline()?;
        tasks::extend_claim(&mut tx, task.id, expires_at).await?;
        self.arm_claim_timer(&mut tx, task.id, task.claim_generation, expires_at).await?;
        tx.commit().await?;
        task.claim_expires_at = Some(expires_at);
        let token = self.claim_token(task.id, task.claim_generation);
        Ok(Claim { task, token, expires_at })
    }

    /// Gives the turn back: `claimed -> waiting_for_agent`, keeping when it was first parked.
    pub async fn release(&self, agent: &AgentIdentity, task_id: Uuid, token: Option<&str>) -> Result<Task, DeliveryError> {
        let mut tx = self.pool.begin().await?;
        let mut task = self.lock_visible(&mut tx, agent, task_id).await?;
        Self::check_holder(&task, agent, token)?;
        let next = task.state.transition(TaskEvent::Unclaim)?;
        tasks::set_state(&mut tx, task.id, task.state, next, task.turn_count).await?;
        let user = task.awaiting_user_id.clone().unwrap_or_default();
        self.disarm_turn_timers(&mut tx, task.id).await?;
        let first_parked_at = task.first_parked_at.unwrap_or_else(Utc::now);
        self.arm_park_timer(&mut tx, &task, task.turn_count, task.claim_generation, first_parked_at).await?;
        tasks::notify_parked(&mut tx, &user).await?;
        tx.commit().await?;
        self.wakeups.wake(&user);
        task.state = next;
        task.claim_agent_id = None;
        task.claim_token_hash = None;
        task.claim_expires_at = None;
        Ok(task)
    }

    /// Locks a task the agent's user takes part in; anyone else's is "not found".
    pub(crate) async fn lock_visible(
        &self,
        conn: &mut sqlx::PgConnection,
        agent: &AgentIdentity,
        task_id: Uuid,
    ) -> Result<Task, DeliveryError> {
        let task = tasks::lock(conn, task_id).await?.ok_or(DeliveryError::NotFound)?;
        if task.side_of(&agent.owner_user_id).is_none() {
            return Err(DeliveryError::NotFound);
        }
        Ok(task)
    }
}

impl Engine {
    /// Gives back every live claim an agent holds (before the agent is deleted).
    pub async fn release_all(&self, agent: &AgentIdentity) -> Result<usize, DeliveryError> {
        let ids = {
            let mut conn = self.pool.acquire().await?;
            tasks::claimed_by(&mut conn, agent.agent_id).await?
        };
        let mut released = 0;
        for id in ids {
            match self.release(agent, id, None).await {
                Ok(_) => released += 1,
                // Lapsed or answered meanwhile: its own timer or respond took care of it.
                Err(DeliveryError::ClaimStale | DeliveryError::NotClaimed | DeliveryError::AlreadyCompleted) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(released)
    }
}
