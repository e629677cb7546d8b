//! The JSON shapes of negotiations and opportunities, shared by every route that shows them.
//!
//! A turn's `reasoning` is private to its own side: it is written for (or, by the system
//! negotiator, about) its own user, and may name that user's needs. [`Viewer`] (a domain rule,
//! re-exported here) decides what a reader sees: the service sees every turn's reasoning, a side
//! (its user or its agent) sees its own turns' reasoning and only the `action`, `message` and
//! `suggestedRoles` of the other side. The outcome's reasoning follows the turn that ended the
//! negotiation: the other side reads the service's sentence about how it ended instead.

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::{
    delivery::{AfterWait, Engine},
    domain::{
        Action, AgreedRole, DecidedBy, EndReason, FallbackReason, OpportunityStatus, Outcome, PlayedBy, RoleView, Side,
        SideKind, SuggestedRoles, TaskState, Turn,
    },
    store::{messages::StoredTurn, opportunities::Opportunity, person_questions, tasks, tasks::Task},
};

pub use crate::domain::Viewer;

impl Viewer {
    /// `task`'s stored outcome as this reader may see it (see [`Viewer::outcome`]), the people
    /// named as the platform named them.
    pub fn task_outcome(self, task: &Task, turns: &[StoredTurn], outcome: &Outcome) -> Outcome {
        let turns: Vec<Turn> = turns.iter().map(|t| t.turn.clone()).collect();
        self.outcome(outcome, &turns, |side| task.display_name(side))
    }
}

/// One side of a negotiation.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SideOut {
    /// The user.
    pub user_id: String,
    /// The user's display name, when the platform gave one.
    pub name: Option<String>,
    /// `system` or `personal`.
    #[serde(rename = "type")]
    pub kind: SideKind,
}

/// Both sides.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SidesOut {
    /// The discovering user's side.
    pub source: SideOut,
    /// The other user's side.
    pub candidate: SideOut,
}

/// One turn.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnOut {
    /// 0-based.
    pub turn_number: u32,
    /// Who spoke.
    pub side: Side,
    /// Their user.
    pub user_id: String,
    /// What they did.
    pub action: Action,
    /// Why: shown only to the speaker's own side (and the service), never to the other side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Suggested roles, from the speaker's view.
    pub suggested_roles: SuggestedRoles,
    /// Free text, if any.
    pub message: Option<String>,
    /// Who took the turn: `agent` (the user's personal agent), `system` (Parley's system
    /// negotiator, for a user without one) or `system_fallback` (Parley, standing in for the
    /// user's agent; `fallbackReason` says why).
    pub played_by: PlayedBy,
    /// For a `system_fallback` turn: `park_timeout` or `offline` (the timer that fired) or
    /// `hand_back` (the agent gave the turn back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<FallbackReason>,
    /// How the turn was decided: `agent`, `rules` or `model:<name>`.
    #[schema(value_type = String, pattern = "^(agent|rules|model:.+)$", example = "rules")]
    pub decided_by: DecidedBy,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
}

impl TurnOut {
    /// The turn as `viewer` may see it.
    pub fn new(t: &StoredTurn, viewer: Viewer) -> Self {
        TurnOut {
            turn_number: t.turn.turn_number,
            side: t.turn.side,
            user_id: t.user_id.clone(),
            action: t.turn.action,
            reasoning: viewer.sees_reasoning_of(t.turn.side).then(|| t.turn.reasoning.clone()),
            suggested_roles: t.turn.suggested_roles,
            message: t.turn.message.clone(),
            played_by: t.played().played_by,
            fallback_reason: t.played().fallback_reason,
            decided_by: t.played().decided_by,
            created_at: t.created_at,
        }
    }
}

/// What happens when a turn has waited for an agent until `awaitingUntil`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AwaitingThen {
    /// Parley's system negotiator plays the turn for the user.
    SystemNegotiator,
    /// The negotiation ends without agreement (personal vs personal: its deadline).
    NegotiationEnds,
}

/// Whom a negotiation in progress waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitingFor {
    /// A personal agent of `awaitingUserId` (the turn is parked or claimed).
    Agent,
    /// The person `awaitingUserId` themselves: their agent asked them something (only they
    /// read the question).
    Person,
}

/// A question a person's agent asked them and that waits for their answer, as the person (and
/// the service) read it; the other side never does.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingQuestionOut {
    /// Answer it at `POST /api/negotiations/{negotiationId}/questions/{id}/answer`.
    pub id: Uuid,
    /// The negotiation it holds up.
    pub negotiation_id: Uuid,
    /// The question, in the agent's words.
    pub question: String,
    /// Answers offered as buttons (possibly none); any free text answers too.
    pub options: Vec<String>,
    /// When it was asked.
    pub asked_at: DateTime<Utc>,
    /// When the answer window ends: the agent then decides without the answer.
    pub expires_at: DateTime<Utc>,
}

impl PendingQuestionOut {
    /// The view of a stored question.
    pub fn of(q: &person_questions::Question) -> PendingQuestionOut {
        PendingQuestionOut {
            id: q.id,
            negotiation_id: q.task_id,
            question: q.question.clone(),
            options: q.options.clone(),
            asked_at: q.asked_at,
            expires_at: q.expires_at,
        }
    }
}

/// A whole negotiation.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NegotiationOut {
    /// The negotiation id (= the A2A task id).
    pub id: Uuid,
    /// The opportunity it decides.
    pub opportunity_id: Uuid,
    /// The A2A context id.
    pub conversation_id: Uuid,
    /// The task state.
    pub status: TaskState,
    /// Who plays each side.
    pub sides: SidesOut,
    /// Turn cap (0 = unlimited).
    pub max_turns: u32,
    /// Turns taken.
    pub turn_count: u32,
    /// While parked or claimed: whose agent the turn waits for.
    pub awaiting_user_id: Option<String>,
    /// While parked or claimed: until when the turn waits for that agent, if it does not answer
    /// first (see `awaitingThen` for what happens then). In a mixed negotiation, when the system
    /// negotiator takes the turn: the offline window from the turn's first parking when it was
    /// parked with it and none of the user's agents is live, the long window otherwise, and no
    /// earlier than a claim's end; personal vs personal, the negotiation's deadline.
    pub awaiting_until: Option<DateTime<Utc>>,
    /// While parked or claimed: what happens at `awaitingUntil`.
    pub awaiting_then: Option<AwaitingThen>,
    /// While in progress and waiting: for `agent` (parked or claimed) or for the `person`
    /// `awaitingUserId` (their agent asked them something); null otherwise.
    pub waiting_for: Option<WaitingFor>,
    /// For the asking person (and the service) only: the question their agent asked them that
    /// waits for an answer. The other side reads only `waitingFor: person`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_question: Option<PendingQuestionOut>,
    /// Who reads the view (what it may show).
    #[serde(skip)]
    #[schema(ignore)]
    pub viewer: Viewer,
    /// Which round of its opportunity this negotiation is: 0 for the first, 1 for the one a
    /// reactivation started, and so on.
    pub round: u32,
    /// The negotiation ids of the opportunity's earlier rounds, oldest first (each stays
    /// readable here); empty in a first round.
    pub earlier_rounds: Vec<Uuid>,
    /// The turns.
    pub turns: Vec<TurnOut>,
    /// Set once it ended; its `reasoning` as the reader may see it (see [`Viewer`]).
    pub outcome: Option<Outcome>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
    /// Ended.
    pub completed_at: Option<DateTime<Utc>>,
}

impl NegotiationOut {
    /// Builds the view from its parts, as `viewer` may see it.
    pub fn new(task: &Task, turns: &[StoredTurn], outcome: Option<Outcome>, viewer: Viewer) -> NegotiationOut {
        NegotiationOut {
            id: task.id,
            opportunity_id: task.opportunity_id,
            conversation_id: task.conversation_id,
            status: task.state,
            sides: SidesOut {
                source: SideOut {
                    user_id: task.source_user_id.clone(),
                    name: task.user_name(Side::Source),
                    kind: task.source_kind,
                },
                candidate: SideOut {
                    user_id: task.candidate_user_id.clone(),
                    name: task.user_name(Side::Candidate),
                    kind: task.candidate_kind,
                },
            },
            max_turns: task.max_turns,
            turn_count: task.turn_count,
            awaiting_user_id: task.awaiting_user_id.clone(),
            awaiting_until: None,
            awaiting_then: None,
            waiting_for: match task.state {
                TaskState::WaitingForAgent | TaskState::Claimed => Some(WaitingFor::Agent),
                TaskState::WaitingForPerson => Some(WaitingFor::Person),
                _ => None,
            },
            pending_question: None,
            viewer,
            round: 0,
            earlier_rounds: Vec::new(),
            turns: turns.iter().map(|t| TurnOut::new(t, viewer)).collect(),
            outcome: outcome.map(|o| viewer.task_outcome(task, turns, &o)),
            created_at: task.created_at,
            updated_at: task.updated_at,
            completed_at: task.completed_at,
        }
    }
}

impl NegotiationOut {
    /// The view with what takes more reads than the task and its turns: its round and the
    /// earlier ones, and how long its turn waits for an agent.
    pub async fn with_rounds_and_wait(
        mut self,
        conn: &mut sqlx::PgConnection,
        engine: &Engine,
        task: &Task,
    ) -> super::error::ApiResult<NegotiationOut> {
        let rounds = tasks::rounds(conn, task.opportunity_id).await?;
        if let Some(&(_, round)) = rounds.iter().find(|(id, _)| *id == task.id) {
            self.round = round;
            self.earlier_rounds = rounds.iter().filter(|(_, r)| *r < round).map(|(id, _)| *id).collect();
        }
        if task.state == TaskState::WaitingForPerson {
            let asker = task.awaiting_user_id.as_deref().and_then(|u| task.side_of(u));
            let sees = match self.viewer {
                Viewer::Service => true,
                Viewer::Side(own) => asker == Some(own),
            };
            if sees {
                let pending = person_questions::pending_for_tasks(conn, &[task.id], None).await?;
                self.pending_question = pending.get(&task.id).map(PendingQuestionOut::of);
            }
        }
        if let Some(wait) = engine.turn_wait(conn, task).await? {
            self.awaiting_until = Some(wait.until);
            self.awaiting_then = Some(match wait.then {
                AfterWait::SystemNegotiator => AwaitingThen::SystemNegotiator,
                AfterWait::NegotiationEnds => AwaitingThen::NegotiationEnds,
            });
        }
        Ok(self)
    }
}

/// An opportunity.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpportunityOut {
    /// Its id.
    pub id: Uuid,
    /// Its status.
    pub status: OpportunityStatus,
    /// The evaluator's seed score (0-100).
    pub score: f64,
    /// The discovering user.
    pub source_user_id: String,
    /// The other user.
    pub candidate_user_id: String,
    /// The discovering user's display name, when the platform gave one.
    pub source_user_name: Option<String>,
    /// The other user's display name, when the platform gave one.
    pub candidate_user_name: Option<String>,
    /// The negotiation deciding it.
    pub negotiation_id: Option<Uuid>,
    /// The evaluator's assessment.
    #[schema(value_type = crate::domain::SeedAssessment)]
    pub seed_assessment: serde_json::Value,
    /// For a user: the other person.
    pub counterpart_user_id: Option<String>,
    /// For a user: the other person's display name, when the platform gave one.
    pub counterpart_name: Option<String>,
    /// The roles the agents agreed on: empty unless they accepted and their last suggestions
    /// mirror each other (see `roleViews`).
    pub agreed_roles: Vec<AgreedRole>,
    /// Each side's view of the roles when the agents accepted (the accepting side first),
    /// agreed or not: what each suggested for its own user and the other. Empty unless they
    /// accepted.
    pub role_views: Vec<RoleView>,
    /// Why the latest round ended without an accept or reject (`turn_cap`, `timeout`,
    /// `canceled`), once it has; null otherwise.
    pub end_reason: Option<EndReason>,
    /// The latest round's number: 0 for the first, 1 once reactivated, and so on.
    pub round: u32,
    /// For a user: their own decision (`accept` or `decline`), once made.
    pub my_decision: Option<String>,
    /// For a user: the other person's decision, once made.
    pub other_decision: Option<String>,
    /// Every decision made so far, by user id.
    pub decisions: std::collections::BTreeMap<String, String>,
    /// For the asking person (and the service) only: the question their agent asked them in
    /// this opportunity's negotiation, waiting for their answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_question: Option<PendingQuestionOut>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Status last changed.
    pub updated_at: DateTime<Utc>,
}

/// Builds the views of `list` as `viewer` (a user id, or `None` for the service) sees them,
/// with names, agreed roles and decisions, in three queries.
pub async fn opportunity_views(
    conn: &mut sqlx::PgConnection,
    list: &[Opportunity],
    viewer: Option<&str>,
) -> anyhow::Result<Vec<OpportunityOut>> {
    let ids: Vec<Uuid> = list.iter().map(|o| o.id).collect();
    let task_ids: Vec<Uuid> = list.iter().filter_map(|o| o.negotiation_id).collect();
    let decisions = crate::store::decisions::for_opportunities(conn, &ids).await?;
    let outcomes = crate::store::messages::outcomes_for(conn, &task_ids).await?;
    let names = crate::store::tasks::user_names(conn, &task_ids).await?;
    let questions = person_questions::pending_for_tasks(conn, &task_ids, viewer).await?;
    Ok(list
        .iter()
        .map(|o| {
            let mut out = OpportunityOut::from(o);
            let made = decisions.get(&o.id).cloned().unwrap_or_default();
            if let Some((source, candidate)) = o.negotiation_id.and_then(|t| names.get(&t)) {
                out.source_user_name = source.clone();
                out.candidate_user_name = candidate.clone();
            }
            if let Some(user) = viewer {
                let source_views = o.source_user_id == user;
                let other = if source_views { &o.candidate_user_id } else { &o.source_user_id };
                out.counterpart_user_id = Some(other.clone());
                out.counterpart_name =
                    if source_views { out.candidate_user_name.clone() } else { out.source_user_name.clone() };
                out.my_decision = made.get(user).cloned();
                out.other_decision = made.get(other).cloned();
            }
            out.decisions = made.into_iter().collect();
            out.pending_question = o.negotiation_id.and_then(|t| questions.get(&t)).map(PendingQuestionOut::of);
            if let Some(outcome) = o.negotiation_id.and_then(|t| outcomes.get(&t)) {
                out.agreed_roles = outcome.agreed_roles.clone();
                out.role_views = outcome.role_views.clone();
                out.end_reason = outcome.reason;
            }
            out
        })
        .collect())
}

impl From<&Opportunity> for OpportunityOut {
    fn from(o: &Opportunity) -> Self {
        OpportunityOut {
            counterpart_user_id: None,
            counterpart_name: None,
            source_user_name: None,
            candidate_user_name: None,
            agreed_roles: Vec::new(),
            role_views: Vec::new(),
            end_reason: None,
            round: o.round,
            my_decision: None,
            other_decision: None,
            decisions: Default::default(),
            pending_question: None,
            id: o.id,
            status: o.status,
            score: o.score,
            source_user_id: o.source_user_id.clone(),
            candidate_user_id: o.candidate_user_id.clone(),
            negotiation_id: o.negotiation_id,
            seed_assessment: o.seed_assessment.clone(),
            created_at: o.created_at,
            updated_at: o.updated_at,
        }
    }
}
