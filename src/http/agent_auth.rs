//! Personal agents' credentials at the HTTP edge: an API key in `Authorization: Bearer <key>` or
//! `x-api-key`, alone or beside the owner's user token, each extractor a thin wrapper over
//! [`crate::auth::authenticate`] with its route kind's [`Policy`].
//!
//! The key's agent must be the `{id}` of the path (403 otherwise); an unknown, revoked or
//! expired key is a 401 at once (keys are looked up by hash on every request, never cached).
//! Pickup and respond, and delegation's delegate, inbox, accept and complete, look the key up
//! inside their own statement ([`PresentedAgentKey`], [`PresentedKey`]), so those calls cost no
//! separate round trip for it. Such a handler gets the key only through
//! [`PresentedKey::admit`] with the outcome of its own checks of path, query and body: a check
//! that failed is answered only once the key itself is found good, so credentials come first
//! there as on every other route.
//!
//! Every call a key authenticates marks its agent seen (`Runtime::seen`, throttled to one
//! write per agent per 15 s); pickup and respond do so in the engine once their statement
//! has authenticated the key.

use axum::{extract::FromRequestParts, http::request::Parts};

use super::{
    AppState,
    auth::{principal, unexpected},
    error::ApiError,
};
use crate::{
    auth::{self, Policy, Principal},
    runtime::{AgentIdentity, AgentKey},
};

/// The agent `policy` lets through: the key's, or the path's as its owner or the platform reads it.
async fn agent(parts: &mut Parts, state: &AppState, policy: &Policy) -> Result<AgentIdentity, ApiError> {
    match principal(parts, state, policy).await? {
        Principal::Agent(agent) => Ok(agent),
        other => Err(unexpected(&other)),
    }
}

/// A request authenticated by the API key of the agent in the path ([`Policy::PATH_AGENT_KEY`]).
#[derive(Debug, Clone)]
pub struct AgentCaller(pub AgentIdentity);

impl FromRequestParts<AppState> for AgentCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        agent(parts, state, &Policy::PATH_AGENT_KEY).await.map(AgentCaller)
    }
}

/// Any active agent, by its API key, whatever the path names (the caller of
/// `GET /api/agents/me`) ([`Policy::ANY_AGENT_KEY`]).
#[derive(Debug, Clone)]
pub struct AnyAgent(pub AgentIdentity);

impl FromRequestParts<AppState> for AnyAgent {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        agent(parts, state, &Policy::ANY_AGENT_KEY).await.map(AnyAgent)
    }
}

/// The agent in the path, by its own API key or by its owner's user JWT, for the read views
/// ([`Policy::AGENT_OR_OWNER`]); anyone else is told the agent does not exist.
#[derive(Debug, Clone)]
pub struct AgentOrOwner(pub AgentIdentity);

impl FromRequestParts<AppState> for AgentOrOwner {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        agent(parts, state, &Policy::AGENT_OR_OWNER).await.map(AgentOrOwner)
    }
}

/// The agent in the path, managed by its own API key or its owner's user JWT
/// ([`Policy::AGENT_MANAGER`]): the platform's token is a 403; another user is told the agent
/// does not exist (the answer must not tell whether another user's agent exists).
#[derive(Debug, Clone)]
pub struct AgentManager(pub AgentIdentity);

impl FromRequestParts<AppState> for AgentManager {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        agent(parts, state, &Policy::AGENT_MANAGER).await.map(AgentManager)
    }
}

/// The agent in the path, read by its own API key, its owner's user JWT or the platform
/// ([`Policy::AGENT_READER`]).
#[derive(Debug, Clone)]
pub struct AgentReader(pub AgentIdentity);

impl FromRequestParts<AppState> for AgentReader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        agent(parts, state, &Policy::AGENT_READER).await.map(AgentReader)
    }
}

/// The agent in the path, by its owner's user JWT or the platform's token, never an agent's key
/// ([`Policy::OWNER_OR_PLATFORM`]): what Parley presents to an agent is its owner's to set;
/// another user is told the agent does not exist.
#[derive(Debug, Clone)]
pub struct AgentOwnerOrPlatform(pub AgentIdentity);

impl FromRequestParts<AppState> for AgentOwnerOrPlatform {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        agent(parts, state, &Policy::OWNER_OR_PLATFORM).await.map(AgentOwnerOrPlatform)
    }
}

/// Any authenticated caller: a valid JWT of any role, or a live API key of an active agent
/// ([`Policy::ANYONE`]); what it may see is the handler's to decide (an A2A task, a delegation).
#[derive(Debug, Clone)]
pub struct AnyCaller(pub Principal);

impl FromRequestParts<AppState> for AnyCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        principal(parts, state, &Policy::ANYONE).await.map(AnyCaller)
    }
}

/// The API key and the path's agent of a call whose own statement authenticates the key
/// (pickup, respond, a delegation's inbox, accept, complete): not yet looked up
/// ([`Policy::PATH_AGENT_KEY_IN_STATEMENT`]). A missing key is a 401 at once; a path that names
/// no agent is a 404 once the key is found good.
#[derive(Debug, Clone)]
pub struct PresentedAgentKey(PresentedKey);

impl FromRequestParts<AppState> for PresentedAgentKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        presented(parts, state, &Policy::PATH_AGENT_KEY_IN_STATEMENT).await.map(PresentedAgentKey)
    }
}

impl PresentedAgentKey {
    /// As [`PresentedKey::admit`].
    pub async fn admit<T>(&self, state: &AppState, checked: Result<T, ApiError>) -> Result<(&AgentKey, T), ApiError> {
        self.0.admit(state, checked).await
    }
}

/// The API key of a call whose path names no agent (`POST /api/agents/delegate`): any active
/// agent's, not yet looked up; the call's own statement authenticates it
/// ([`Policy::ANY_AGENT_KEY_IN_STATEMENT`]).
#[derive(Debug, Clone)]
pub struct PresentedKey(AgentKey);

impl FromRequestParts<AppState> for PresentedKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        presented(parts, state, &Policy::ANY_AGENT_KEY_IN_STATEMENT).await
    }
}

impl PresentedKey {
    /// The key, for the call's statement, with what the handler's own checks (path, query,
    /// body) gave; a check that failed is answered only when the key itself is good, else the
    /// key's refusal (401/403) is, as on every other route. The only way to the key: a handler
    /// cannot answer its input's error before its caller's.
    pub async fn admit<T>(&self, state: &AppState, checked: Result<T, ApiError>) -> Result<(&AgentKey, T), ApiError> {
        match checked {
            Ok(checked) => Ok((&self.0, checked)),
            Err(error) => match auth::judge_key(&state.engine, &self.0).await {
                Ok(_) => Err(error),
                Err(refused) => Err(refused.into()),
            },
        }
    }
}

async fn presented(parts: &mut Parts, state: &AppState, policy: &Policy) -> Result<PresentedKey, ApiError> {
    match principal(parts, state, policy).await? {
        Principal::Key(key) => Ok(PresentedKey(key)),
        other => Err(unexpected(&other)),
    }
}
