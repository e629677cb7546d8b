//! Durable timers: arming them in the transactions that need them, and what each does when it
//! comes due (claim expiry, park fallback, the personal-vs-personal deadline, pending expiry).
//!
//! Arming and cancelling always happen inside the state change's own transaction
//! (`parley_jobs` writes apalis rows on the caller's connection), so a timer exists iff the
//! change that needs it committed. Each handler is one transaction that locks the task and acts
//! only if the state and claim generation are still the ones the timer was armed for; a
//! duplicate, retried or stale delivery changes nothing in the negotiation.
//!
//! A task's turn timer (park or claim) is due no later than its turn's deadline, not exactly at
//! it: pickup and respond keep the pending turn timer when it is due by their new deadline, so
//! turns that come faster than the claim window write no timer row. Such a kept timer fires
//! early for a state that has moved on, and then re-arms the turn timer for the deadline the
//! task has now ([`Engine::ensure_turn_timer`]); a duplicate of it finds that timer pending and
//! does nothing.
//!
//! Which handler a due job reaches is decided above the engine, by the dispatcher in
//! `crate::services`, which also runs housekeeping (a periodic job: the recovery pass of
//! [`Engine::recover`], pruning, and the directory's upkeep).
//!
//! The park timer of a mixed negotiation has two windows: the long one (`PARLEY_PARK_TIMEOUT`)
//! and, for a user with no live agent, the offline one (`PARLEY_PARK_TIMEOUT_OFFLINE`); see
//! [`Engine::fall_back`].

use chrono::{DateTime, Utc};
use parley_jobs::{ClaimTimeout, NegotiationDeadline, ParkTimeout, PendingExpiry, TimerKind};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{DeliveryError, Engine, engine::Concluded, finalize};
use crate::{
    domain::{EndReason, FallbackReason, OpportunityEvent, OpportunityStatus, Side, TaskEvent, TaskState, Turn},
    store::{messages, opportunities, person_questions, tasks, tasks::Task},
};

fn jobs(e: parley_jobs::JobsError) -> DeliveryError {
    DeliveryError::Unexpected(e.into())
}

fn after(start: DateTime<Utc>, d: std::time::Duration) -> DateTime<Utc> {
    start + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// How long a turn waits for an agent of its user, and what happens when it has waited that long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnWait {
    /// When the wait ends (if no agent answers first).
    pub until: DateTime<Utc>,
    /// What happens then.
    pub then: AfterWait,
}

/// What ends a turn's wait for an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterWait {
    /// The system negotiator plays the turn for the user (a mixed negotiation).
    SystemNegotiator,
    /// The negotiation ends stalled at its deadline (personal vs personal).
    NegotiationEnds,
}

impl Engine {
    /// How long `task`'s turn waits for an agent, and what happens then; `None` unless the turn
    /// is parked or claimed. Read from the same windows and timers that end the wait: personal
    /// vs personal, the negotiation's deadline; otherwise the park window from the turn's first
    /// parking (the offline window when the turn was parked with it and no agent of the user is
    /// live now, since a live one moves the fallback to the long window), and for a claimed turn
    /// no earlier than the claim's end, after which it is parked again.
    pub async fn turn_wait(&self, conn: &mut PgConnection, task: &Task) -> Result<Option<TurnWait>, DeliveryError> {
        if !matches!(task.state, TaskState::WaitingForAgent | TaskState::Claimed) {
            return Ok(None);
        }
        if !Self::falls_back(task) {
            let until = after(task.created_at, self.runtime.config.pvp_timeout);
            return Ok(Some(TurnWait { until, then: AfterWait::NegotiationEnds }));
        }
        let Some(parked) = task.first_parked_at else { return Ok(None) };
        let long = after(parked, self.runtime.config.park_timeout);
        if task.state == TaskState::Claimed {
            let until = task.claim_expires_at.map_or(long, |claim| claim.max(long));
            return Ok(Some(TurnWait { until, then: AfterWait::SystemNegotiator }));
        }
        let offline = after(parked, self.runtime.config.park_timeout_offline);
        let mut until = long;
        if offline < long {
            // A park timer armed with the offline window is due then (rounded up to a second).
            let armed = parley_jobs::pending_timer_at(conn, TimerKind::Park, task.id).await.map_err(jobs)?;
            let offline_armed = armed.is_some_and(|at| at <= offline + chrono::Duration::seconds(1));
            let user = task.awaiting_user_id.as_deref().unwrap_or_default();
            if offline_armed && !self.runtime.any_live(conn, user).await? {
                until = offline;
            }
        }
        Ok(Some(TurnWait { until, then: AfterWait::SystemNegotiator }))
    }

    /// The park window of a turn of a mixed negotiation parked now for `user_id`:
    /// `PARLEY_PARK_TIMEOUT_OFFLINE` when no agent of that user is live (and it is the shorter),
    /// else `PARLEY_PARK_TIMEOUT`. Liveness is what `crate::runtime::liveness` records.
    pub(crate) async fn park_window(
        &self,
        conn: &mut PgConnection,
        user_id: &str,
    ) -> sqlx::Result<std::time::Duration> {
        let (long, offline) = (self.runtime.config.park_timeout, self.runtime.config.park_timeout_offline);
        if offline >= long || self.runtime.any_live(conn, user_id).await? {
            return Ok(long);
        }
        Ok(offline)
    }

    /// Whether a parked turn of this task falls back to the system negotiator (mixed only;
    /// personal vs personal has a deadline instead).
    pub(crate) fn falls_back(task: &Task) -> bool {
        task.source_kind != task.candidate_kind
    }

    /// Arms the park timer of a parked task: at `first_parked_at + PARK_TIMEOUT`, but never in
    /// the past. No-op for personal-vs-personal negotiations.
    pub(crate) async fn arm_park_timer(
        &self,
        conn: &mut PgConnection,
        task: &Task,
        turn_number: u32,
        generation: i64,
        first_parked_at: DateTime<Utc>,
    ) -> Result<(), DeliveryError> {
        if !Self::falls_back(task) {
            return Ok(());
        }
        let run_at = after(first_parked_at, self.runtime.config.park_timeout).max(Utc::now());
        parley_jobs::schedule_park_timeout(conn, &ParkTimeout { task_id: task.id, turn_number, generation }, run_at)
            .await
            .map_err(jobs)
    }

    /// (Re-)arms the claim timer; a pending park timer of the task becomes it (`parley_jobs`
    /// keeps one turn timer per task).
    pub(crate) async fn arm_claim_timer(
        &self,
        conn: &mut PgConnection,
        task_id: Uuid,
        generation: i64,
        expires_at: DateTime<Utc>,
    ) -> Result<(), DeliveryError> {
        parley_jobs::schedule_claim_timeout(conn, &ClaimTimeout { task_id, generation }, expires_at).await.map_err(jobs)
    }

    /// Cancels the claim timer of a task whose claim was given back.
    pub(crate) async fn disarm_claim_timer(&self, conn: &mut PgConnection, task_id: Uuid) -> Result<(), DeliveryError> {
        parley_jobs::cancel_timers_for_task(conn, task_id, &[TimerKind::Claim]).await.map_err(jobs)?;
        Ok(())
    }

    /// Cancels the turn timer of a task, whichever it is (a claim keeps a park timer that is due
    /// before its expiry): for a turn the system negotiator takes at once.
    pub(crate) async fn disarm_turn_timer(&self, conn: &mut PgConnection, task_id: Uuid) -> Result<(), DeliveryError> {
        parley_jobs::cancel_timers_for_task(conn, task_id, &[TimerKind::Claim, TimerKind::Park]).await.map_err(jobs)?;
        Ok(())
    }

    /// Makes sure the task's turn deadline, if it has one now, has a pending turn timer due at
    /// or before it: the claim's expiry when it is claimed, the long park window from the turn's
    /// first parking when it is parked in a mixed negotiation. Called by a turn timer that fired
    /// for a state that has moved on: pickup and respond keep a pending turn timer that is due
    /// by their new deadline instead of moving it (`parley_jobs::turn_timer_at`), so such a
    /// timer fires early, and this re-arms the turn timer for the real deadline. A parked turn
    /// whose timer was kept was parked by a respond, which always uses the long window; a turn
    /// parked with the offline window has its timer armed exactly, so this finds it pending
    /// and leaves it.
    pub(crate) async fn ensure_turn_timer(&self, conn: &mut PgConnection, task: &Task) -> Result<(), DeliveryError> {
        // The deadline, and when the turn was first parked if it is a park deadline.
        if task.state == TaskState::WaitingForPerson {
            return self.ensure_answer_timer(conn, task).await;
        }
        let (deadline, parked) = match (task.state, task.first_parked_at) {
            (TaskState::Claimed, _) => (task.claim_expires_at, None),
            (TaskState::WaitingForAgent, Some(parked)) if Self::falls_back(task) => {
                (Some(after(parked, self.runtime.config.park_timeout)), Some(parked))
            }
            _ => (None, None),
        };
        let Some(deadline) = deadline else { return Ok(()) };
        if parley_jobs::turn_timer_at(conn, task.id).await.map_err(jobs)?.is_some_and(|at| at <= deadline) {
            return Ok(());
        }
        match parked {
            Some(parked) => self.arm_park_timer(conn, task, task.turn_count, task.claim_generation, parked).await,
            None => self.arm_claim_timer(conn, task.id, task.claim_generation, deadline).await,
        }
    }

    /// The turn timer of a task waiting for its person: its question's answer window.
    async fn ensure_answer_timer(&self, conn: &mut PgConnection, task: &Task) -> Result<(), DeliveryError> {
        let Some(question) = person_questions::lock_pending(conn, task.id).await? else { return Ok(()) };
        if parley_jobs::turn_timer_at(conn, task.id).await.map_err(jobs)?.is_some_and(|at| at <= question.expires_at) {
            return Ok(());
        }
        let t = ParkTimeout { task_id: task.id, turn_number: task.turn_count, generation: question.claim_generation };
        parley_jobs::schedule_park_timeout(conn, &t, question.expires_at.max(Utc::now())).await.map_err(jobs)
    }

    /// Arms the personal-vs-personal deadline at start.
    pub(crate) async fn arm_deadline(
        &self,
        conn: &mut PgConnection,
        task_id: Uuid,
        started: DateTime<Utc>,
    ) -> Result<(), DeliveryError> {
        parley_jobs::schedule_deadline(
            conn,
            &NegotiationDeadline { task_id },
            after(started, self.runtime.config.pvp_timeout),
        )
        .await
        .map_err(jobs)
    }

    /// Timers of an ended negotiation: cancel the task's, and arm the pending expiry when the
    /// opportunity became `pending`.
    pub(crate) async fn on_finished(
        &self,
        conn: &mut PgConnection,
        task: &Task,
        opportunity_status: OpportunityStatus,
    ) -> Result<(), DeliveryError> {
        parley_jobs::cancel_timers_for_task(conn, task.id, &TimerKind::ALL).await.map_err(jobs)?;
        if opportunity_status == OpportunityStatus::Pending {
            let run_at = after(Utc::now(), self.runtime.config.pending_ttl);
            parley_jobs::schedule_pending_expiry(conn, &PendingExpiry { opportunity_id: task.opportunity_id }, run_at)
                .await
                .map_err(jobs)?;
        }
        Ok(())
    }

    /// Claim expiry: `claimed -> waiting_for_agent` when the claim of `generation` really lapsed;
    /// the park timer is re-armed at `max(now, first_parked_at + PARK_TIMEOUT)`.
    pub async fn expire_claim(&self, t: ClaimTimeout) -> Result<bool, DeliveryError> {
        let mut tx = self.runtime.pool.begin().await?;
        let Some(task) = tasks::lock(&mut tx, t.task_id).await? else { return Ok(false) };
        let lapsed = task.claim_expires_at.is_some_and(|e| e <= Utc::now());
        if task.state != TaskState::Claimed || task.claim_generation != t.generation || !lapsed {
            self.ensure_turn_timer(&mut tx, &task).await?;
            tx.commit().await?;
            return Ok(false);
        }
        let next = task.state.transition(TaskEvent::Unclaim)?;
        tasks::set_state(&mut tx, task.id, task.state, next, task.turn_count).await?;
        let user = task.awaiting_user_id.clone().unwrap_or_default();
        let first_parked_at = task.first_parked_at.unwrap_or_else(Utc::now);
        self.arm_park_timer(&mut tx, &task, task.turn_count, task.claim_generation, first_parked_at).await?;
        tx.commit().await?;
        crate::metrics::claim_expired();
        self.runtime.wakeups.announce(&user);
        tracing::info!(negotiation.id = %task.id, claim.generation = t.generation, "claim expired; turn parked again");
        Ok(true)
    }

    /// Park timeout: the system negotiator takes the parked turn for the waiting side, with that
    /// side's full context, and the negotiation goes on as usual.
    ///
    /// The timer was armed for the long window (`PARLEY_PARK_TIMEOUT`) or, when the user had no
    /// live agent at parking, the offline window (`PARLEY_PARK_TIMEOUT_OFFLINE`); either way it
    /// decides from the state now. Past the long window the system takes the turn. Past the
    /// offline window only, the system takes it unless an agent of that user is live by now; if
    /// one is, the timer is re-armed for the long window, measured from the turn's first
    /// parking. A claim made meanwhile has already replaced this timer with its own (the task is
    /// `claimed`, its generation moved on), so such a delivery does nothing.
    pub async fn fall_back(&self, t: ParkTimeout) -> Result<bool, DeliveryError> {
        let mut tx = self.runtime.pool.begin().await?;
        let Some(mut task) = tasks::lock(&mut tx, t.task_id).await? else { return Ok(false) };
        // While the turn waits for the person, its timer is the answer window (`super::ask`).
        if task.state == TaskState::WaitingForPerson {
            return self.end_answer_window(tx, task, t).await;
        }
        let first_parked_at = match task.first_parked_at {
            Some(at)
                if task.state == TaskState::WaitingForAgent
                    && task.turn_count == t.turn_number
                    && task.claim_generation == t.generation
                    && Self::falls_back(&task) =>
            {
                at
            }
            _ => {
                self.ensure_turn_timer(&mut tx, &task).await?;
                tx.commit().await?;
                return Ok(false);
            }
        };
        let now = Utc::now();
        let window = if after(first_parked_at, self.runtime.config.park_timeout) <= now {
            FallbackReason::ParkTimeout
        } else if after(first_parked_at, self.runtime.config.park_timeout_offline) <= now {
            let user = task.awaiting_user_id.clone().unwrap_or_default();
            if self.runtime.any_live(&mut tx, &user).await? {
                self.arm_park_timer(&mut tx, &task, task.turn_count, task.claim_generation, first_parked_at).await?;
                tx.commit().await?;
                tracing::info!(negotiation.id = %task.id, turn.number = task.turn_count,
                    "an agent of the user is live again; the turn waits for the long park window");
                return Ok(false);
            }
            FallbackReason::Offline
        } else {
            self.ensure_turn_timer(&mut tx, &task).await?;
            tx.commit().await?;
            return Ok(false);
        };
        if self.model_decides() {
            // The model's job takes the turn if it is still parked when the model has answered.
            self.request_model_turn(&mut tx, &task, Some(window)).await?;
            tx.commit().await?;
            return Ok(true);
        }
        let (turn, concluded) = self.take_parked_turn(&mut tx, &mut task, window).await?;
        tx.commit().await?;
        self.after_takeover(&task, &turn, concluded, window).await?;
        Ok(true)
    }

    /// The system negotiator plays the parked turn of a locked `waiting_for_agent` task for the
    /// side it waits for, in the caller's transaction: `waiting_for_agent -> working`, the turn
    /// decided from that side's full context, stored and concluded. The park timeout comes here,
    /// and so does an agent that hands its turn back ([`Engine::hand_back`]). Call
    /// [`Engine::after_takeover`] once committed.
    pub(crate) async fn take_parked_turn(
        &self,
        conn: &mut PgConnection,
        task: &mut Task,
        reason: FallbackReason,
    ) -> Result<(Turn, Concluded), DeliveryError> {
        let working = task.state.transition(TaskEvent::FallBack)?;
        tasks::set_state(conn, task.id, task.state, working, task.turn_count).await?;
        task.state = working;
        let side = Side::for_turn(task.turn_count);
        let turns: Vec<Turn> = messages::turns(conn, task.id).await?.into_iter().map(|t| t.turn).collect();
        self.take_system_turn(conn, task, side, turns, Some(reason)).await
    }

    /// Once a [`Engine::take_parked_turn`] committed: counts the turn under `window` (why the
    /// system took it: `park_timeout`, `offline` or `hand_back`), logs it, and runs the
    /// negotiation on.
    pub(crate) async fn after_takeover(
        &self,
        task: &Task,
        turn: &Turn,
        concluded: Concluded,
        reason: FallbackReason,
    ) -> Result<(), DeliveryError> {
        let window = reason.as_str();
        crate::metrics::park_fallback(window);
        crate::metrics::turn("system_fallback", turn.action);
        tracing::info!(negotiation.id = %task.id, turn.number = turn.turn_number, turn.side = turn.side.as_str(),
            turn.played_by = "system_fallback", fallback.window = window, "{}", turn.action);
        if self.after_commit(task, concluded) == Concluded::Continues {
            self.advance(task.id).await?;
        }
        Ok(())
    }

    /// Personal-vs-personal deadline: an unfinished negotiation ends `stalled`/`timeout`.
    pub async fn deadline(&self, t: NegotiationDeadline) -> Result<bool, DeliveryError> {
        let mut tx = self.runtime.pool.begin().await?;
        let Some(task) = tasks::lock(&mut tx, t.task_id).await? else { return Ok(false) };
        if task.state.is_terminal() {
            return Ok(false);
        }
        let turns: Vec<Turn> = messages::turns(&mut tx, task.id).await?.into_iter().map(|t| t.turn).collect();
        let outcome = finalize(self, &mut tx, &task, &turns, Some(EndReason::Timeout)).await?;
        tx.commit().await?;
        crate::metrics::negotiation_ended(outcome.has_opportunity, outcome.reason);
        Ok(true)
    }

    /// Pending expiry: `pending -> expired` when nobody decided in time.
    pub async fn expire_pending(&self, t: PendingExpiry) -> Result<bool, DeliveryError> {
        let mut tx = self.runtime.pool.begin().await?;
        let Some(o) = opportunities::lock(&mut tx, t.opportunity_id).await? else { return Ok(false) };
        if o.status != OpportunityStatus::Pending {
            return Ok(false);
        }
        opportunities::apply(&mut tx, &o, OpportunityEvent::Expire).await??;
        tx.commit().await?;
        Ok(true)
    }
}
