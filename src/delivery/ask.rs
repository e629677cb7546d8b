//! Asking the person: a personal agent that cannot decide without its person asks it
//! (`ask_person`, a respond action) instead of guessing.
//!
//! The ask is one transaction on the locked task: the claim is released
//! (`claimed -> waiting_for_person`), the question stored, the turn timer replaced by the answer
//! window (`PARLEY_ASK_TIMEOUT`), and the event `negotiation.question` written to the asking
//! person only. The turn does not advance. While the turn waits for the person its own deadline
//! is suspended: the turn's timer is the answer window, kept under the task's park timer key
//! (one turn timer per task, whatever it waits for), so it survives restarts like every timer.
//!
//! The answer (the person, through `POST /api/negotiations/{id}/questions/{questionId}/answer`)
//! and the end of the window ([`Engine::fall_back`] finds the task waiting for its person) close
//! the question in one transaction each, and park the turn for the agent again
//! (`waiting_for_person -> waiting_for_agent`) with its park window moved on by the time it
//! waited for the person. The agent's next pickup of that turn carries the answers
//! (`context.personAnswers`; `null` for one that ran out).
//!
//! Each side may ask at most [`MAX_QUESTIONS`] questions per negotiation. Nothing of a question
//! reaches the other side: it reads only that the negotiation waits (`waiting_for_person`).

use chrono::{DateTime, SubsecRound, Utc};
use parley_jobs::ParkTimeout;
use serde_json::json;
use uuid::Uuid;

use super::{
    DeliveryError, Engine,
    commands::{AskPerson, Checked, check_answer},
    respond::{OpportunityRef, Responded},
};
use crate::{
    domain::{Side, TaskEvent, TaskState},
    runtime::{AgentIdentity, AgentKey},
    store::{
        agents, events, insights, opportunities,
        person_questions::{self, NewQuestion, Question},
        tasks::{self, Task},
    },
};

/// Most questions one side may ask its person in one negotiation.
pub const MAX_QUESTIONS: i64 = 3;

/// The event a question is told by.
const QUESTION_EVENT: &str = "negotiation.question";

impl Engine {
    /// A checked respond: the turn, or a question to the agent's person.
    pub async fn respond_checked(
        &self,
        key: &AgentKey,
        task_id: Uuid,
        checked: &Checked,
    ) -> Result<Responded, DeliveryError> {
        match checked {
            Checked::Turn(answer) => self.respond(key, task_id, answer).await,
            Checked::Ask(ask) => self.ask_person(key, task_id, ask).await,
        }
    }

    /// The key's agent, judged as respond's own statement judges it (`parley_agent_of_key`).
    async fn agent_of_key(&self, key: &AgentKey) -> Result<AgentIdentity, DeliveryError> {
        let mut conn = self.runtime.pool.acquire().await?;
        Ok(agents::key_verdict(&mut conn, &key.key_hash, key.agent_id).await?.identity()?)
    }

    /// `ask_person`: see the module docs. A repeat with the same claim token and body gets the
    /// same answer; another body under that token is `turn_already_answered`.
    #[tracing::instrument(name = "ask_person", skip_all, fields(negotiation.id = %task_id))]
    pub async fn ask_person(&self, key: &AgentKey, task_id: Uuid, ask: &AskPerson) -> Result<Responded, DeliveryError> {
        let agent = self.agent_of_key(key).await?;
        self.runtime.seen(agent.agent_id).await;
        let proof = self.claim_proof(task_id, ask.claim_token.as_deref());
        let request_hash = ask.request_hash();
        let mut tx = self.runtime.pool.begin().await?;
        let mut task = self.lock_visible(&mut tx, &agent, task_id).await?;
        if let Some(generation) = proof.generation()
            && let Some(asked) = person_questions::by_claim(&mut tx, task.id, generation).await?
        {
            if asked.request_hash != request_hash {
                return Err(DeliveryError::TurnAlreadyAnswered);
            }
            let stored = asked.response.ok_or_else(|| anyhow::anyhow!("question {} has no answer stored", asked.id))?;
            return Ok(serde_json::from_value(stored).map_err(anyhow::Error::from)?);
        }
        Self::check_holder(&task, &agent, proof)?;
        let side = Side::for_turn(task.turn_count);
        if task.side_of(&agent.owner_user_id) != Some(side) {
            return Err(DeliveryError::NotClaimed);
        }
        if person_questions::count_for_side(&mut tx, task.id, side).await? >= MAX_QUESTIONS {
            return Err(DeliveryError::QuestionLimit);
        }
        let next = task.state.transition(TaskEvent::AskPerson)?;
        tasks::set_state(&mut tx, task.id, task.state, next, task.turn_count).await?;
        let opportunity =
            opportunities::get(&mut tx, task.opportunity_id).await?.ok_or(DeliveryError::OpportunityNotFound)?;
        let question_id = Uuid::now_v7();
        let expires_at = self.answer_deadline()?;
        let response = Responded {
            success: true,
            negotiation_id: task.id,
            turn_number: task.turn_count,
            status: TaskState::WaitingForPerson,
            opportunity: OpportunityRef { id: opportunity.id, status: opportunity.status },
            outcome: None,
            question_id: Some(question_id),
        };
        let stored = serde_json::to_value(&response).map_err(anyhow::Error::from)?;
        let user_id = task.user_id(side).to_owned();
        person_questions::insert(
            &mut tx,
            &NewQuestion {
                id: question_id,
                task_id: task.id,
                side,
                user_id: &user_id,
                agent_id: Some(agent.agent_id),
                turn_number: task.turn_count,
                claim_generation: task.claim_generation,
                request_hash: &request_hash,
                response: Some(&stored),
                question: &ask.question,
                options: &ask.options,
                expires_at,
            },
        )
        .await?;
        // The turn's timer is now the answer window (it replaces the claim or park timer).
        self.disarm_turn_timer(&mut tx, task.id).await?;
        parley_jobs::schedule_park_timeout(
            &mut tx,
            &ParkTimeout { task_id: task.id, turn_number: task.turn_count, generation: task.claim_generation },
            expires_at,
        )
        .await
        .map_err(|e| DeliveryError::Unexpected(e.into()))?;
        let data = json!({
            "negotiationId": task.id, "opportunityId": task.opportunity_id, "questionId": question_id,
            "state": "asked", "question": ask.question, "options": ask.options,
            "askedAt": Utc::now(), "expiresAt": expires_at,
        });
        self.record_question_event(&mut tx, &task, &user_id, data).await?;
        insights::count_question(&mut tx, task.id, &user_id, "asked").await?;
        tx.commit().await?;
        // The claim this process handed out is gone: a later respond under it reads afresh.
        let _ = self.recent_claims.take(task.id, task.claim_generation, Some(agent.agent_id));
        self.runtime.wakeups.events_written();
        crate::metrics::person_question("asked");
        task.state = next;
        tracing::info!(agent.id = %agent.agent_id, turn.number = task.turn_count, question.id = %question_id,
            "asked its person");
        Ok(response)
    }

    /// When an answer window opened now ends (microseconds, as stored).
    pub(super) fn answer_deadline(&self) -> Result<DateTime<Utc>, DeliveryError> {
        let window = chrono::Duration::from_std(self.runtime.config.ask_timeout).map_err(anyhow::Error::from)?;
        Ok((Utc::now() + window).trunc_subsecs(6))
    }

    /// Writes a `negotiation.question` event that only `user_id` (the asking person) and the
    /// service see.
    pub(super) async fn record_question_event(
        &self,
        conn: &mut sqlx::PgConnection,
        task: &Task,
        user_id: &str,
        data: serde_json::Value,
    ) -> Result<(), DeliveryError> {
        let to = events::Audience {
            opportunity_id: task.opportunity_id,
            source_user_id: user_id,
            candidate_user_id: user_id,
        };
        events::record(conn, QUESTION_EVENT, &to, data).await?;
        Ok(())
    }

    /// The person `user_id` answers their agent's question `question_id` in negotiation
    /// `task_id`. Only the asking person may (anyone else: not found). A question answered
    /// already, or whose window ran out, is `question_closed` (the same answer again is
    /// accepted, and changes nothing). Returns the question as it stands.
    pub async fn answer_question(
        &self,
        user_id: &str,
        task_id: Uuid,
        question_id: Uuid,
        answer: &str,
    ) -> Result<Question, DeliveryError> {
        let answer = check_answer(answer)?;
        let mut tx = self.runtime.pool.begin().await?;
        let mut task = tasks::lock(&mut tx, task_id).await?.ok_or(DeliveryError::NotFound)?;
        let question = person_questions::lock(&mut tx, task.id, question_id)
            .await?
            .filter(|q| q.user_id == user_id)
            .ok_or(DeliveryError::NotFound)?;
        match question.status {
            person_questions::QuestionStatus::Pending => {}
            person_questions::QuestionStatus::Answered if question.answer.as_deref() == Some(answer.as_str()) => {
                return Ok(question);
            }
            // The negotiation ended before the person answered (`super::finalize`).
            person_questions::QuestionStatus::Withdrawn => return Err(DeliveryError::AlreadyCompleted),
            status => return Err(DeliveryError::QuestionClosed(status)),
        }
        if task.state != TaskState::WaitingForPerson {
            // Only a negotiation that ended before its questions were withdrawn with it (an
            // ending older than that rule) leaves a question pending.
            return Err(DeliveryError::AlreadyCompleted);
        }
        person_questions::close(&mut tx, question.id, Some(&answer)).await?;
        let system = Self::system_is_asking(&task);
        self.back_from_person(&mut tx, &mut task, &question).await?;
        let data = json!({
            "negotiationId": task.id, "opportunityId": task.opportunity_id, "questionId": question.id,
            "state": "answered", "answer": answer,
        });
        self.record_question_event(&mut tx, &task, user_id, data).await?;
        insights::count_question(&mut tx, task.id, user_id, "answered").await?;
        tx.commit().await?;
        self.after_person(&task, "answered");
        if system {
            // The system negotiator takes its turn now, by the answer.
            self.advance(task.id).await?;
        }
        let mut conn = self.runtime.pool.acquire().await?;
        person_questions::lock(&mut conn, task.id, question.id).await?.ok_or(DeliveryError::NotFound)
    }

    /// The answer window of the question pending on a locked task waiting for its person ran
    /// out (the task's park timer fired, for `t`'s claim generation): the question closes
    /// unanswered and the turn goes back to the agent. `false` when there was nothing to do
    /// (answered meanwhile, or a stale timer): then the task's turn timer is made sure of.
    pub(crate) async fn end_answer_window(
        &self,
        mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
        mut task: Task,
        t: ParkTimeout,
    ) -> Result<bool, DeliveryError> {
        let pending = person_questions::lock_pending(&mut tx, task.id).await?;
        let Some(question) = pending.filter(|q| q.claim_generation == t.generation && q.expires_at <= Utc::now())
        else {
            self.ensure_turn_timer(&mut tx, &task).await?;
            tx.commit().await?;
            return Ok(false);
        };
        person_questions::close(&mut tx, question.id, None).await?;
        let system = Self::system_is_asking(&task);
        self.back_from_person(&mut tx, &mut task, &question).await?;
        let data = json!({
            "negotiationId": task.id, "opportunityId": task.opportunity_id, "questionId": question.id,
            "state": "unanswered",
        });
        self.record_question_event(&mut tx, &task, &question.user_id, data).await?;
        insights::count_question(&mut tx, task.id, &question.user_id, "unanswered").await?;
        tx.commit().await?;
        self.after_person(&task, "unanswered");
        if system {
            // The system negotiator takes its turn now, as it would have without asking.
            self.advance(task.id).await?;
        }
        Ok(true)
    }

    /// The turn goes back to whoever asked: the system negotiator ([`Engine::back_to_system`]),
    /// or the agent.
    async fn back_from_person(
        &self,
        conn: &mut sqlx::PgConnection,
        task: &mut Task,
        question: &Question,
    ) -> Result<(), DeliveryError> {
        if Self::system_is_asking(task) {
            return self.back_to_system(conn, task).await;
        }
        self.back_to_agent(conn, task, question).await
    }

    /// `waiting_for_person -> waiting_for_agent` for the same turn, its park window moved on by
    /// the time the person had the question, and its park timer armed again (mixed
    /// negotiations; personal vs personal has its overall deadline instead).
    async fn back_to_agent(
        &self,
        conn: &mut sqlx::PgConnection,
        task: &mut Task,
        question: &Question,
    ) -> Result<(), DeliveryError> {
        let next = task.state.transition(TaskEvent::PersonReplied)?;
        let first_parked_at = tasks::back_from_person(conn, task.id, question.asked_at).await?;
        task.state = next;
        task.first_parked_at = Some(first_parked_at);
        self.disarm_turn_timer(conn, task.id).await?;
        self.arm_park_timer(conn, task, task.turn_count, task.claim_generation, first_parked_at).await?;
        // An agent Parley calls over A2A (it never polls) is sent the turn again.
        let user = task.awaiting_user_id.clone().unwrap_or_default();
        tasks::a2a_turn_parked(conn, task.id, &user, task.turn_count).await?;
        Ok(())
    }

    /// Once a question closed: wakes the agent's long-polls (when an agent asked) and the event
    /// readers.
    fn after_person(&self, task: &Task, how: &'static str) {
        if let Some(user) = task.awaiting_user_id.as_deref() {
            self.runtime.wakeups.announce(user);
        }
        self.runtime.wakeups.events_written();
        crate::metrics::person_question(how);
        tracing::info!(negotiation.id = %task.id, turn.number = task.turn_count, question.state = how,
            "the person's question closed; the turn goes back to whoever asked");
    }
}
