//! A personal agent's answer to the turn it holds (DESIGN.md §5 "Respond").
//!
//! Two statements. The first reads a snapshot: the key's agent, the task, its turns, and any
//! turn already stored under the presented claim (a retry gets the answer it got before). From
//! it the engine plans the whole call in memory: the agent's turn, the system negotiator's reply
//! when that side is the system's, and what follows by the one rule of [`next_step`]: park the
//! next personal turn, or end. The second statement (`parley_respond`) applies the plan in one
//! transaction, but only if the claim is still the one the snapshot saw (same holder,
//! generation and turn count, unexpired); otherwise nothing changes and the call reads again,
//! which then tells why it may not go on. The plan is sound because everything it reads is
//! fixed for a given claim: contexts never change and turns are only appended.
//!
//! A plan that ends the negotiation stores its turns and leaves the task `working`; the engine's
//! loop then concludes it through the one [`finalize`](super::finalize).

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{
    AgentKey, DeliveryError, Engine,
    engine::{Next, next_step},
};
use crate::{
    domain::{Action, Side, SideKind, SuggestedRoles, TaskEvent, TaskState, Turn, action_allowed},
    store::{
        messages, opportunities,
        tasks::{self, Task},
        turn_delivery::{self, ApplyRespond, TurnRow},
    },
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

/// The agent's turn and what follows it, worked out from a snapshot.
struct Plan {
    /// The new turns: the agent's first, then the system's replies.
    turns: Vec<(Turn, SideKind)>,
    /// The side whose personal agent speaks next (parked by the same statement); `None` when the
    /// negotiation ends.
    park: Option<Side>,
}

/// How often a respond that lost a race re-reads before giving up (each loss means the claim
/// changed, so the next read almost always says why the call may not go on).
const ATTEMPTS: usize = 3;

impl Engine {
    /// Applies the holder's answer; see the module docs.
    #[tracing::instrument(name = "turn", skip_all, fields(negotiation.id = %task_id))]
    pub async fn respond(&self, key: &AgentKey, task_id: Uuid, answer: &TurnAnswer) -> Result<Responded, DeliveryError> {
        let request_hash = answer.request_hash();
        let proof = self.claim_proof(task_id, answer.claim_token.as_deref());
        for _ in 0..ATTEMPTS {
            let mut conn = self.pool.acquire().await?;
            let snapshot =
                turn_delivery::respond_snapshot(&mut conn, &key.key_hash, key.agent_id, task_id, proof.generation()).await?;
            let agent = snapshot.key.identity()?;
            let task = snapshot.task.ok_or(DeliveryError::NotFound)?;
            if let Some(previous) = snapshot.replay {
                drop(conn);
                if previous.request_hash.as_deref() != Some(request_hash.as_slice()) {
                    return Err(DeliveryError::ClaimStale);
                }
                return match previous.response {
                    Some(response) => Ok(response),
                    None => self.answer_for(task_id, previous.turn_number).await,
                };
            }
            Self::check_holder(&task, &agent, proof)?;
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
            let plan = self.plan(&task, snapshot.history, turn)?;
            let rows: Vec<TurnRow<'_>> = plan
                .turns
                .iter()
                .map(|(t, played_by)| TurnRow {
                    message_id: Uuid::now_v7(),
                    turn_number: t.turn_number,
                    side: t.side.as_str(),
                    user_id: task.user_id(t.side),
                    action: t.action.as_str(),
                    parts: messages::turn_parts(t),
                    played_by: played_by.as_str(),
                })
                .collect();
            let agent_message = rows[0].message_id;
            // A parked next turn is known now, so its answer is stored with the turn.
            let response = plan.park.map(|_| {
                json!({
                    "success": true,
                    "negotiationId": task.id,
                    "turnNumber": turn_number,
                    "status": TaskState::WaitingForAgent,
                    "opportunity": { "id": task.opportunity_id, "status": snapshot.opportunity_status },
                })
            });
            let applied = turn_delivery::apply_respond(
                &mut conn,
                &ApplyRespond {
                    task_id: task.id,
                    agent_id: agent.agent_id,
                    generation: task.claim_generation,
                    turn_count: turn_number,
                    transition: (TaskState::Claimed, TaskState::Claimed.transition(TaskEvent::Respond)?),
                    turns: rows,
                    request_hash: &request_hash,
                    response: response.as_ref(),
                    park: match plan.park {
                        Some(next) => Some((
                            task.user_id(next),
                            (TaskState::Working, TaskState::Working.transition(TaskEvent::Park)?),
                            Self::falls_back(&task).then_some(self.config.park_timeout),
                        )),
                        None => None,
                    },
                },
            )
            .await?;
            drop(conn);
            if !applied {
                continue;
            }
            for (t, played_by) in &plan.turns {
                tracing::info!(agent.id = %agent.agent_id, turn.number = t.turn_number, turn.side = t.side.as_str(),
                    turn.played_by = played_by.as_str(), "{}", t.action);
            }
            if plan.park.is_some() {
                self.parked(&task, turn_number + plan.turns.len() as u32);
                return Ok(response.unwrap_or_default());
            }
            // The plan ends the negotiation: the loop concludes it through `finalize`.
            self.advance(task.id).await?;
            let response = self.answer_for(task.id, turn_number).await?;
            let mut conn = self.pool.acquire().await?;
            messages::set_response(&mut conn, agent_message, &response).await?;
            return Ok(response);
        }
        Err(DeliveryError::ClaimStale)
    }

    /// The agent's `turn` and what follows it by [`next_step`]: system replies in process until a
    /// personal side speaks next (park) or the negotiation ends.
    fn plan(&self, task: &Task, mut history: Vec<Turn>, turn: Turn) -> Result<Plan, DeliveryError> {
        history.push(turn.clone());
        let mut turns = vec![(turn, SideKind::Personal)];
        loop {
            match next_step(task, &history) {
                Next::Finish(_) => return Ok(Plan { turns, park: None }),
                Next::Park(side) => return Ok(Plan { turns, park: Some(side) }),
                Next::System(side) => {
                    let reply = self.system_turn(task, side, &history)?;
                    history.push(reply.clone());
                    turns.push((reply, SideKind::System));
                }
            }
        }
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
