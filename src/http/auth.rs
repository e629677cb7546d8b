//! Authentication at the HTTP edge: the extractors a handler names its caller with, each a thin
//! wrapper over [`crate::auth::authenticate`] with its route kind's [`Policy`]; a refusal becomes
//! the [`ApiError`] with the same status and code (`crate::wire::error`, for every adapter).
//!
//! An authenticating extractor comes first among a handler's arguments: axum runs extractors in
//! order, so a request with bad credentials is answered 401/403 before its path, query or body
//! is judged. The agents' extractors are in [`super::agent_auth`].

use std::collections::HashMap;

use axum::{
    extract::{FromRequestParts, Path},
    http::request::Parts,
};
use uuid::Uuid;

use super::{AppState, error::ApiError};
pub use crate::auth::Caller;
use crate::auth::{self, Policy, Principal};

/// The agent id the path names (`{id}` or `{agentId}`), if it names one by an id.
async fn path_agent(parts: &mut Parts, state: &AppState) -> Option<Uuid> {
    let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, state).await.ok()?;
    params.get("id").or_else(|| params.get("agentId")).and_then(|id| Uuid::parse_str(id).ok())
}

/// The request's principal under `policy`.
pub(crate) async fn principal(parts: &mut Parts, state: &AppState, policy: &Policy) -> Result<Principal, ApiError> {
    let path_agent = if policy.names_path_agent() { path_agent(parts, state).await } else { None };
    Ok(auth::authenticate(&parts.headers, path_agent, policy, &state.jwt, &state.engine).await?)
}

/// A principal the policy cannot give: a bug, answered 500.
pub(crate) fn unexpected(principal: &Principal) -> ApiError {
    ApiError::Internal(anyhow::anyhow!("the route's policy let through {}", principal.kind()))
}

/// A user, the platform or an operator, by JWT ([`Policy::ANY_TOKEN`]).
impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match principal(parts, state, &Policy::ANY_TOKEN).await? {
            Principal::Caller(caller) => Ok(caller),
            other => Err(unexpected(&other)),
        }
    }
}

/// A caller with the `service` (or `admin`) role ([`Policy::SERVICE`]).
#[derive(Debug, Clone)]
pub struct ServiceCaller;

impl FromRequestParts<AppState> for ServiceCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match principal(parts, state, &Policy::SERVICE).await? {
            Principal::Caller(_) => Ok(ServiceCaller),
            other => Err(unexpected(&other)),
        }
    }
}

/// A caller with the `user` role: a person ([`Policy::USER`]).
#[derive(Debug, Clone)]
pub struct UserCaller(pub Caller);

impl FromRequestParts<AppState> for UserCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match principal(parts, state, &Policy::USER).await? {
            Principal::Caller(caller) => Ok(UserCaller(caller)),
            other => Err(unexpected(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::AuthError;

    #[test]
    fn an_auth_error_keeps_its_status_and_code_at_the_http_edge() {
        let errors = || {
            [
                AuthError::Unauthorized("bad".into()),
                AuthError::Forbidden("no".into()),
                AuthError::NotFound("agent"),
                AuthError::Internal(anyhow::anyhow!("down")),
            ]
        };
        for (auth, api) in errors().into_iter().zip(errors().map(ApiError::from)) {
            assert_eq!((auth.status(), auth.code()), (api.status(), api.code()), "{auth:?}");
            assert_eq!(auth.to_string(), api.to_string());
        }
    }
}
