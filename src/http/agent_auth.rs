//! Personal agents' credentials: an API key in `Authorization: Bearer <key>` or `x-api-key`.
//!
//! The key's agent must be the `{id}` of the path (403 otherwise); an unknown, revoked or
//! expired key is a 401 at once (keys are looked up by hash on every request, never cached).
//! Pickup and respond, and delegation's delegate, inbox, accept and complete, look the key up
//! inside their own statement ([`PresentedAgentKey`], [`PresentedKey`]), so those calls cost no
//! separate round trip for it; every other agent route uses [`AgentCaller`].
//!
//! Every call a key authenticates marks its agent seen (`Engine::seen`, throttled to one
//! write per agent per 15 s); pickup and respond do so in the engine once their statement
//! has authenticated the key.

use std::collections::HashMap;

use axum::{
    extract::{FromRequestParts, Path},
    http::request::Parts,
};
use uuid::Uuid;

use super::{
    AppState,
    auth::{Caller, CallerRole, bearer},
    error::ApiError,
};
use crate::{
    delivery::{AgentIdentity, AgentKey, hash_secret},
    store::agents,
};

pub use super::auth::KEY_PREFIX;

/// The API key a request presents (`x-api-key`, or a bearer token that is a key), if any.
pub fn presented_key(parts: &Parts) -> Option<String> {
    if let Some(v) = parts.headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(v.trim().to_owned());
    }
    bearer(parts).filter(|t| t.starts_with(KEY_PREFIX)).map(str::to_owned)
}

/// The API key a request must present: a 401 without one.
fn required_key(parts: &Parts) -> Result<String, ApiError> {
    presented_key(parts).ok_or_else(|| ApiError::Unauthorized("missing API key".into()))
}

async fn path_agent_id(parts: &mut Parts, state: &AppState) -> Result<Uuid, ApiError> {
    let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, state)
        .await
        .map_err(|_| ApiError::NotFound("agent"))?;
    params
        .get("id")
        .or_else(|| params.get("agentId"))
        .and_then(|id| Uuid::parse_str(id).ok())
        .ok_or(ApiError::NotFound("agent"))
}

async fn authenticate_key(state: &AppState, key: &str, path_agent: Option<Uuid>) -> Result<AgentIdentity, ApiError> {
    authenticate_hash(state, &hash_secret(key), path_agent).await
}

/// Every agent authenticated here is marked seen (throttled: see `delivery::liveness`). With
/// `path_agent` `None`, the key may be any agent's.
async fn authenticate_hash(
    state: &AppState,
    key_hash: &[u8],
    path_agent: Option<Uuid>,
) -> Result<AgentIdentity, ApiError> {
    let mut conn = state.pool().acquire().await?;
    let owner = agents::authenticate(&mut conn, key_hash)
        .await?
        .ok_or_else(|| ApiError::Unauthorized("the API key is unknown, revoked or expired".into()))?;
    drop(conn);
    if path_agent.is_some_and(|agent| agent != owner.agent_id) {
        return Err(ApiError::Forbidden("this API key belongs to another agent".into()));
    }
    if owner.status != agents::AgentStatus::Active {
        return Err(ApiError::Forbidden("the agent is inactive".into()));
    }
    state.engine.seen(owner.agent_id).await;
    Ok(AgentIdentity { agent_id: owner.agent_id, owner_user_id: owner.owner_user_id })
}

/// A request authenticated by the API key of the agent in the path.
#[derive(Debug, Clone)]
pub struct AgentCaller(pub AgentIdentity);

impl FromRequestParts<AppState> for AgentCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let key = required_key(parts)?;
        let agent = path_agent_id(parts, state).await?;
        authenticate_key(state, &key, Some(agent)).await.map(AgentCaller)
    }
}

/// Any active agent, by its API key, whatever the path names (the caller of
/// `GET /api/agents/me`, or the requester reading its delegations).
#[derive(Debug, Clone)]
pub struct AnyAgent(pub AgentIdentity);

impl FromRequestParts<AppState> for AnyAgent {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let key = required_key(parts)?;
        authenticate_key(state, &key, None).await.map(AnyAgent)
    }
}

/// The agent in the path, by its own API key or by its owner's user JWT (for the read views).
#[derive(Debug, Clone)]
pub struct AgentOrOwner(pub AgentIdentity);

impl FromRequestParts<AppState> for AgentOrOwner {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let agent = path_agent_id(parts, state).await?;
        if let Some(key) = presented_key(parts) {
            return authenticate_key(state, &key, Some(agent)).await.map(AgentOrOwner);
        }
        let caller = Caller::from_request_parts(parts, state).await?;
        let mut conn = state.pool().acquire().await?;
        let found = agents::get(&mut conn, agent).await?.ok_or(ApiError::NotFound("agent"))?;
        let allowed = found.owner_user_id == caller.sub && caller.role == CallerRole::User;
        if !allowed {
            return Err(ApiError::NotFound("agent"));
        }
        Ok(AgentOrOwner(AgentIdentity { agent_id: found.agent_id, owner_user_id: found.owner_user_id }))
    }
}

/// The API key and the path's agent of a pickup or respond, not yet looked up: the call's own
/// statement authenticates it (401/403 as [`AgentCaller`] answers them).
#[derive(Debug, Clone)]
pub struct PresentedAgentKey(pub AgentKey);

impl FromRequestParts<AppState> for PresentedAgentKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let key = required_key(parts)?;
        let agent = path_agent_id(parts, state).await?;
        Ok(PresentedAgentKey(AgentKey::new(&key, Some(agent))))
    }
}

impl PresentedAgentKey {
    /// For a request refused before its statement ran (a bad query, path or body): the key's
    /// own verdict comes first, as on every other agent route (401/403 before 400/404).
    pub async fn refuse(&self, state: &AppState, error: ApiError) -> ApiError {
        refuse(state, &self.0, error).await
    }
}

/// The API key of a call whose path names no agent (`POST /api/agents/delegate`): any active
/// agent's, not yet looked up; the call's own statement authenticates it.
#[derive(Debug, Clone)]
pub struct PresentedKey(pub AgentKey);

impl FromRequestParts<AppState> for PresentedKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &AppState) -> Result<Self, ApiError> {
        let key = required_key(parts)?;
        Ok(PresentedKey(AgentKey::new(&key, None)))
    }
}

impl PresentedKey {
    /// As [`PresentedAgentKey::refuse`].
    pub async fn refuse(&self, state: &AppState, error: ApiError) -> ApiError {
        refuse(state, &self.0, error).await
    }
}

/// `error`, unless the key itself is refused (401/403), which comes first.
async fn refuse(state: &AppState, key: &AgentKey, error: ApiError) -> ApiError {
    match authenticate_hash(state, &key.key_hash, key.agent_id).await {
        Ok(_) => error,
        Err(refused) => refused,
    }
}

/// The agent in the path, by its own API key or its owner's user JWT, or (when `service` is
/// allowed) the platform's token. As for [`AgentOrOwner`], a user who may not act on the agent
/// gets the 404 an unknown agent gets: the answer must not tell whether another user's agent
/// exists. (Another agent's key is refused 403 before any lookup, which tells nothing either.)
async fn agent_for(parts: &mut Parts, state: &AppState, service: bool) -> Result<AgentIdentity, ApiError> {
    // Credentials are judged first: a path that names no agent is a 404 only for a caller
    // whose credentials are valid.
    let agent = path_agent_id(parts, state).await;
    if let Some(key) = presented_key(parts) {
        let Ok(agent) = agent else {
            AnyCaller::from_request_parts(parts, state).await?;
            return Err(ApiError::NotFound("agent"));
        };
        return authenticate_key(state, &key, Some(agent)).await;
    }
    let caller = Caller::from_request_parts(parts, state).await?;
    let agent = agent?;
    let mut conn = state.pool().acquire().await?;
    let found = agents::get(&mut conn, agent).await?.ok_or(ApiError::NotFound("agent"))?;
    let owner = caller.role == CallerRole::User && found.owner_user_id == caller.sub;
    if caller.is_service() && !service {
        return Err(ApiError::Forbidden("the platform's token may not manage an agent".into()));
    }
    if !(owner || (service && caller.is_service())) {
        return Err(ApiError::NotFound("agent"));
    }
    Ok(AgentIdentity { agent_id: found.agent_id, owner_user_id: found.owner_user_id })
}

/// The agent in the path, managed by its own API key or its owner's user JWT (see [`agent_for`]).
#[derive(Debug, Clone)]
pub struct AgentManager(pub AgentIdentity);

impl FromRequestParts<AppState> for AgentManager {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        agent_for(parts, state, false).await.map(AgentManager)
    }
}

/// The agent in the path, read by its own API key, its owner's user JWT or the service.
#[derive(Debug, Clone)]
pub struct AgentReader(pub AgentIdentity);

impl FromRequestParts<AppState> for AgentReader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        agent_for(parts, state, true).await.map(AgentReader)
    }
}

/// Any authenticated caller: a valid JWT of any role, or a live API key of an active agent.
#[derive(Debug, Clone)]
pub struct AnyCaller;

impl FromRequestParts<AppState> for AnyCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if let Some(key) = presented_key(parts) {
            let mut conn = state.pool().acquire().await?;
            let owner = agents::authenticate(&mut conn, &hash_secret(&key))
                .await?
                .ok_or_else(|| ApiError::Unauthorized("the API key is unknown, revoked or expired".into()))?;
            if owner.status != agents::AgentStatus::Active {
                return Err(ApiError::Forbidden("the agent is inactive".into()));
            }
            drop(conn);
            state.engine.seen(owner.agent_id).await;
            return Ok(AnyCaller);
        }
        Caller::from_request_parts(parts, state).await.map(|_| AnyCaller)
    }
}
