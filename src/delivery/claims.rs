//! Claims on parked turns: pickup (with long polling), extend, release, and the hand-back of a
//! turn to the system negotiator.
//!
//! A claim token is derived, not stored (`crate::runtime::tokens`), from the task id and the
//! claim's generation. The generation grows with every claim, so every claim gets a fresh
//! unpredictable token, a retried pickup (whose response was lost) gets the very same token
//! back, and the service can tell from the token alone which claim it was made for. The
//! database fences by generation: a respond, extend or release acts only if the task's claim is
//! still of the token's generation, and a turn answered under a claim records its generation.
//!
//! Pickup is one statement (`store::turn_delivery::pickup`), authentication included, and so
//! are the person's answers it carries (`context.personAnswers`).
//!
//! An agent holds at most one claim, and the database enforces it: a unique index over the
//! claimed tasks' holders. A retried pickup, or several pickups of one agent at once, all get
//! the agent's one live claim (same turn, same token); a lapsed claim that its timer has not
//! given back yet is given back by the agent's next pickup before it claims.

use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use uuid::Uuid;

use super::{DeliveryError, Engine, PickupQuery};
use crate::{
    domain::{FallbackReason, OpportunityStatus, PreviousRound, TaskEvent, TaskState, Turn},
    quote::logged,
    runtime::{AgentIdentity, AgentKey, ClaimProof, wakeups::wait_or_recheck},
    store::{
        tasks::{self, Task},
        turn_delivery,
    },
};

/// A claimed turn, with what its pickup answer shows.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The task as claimed.
    pub task: Task,
    /// The claim token (only ever shown to the holder).
    pub token: String,
    /// When the claim lapses.
    pub expires_at: DateTime<Utc>,
    /// The turns so far.
    pub history: Vec<Turn>,
    /// The opportunity's status.
    pub opportunity_status: OpportunityStatus,
    /// The opportunity's earlier rounds (empty in a first round).
    pub previous_rounds: Vec<PreviousRound>,
    /// What the agent's person answered to the questions its side asked at this turn
    /// (`ask_person`), oldest first; an answer is `None` when its window ran out.
    pub person_answers: Vec<crate::store::person_questions::PersonAnswer>,
}

impl Engine {
    /// What a presented claim token proves for `task_id`.
    pub(crate) fn claim_proof(&self, task_id: Uuid, token: Option<&str>) -> ClaimProof {
        self.runtime.tokens.claim_proof(task_id, token)
    }

    fn claim_deadline(&self) -> Result<DateTime<Utc>, DeliveryError> {
        let timeout = chrono::Duration::from_std(self.runtime.config.claim_timeout).map_err(anyhow::Error::from)?;
        // PostgreSQL keeps microseconds: round here so the deadline we report is the one stored.
        Ok((Utc::now() + timeout).trunc_subsecs(6))
    }

    /// One pickup attempt, in one statement: authenticates the key, then returns the agent's
    /// live claim, else claims the oldest turn parked for its user that is not one of the
    /// negotiations in `skip`. Also returns the agent.
    pub async fn try_pickup(
        &self,
        key: &AgentKey,
        skip: &[Uuid],
    ) -> Result<(AgentIdentity, Option<Claim>), DeliveryError> {
        let found = {
            let mut conn = self.runtime.pool.acquire().await?;
            turn_delivery::pickup(
                &mut conn,
                &key.key_hash,
                key.agent_id,
                self.runtime.config.claim_timeout,
                self.runtime.config.park_timeout,
                skip,
            )
            .await?
        };
        let agent = found.key.identity()?;
        let Some(picked) = found.picked_up else { return Ok((agent, None)) };
        let task = picked.task;
        if picked.claimed_now {
            crate::metrics::claimed();
            tracing::info!(negotiation.id = %task.id, agent.id = %agent.agent_id, claim.generation = task.claim_generation, "claimed");
        }
        let token = self.runtime.tokens.claim_token(task.id, task.claim_generation);
        let expires_at = task.claim_expires_at.unwrap_or_else(Utc::now);
        let claim = Claim {
            task,
            token,
            expires_at,
            history: picked.history,
            opportunity_status: picked.opportunity_status,
            previous_rounds: picked.previous_rounds,
            person_answers: picked.person_answers,
        };
        self.recent_claims.remember(&claim);
        Ok((agent, Some(claim)))
    }

    /// Pickup with an optional long poll: waits up to the query's `wait` for a turn to be
    /// parked for the agent's user. Waiting holds no database connection; a wake-up that loses
    /// the race to another agent keeps waiting for the rest of its time. Turns of the
    /// negotiations in its `skip` are passed over (an agent backing off on them); the agent's
    /// own live claim is returned whatever `skip` says, so that a retried pickup never strands a
    /// turn.
    pub async fn pickup(&self, key: &AgentKey, query: &PickupQuery) -> Result<Option<Claim>, DeliveryError> {
        let (wait, skip) = (query.wait, query.skip.as_slice());
        let (agent, claim) = self.try_pickup(key, skip).await?;
        // Marked at the start: a long-poll counts as seen while it waits (see `liveness`).
        self.runtime.seen(agent.agent_id).await;
        let Some(wait) = wait.filter(|w| !w.is_zero()).filter(|_| claim.is_none()) else {
            crate::metrics::pickup_waited(Duration::ZERO);
            return Ok(claim);
        };
        let started = tokio::time::Instant::now();
        let deadline = started + wait;
        let notify = self.runtime.wakeups.subscribe(&agent.owner_user_id);
        let _waiting = crate::metrics::LongPollWaiter::start();
        let claim = loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            // Registered before looking (again), so a park committed in between still wakes us.
            notified.as_mut().enable();
            if let (_, Some(claim)) = self.try_pickup(key, skip).await? {
                break Some(claim);
            }
            if !wait_or_recheck(deadline, notified).await {
                break None;
            }
        };
        crate::metrics::pickup_waited(started.elapsed());
        Ok(claim)
    }

    /// Checks that `agent` holds a live claim on `task` that `proof` (when a token was sent)
    /// is for.
    pub(crate) fn check_holder(task: &Task, agent: &AgentIdentity, proof: ClaimProof) -> Result<(), DeliveryError> {
        let token_sent = proof != ClaimProof::Absent;
        if task.state.is_terminal() {
            return Err(DeliveryError::AlreadyCompleted);
        }
        // A token this service never issued for this task: not one of its tokens at all, or
        // one for a claim that was never made (generations only grow).
        if proof == ClaimProof::Forged || proof.generation().is_some_and(|g| g > task.claim_generation) {
            return Err(DeliveryError::UnknownClaimToken);
        }
        if task.state != TaskState::Claimed {
            return Err(if token_sent { DeliveryError::ClaimStale } else { DeliveryError::NotClaimed });
        }
        if task.claim_agent_id != Some(agent.agent_id) {
            return Err(if token_sent { DeliveryError::ClaimStale } else { DeliveryError::ClaimedByOther });
        }
        if token_sent && proof.generation() != Some(task.claim_generation) {
            return Err(DeliveryError::ClaimStale);
        }
        if task.claim_expires_at.is_none_or(|e| e <= Utc::now()) {
            return Err(DeliveryError::ClaimStale);
        }
        Ok(())
    }

    /// Pushes the holder's claim expiry to now + claim timeout, but in a mixed negotiation never
    /// past the turn's park window (`PARLEY_PARK_TIMEOUT` from when it was first parked), nor
    /// back from where it stands: there a turn waits for its user's agents that long in all,
    /// claims included, and then the system negotiator takes it when the claim lapses. (A
    /// personal-vs-personal negotiation has its overall deadline instead.)
    /// Returns the task as extended; its token is unchanged.
    pub async fn extend(
        &self,
        agent: &AgentIdentity,
        task_id: Uuid,
        token: Option<&str>,
    ) -> Result<Task, DeliveryError> {
        let mut tx = self.runtime.pool.begin().await?;
        let mut task = self.lock_visible(&mut tx, agent, task_id).await?;
        Self::check_holder(&task, agent, self.claim_proof(task_id, token))?;
        let mut expires_at = self.claim_deadline()?;
        if Self::falls_back(&task)
            && let (Some(first_parked), Some(current)) = (task.first_parked_at, task.claim_expires_at)
        {
            let window = chrono::Duration::from_std(self.runtime.config.park_timeout).map_err(anyhow::Error::from)?;
            expires_at = expires_at.min((first_parked + window).trunc_subsecs(6).max(current));
        }
        tasks::extend_claim(&mut tx, task.id, expires_at).await?;
        self.arm_claim_timer(&mut tx, task.id, task.claim_generation, expires_at).await?;
        tx.commit().await?;
        task.claim_expires_at = Some(expires_at);
        Ok(task)
    }

    /// Gives the turn back: `claimed -> waiting_for_agent`, keeping when it was first parked;
    /// with `hand_back`, the system negotiator plays it at once instead (see
    /// [`Self::hand_back`]). `reason` (the agent's, e.g. why its program failed) goes to the log
    /// with the negotiation.
    pub async fn release(
        &self,
        agent: &AgentIdentity,
        task_id: Uuid,
        token: Option<&str>,
        reason: Option<&str>,
        hand_back: bool,
    ) -> Result<Task, DeliveryError> {
        let mut tx = self.runtime.pool.begin().await?;
        let mut task = self.lock_visible(&mut tx, agent, task_id).await?;
        Self::check_holder(&task, agent, self.claim_proof(task_id, token))?;
        if hand_back {
            return self.hand_back(tx, agent, task, reason).await;
        }
        let next = task.state.transition(TaskEvent::Unclaim)?;
        tasks::set_state(&mut tx, task.id, task.state, next, task.turn_count).await?;
        let user = task.awaiting_user_id.clone().unwrap_or_default();
        self.disarm_claim_timer(&mut tx, task.id).await?;
        let first_parked_at = task.first_parked_at.unwrap_or_else(Utc::now);
        self.arm_park_timer(&mut tx, &task, task.turn_count, task.claim_generation, first_parked_at).await?;
        tx.commit().await?;
        self.runtime.wakeups.announce(&user);
        tracing::info!(negotiation.id = %task.id, agent.id = %agent.agent_id, turn.number = task.turn_count,
            release.reason = %logged(reason.unwrap_or("")), "turn released");
        task.state = next;
        task.claim_agent_id = None;
        task.claim_expires_at = None;
        Ok(task)
    }

    /// The rest of a release with `hand_back`, in its transaction: the system negotiator plays
    /// the turn at once for the agent's user (the agent declines the turn), instead of leaving
    /// it parked until the park window ends.
    /// Only a mixed negotiation has a system negotiator to hand a turn to: in a personal-vs-
    /// personal one this is refused ([`DeliveryError::NoSystemNegotiator`]) and nothing changes.
    ///
    /// One transaction: the claim is given back (it counts as released for the agent's trust),
    /// the task's turn timer is cancelled, and the system's turn is taken through the park
    /// timeout's own path ([`Engine::take_parked_turn`]); then the negotiation runs on as after a
    /// fallback. Returns the task as it stands afterwards.
    async fn hand_back(
        &self,
        mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
        agent: &AgentIdentity,
        mut task: Task,
        reason: Option<&str>,
    ) -> Result<Task, DeliveryError> {
        if !Self::falls_back(&task) {
            return Err(DeliveryError::NoSystemNegotiator);
        }
        let parked = task.state.transition(TaskEvent::Unclaim)?;
        tasks::set_state(&mut tx, task.id, task.state, parked, task.turn_count).await?;
        task.state = parked;
        self.disarm_turn_timer(&mut tx, task.id).await?;
        if self.model_decides() {
            // The model's job takes the turn if it is still parked when the model has answered.
            self.request_model_turn(&mut tx, &task, Some(FallbackReason::HandBack)).await?;
            tx.commit().await?;
            tracing::info!(negotiation.id = %task.id, agent.id = %agent.agent_id, turn.number = task.turn_count,
                release.reason = %logged(reason.unwrap_or("")), "turn handed back to the system negotiator's model");
            return Ok(task);
        }
        let (turn, concluded) = self.take_parked_turn(&mut tx, &mut task, FallbackReason::HandBack).await?;
        tx.commit().await?;
        tracing::info!(negotiation.id = %task.id, agent.id = %agent.agent_id, turn.number = turn.turn_number,
            release.reason = %logged(reason.unwrap_or("")), "turn handed back to the system negotiator");
        self.after_takeover(&task, &turn, concluded, FallbackReason::HandBack).await?;
        let mut conn = self.runtime.pool.acquire().await?;
        tasks::get(&mut conn, task.id).await?.ok_or(DeliveryError::NotFound)
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
            let mut conn = self.runtime.pool.acquire().await?;
            tasks::claimed_by(&mut conn, agent.agent_id).await?
        };
        let mut released = 0;
        for id in ids {
            match self.release(agent, id, None, Some("the agent was deleted"), false).await {
                Ok(_) => released += 1,
                // Lapsed or answered meanwhile: its own timer or respond took care of it.
                Err(DeliveryError::ClaimStale | DeliveryError::NotClaimed | DeliveryError::AlreadyCompleted) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(released)
    }
}
