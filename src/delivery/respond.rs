//! A personal agent's answer to the turn it holds (DESIGN.md §5 "Respond").
//!
//! One transaction checks the claim (holder, token, expiry), validates the action for this
//! turn, stores the turn, and either finalizes (accept, reject, cap) or moves the task back to
//! `working`; after the commit the engine's ordinary loop continues (system turns in process, or
//! the next personal turn parked). A retry with the same claim token and body gets the same
//! answer and changes nothing.

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{AgentIdentity, DeliveryError, Engine, claims::hash_secret, engine::Concluded};
use crate::{
    domain::{
        Action, Side, SideKind, SuggestedRoles, TaskEvent, TaskState, Turn, action_allowed,
    },
    store::{messages, opportunities, tasks},
};

/// What the agent answered.
#[derive(Debug, Clone, Serialize)]
pub struct TurnAnswer {
    /// The action.
    pub action: Action,
    /// Why (non-empty; validated at the edge).
    pub reasoning: String,
    /// Suggested roles from the agent's user's view.
    pub suggested_roles: SuggestedRoles,
    /// Free text.
    pub message: Option<String>,
    /// The claim token, when the client sends one.
    #[serde(skip)]
    pub claim_token: Option<String>,
}

/// The 200 body of a respond.
pub type Responded = Value;

impl TurnAnswer {
    fn request_hash(&self) -> Vec<u8> {
        let canonical = serde_json::to_vec(self).unwrap_or_default();
        Sha256::digest(&canonical).to_vec()
    }
}

impl Engine {
    /// Applies the holder's answer; see the module docs.
    #[tracing::instrument(name = "turn", skip_all, fields(negotiation.id = %task_id, agent.id = %agent.agent_id))]
    pub async fn respond(&self, agent: &AgentIdentity, task_id: Uuid, answer: &TurnAnswer) -> Result<Responded, DeliveryError> {
        let request_hash = answer.request_hash();
        let mut tx = self.pool.begin().await?;
        let mut task = self.lock_visible(&mut tx, agent, task_id).await?;

        if let Some(token) = answer.claim_token.as_deref()
            && let Some(previous) = messages::by_claim_token(&mut tx, task.id, &hash_secret(token)).await? {
                tx.commit().await?;
                if previous.request_hash.as_deref() != Some(request_hash.as_slice()) {
                    return Err(DeliveryError::ClaimStale);
                }
                return match previous.response {
                    Some(response) => Ok(response),
                    None => self.answer_for(task_id, u32::try_from(previous.turn_number).unwrap_or(0)).await,
                };
            }
        Self::check_holder(&task, agent, answer.claim_token.as_deref())?;

        let turn_number = task.turn_count;
        let side = Side::for_turn(turn_number);
        if task.side_of(&agent.owner_user_id) != Some(side) {
            return Err(DeliveryError::NotClaimed);
        }
        if !action_allowed(answer.action, turn_number, SideKind::Personal) {
            return Err(DeliveryError::ActionNotAllowed(if turn_number == 0 {
                "turn 0 must be a propose".to_owned()
            } else {
                format!("{} is not allowed at turn {turn_number}; propose is only for turn 0", answer.action)
            }));
        }
        let turn = Turn {
            turn_number,
            side,
            action: answer.action,
            reasoning: answer.reasoning.clone(),
            suggested_roles: answer.suggested_roles,
            message: answer.message.clone(),
        };
        let message_id = super::store_turn(
            &mut tx,
            &task,
            &messages::NewTurn {
                task_id: task.id,
                turn: &turn,
                user_id: &agent.owner_user_id,
                played_by: SideKind::Personal,
                agent_id: Some(agent.agent_id),
                claim_token_hash: task.claim_token_hash.as_deref(),
                request_hash: Some(&request_hash),
            },
        )
        .await?;
        self.disarm_turn_timers(&mut tx, task.id).await?;
        let working = task.state.transition(TaskEvent::Respond)?;
        let count = turn_number + 1;
        tasks::set_state(&mut tx, task.id, task.state, working, count).await?;
        task.state = working;
        task.turn_count = count;

        let turns: Vec<Turn> = messages::turns(&mut tx, task.id).await?.into_iter().map(|t| t.turn).collect();
        let concluded = self.conclude_turn(&mut tx, &task, &turns).await?;
        tx.commit().await?;
        tracing::info!(turn.number = turn_number, turn.side = side.as_str(), turn.played_by = "personal", "{}", turn.action);

        if self.after_commit(&task, concluded) == Concluded::Continues {
            self.advance(task.id).await?;
        }
        let response = self.answer_for(task.id, turn_number).await?;
        let mut conn = self.pool.acquire().await?;
        messages::set_response(&mut conn, message_id, &response).await?;
        Ok(response)
    }

    /// The respond body for turn `turn_number` of a task, from its current state.
    async fn answer_for(&self, task_id: Uuid, turn_number: u32) -> Result<Responded, DeliveryError> {
        let mut conn = self.pool.acquire().await?;
        let task = tasks::get(&mut conn, task_id).await?.ok_or(DeliveryError::NotFound)?;
        let opportunity = opportunities::get(&mut conn, task.opportunity_id).await?.ok_or(DeliveryError::NotFound)?;
        let outcome = if task.state == TaskState::Completed || task.state == TaskState::Canceled {
            messages::outcome(&mut conn, task.id).await?
        } else {
            None
        };
        let mut body = json!({
            "success": true,
            "negotiationId": task.id,
            "turnNumber": turn_number,
            "status": task.state,
            "opportunity": { "id": opportunity.id, "status": opportunity.status },
        });
        if let Some(outcome) = outcome {
            body["outcome"] = serde_json::to_value(outcome).map_err(anyhow::Error::from)?;
        }
        Ok(body)
    }
}
