//! A personal agent's answer to the turn it holds.
//!
//! At most two statements. The first reads a snapshot: the key's agent, the task, its turns, and any
//! turn already stored under the presented claim (a retry gets the answer it got before). From
//! it the engine plans the whole call in memory: the agent's turn, the system negotiator's reply
//! when that side is the system's, and what follows by the one rule of [`next_step`]: park the
//! next personal turn, or end. The second statement (`parley_respond`) applies the plan in one
//! transaction, but only if the claim is still the one the snapshot saw (same holder,
//! generation and turn count, unexpired); otherwise nothing changes and the call reads again,
//! which then tells why it may not go on. The plan is sound because everything it reads is
//! fixed for a given claim: contexts never change and turns are only appended.
//!
//! When this process handed out the claim, the snapshot is the one its pickup read
//! ([`RecentClaims`](super::recent_claims)) and the call is the second statement alone; any
//! refusal or lost race on that path is decided again from a fresh read.
//!
//! A plan that ends the negotiation stores its turns and leaves the task `working`; the engine's
//! loop then concludes it through the one [`finalize`](super::finalize()).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{
    DeliveryError, Engine,
    engine::{Next, next_step},
};
use crate::{
    domain::{
        Action, OpportunityStatus, Outcome, Played, Side, SideKind, SuggestedRoles, TaskState, Turn, Viewer,
        action_allowed,
    },
    runtime::{AgentKey, ClaimProof},
    store::{
        messages,
        messages::TurnRow,
        opportunities,
        tasks::{self, Task},
        turn_delivery::{self, ApplyRespond, RespondSnapshot},
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

// What a respond did. Every adapter renders it as it is; it is stored with the agent's turn, so
// that a repeated respond gets the same answer back.
/// The respond answer: the turn's number and where the negotiation and its opportunity stand now
/// (with the outcome once it has ended).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "success": true,
    "negotiationId": "0193b0a4-7000-7000-8000-000000000001",
    "turnNumber": 1,
    "status": "completed",
    "opportunity": {"id": "0193b0a4-7000-7000-8000-000000000002", "status": "pending"},
    "outcome": {"hasOpportunity": true,
        "agreedRoles": [{"userId": "user-tomas", "role": "agent"}, {"userId": "user-maya", "role": "patient"}],
        "reasoning": "Strong skills and intent fit", "turnCount": 2,
        "summary": "Tomas Novak's agent accepted Maya Chen's proposal at turn 1."}
}))]
pub struct Responded {
    /// Always true.
    pub success: bool,
    /// The negotiation.
    pub negotiation_id: Uuid,
    /// The turn just stored (0-based).
    pub turn_number: u32,
    /// The task's state once the call is done: `waiting_for_agent` when a personal turn was
    /// parked next, `completed` when it ended.
    pub status: TaskState,
    /// The opportunity's id and status.
    pub opportunity: OpportunityRef,
    /// Set once the negotiation ended; its `reasoning` is the final turn's only when that turn
    /// was the agent's own side's (a system reply may have ended it), else the service's
    /// sentence (`summary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// `ask_person` only: the question asked (the turn waits for the person: `status` is
    /// `waiting_for_person`, and `turnNumber` the turn still to take).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question_id: Option<Uuid>,
}

/// An opportunity's id and status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OpportunityRef {
    // (Undocumented fields, as the OpenAPI document has them.)
    pub id: Uuid,
    pub status: OpportunityStatus,
}

impl Responded {
    /// The answer as it is stored with the turn.
    fn stored(&self) -> Result<serde_json::Value, DeliveryError> {
        Ok(serde_json::to_value(self).map_err(anyhow::Error::from)?)
    }

    /// A stored answer, read back for a repeated respond; one that does not decode is an
    /// error, never a different answer.
    fn from_stored(stored: &serde_json::Value) -> Result<Responded, DeliveryError> {
        Ok(Responded::deserialize(stored).map_err(anyhow::Error::from)?)
    }
}

impl TurnAnswer {
    fn request_hash(&self) -> Vec<u8> {
        let canonical = serde_json::to_vec(self).unwrap_or_default();
        Sha256::digest(&canonical).to_vec()
    }
}

/// A respond call, as presented.
struct Request<'a> {
    key: &'a AgentKey,
    answer: &'a TurnAnswer,
    request_hash: Vec<u8>,
    proof: ClaimProof,
}

/// The agent's turn and what follows it, worked out from a snapshot.
struct Plan {
    /// The new turns: the agent's first, then the system's replies.
    turns: Vec<(Turn, SideKind)>,
    /// The side whose personal agent speaks next (parked by the same statement); `None` when the
    /// negotiation ends.
    park: Option<Side>,
}

/// Lower-case hex, as `parley_store_turns` decodes it.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// How often a respond that lost a race re-reads before giving up (each loss means the claim
/// changed, so the next read almost always says why the call may not go on).
const ATTEMPTS: usize = 3;

impl Engine {
    /// Applies the holder's answer; see the module docs.
    #[tracing::instrument(name = "turn", skip_all, fields(negotiation.id = %task_id))]
    pub async fn respond(
        &self,
        key: &AgentKey,
        task_id: Uuid,
        answer: &TurnAnswer,
    ) -> Result<Responded, DeliveryError> {
        let result = self.respond_once(key, task_id, answer).await;
        // Any answer past the key check means the key is this agent's: it was seen.
        if let Some(agent) = key.agent_id
            && !matches!(
                result,
                Err(DeliveryError::Unauthorized | DeliveryError::Forbidden(_) | DeliveryError::Unexpected(_))
            )
        {
            self.runtime.seen(agent).await;
        }
        result
    }

    async fn respond_once(
        &self,
        key: &AgentKey,
        task_id: Uuid,
        answer: &TurnAnswer,
    ) -> Result<Responded, DeliveryError> {
        let request = Request {
            key,
            answer,
            request_hash: answer.request_hash(),
            proof: self.claim_proof(task_id, answer.claim_token.as_deref()),
        };
        // The claim as this process's pickup saw it: only ever a shortcut to success. Any
        // refusal or lost race is decided again from a fresh read.
        if let Some(generation) = request.proof.generation()
            && let Some(snapshot) = self.recent_claims.take(task_id, generation, key.agent_id)
            && let Ok(Some(response)) = self.attempt(&request, snapshot).await
        {
            return Ok(response);
        }
        for _ in 0..ATTEMPTS {
            let snapshot = {
                let mut conn = self.runtime.pool.acquire().await?;
                turn_delivery::respond_snapshot(
                    &mut conn,
                    &key.key_hash,
                    key.agent_id,
                    task_id,
                    request.proof.generation(),
                )
                .await?
            };
            if let Some(previous) = &snapshot.replay {
                snapshot.key.clone().identity()?;
                if snapshot.task.is_none() {
                    return Err(DeliveryError::NotFound);
                }
                if previous.request_hash.as_deref() != Some(request.request_hash.as_slice()) {
                    return Err(DeliveryError::TurnAlreadyAnswered);
                }
                return match &previous.response {
                    Some(response) => Responded::from_stored(response),
                    None => self.answer_for(task_id, previous.turn_number).await,
                };
            }
            if let Some(response) = self.attempt(&request, snapshot).await? {
                return Ok(response);
            }
        }
        Err(DeliveryError::ClaimStale)
    }

    /// One try at applying `request` on `snapshot`: the answer, or `None` when the claim
    /// changed after the snapshot was taken (nothing was written).
    async fn attempt(
        &self,
        request: &Request<'_>,
        snapshot: RespondSnapshot,
    ) -> Result<Option<Responded>, DeliveryError> {
        let agent = snapshot.key.identity()?;
        let task = snapshot.task.ok_or(DeliveryError::NotFound)?;
        let answer = request.answer;
        Self::check_holder(&task, &agent, request.proof)?;
        let turn_number = task.turn_count;
        let side = Side::for_turn(turn_number);
        if task.side_of(&agent.owner_user_id) != Some(side) {
            return Err(DeliveryError::NotClaimed);
        }
        if !action_allowed(answer.action, turn_number, SideKind::Personal) {
            return Err(DeliveryError::ActionNotAllowed(if turn_number == 0 {
                "turn 0 must be a propose (or a reject)".to_owned()
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
            played: Some(Played::agent()),
        };
        let plan = self.plan(&task, snapshot.history, turn)?;
        // A parked next turn is known now, so its answer is stored with the agent's turn.
        // The task's opportunity exists (a foreign key): its status is read with the task.
        let opportunity_status = snapshot
            .opportunity_status
            .ok_or_else(|| anyhow::anyhow!("the snapshot of negotiation {} has no opportunity", task.id))?;
        let response = plan.park.map(|_| Responded {
            success: true,
            negotiation_id: task.id,
            turn_number,
            status: TaskState::WaitingForAgent,
            opportunity: OpportunityRef { id: task.opportunity_id, status: opportunity_status },
            outcome: None,
            question_id: None,
        });
        let mut rows: Vec<TurnRow<'_>> =
            plan.turns.iter().map(|(t, _)| TurnRow::new(t, task.user_id(t.side))).collect();
        rows[0].agent_id = Some(agent.agent_id);
        rows[0].claim_generation = Some(task.claim_generation);
        rows[0].request_hash = Some(hex(&request.request_hash));
        rows[0].response = response.as_ref().map(Responded::stored).transpose()?;
        let agent_message = rows[0].message_id;
        let applied = {
            let mut conn = self.runtime.pool.acquire().await?;
            turn_delivery::apply_respond(
                &mut conn,
                &ApplyRespond {
                    key_hash: &request.key.key_hash,
                    task_id: task.id,
                    agent_id: agent.agent_id,
                    generation: task.claim_generation,
                    turn_count: turn_number,
                    turns: rows,
                    // In a mixed negotiation the turn parked next is the responding agent's own
                    // user's, and that agent is live (it is answering now): the long window.
                    park: plan.park.map(|next| {
                        (task.user_id(next), Self::falls_back(&task).then_some(self.runtime.config.park_timeout))
                    }),
                },
            )
            .await?
        };
        if !applied {
            return Ok(None);
        }
        for (t, played_by) in &plan.turns {
            crate::metrics::turn_by(*played_by, t.action);
            tracing::info!(agent.id = %agent.agent_id, turn.number = t.turn_number, turn.side = t.side.as_str(),
                turn.played_by = played_by.as_str(), "{}", t.action);
        }
        if plan.park.is_some() {
            self.parked(&task, turn_number + plan.turns.len() as u32);
            return Ok(response);
        }
        // The plan ends the negotiation: the loop concludes it through `finalize`.
        self.advance(task.id).await?;
        let response = self.answer_for(task.id, turn_number).await?;
        let mut conn = self.runtime.pool.acquire().await?;
        messages::set_response(&mut conn, agent_message, &response.stored()?).await?;
        Ok(Some(response))
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
                // A model decides the system's reply off this request: leave the task working
                // (the engine's loop then arms the model's job).
                Next::System(_) if self.model_decides() => return Ok(Plan { turns, park: None }),
                // A system negotiator that may ask its person first (`super::system_asks`): the
                // engine's loop takes the turn, asking or not.
                Next::System(side) if self.system_may_ask(task, side, &history) => {
                    return Ok(Plan { turns, park: None });
                }
                Next::System(side) => {
                    let reply = self.system_turn(task, side, &history, None)?;
                    history.push(reply.clone());
                    turns.push((reply, SideKind::System));
                }
            }
        }
    }

    /// The respond body for turn `turn_number` of a task, from its current state. The outcome
    /// is shown as the responding side may read it: a system reply may have ended the
    /// negotiation, and its reasoning is the other side's.
    async fn answer_for(&self, task_id: Uuid, turn_number: u32) -> Result<Responded, DeliveryError> {
        let mut conn = self.runtime.pool.acquire().await?;
        let task = tasks::get(&mut conn, task_id).await?.ok_or(DeliveryError::NotFound)?;
        let opportunity = opportunities::get(&mut conn, task.opportunity_id).await?.ok_or(DeliveryError::NotFound)?;
        let outcome = if task.state == TaskState::Completed || task.state == TaskState::Canceled {
            match messages::outcome(&mut conn, task.id).await? {
                Some(outcome) => {
                    let turns: Vec<Turn> =
                        messages::turns(&mut conn, task.id).await?.into_iter().map(|t| t.turn).collect();
                    let reader = Viewer::Side(Side::for_turn(turn_number));
                    Some(reader.outcome(&outcome, &turns, |side| task.display_name(side)))
                }
                None => None,
            }
        } else {
            None
        };
        Ok(Responded {
            success: true,
            negotiation_id: task.id,
            turn_number,
            status: task.state,
            opportunity: OpportunityRef { id: opportunity.id, status: opportunity.status },
            outcome,
            question_id: None,
        })
    }
}
