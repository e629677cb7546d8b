//! The views an agent reads of its user's negotiations, for both adapters: the listing
//! (`GET /api/agents/{id}/negotiations`, the MCP tool `list_negotiations`) and one negotiation
//! from the agent's side (`GET .../negotiations/{negotiationId}`, `get_negotiation`). Each
//! shows the agent's own side's reasoning only (see [`Viewer`]).

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::{
    error::{ApiError, ApiResult},
    page::Page,
    views::{NegotiationOut, Viewer},
};
use crate::{
    delivery::Engine,
    domain::{Action, Side, TaskState},
    runtime::AgentIdentity,
    store::{messages, tasks},
};

fn is_users_turn(task: &tasks::Task, agent: &AgentIdentity) -> bool {
    matches!(task.state, TaskState::WaitingForAgent | TaskState::Claimed)
        && task.awaiting_user_id.as_deref() == Some(agent.owner_user_id.as_str())
}

/// One negotiation in the agent's listing.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentNegotiationItem {
    /// The negotiation.
    pub negotiation_id: Uuid,
    /// The opportunity it decides.
    pub opportunity_id: Uuid,
    /// The task state.
    pub status: TaskState,
    /// A turn of the agent's user is parked or claimed.
    pub is_users_turn: bool,
    /// The last turn's action; null before any turn.
    pub latest_action: Option<Action>,
    /// Turns taken.
    pub turn_count: u32,
    /// 0 = unlimited.
    pub max_turns: u32,
    /// The agent's user's seat.
    pub own_side: Option<Side>,
    /// The other user.
    pub counterpart_user_id: Option<String>,
    /// The other user's display name, when the platform gave one.
    pub counterpart_name: Option<String>,
    /// Turns this agent answered in it (any agent of the user may answer the user's turns).
    pub answered_turns: i64,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

/// A page of the agent's negotiations.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentNegotiationPage {
    /// Newest first.
    pub negotiations: Vec<AgentNegotiationItem>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// A listing of the agent's negotiations, checked: which ones, whether only those it answered
/// a turn in, and the page.
#[derive(Debug, Clone, Copy)]
pub struct AgentListing {
    /// Which negotiations.
    pub listed: tasks::Listed,
    /// Only the negotiations in which this agent answered at least one turn.
    pub answered: bool,
    /// The page.
    pub page: Page,
}

impl AgentListing {
    /// Checks a listing's parameters, the same whichever adapter received them: `status` is
    /// `waiting_for_agent`, `active`, `completed` or `all` (the default), then the page.
    pub fn parse(
        status: Option<&str>,
        answered: Option<bool>,
        limit: Option<i64>,
        cursor: Option<&str>,
    ) -> ApiResult<AgentListing> {
        let listed = match status.unwrap_or("all") {
            "waiting_for_agent" => tasks::Listed::Awaiting,
            "active" => tasks::Listed::Active,
            "completed" => tasks::Listed::Ended,
            "all" => tasks::Listed::All,
            _ => return Err(ApiError::invalid("status must be one of waiting_for_agent, active, completed, all")),
        };
        Ok(AgentListing { listed, answered: answered.unwrap_or(false), page: Page::parse(limit, cursor)? })
    }
}

/// The negotiations of the agent's user, newest first.
pub async fn agent_negotiations(
    engine: &Engine,
    agent: &AgentIdentity,
    q: &AgentListing,
) -> ApiResult<AgentNegotiationPage> {
    let (listed, Page { limit, before }) = (q.listed, q.page);
    let mut conn = engine.pool().acquire().await?;
    let answered_by = q.answered.then_some(agent.agent_id);
    let page = tasks::list_for_user(&mut conn, &agent.owner_user_id, listed, answered_by, before, limit + 1).await?;
    let has_more = page.len() as i64 > limit;
    let shown: Vec<Uuid> = page.iter().take(limit as usize).map(|t| t.id).collect();
    let answered = tasks::turns_answered_by(&mut conn, agent.agent_id, &shown).await?;
    let mut items = Vec::new();
    for task in page.iter().take(limit as usize) {
        let turns = messages::turns(&mut conn, task.id).await?;
        let own_side = task.side_of(&agent.owner_user_id);
        items.push(AgentNegotiationItem {
            negotiation_id: task.id,
            opportunity_id: task.opportunity_id,
            status: task.state,
            is_users_turn: is_users_turn(task, agent),
            latest_action: turns.last().map(|t| t.turn.action),
            turn_count: task.turn_count,
            max_turns: task.max_turns,
            own_side,
            counterpart_user_id: own_side.map(|s| task.user_id(s.other()).to_owned()),
            counterpart_name: own_side.and_then(|s| task.user_name(s.other())),
            answered_turns: answered.get(&task.id).copied().unwrap_or(0),
            updated_at: task.updated_at,
        });
    }
    let next_cursor = if has_more { page.get(limit as usize - 1).map(|t| t.id.to_string()) } else { None };
    Ok(AgentNegotiationPage { negotiations: items, next_cursor })
}

/// A negotiation from an agent's side.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentNegotiationOut {
    /// The whole negotiation.
    #[serde(flatten)]
    pub negotiation: NegotiationOut,
    /// The agent's user's seat.
    pub own_side: Side,
    /// A turn of the agent's user is parked or claimed.
    pub is_users_turn: bool,
    /// The last turn's action; null before any turn.
    pub latest_action: Option<Action>,
}

/// One negotiation from the agent's side: history with `isUsersTurn` and `latestAction`.
pub async fn agent_negotiation(
    engine: &Engine,
    agent: &AgentIdentity,
    negotiation_id: Uuid,
) -> ApiResult<AgentNegotiationOut> {
    let mut conn = engine.pool().acquire().await?;
    let task = tasks::get(&mut conn, negotiation_id).await?.ok_or(ApiError::NotFound("negotiation"))?;
    let Some(own_side) = task.side_of(&agent.owner_user_id) else {
        return Err(ApiError::NotFound("negotiation"));
    };
    let turns = messages::turns(&mut conn, task.id).await?;
    let outcome = messages::outcome(&mut conn, task.id).await?;
    let negotiation = NegotiationOut::new(&task, &turns, outcome, Viewer::Side(own_side))
        .with_rounds_and_wait(&mut conn, engine, &task)
        .await?;
    Ok(AgentNegotiationOut {
        negotiation,
        own_side,
        is_users_turn: is_users_turn(&task, agent),
        latest_action: turns.last().map(|t| t.turn.action),
    })
}
