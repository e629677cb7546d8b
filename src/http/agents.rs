//! `/api/agents`: a person registers personal agents and manages their API keys; an agent
//! reports that it is alive (`POST /api/agents/{id}/heartbeat`) and learns who it is from its
//! key alone (`GET /api/agents/me`). An agent that never polls is registered with its AgentCard
//! URL (`agentCardUrl`), which Parley fetches and keeps ([`super::agent_cards`]); every read of
//! an agent says whether it polls or Parley calls it.

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    routing::{delete, get, post},
};
use base64::Engine as _;
use chrono::{DateTime, Utc};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use uuid::Uuid;

use super::{
    AppState,
    agent_auth::{AgentCaller, AgentOrOwner, AnyAgent},
    agent_cards::{self as cards, A2aAuthIn, AgentCardOut},
    api_docs::{AgentKeyPath, AgentOrItsOwner, AgentPath, OwnAgentKey, UsersOnly, UsersOwnAgent},
    auth::UserCaller,
    error::{ApiError, ApiResult},
    extract::{ApiJson, ApiQuery, Ids, MAX_PAGE, OptionalJson},
};
use crate::{
    auth::KEY_PREFIX,
    runtime::{AgentIdentity, hash_secret},
    store::{
        agent_cards::{self, AuthChange},
        agents::{self, Agent, AgentStatus, ApiKey, NegotiationMode},
    },
};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/agents", post(create_agent).get(list_agents))
        .route("/api/agents/me", get(get_own_agent))
        .route("/api/agents/{id}", get(get_agent).patch(update_agent).delete(delete_agent))
        .route("/api/agents/{id}/keys", post(create_key))
        .route("/api/agents/{id}/keys/{key_id}", delete(revoke_key))
        .route("/api/agents/{id}/heartbeat", post(heartbeat))
}

/// An agent as its owner sees it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentOut {
    /// Its id.
    pub id: Uuid,
    /// Display name.
    pub name: String,
    /// `personal`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `active` or `inactive`.
    pub status: String,
    /// `enabled` or `disabled`.
    pub negotiation_mode: String,
    /// Free text.
    pub description: Option<String>,
    /// The user it speaks for.
    pub owner_user_id: String,
    /// Its keys (never the keys themselves).
    pub keys: Vec<KeyOut>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
    /// When the agent was last seen: any call it made with its key (written at most every
    /// 15 s), null if never.
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Whether it can answer now: active, with a working key, and seen within
    /// `PARLEY_AGENT_LIVENESS` (90 s by default).
    pub live: bool,
    /// How its work reaches it: `polling` (it calls Parley with its key) or `a2a` (Parley calls
    /// it over A2A, at the interface its AgentCard names).
    #[schema(pattern = "^(polling|a2a)$")]
    pub delivery: String,
    /// The AgentCard URL of an agent Parley calls; null for one that polls. The card and how it
    /// is called: `GET /api/agents/{id}/agent-card`.
    pub agent_card_url: Option<String>,
    /// The last call Parley made to an agent it calls (null before the first, and for one that
    /// polls).
    pub last_call: Option<LastCallOut>,
}

/// The last call Parley made to an agent it calls.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastCallOut {
    /// When.
    pub at: DateTime<Utc>,
    /// How it ended: the call (`send`, `lookup`, `get`, `cancel`), then `ok` or what failed,
    /// e.g. `send: the endpoint could not be reached: connection refused`.
    pub outcome: String,
}

/// A key's public facts.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyOut {
    /// Its id.
    pub id: Uuid,
    /// The key's first characters.
    pub prefix: String,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Expiry, if any.
    pub expires_at: Option<DateTime<Utc>>,
    /// Revocation time, if revoked.
    pub revoked_at: Option<DateTime<Utc>>,
}

impl From<&ApiKey> for KeyOut {
    fn from(k: &ApiKey) -> Self {
        KeyOut {
            id: k.api_key_id,
            prefix: k.prefix.clone(),
            created_at: k.created_at,
            expires_at: k.expires_at,
            revoked_at: k.revoked_at,
        }
    }
}

fn agent_out(state: &AppState, a: Agent, keys: &[ApiKey], called: Option<agent_cards::Called>) -> AgentOut {
    AgentOut {
        live: state.engine.runtime().is_live(&agents::Presence::of(&a, keys)),
        last_seen_at: a.last_seen_at,
        id: a.agent_id,
        name: a.name,
        kind: a.agent_type.as_str().to_owned(),
        status: a.status.as_str().to_owned(),
        negotiation_mode: a.negotiation_mode.as_str().to_owned(),
        description: a.description,
        owner_user_id: a.owner_user_id,
        keys: keys.iter().map(KeyOut::from).collect(),
        created_at: a.created_at,
        updated_at: a.updated_at,
        delivery: if called.is_some() { "a2a" } else { "polling" }.to_owned(),
        last_call: called.as_ref().and_then(|c| {
            Some(LastCallOut { at: c.last_call_at?, outcome: c.last_call_outcome.clone().unwrap_or_default() })
        }),
        agent_card_url: called.map(|c| c.card_url),
    }
}

/// How agent `id` is called, if Parley calls it.
async fn called_of(conn: &mut sqlx::PgConnection, id: Uuid) -> ApiResult<Option<agent_cards::Called>> {
    Ok(agent_cards::called(conn, &[id]).await?.pop())
}

/// A new key: 192 random bits, URL-safe, with a recognisable prefix. Returns (key, shown prefix).
fn new_key() -> (String, String) {
    let mut bytes = [0u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    let key = format!("{KEY_PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes));
    let prefix = key[..KEY_PREFIX.len() + 8].to_owned();
    (key, prefix)
}

/// A new API key: the only time the key itself is shown.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewKeyOut {
    /// The key's id (for revoking it).
    pub id: Uuid,
    /// The key; send it as `x-api-key: <key>` or `Authorization: Bearer <key>`.
    #[schema(example = "pk_3q2-7wEXAMPLEonlyEXAMPLEonlyEXAMPLE")]
    pub key: String,
    /// The key's first characters, shown in listings.
    pub prefix: String,
    /// When it stops working; null for never.
    pub expires_at: Option<DateTime<Utc>>,
}

async fn issue_key(
    conn: &mut sqlx::PgConnection,
    agent_id: Uuid,
    expires_at: Option<DateTime<Utc>>,
) -> ApiResult<NewKeyOut> {
    let (key, prefix) = new_key();
    let stored = agents::insert_key(conn, agent_id, &prefix, &hash_secret(&key), expires_at).await?;
    Ok(NewKeyOut { id: stored.api_key_id, key, prefix, expires_at: stored.expires_at })
}

/// The answer of `POST /api/agents`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedAgentOut {
    /// The agent.
    pub agent: AgentOut,
    /// Its first key, shown once.
    pub api_key: NewKeyOut,
    /// With `agentCardUrl`: the card as fetched and kept (never the credential).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_card: Option<AgentCardOut>,
}

/// A page of the caller's agents.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentListOut {
    /// Oldest first.
    pub agents: Vec<AgentOut>,
    /// The cursor of the next page (pass it as `cursor`); absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Uuid>,
}

/// Query of `GET /api/agents`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AgentListQuery {
    /// 1 to 200 (default 100: every agent a user may have by default, in one page).
    pub limit: Option<i64>,
    /// The `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

/// Agents on a page of `GET /api/agents` when the query gives no `limit`.
pub const DEFAULT_AGENT_PAGE: i64 = 100;

/// The 409 for a user at one of the limits of the configuration.
fn limit_reached(what: &str, limit: u32, variable: &str) -> ApiError {
    ApiError::LimitReached {
        message: format!("a user may have at most {limit} {what} ({variable}); delete or revoke one first"),
        limit,
    }
}

/// Body of `POST /api/agents`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateAgentIn {
    /// Display name (1-200 characters).
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    /// Free text (at most 2 000 characters).
    pub description: Option<String>,
    /// `enabled` (default) or `disabled`.
    #[schema(pattern = "^(enabled|disabled)$")]
    pub negotiation_mode: Option<String>,
    /// For an agent that never polls: where its AgentCard is (http or https, at most 2 048
    /// characters). Parley fetches it now (5 s, 64 KiB, same-host redirects only, public
    /// addresses only unless `PARLEY_A2A_ALLOW_PRIVATE_TARGETS=true`), checks it, and calls the
    /// agent at the JSON-RPC interface chosen on it (A2A 1.0, else 0.3, or Bindu's dialect).
    #[schema(max_length = 2048, example = "https://agent.example.com/.well-known/agent-card.json")]
    pub agent_card_url: Option<String>,
    /// With `agentCardUrl`: the credential Parley presents to the agent's endpoint. Stored, and
    /// never returned by any read.
    pub a2a_auth: Option<A2aAuthIn>,
}

fn check_name(name: &str) -> ApiResult<()> {
    let n = name.trim().chars().count();
    if n == 0 || n > 200 {
        return Err(ApiError::invalid("name must be 1 to 200 characters"));
    }
    Ok(())
}

fn check_description(d: Option<&str>) -> ApiResult<()> {
    if d.is_some_and(|d| d.chars().count() > 2000) {
        return Err(ApiError::invalid("description must be at most 2000 characters"));
    }
    Ok(())
}

fn check_mode(mode: Option<&str>) -> ApiResult<Option<NegotiationMode>> {
    mode.map(|m| {
        NegotiationMode::parse(m).ok_or_else(|| ApiError::invalid("negotiationMode must be enabled or disabled"))
    })
    .transpose()
}

/// Registers a personal agent for the caller and returns its first API key, once.
#[utoipa::path(post, path = "/api/agents", tag = "agents", operation_id = "createAgent",
    security(("bearerJwt" = [])),
    request_body(content = CreateAgentIn, examples(
        ("polling" = (summary = "An agent that polls", value = json!({"name": "Tomas on my laptop"}))),
        ("card" = (summary = "An agent Parley calls, by its AgentCard", value = json!({
            "name": "Tomas's reviewer",
            "agentCardUrl": "https://agent.example.com/.well-known/agent-card.json",
            "a2aAuth": {"scheme": "bearer", "credential": "agent-secret-token"}
        }))),
    )),
    responses(
        (status = 201, description = "Registered; the key is shown this once", body = CreatedAgentOut),
        (status = 400, description = "Invalid body (`invalid_body`), or an AgentCard that cannot be fetched or used (`agent_card_invalid`, saying why)"),
        (status = 409, description = "The user has as many agents, or live keys, as they may (`limit_reached`, with the `limit`)"),
        UsersOnly,
    ))]
pub async fn create_agent(
    State(state): State<AppState>,
    UserCaller(caller): UserCaller,
    ApiJson(body): ApiJson<CreateAgentIn>,
) -> ApiResult<(StatusCode, Json<CreatedAgentOut>)> {
    check_name(&body.name)?;
    check_description(body.description.as_deref())?;
    let mode = check_mode(body.negotiation_mode.as_deref())?;
    let auth = body.a2a_auth.as_ref().map(cards::check_auth).transpose()?;
    if auth.is_some() && body.agent_card_url.is_none() {
        return Err(ApiError::invalid("a2aAuth is for an agent registered with agentCardUrl"));
    }
    // Fetched before the transaction: the network is never waited on while it is open.
    let fetched = match &body.agent_card_url {
        Some(url) => Some(cards::fetch(&state, &caller.sub, url).await?),
        None => None,
    };
    let config = state.engine.config();
    let mut tx = state.pool().begin().await?;
    agents::lock_owner(&mut tx, &caller.sub).await?;
    if agents::count_for_owner(&mut tx, &caller.sub).await? >= i64::from(config.max_agents_per_user) {
        return Err(limit_reached("agents", config.max_agents_per_user, "PARLEY_MAX_AGENTS_PER_USER"));
    }
    if agents::count_live_keys(&mut tx, &caller.sub).await? >= i64::from(config.max_keys_per_user) {
        return Err(limit_reached("live API keys", config.max_keys_per_user, "PARLEY_MAX_KEYS_PER_USER"));
    }
    let agent = agents::insert(
        &mut tx,
        Uuid::now_v7(),
        &caller.sub,
        body.name.trim(),
        body.description.as_deref(),
        mode.unwrap_or(NegotiationMode::Enabled),
    )
    .await?;
    let key = issue_key(&mut tx, agent.agent_id, None).await?;
    let keys = agents::keys(&mut tx, agent.agent_id).await?;
    let card = match &fetched {
        Some(fetched) => {
            let change = auth.as_ref().map_or(AuthChange::Keep, AuthChange::Set);
            Some(cards::store(&state, &mut tx, agent.agent_id, fetched, change).await?)
        }
        None => None,
    };
    tx.commit().await?;
    let called = card.as_ref().map(|c| agent_cards::Called {
        agent_id: c.agent_id,
        card_url: c.card_url.clone(),
        last_call_at: None,
        last_call_outcome: None,
    });
    Ok((
        StatusCode::CREATED,
        Json(CreatedAgentOut {
            agent: agent_out(&state, agent, &keys, called),
            api_key: key,
            agent_card: card.map(AgentCardOut::from),
        }),
    ))
}

/// The caller's agents, a page at a time, oldest first. Without a query the first page holds up
/// to 100, every agent a user may have by default.
#[utoipa::path(get, path = "/api/agents", tag = "agents", operation_id = "listAgents",
    security(("bearerJwt" = [])),
    params(AgentListQuery),
    responses(
        (status = 200, description = "A page of the caller's agents", body = AgentListOut),
        (status = 400, description = "Invalid query (`invalid_body`)"),
        UsersOnly,
    ))]
pub async fn list_agents(
    State(state): State<AppState>,
    UserCaller(caller): UserCaller,
    ApiQuery(q): ApiQuery<AgentListQuery>,
) -> ApiResult<Json<AgentListOut>> {
    let limit = q.limit.unwrap_or(DEFAULT_AGENT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::invalid(format!("limit must be between 1 and {MAX_PAGE}")));
    }
    let after = match q.cursor.as_deref() {
        None => None,
        Some(c) => Some(Uuid::parse_str(c).map_err(|_| ApiError::invalid("cursor is not valid"))?),
    };
    let mut conn = state.pool().acquire().await?;
    let mut page = agents::list_for_owner(&mut conn, &caller.sub, after, limit + 1).await?;
    let next_cursor = (page.len() as i64 > limit).then(|| page[limit as usize - 1].agent_id);
    page.truncate(limit as usize);
    let ids: Vec<Uuid> = page.iter().map(|a| a.agent_id).collect();
    let keys = agents::keys_of(&mut conn, &ids).await?;
    let mut called: std::collections::HashMap<Uuid, agent_cards::Called> =
        agent_cards::called(&mut conn, &ids).await?.into_iter().map(|c| (c.agent_id, c)).collect();
    let out = page
        .into_iter()
        .map(|agent| {
            let own: Vec<ApiKey> = keys.iter().filter(|k| k.agent_id == agent.agent_id).cloned().collect();
            let called = called.remove(&agent.agent_id);
            agent_out(&state, agent, &own, called)
        })
        .collect();
    Ok(Json(AgentListOut { agents: out, next_cursor }))
}

/// The caller's agent `id`, or 404.
async fn own_agent(conn: &mut sqlx::PgConnection, owner: &str, id: Uuid) -> ApiResult<Agent> {
    agents::get(conn, id).await?.filter(|a| a.owner_user_id == owner).ok_or(ApiError::NotFound("agent"))
}

/// One agent, read by its owner or by the agent itself (with its own API key).
#[utoipa::path(get, path = "/api/agents/{id}", tag = "agents", operation_id = "getAgent",
    security(("bearerJwt" = []), ("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentPath),
    responses(
        (status = 200, description = "The agent", body = AgentOut),
        (status = 404, description = "Unknown agent, or another user's"),
        AgentOrItsOwner,
    ))]
pub async fn get_agent(State(state): State<AppState>, AgentOrOwner(agent): AgentOrOwner) -> ApiResult<Json<AgentOut>> {
    let mut conn = state.pool().acquire().await?;
    let found = agents::get(&mut conn, agent.agent_id).await?.ok_or(ApiError::NotFound("agent"))?;
    let keys = agents::keys(&mut conn, agent.agent_id).await?;
    let called = called_of(&mut conn, agent.agent_id).await?;
    Ok(Json(agent_out(&state, found, &keys, called)))
}

/// The agent the API key belongs to, as its owner sees it: a program holding only a key learns
/// its agent's id (the `{id}` of the agent routes) and user from it.
#[utoipa::path(get, path = "/api/agents/me", tag = "agents", operation_id = "getOwnAgent",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    responses(
        (status = 200, description = "The key's agent", body = AgentOut),
        (status = 401, description = "Missing, unknown, revoked or expired API key"),
        (status = 403, description = "The agent is inactive"),
    ))]
pub async fn get_own_agent(State(state): State<AppState>, AnyAgent(identity): AnyAgent) -> ApiResult<Json<AgentOut>> {
    let mut conn = state.pool().acquire().await?;
    let agent = agents::get(&mut conn, identity.agent_id).await?.ok_or(ApiError::NotFound("agent"))?;
    let keys = agents::keys(&mut conn, identity.agent_id).await?;
    let called = called_of(&mut conn, identity.agent_id).await?;
    Ok(Json(agent_out(&state, agent, &keys, called)))
}

/// Body of `PATCH /api/agents/{id}`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateAgentIn {
    /// New name.
    pub name: Option<String>,
    /// `active` or `inactive`.
    #[schema(pattern = "^(active|inactive)$")]
    pub status: Option<String>,
    /// `enabled` or `disabled`.
    #[schema(pattern = "^(enabled|disabled)$")]
    pub negotiation_mode: Option<String>,
    /// New description.
    pub description: Option<String>,
}

/// Changes name, status, negotiation mode or description.
#[utoipa::path(patch, path = "/api/agents/{id}", tag = "agents", operation_id = "updateAgent",
    security(("bearerJwt" = [])),
    params(AgentPath),
    request_body(content = UpdateAgentIn, example = json!({"negotiationMode": "disabled"})),
    responses(
        (status = 200, description = "The agent as it now is", body = AgentOut),
        (status = 400, description = "Invalid body (`invalid_body`)"),
        UsersOwnAgent,
    ))]
pub async fn update_agent(
    State(state): State<AppState>,
    UserCaller(caller): UserCaller,
    Ids(id): Ids<Uuid>,
    ApiJson(body): ApiJson<UpdateAgentIn>,
) -> ApiResult<Json<AgentOut>> {
    if let Some(name) = &body.name {
        check_name(name)?;
    }
    check_description(body.description.as_deref())?;
    let mode = check_mode(body.negotiation_mode.as_deref())?;
    let status = match body.status.as_deref() {
        None => None,
        Some(s) => Some(AgentStatus::parse(s).ok_or_else(|| ApiError::invalid("status must be active or inactive"))?),
    };
    let mut tx = state.pool().begin().await?;
    own_agent(&mut tx, &caller.sub, id).await?;
    let agent =
        agents::update(&mut tx, id, body.name.as_deref().map(str::trim), status, mode, body.description.as_deref())
            .await?
            .ok_or(ApiError::NotFound("agent"))?;
    let keys = agents::keys(&mut tx, id).await?;
    let called = called_of(&mut tx, id).await?;
    tx.commit().await?;
    Ok(Json(agent_out(&state, agent, &keys, called)))
}

/// Deletes an agent: its keys, capabilities and AgentCard go, turns it holds are given back to be picked up
/// again, and the delegation attempts open at it end `error` ("the target was deleted") so that
/// their delegations fall back. Its records stay: the delegations it asked for or worked on
/// remain readable by their parties.
#[utoipa::path(delete, path = "/api/agents/{id}", tag = "agents", operation_id = "deleteAgent",
    security(("bearerJwt" = [])),
    params(AgentPath),
    responses(
        (status = 204, description = "Deleted"),
        UsersOwnAgent,
    ))]
pub async fn delete_agent(
    State(state): State<AppState>,
    UserCaller(caller): UserCaller,
    Ids(id): Ids<Uuid>,
) -> ApiResult<StatusCode> {
    let mut conn = state.pool().acquire().await?;
    let agent = own_agent(&mut conn, &caller.sub, id).await?;
    drop(conn);
    let identity = AgentIdentity { agent_id: agent.agent_id, owner_user_id: agent.owner_user_id };
    state.engine.release_all(&identity).await?;
    let mut tx = state.pool().begin().await?;
    agents::delete(&mut tx, id).await?;
    tx.commit().await?;
    state.delegations.end_attempts_at_deleted(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Optional body of `POST /api/agents/{id}/keys`.
#[derive(Debug, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateKeyIn {
    /// When the key stops working (RFC 3339); never when absent.
    pub expires_at: Option<DateTime<Utc>>,
}

/// Issues another key for an agent; the key is shown once.
#[utoipa::path(post, path = "/api/agents/{id}/keys", tag = "agents", operation_id = "createAgentKey",
    security(("bearerJwt" = [])),
    params(AgentPath),
    request_body(content = Option<CreateKeyIn>, description = "Optional; an empty body issues a key that never expires"),
    responses(
        (status = 201, description = "The new key, shown this once", body = NewKeyOut),
        (status = 400, description = "Invalid body (`invalid_body`)"),
        (status = 409, description = "The user has as many live keys as they may (`limit_reached`, with the `limit`)"),
        UsersOwnAgent,
    ))]
pub async fn create_key(
    State(state): State<AppState>,
    UserCaller(caller): UserCaller,
    Ids(id): Ids<Uuid>,
    OptionalJson(body): OptionalJson<CreateKeyIn>,
) -> ApiResult<(StatusCode, Json<NewKeyOut>)> {
    if body.expires_at.is_some_and(|e| e <= Utc::now()) {
        return Err(ApiError::invalid("expiresAt must be in the future"));
    }
    let mut tx = state.pool().begin().await?;
    own_agent(&mut tx, &caller.sub, id).await?;
    let max_keys = state.engine.config().max_keys_per_user;
    agents::lock_owner(&mut tx, &caller.sub).await?;
    if agents::count_live_keys(&mut tx, &caller.sub).await? >= i64::from(max_keys) {
        return Err(limit_reached("live API keys", max_keys, "PARLEY_MAX_KEYS_PER_USER"));
    }
    let key = issue_key(&mut tx, id, body.expires_at).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(key)))
}

/// Revokes a key; it answers 401 from now on.
#[utoipa::path(delete, path = "/api/agents/{id}/keys/{keyId}", tag = "agents", operation_id = "revokeAgentKey",
    security(("bearerJwt" = [])),
    params(AgentKeyPath),
    responses(
        (status = 204, description = "Revoked"),
        (status = 404, description = "Unknown agent or key, or not the caller's"),
        UsersOnly,
    ))]
pub async fn revoke_key(
    State(state): State<AppState>,
    UserCaller(caller): UserCaller,
    Ids((id, key_id)): Ids<(Uuid, Uuid)>,
) -> ApiResult<StatusCode> {
    let mut conn = state.pool().acquire().await?;
    own_agent(&mut conn, &caller.sub, id).await?;
    if !agents::revoke_key(&mut conn, id, key_id).await? {
        return Err(ApiError::NotFound("key"));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Marks the agent seen, for an agent with nothing else to call: any call with its key does
/// the same. An agent seen within `PARLEY_AGENT_LIVENESS` is live, and a turn parked for a user
/// with a live agent waits the long park window instead of the offline one.
#[utoipa::path(post, path = "/api/agents/{id}/heartbeat", tag = "agents", operation_id = "agentHeartbeat",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentPath),
    responses(
        (status = 204, description = "Seen"),
        (status = 404, description = "The path names no agent"),
        OwnAgentKey,
    ))]
pub async fn heartbeat(AgentCaller(_agent): AgentCaller) -> StatusCode {
    // The extractor authenticated the key and marked the agent seen.
    StatusCode::NO_CONTENT
}
