//! `/api/agents/{id}/agent-card`: an agent that never polls is registered by its AgentCard URL
//! (here, or at `POST /api/agents` with `agentCardUrl`); Parley fetches the card, checks it,
//! chooses the JSON-RPC interface it will call and keeps it with the credential to present
//! there. `GET` reads what is kept (never the credential), `PUT` fetches the card again or
//! another one, `DELETE` detaches it: the agent polls again.
//!
//! The fetch and every later call go through `crate::a2a_client` (the outbound guard and the
//! card's checks). Its refusals are the caller's to fix: 400 `agent_card_invalid`, saying why.
//! These routes are the agent's owner's (user token) or the platform's; an agent's own key may
//! not change what Parley presents to it, and another user is told the agent does not exist.

use axum::{Json, Router, extract::State, http::StatusCode, routing::get};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use uuid::Uuid;

use super::{
    AppState,
    agent_auth::AgentOwnerOrPlatform,
    api_docs::{AgentPath, OwnerOrPlatform},
    error::{ApiError, ApiResult},
    extract::ApiJson,
};
use crate::{
    a2a_client::{
        card::{self, FetchedCard},
        credential::{A2aAuth, AuthScheme},
    },
    error_code::ErrorCode,
    store::agent_cards::{self, AgentCard, AuthChange, NewAgentCard},
};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new().route("/api/agents/{id}/agent-card", get(get_card).put(put_card).delete(delete_card))
}

/// What Parley presents to the agent's own endpoint.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct A2aAuthIn {
    /// `bearer` or `basic`: sent as `Authorization: Bearer <credential>` (or `Basic`).
    #[schema(pattern = "^(bearer|basic)$", example = "bearer")]
    pub scheme: String,
    /// The credential, as the header carries it (for `basic`, base64 of `user:password`):
    /// 1 to 4 096 visible ASCII characters. Stored to be presented; never returned by any read.
    #[schema(min_length = 1, max_length = 4096, pattern = "^[!-~]+$", example = "agent-secret-token")]
    pub credential: String,
}

/// Body of `PUT /api/agents/{id}/agent-card`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentCardIn {
    /// Where the AgentCard is (http or https, at most 2 048 characters), e.g.
    /// `https://agent.example.com/.well-known/agent-card.json`.
    #[schema(max_length = 2048)]
    pub agent_card_url: String,
    /// The credential to present to the agent's endpoint. Absent: the stored one stays; `null`:
    /// it is removed.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<A2aAuthIn>, nullable)]
    pub a2a_auth: Option<Option<A2aAuthIn>>,
}

/// A field that was sent (`Some`), `null` included (`Some(None)`); `None` when absent.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// One of the card's skills, in brief.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CardSkillOut {
    /// Its id on the card.
    pub id: String,
    /// Its name.
    pub name: String,
}

/// How Parley authenticates to the agent (never the credential itself).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct A2aAuthOut {
    /// `bearer` or `basic`.
    pub scheme: String,
}

/// An agent's AgentCard as Parley keeps it: where Parley calls the agent and how.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentCardOut {
    /// The agent.
    pub agent_id: Uuid,
    /// Where the card was fetched from.
    pub agent_card_url: String,
    /// The JSON-RPC endpoint chosen on the card, which Parley calls.
    pub interface_url: String,
    /// The protocol version the card gives for that interface.
    pub protocol_version: String,
    /// How Parley speaks there: `1.0` or `0.3` (A2A), or `bindu` (Bindu's agents: 0.3 method
    /// names whatever version the card claims).
    #[schema(pattern = "^(1\\.0|0\\.3|bindu)$")]
    pub dialect: String,
    /// The agent's name on the card.
    pub name: String,
    /// Its description on the card.
    pub description: String,
    /// Its skills (the first 100).
    pub skills: Vec<CardSkillOut>,
    /// Whether the card says the agent streams.
    pub streaming: bool,
    /// The scheme of the credential Parley presents; null when it presents none. The credential
    /// is never shown.
    pub a2a_auth: Option<A2aAuthOut>,
    /// When the card was fetched.
    pub fetched_at: DateTime<Utc>,
}

impl From<AgentCard> for AgentCardOut {
    fn from(c: AgentCard) -> Self {
        AgentCardOut {
            agent_id: c.agent_id,
            agent_card_url: c.card_url,
            interface_url: c.interface_url,
            protocol_version: c.protocol_version,
            dialect: c.dialect.as_str().to_owned(),
            name: c.name,
            description: c.description,
            skills: c.skills.into_iter().map(|s| CardSkillOut { id: s.id, name: s.name }).collect(),
            streaming: c.streaming,
            a2a_auth: c.auth.map(|a| A2aAuthOut { scheme: a.scheme.as_str().to_owned() }),
            fetched_at: c.fetched_at,
        }
    }
}

/// Checks a credential as sent (400 `invalid_body`).
pub(super) fn check_auth(auth: &A2aAuthIn) -> ApiResult<A2aAuth> {
    let scheme =
        AuthScheme::parse(&auth.scheme).ok_or_else(|| ApiError::invalid("a2aAuth.scheme must be bearer or basic"))?;
    A2aAuth::new(scheme, &auth.credential).map_err(ApiError::invalid)
}

/// Card fetches one owner may make at once, and how often one more is allowed after that.
pub const CARD_FETCH_BURST: u32 = 10;
/// See [`CARD_FETCH_BURST`].
pub const CARD_FETCH_REFILL: std::time::Duration = std::time::Duration::from_secs(6);

/// The per-owner budget of card fetches ([`CARD_FETCH_BURST`], [`CARD_FETCH_REFILL`]).
pub fn card_fetch_limiter() -> std::sync::Arc<crate::failure_limiter::FailureLimiter<String>> {
    std::sync::Arc::new(crate::failure_limiter::FailureLimiter::new(CARD_FETCH_BURST, CARD_FETCH_REFILL))
}

/// Fetches and checks the card at `url` for an agent of `owner` (400 `agent_card_invalid` saying
/// why it cannot be used). Each fetch counts against the owner's budget ([`CARD_FETCH_BURST`],
/// then one per [`CARD_FETCH_REFILL`]): past it, 429 `rate_limited` with `Retry-After`, so that
/// nobody can make Parley fetch URLs as fast as they can ask.
pub(super) async fn fetch(state: &AppState, owner: &str, url: &str) -> ApiResult<FetchedCard> {
    if url.trim().is_empty() || url.chars().count() > card::MAX_URL_CHARS {
        return Err(ApiError::invalid(format!("agentCardUrl must be 1 to {} characters", card::MAX_URL_CHARS)));
    }
    state.card_fetches.failed(&owner.to_owned()).map_err(|wait| {
        ApiError::TooMany(
            format!("more than {CARD_FETCH_BURST} AgentCard fetches for this user's agents; retry later"),
            wait,
        )
    })?;
    card::fetch_card(url, state.engine.config().a2a_allow_private_targets).await.map_err(|e| ApiError::BadRequest {
        code: ErrorCode::AgentCardInvalid,
        message: format!("the agent card cannot be used: {e}"),
    })
}

/// Stores a fetched card for `agent_id`, in the caller's transaction.
pub(super) async fn store(
    state: &AppState,
    conn: &mut sqlx::PgConnection,
    agent_id: Uuid,
    fetched: &FetchedCard,
    auth: AuthChange<'_>,
) -> ApiResult<AgentCard> {
    let s = &fetched.summary;
    let new = NewAgentCard {
        card_url: fetched.url.as_str(),
        interface_url: &s.interface.url,
        protocol_version: &s.interface.protocol_version,
        dialect: s.interface.dialect,
        name: &s.name,
        description: &s.description,
        skills: &s.skills,
        streaming: s.streaming,
        card: &fetched.document,
    };
    let card = agent_cards::put(conn, agent_id, &new, auth).await?;
    // The key Parley takes the agent's turns with (one its owner revoked stays revoked).
    agent_cards::ensure_push_key(conn, agent_id, &state.engine.runtime().push_key_hash(agent_id)).await?;
    Ok(card)
}

/// The agent's AgentCard as Parley keeps it.
#[utoipa::path(get, path = "/api/agents/{id}/agent-card", tag = "agents", operation_id = "getAgentCard",
    security(("bearerJwt" = [])),
    params(AgentPath),
    responses(
        (status = 200, description = "Where and how Parley calls the agent", body = AgentCardOut),
        (status = 404, description = "Unknown agent, another user's, or an agent that polls (no card)"),
        OwnerOrPlatform,
    ))]
pub async fn get_card(
    State(state): State<AppState>,
    AgentOwnerOrPlatform(agent): AgentOwnerOrPlatform,
) -> ApiResult<Json<AgentCardOut>> {
    let mut conn = state.pool().acquire().await?;
    let card = agent_cards::get(&mut conn, agent.agent_id).await?.ok_or(ApiError::NotFound("agent card"))?;
    Ok(Json(card.into()))
}

/// Fetches the AgentCard at `agentCardUrl` (again, or another one) and keeps it: from now on
/// Parley calls the agent at the interface chosen on it. An agent that polled is attached.
#[utoipa::path(put, path = "/api/agents/{id}/agent-card", tag = "agents", operation_id = "putAgentCard",
    security(("bearerJwt" = [])),
    params(AgentPath),
    request_body(content = AgentCardIn, example = json!({
        "agentCardUrl": "https://agent.example.com/.well-known/agent-card.json",
        "a2aAuth": {"scheme": "bearer", "credential": "agent-secret-token"}
    })),
    responses(
        (status = 200, description = "The card as now kept", body = AgentCardOut),
        (status = 400, description = "Invalid body (`invalid_body`), or a card that cannot be fetched or used (`agent_card_invalid`, saying why)"),
        (status = 404, description = "Unknown agent, or another user's"),
        OwnerOrPlatform,
    ))]
pub async fn put_card(
    State(state): State<AppState>,
    AgentOwnerOrPlatform(agent): AgentOwnerOrPlatform,
    ApiJson(body): ApiJson<AgentCardIn>,
) -> ApiResult<Json<AgentCardOut>> {
    let auth = match &body.a2a_auth {
        None => None,
        Some(None) => Some(None),
        Some(Some(a)) => Some(Some(check_auth(a)?)),
    };
    let fetched = fetch(&state, &agent.owner_user_id, &body.agent_card_url).await?;
    let change = match &auth {
        None => AuthChange::Keep,
        Some(None) => AuthChange::Clear,
        Some(Some(a)) => AuthChange::Set(a),
    };
    let mut tx = state.pool().begin().await?;
    // The agent may have been deleted while the card was fetched; locked, it cannot be now.
    if !agent_cards::lock_live_agent(&mut tx, agent.agent_id).await? {
        return Err(ApiError::NotFound("agent"));
    }
    let card = store(&state, &mut tx, agent.agent_id, &fetched, change).await?;
    tx.commit().await?;
    Ok(Json(card.into()))
}

/// Detaches the agent's AgentCard, with the credential Parley held for it: the agent polls again.
#[utoipa::path(delete, path = "/api/agents/{id}/agent-card", tag = "agents", operation_id = "deleteAgentCard",
    security(("bearerJwt" = [])),
    params(AgentPath),
    responses(
        (status = 204, description = "Detached"),
        (status = 404, description = "Unknown agent, another user's, or an agent that polls (no card)"),
        OwnerOrPlatform,
    ))]
pub async fn delete_card(
    State(state): State<AppState>,
    AgentOwnerOrPlatform(agent): AgentOwnerOrPlatform,
) -> ApiResult<StatusCode> {
    let mut conn = state.pool().acquire().await?;
    if !agent_cards::delete(&mut conn, agent.agent_id).await? {
        return Err(ApiError::NotFound("agent card"));
    }
    Ok(StatusCode::NO_CONTENT)
}
