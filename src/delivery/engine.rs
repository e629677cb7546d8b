//! The turn loop: one transaction per turn, until the negotiation ends or waits for an agent.

use std::sync::Arc;

use sqlx::PgPool;
use tracing::Instrument;
use uuid::Uuid;

use super::{DeliveryError, finalize, system_asks::Consult};
use crate::{
    config::Config,
    domain::{
        DecidedBy, EndReason, FallbackReason, Played, SeedAssessment, Side, SideKind, TaskEvent, TaskState, Turn,
        outcome::cap_reached,
    },
    negotiator::{self, NegotiatorConfig, Situation},
    runtime::{Runtime, Wakeups},
    store::{messages, tasks},
};

/// The negotiation engine: shared by the HTTP handlers, the timers and the recovery pass.
#[derive(Clone)]
pub struct Engine {
    /// The pool, the configuration, the wake-ups, the seen-throttle and the token key, shared
    /// with the delegations.
    pub(crate) runtime: Runtime,
    pub(crate) negotiator: Arc<NegotiatorConfig>,
    /// Claims handed out lately, for the responds that follow them.
    pub(crate) recent_claims: Arc<super::recent_claims::RecentClaims>,
    /// The model that decides system turns, when one is configured.
    pub(crate) model: Option<Arc<super::negotiator_model::ModelNegotiator>>,
}

/// How a turn was concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Concluded {
    /// The negotiation ended (accept, reject, cap): whether it made an opportunity, and why
    /// it ended without an accept or reject.
    Ended(bool, Option<EndReason>),
    /// The next turn, this number, was parked for a personal agent.
    Parked(u32),
    /// The next turn is the system negotiator's.
    Continues,
}

/// What comes after `turns` in a `working` task: the one rule every path follows (the turn
/// loop, respond's plan, the fallback).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// The negotiation ends: after an accept or a reject (`None`), or at the cap.
    Finish(Option<EndReason>),
    /// The side's personal agent speaks next: park the turn.
    Park(Side),
    /// The system negotiator speaks next for this side.
    System(Side),
}

/// The rule of [`Next`].
pub(crate) fn next_step(task: &tasks::Task, turns: &[Turn]) -> Next {
    let count = turns.len() as u32;
    if turns.last().is_some_and(|t| t.action.is_terminal()) {
        Next::Finish(None)
    } else if cap_reached(count, task.max_turns) {
        Next::Finish(Some(EndReason::TurnCap))
    } else {
        let side = Side::for_turn(count);
        match task.kind(side) {
            SideKind::Personal => Next::Park(side),
            SideKind::System => Next::System(side),
        }
    }
}

/// What one step of the loop did.
enum Step {
    /// A system turn was taken; take the next one.
    Continue,
    /// The task waits for a personal agent, or has ended.
    Stop,
}

impl Engine {
    /// An engine over `runtime`, deciding system turns with `negotiator` (and with `model`,
    /// when one is configured).
    pub fn new(
        runtime: Runtime,
        negotiator: NegotiatorConfig,
        model: Option<Arc<super::negotiator_model::ModelNegotiator>>,
    ) -> Engine {
        Engine { runtime, negotiator: Arc::new(negotiator), recent_claims: Arc::default(), model }
    }

    /// What the engine shares with the delegations.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The registry of waiting long-polls (its listener is started by the application).
    pub fn wakeups(&self) -> &Arc<Wakeups> {
        &self.runtime.wakeups
    }

    /// The pool the engine writes through.
    pub fn pool(&self) -> &PgPool {
        &self.runtime.pool
    }

    /// The configuration the engine runs with.
    pub fn config(&self) -> &Config {
        &self.runtime.config
    }

    /// Runs a negotiation forward: system turns are taken in process, one transaction each; a
    /// personal side's turn is parked; it stops when the task is terminal or waiting.
    pub async fn advance(&self, task_id: Uuid) -> Result<(), DeliveryError> {
        while let Step::Continue = self.step(task_id).await? {}
        Ok(())
    }

    async fn step(&self, task_id: Uuid) -> Result<Step, DeliveryError> {
        let mut tx = self.runtime.pool.begin().await?;
        let Some(mut task) = tasks::lock(&mut tx, task_id).await? else {
            return Err(DeliveryError::NotFound);
        };
        if task.state == TaskState::Submitted {
            let next = task.state.transition(TaskEvent::Start)?;
            tasks::set_state(&mut tx, task.id, task.state, next, task.turn_count).await?;
            task.state = next;
        }
        if task.state != TaskState::Working {
            tx.commit().await?;
            return Ok(Step::Stop);
        }
        let turns: Vec<Turn> = messages::turns(&mut tx, task.id).await?.into_iter().map(|t| t.turn).collect();
        let side = match next_step(&task, &turns) {
            // Turns stored but not yet concluded (a respond that ended the negotiation).
            Next::Finish(reason) => {
                let outcome = finalize(self, &mut tx, &task, &turns, reason).await?;
                tx.commit().await?;
                crate::metrics::negotiation_ended(outcome.has_opportunity, outcome.reason);
                return Ok(Step::Stop);
            }
            Next::Park(_) => {
                let turn_number = turns.len() as u32;
                self.park_in(&mut tx, &task, turn_number).await?;
                tx.commit().await?;
                self.parked(&task, turn_number);
                return Ok(Step::Stop);
            }
            // A model decides: its job takes the turn, off this call.
            Next::System(_) if self.model_decides() => {
                self.request_model_turn(&mut tx, &task, None).await?;
                tx.commit().await?;
                return Ok(Step::Stop);
            }
            Next::System(side) => side,
        };

        // Where its user opted in, the system negotiator may ask them first (`super::system_asks`).
        let answered = match self.consult_person(&mut tx, &task, side, &turns).await? {
            Consult::Asked => {
                tx.commit().await?;
                self.runtime.wakeups.events_written();
                crate::metrics::person_question("asked");
                return Ok(Step::Stop);
            }
            Consult::Decided(turn) => Some(*turn),
            Consult::Rules => None,
        };
        let turn_number = turns.len() as u32;
        let span = tracing::info_span!("turn", negotiation.id = %task.id, turn.number = turn_number,
            turn.side = side.as_str(), turn.played_by = "system");
        let concluded = async {
            let (turn, concluded) = match answered {
                Some(turn) => {
                    let concluded = self.store_system_turn(&mut tx, &task, turns, turn.clone()).await?;
                    (turn, concluded)
                }
                None => self.take_system_turn(&mut tx, &task, side, turns, None).await?,
            };
            tx.commit().await?;
            crate::metrics::turn_by(SideKind::System, turn.action);
            tracing::info!("{}", turn.action);
            Ok::<_, DeliveryError>(concluded)
        }
        .instrument(span)
        .await?;
        Ok(match self.after_commit(&task, concluded) {
            Concluded::Continues => Step::Continue,
            Concluded::Ended(..) | Concluded::Parked(_) => Step::Stop,
        })
    }

    /// The system negotiator takes `side`'s turn on a locked `working` task, in the caller's
    /// transaction: it decides from that side's full context, stores the turn and concludes it.
    /// `turns` are the turns taken so far; `fallback` says why it stands in for the side's
    /// personal agent, when it does.
    pub(crate) async fn take_system_turn(
        &self,
        conn: &mut sqlx::PgConnection,
        task: &tasks::Task,
        side: Side,
        turns: Vec<Turn>,
        fallback: Option<FallbackReason>,
    ) -> Result<(Turn, Concluded), DeliveryError> {
        let turn = self.system_turn(task, side, &turns, fallback)?;
        let concluded = self.store_system_turn(conn, task, turns, turn.clone()).await?;
        Ok((turn, concluded))
    }

    /// Stores a system turn (`turn`, the next after `turns`) on a locked `working` task and
    /// concludes it, in the caller's transaction.
    pub(crate) async fn store_system_turn(
        &self,
        conn: &mut sqlx::PgConnection,
        task: &tasks::Task,
        mut turns: Vec<Turn>,
        turn: Turn,
    ) -> Result<Concluded, DeliveryError> {
        messages::store_turns(conn, task, &[messages::TurnRow::new(&turn, task.user_id(turn.side))]).await?;
        turns.push(turn);
        self.conclude_turn(conn, task, &turns).await
    }

    /// After a turn was stored on a locked `working` task (`turns`: all of them, the new one
    /// last): ends the negotiation on accept or reject or when the cap is reached; when the
    /// next turn is a personal agent's, parks it in this same transaction (one commit per
    /// handed-over turn instead of two); otherwise records the new turn count. Every turn,
    /// whoever took it, is concluded here; call [`Engine::after_commit`] once committed.
    pub(crate) async fn conclude_turn(
        &self,
        conn: &mut sqlx::PgConnection,
        task: &tasks::Task,
        turns: &[Turn],
    ) -> Result<Concluded, DeliveryError> {
        let count = turns.len() as u32;
        match next_step(task, turns) {
            Next::Finish(reason) => {
                let outcome = finalize(self, conn, task, turns, reason).await?;
                Ok(Concluded::Ended(outcome.has_opportunity, outcome.reason))
            }
            Next::Park(_) => {
                self.park_in(conn, task, count).await?;
                Ok(Concluded::Parked(count))
            }
            Next::System(_) => {
                tasks::set_state(conn, task.id, TaskState::Working, TaskState::Working, count).await?;
                Ok(Concluded::Continues)
            }
        }
    }

    /// What to do once a concluded turn's transaction committed: wake the long-polls of a
    /// parked turn, count an ending. Returns `concluded` for the caller to decide whether to go on.
    pub(crate) fn after_commit(&self, task: &tasks::Task, concluded: Concluded) -> Concluded {
        match concluded {
            Concluded::Parked(turn_number) => self.parked(task, turn_number),
            Concluded::Ended(has_opportunity, reason) => {
                self.runtime.wakeups.events_written();
                crate::metrics::negotiation_ended(has_opportunity, reason);
            }
            Concluded::Continues => {}
        }
        concluded
    }

    /// Parks turn `turn_number` of a locked `working` task for the personal agent of the side
    /// whose turn it is, inside the caller's transaction: `waiting_for_agent` and the park timer.
    /// Call [`Engine::parked`] after the commit to wake the long-polls.
    ///
    /// In a mixed negotiation the park timer is armed for the park window of that user: the
    /// offline window when none of the user's agents is live, else `PARLEY_PARK_TIMEOUT`
    /// ([`Engine::park_window`]); when it fires, the handler decides again from the state then.
    async fn park_in(
        &self,
        tx: &mut sqlx::PgConnection,
        task: &tasks::Task,
        turn_number: u32,
    ) -> Result<(), DeliveryError> {
        let side = Side::for_turn(turn_number);
        let user = task.user_id(side);
        let park_timeout = if Self::falls_back(task) { Some(self.park_window(tx, user).await?) } else { None };
        tasks::park(tx, task.id, user, turn_number, park_timeout).await?;
        Ok(())
    }

    /// After a park committed: wakes the long-polls of that user (this process's at once, the
    /// others' through the wake-up sender) and pokes the event log's reader for the turn events.
    pub(crate) fn parked(&self, task: &tasks::Task, turn_number: u32) {
        let side = Side::for_turn(turn_number);
        self.runtime.wakeups.announce(task.user_id(side));
        self.runtime.wakeups.events_written();
        tracing::info!(negotiation.id = %task.id, turn.number = turn_number, turn.side = side.as_str(), "parked");
    }

    /// The system negotiator's turn for `side`, from that side's full context; `fallback` says
    /// why it stands in for the side's personal agent, when it does.
    pub(crate) fn system_turn(
        &self,
        task: &tasks::Task,
        side: Side,
        history: &[Turn],
        fallback: Option<FallbackReason>,
    ) -> Result<Turn, DeliveryError> {
        let own = task.context(side)?;
        // The other user as this side may see them: shared intents, no deal-breakers.
        let other = task.context(side.other())?.as_seen_by_other_side();
        let seed: SeedAssessment = serde_json::from_value(task.seed_assessment.clone()).map_err(anyhow::Error::from)?;
        let deciding = std::time::Instant::now();
        let decision = negotiator::decide(
            &self.negotiator,
            &Situation {
                own: &own,
                other: &other,
                own_side: side,
                seed: &seed,
                discovery_query: task.discovery_query.as_deref(),
                history,
                max_turns: task.max_turns,
            },
        );
        crate::metrics::negotiator_decision(deciding.elapsed());
        Ok(Turn {
            turn_number: history.len() as u32,
            side,
            action: decision.action,
            reasoning: decision.reasoning,
            suggested_roles: decision.suggested_roles,
            message: decision.message,
            played: Some(Played::system(fallback, DecidedBy::Rules)),
        })
    }

    /// Cancels a negotiation (platform request): the task ends `canceled`, the outcome says why.
    ///
    /// A negotiation whose stored turns already decide its end (a respond's `accept` or
    /// `reject`, or the last turn the cap allows, stored and acknowledged but not yet
    /// concluded) is not canceled: that end is concluded here, through the same finalize, and
    /// the cancel answers `AlreadyCompleted`. So an acknowledged accept is never overturned: of
    /// an accept and a cancel racing, whichever takes the task's lock first wins, and the other
    /// is refused.
    pub async fn cancel(&self, task_id: Uuid) -> Result<(), DeliveryError> {
        let mut tx = self.runtime.pool.begin().await?;
        let task = tasks::lock(&mut tx, task_id).await?.ok_or(DeliveryError::NotFound)?;
        if task.state.is_terminal() {
            return Err(DeliveryError::AlreadyCompleted);
        }
        let turns: Vec<Turn> = messages::turns(&mut tx, task.id).await?.into_iter().map(|t| t.turn).collect();
        if task.state == TaskState::Working
            && let Next::Finish(reason) = next_step(&task, &turns)
        {
            let outcome = finalize(self, &mut tx, &task, &turns, reason).await?;
            tx.commit().await?;
            self.runtime.wakeups.events_written();
            crate::metrics::negotiation_ended(outcome.has_opportunity, outcome.reason);
            return Err(DeliveryError::AlreadyCompleted);
        }
        let outcome = finalize(self, &mut tx, &task, &turns, Some(EndReason::Canceled)).await?;
        tx.commit().await?;
        crate::metrics::negotiation_ended(outcome.has_opportunity, outcome.reason);
        Ok(())
    }

    /// Resumes every task left `submitted`/`working` for longer than `grace` (a crash between
    /// turns). Returns how many were resumed. Safe to run concurrently with live traffic: each
    /// step re-reads the task under its lock.
    pub async fn recover(&self, grace: std::time::Duration) -> Result<usize, DeliveryError> {
        let cutoff = chrono::Utc::now() - chrono::Duration::from_std(grace).map_err(anyhow::Error::from)?;
        let ids = {
            let mut conn = self.runtime.pool.acquire().await?;
            tasks::list_runnable(&mut conn, cutoff).await?
        };
        for id in &ids {
            if let Err(e) = self.advance(*id).await {
                tracing::error!(negotiation.id = %id, error = %e, "resuming a negotiation failed");
            }
        }
        if !ids.is_empty() {
            tracing::info!(count = ids.len(), "resumed negotiations left working");
        }
        Ok(ids.len())
    }
}
