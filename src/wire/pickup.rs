//! The pickup answer both adapters give (`POST .../negotiations/pickup`, the MCP tool
//! `pickup_negotiation`): the claimed turn with everything needed to answer it, rendered from
//! the engine's [`Claim`]. Index Network's clients read this shape unchanged: `agent` beside
//! `side` in the history, `name` beside `profile` and in it, `indexContext` and `profile`
//! objects, and intents with `title` and `description`. The agent sees its own side's reasoning
//! only; the other user through [`UserContext::as_seen_by_other_side`].

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{error::ApiResult, views::Viewer};
use crate::{
    delivery::Claim,
    domain::{
        Action, DecidedBy, FallbackReason, OpportunityStatus, Outcome, PlayedBy, PreviousRound, SeedActor,
        SeedAssessment, Side, SuggestedRoles, Turn, UserContext, outcome::is_final_turn,
    },
};

/// The pickup answer: the claimed turn with everything needed to answer it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Pickup, example = json!({
    "negotiationId": "0193b0a4-7000-7000-8000-000000000001",
    "taskId": "0193b0a4-7000-7000-8000-000000000001",
    "claimToken": "ct_Zm9vYmFyYmF6cXV4",
    "opportunity": {"id": "0193b0a4-7000-7000-8000-000000000002", "status": "negotiating",
        "reasoning": "Both want a Rust payments collaboration", "actors": []},
    "turn": {"number": 1, "deadline": "2026-01-01T18:00:00Z", "counterpartyAction": "propose",
        "isFinalTurn": false, "maxTurns": 8,
        "history": [{"turnNumber": 0, "side": "source", "agent": "source", "action": "propose",
            "suggestedRoles": {"ownUser": "patient", "otherUser": "agent"},
            "message": "Maya is building a payments API in Rust and needs a senior engineer."}]},
    "context": {
        "ownUser": {"id": "user-tomas", "name": "Tomas Novak",
            "profile": {"bio": "Senior backend engineer, eight years of Rust", "skills": ["rust", "postgresql", "payments api"],
                "name": "Tomas Novak"},
            "intents": [{"id": "intent-1", "text": "Looking for a fintech startup to join as a senior backend engineer working on payments",
                "title": "Looking for a fintech startup to join as a senior backend…",
                "description": "Looking for a fintech startup to join as a senior backend engineer working on payments"}]},
        "otherUser": {"id": "user-maya", "name": "Maya Chen",
            "profile": {"bio": "Founder of a fintech startup", "skills": ["fundraising"], "interests": ["payments", "rust"],
                "name": "Maya Chen"},
            "intents": []},
        "indexContext": {},
        "seedAssessment": {"score": 88, "reasoning": "Both want a Rust payments collaboration"},
        "isDiscoverer": false,
        "discoveryQuery": "senior rust backend engineer for payments"}
}))]
pub struct PickupOut {
    /// The negotiation to respond on (= the task id).
    pub negotiation_id: Uuid,
    /// The A2A task id (the same id).
    pub task_id: Uuid,
    /// Proof of the claim; send it back with respond, extend and release.
    pub claim_token: String,
    /// The opportunity being negotiated.
    pub opportunity: PickupOpportunityOut,
    /// The turn to take.
    pub turn: PickupTurnOut,
    /// Everything the agent argues from.
    pub context: PickupContextOut,
}

/// The opportunity of a pickup.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = PickupOpportunity)]
pub struct PickupOpportunityOut {
    id: Uuid,
    status: OpportunityStatus,
    /// The evaluator's reasoning.
    reasoning: String,
    /// The evaluator's roles per user (may be empty).
    actors: Vec<SeedActor>,
}

/// The turn of a pickup.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PickupTurn)]
pub struct PickupTurnOut {
    /// 0-based: the number of turns already taken. Turn 0 is `propose` or `reject`.
    number: u32,
    /// When the claim lapses (ISO 8601); `extend` pushes it.
    deadline: DateTime<Utc>,
    /// The other side's last action, `none` before any turn.
    #[schema(pattern = "^(none|propose|counter|accept|reject|question)$")]
    counterparty_action: String,
    /// The cap ends the negotiation after this turn: anything but accept/reject stalls it.
    is_final_turn: bool,
    /// 0 = unlimited.
    max_turns: u32,
    /// The turns so far.
    history: Vec<HistoryTurnOut>,
}

/// A past turn as a pickup shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = HistoryTurn)]
pub struct HistoryTurnOut {
    turn_number: u32,
    side: Side,
    /// The same as `side` (the name Index Network's clients read).
    agent: Side,
    action: Action,
    /// Only on the agent's own side's turns: the other side's reasoning is private to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<String>,
    suggested_roles: SuggestedRoles,
    message: Option<String>,
    /// `agent`, `system` or `system_fallback` (Parley standing in for the user's agent); absent
    /// only on a turn of an earlier round recorded before turns said who played them.
    #[serde(skip_serializing_if = "Option::is_none")]
    played_by: Option<PlayedBy>,
    /// For a `system_fallback` turn: `park_timeout`, `offline` or `hand_back`.
    #[serde(skip_serializing_if = "Option::is_none")]
    fallback_reason: Option<FallbackReason>,
    /// `agent`, `rules` or `model:<name>`.
    #[schema(value_type = Option<String>, pattern = "^(agent|rules|model:.+)$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    decided_by: Option<DecidedBy>,
}

/// What the agent argues from.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PickupContext)]
pub struct PickupContextOut {
    /// The agent's own user, in full.
    own_user: AgentUserOut,
    /// The other user: who they are and what they offer, with the intents the platform shares
    /// (an intent marked `private` stays with its own side; `dealBreakers` never come along).
    other_user: AgentUserOut,
    /// The platform's index context, verbatim; `{}` when none was given.
    #[schema(value_type = std::collections::HashMap<String, Value>)]
    index_context: Value,
    /// The evaluator's assessment.
    #[schema(value_type = SeedAssessment)]
    seed_assessment: Value,
    /// Whether the agent's user is the discovering (source) user.
    is_discoverer: bool,
    /// What the source user searched for.
    discovery_query: Option<String>,
    /// The opportunity's earlier rounds of negotiation, oldest first (empty in a first round):
    /// a reactivated opportunity is negotiated again from scratch, with these to learn from.
    previous_rounds: Vec<PreviousRoundOut>,
    /// What the agent's person answered to the questions asked at this turn (`ask_person`),
    /// oldest first; `answer` is null when the answer window ran out. Absent when none was asked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    person_answers: Vec<PersonAnswerOut>,
}

/// A person's answer to their agent's question, as the agent's pickup carries it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PersonAnswer)]
pub struct PersonAnswerOut {
    /// The question's id.
    pub question_id: Uuid,
    /// The question as asked.
    pub question: String,
    /// The options offered (possibly none).
    pub options: Vec<String>,
    /// The person's answer (an option or free text); null when the answer window ran out.
    pub answer: Option<String>,
    /// When the person answered; null when the window ran out.
    pub answered_at: Option<DateTime<Utc>>,
}

impl PersonAnswerOut {
    /// A closed question as its agent reads it.
    pub fn of(q: &crate::store::person_questions::PersonAnswer) -> PersonAnswerOut {
        PersonAnswerOut {
            question_id: q.question_id,
            question: q.question.clone(),
            options: q.options.clone(),
            answered_at: q.answer.as_ref().and(q.answered_at),
            answer: q.answer.clone(),
        }
    }
}

/// An earlier round of the opportunity's negotiation, as a pickup shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PreviousRound)]
pub struct PreviousRoundOut {
    /// That round's negotiation id (still readable).
    negotiation_id: Uuid,
    /// Its turns, numbered from 0, shaped like `turn.history`.
    turns: Vec<HistoryTurnOut>,
    /// How it ended; its `reasoning` is the final turn's only when that turn was the agent's own
    /// side's, else the service's sentence (`summary`).
    outcome: Option<Outcome>,
}

/// A user as an agent sees them (the shape Index Network's clients read).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = AgentUser)]
pub struct AgentUserOut {
    id: String,
    /// The display name the platform gave, else the user id.
    name: String,
    /// The platform's profile, always an object, with `name` added when it has none.
    profile: Map<String, Value>,
    /// The user's intents: all of the own user's; the other user's shared ones.
    intents: Vec<AgentIntentOut>,
}

/// An intent as an agent sees it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = AgentIntent)]
pub struct AgentIntentOut {
    /// The platform's id, else `intent-N` (1-based position).
    id: String,
    /// The intent in the user's words.
    text: String,
    /// A short form: the platform's title, else the text's first sentence, cut at 60 characters.
    title: String,
    /// The same as `text`.
    description: String,
    /// 0 to 1, when the platform gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    confidence: Option<f64>,
    /// True on an own intent the platform keeps from the other side (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    private: Option<bool>,
}

/// A user as a personal agent is shown them, in the shape Index Network's clients read:
/// `name` beside `profile` and again as `profile.name` (the given name, else the user id),
/// `profile` always an object, and `intents` always a list of `{id, text, title, description,
/// confidence?, private?}`. Give it the user as this side may see them: the own user whole, the
/// other user through [`UserContext::as_seen_by_other_side`] (shared intents only, no
/// `dealBreakers`).
fn agent_view_of_user(user: &UserContext) -> AgentUserOut {
    let name = user.name.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| user.id.clone());
    let mut profile = match user.profile.as_ref().map(serde_json::to_value) {
        Some(Ok(Value::Object(map))) => map,
        _ => Map::new(),
    };
    profile.entry("name").or_insert_with(|| Value::String(name.clone()));
    let intents = user
        .intents
        .iter()
        .enumerate()
        .map(|(i, intent)| AgentIntentOut {
            id: intent.id.clone().unwrap_or_else(|| format!("intent-{}", i + 1)),
            text: intent.text.clone(),
            title: intent.display_title(),
            description: intent.text.clone(),
            confidence: intent.confidence,
            private: intent.private.then_some(true),
        })
        .collect();
    AgentUserOut { id: user.id.clone(), name, profile, intents }
}

/// The turns so far as the agent of `own_side` sees them: `agent` beside `side` (Index Network's
/// name for it), and `reasoning` only on the agent's own side's turns.
fn history_for(history: &[Turn], own_side: Side) -> Vec<HistoryTurnOut> {
    let viewer = Viewer::Side(own_side);
    history
        .iter()
        .map(|t| HistoryTurnOut {
            turn_number: t.turn_number,
            side: t.side,
            agent: t.side,
            action: t.action,
            reasoning: viewer.sees_reasoning_of(t.side).then(|| t.reasoning.clone()),
            suggested_roles: t.suggested_roles,
            message: t.message.clone(),
            played_by: t.played.as_ref().map(|p| p.played_by),
            fallback_reason: t.played.as_ref().and_then(|p| p.fallback_reason),
            decided_by: t.played.as_ref().map(|p| p.decided_by.clone()),
        })
        .collect()
}

/// The opportunity's earlier rounds as the agent of `own_side` sees them: each round's turns
/// shaped like `history` (reasoning only on its own side's turns) and its outcome, whose
/// reasoning follows the same rule (see [`Viewer::outcome`]); `name_of` names each side's user.
fn previous_rounds_for(
    rounds: &[PreviousRound],
    own_side: Side,
    name_of: impl Fn(Side) -> String + Copy,
) -> Vec<PreviousRoundOut> {
    let viewer = Viewer::Side(own_side);
    rounds
        .iter()
        .map(|r| PreviousRoundOut {
            negotiation_id: r.negotiation_id,
            turns: history_for(&r.turns, own_side),
            outcome: r.outcome.as_ref().map(|o| viewer.outcome(o, &r.turns, name_of)),
        })
        .collect()
}

impl PickupOut {
    /// The pickup answer, from what the pickup statement returned.
    pub fn of(claim: &Claim) -> ApiResult<PickupOut> {
        let task = &claim.task;
        let own_side = Side::for_turn(task.turn_count);
        let own = task.context(own_side)?;
        let other = task.context(own_side.other())?;
        let seed: SeedAssessment = serde_json::from_value(task.seed_assessment.clone()).map_err(anyhow::Error::from)?;
        let counterparty_action = claim.history.last().map(|t| t.action.as_str()).unwrap_or("none");
        let index_context = match &task.index_context {
            Some(value) if !value.is_null() => value.clone(),
            _ => Value::Object(Map::new()),
        };
        Ok(PickupOut {
            negotiation_id: task.id,
            task_id: task.id,
            claim_token: claim.token.clone(),
            opportunity: PickupOpportunityOut {
                id: task.opportunity_id,
                status: claim.opportunity_status,
                reasoning: seed.reasoning,
                actors: seed.actors.unwrap_or_default(),
            },
            turn: PickupTurnOut {
                number: task.turn_count,
                deadline: claim.expires_at,
                counterparty_action: counterparty_action.to_owned(),
                is_final_turn: is_final_turn(task.turn_count, task.max_turns),
                max_turns: task.max_turns,
                history: history_for(&claim.history, own_side),
            },
            context: PickupContextOut {
                own_user: agent_view_of_user(&own),
                other_user: agent_view_of_user(&other.as_seen_by_other_side()),
                index_context,
                seed_assessment: task.seed_assessment.clone(),
                is_discoverer: own_side == Side::Source,
                discovery_query: task.discovery_query.clone(),
                previous_rounds: previous_rounds_for(&claim.previous_rounds, own_side, |side| task.display_name(side)),
                person_answers: claim.person_answers.iter().map(PersonAnswerOut::of).collect(),
            },
        })
    }
}
