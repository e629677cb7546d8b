//! Who is calling, decided in one place for every adapter (HTTP, MCP): a route kind's
//! [`Policy`] says which credentials may call it, and [`authenticate`] judges a request's headers
//! against it, giving the [`Principal`] or the [`AuthError`] to answer.
//!
//! Users and the platform send HS256 JWTs ([`jwt`]); personal agents send an API key
//! ([`credentials`] reads both), stored only as a SHA-256 hash and looked up on every request,
//! never cached: an unknown, revoked or expired key is refused at once. Every agent a key
//! authenticates is marked seen (`Runtime::seen`, throttled). A call whose own SQL statement
//! checks the key (pickup, respond, delegation's delegate, inbox, accept, complete) takes it
//! unlooked-up ([`Lookup::InStatement`]); when such a call is refused before its statement ran,
//! [`judge_key`] gives the key's own verdict, which comes first.
//!
//! Credentials come before everything else about a request: a path that names no agent, a bad
//! query or body is judged only for a caller whose credentials are good, so a bad credential is
//! always answered as one (401 or 403), whatever else is wrong.
//!
//! This module sits below the adapters: it knows the engine and the store, never `http` or
//! `mcp`. Each adapter turns an [`AuthError`] into its own answer with the status and code the
//! error names ([`AuthError::status`], [`AuthError::code`]).

pub mod credentials;
pub mod jwt;

use axum::http::{HeaderMap, StatusCode};
use uuid::Uuid;

pub use credentials::{KEY_PREFIX, bearer_of};
pub use jwt::{Caller, CallerRole, Claims, JwtKeys};

use crate::{
    delivery::Engine,
    error_code::ErrorCode,
    runtime::{AgentIdentity, AgentKey, KeyRefused},
    store::agents,
};

/// Why a request is not let through, with the status and code it is answered with.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// 401 `unauthorized`: no credentials, or bad ones.
    #[error("{0}")]
    Unauthorized(String),
    /// 403 `forbidden`: good credentials that may not call this route.
    #[error("{0}")]
    Forbidden(String),
    /// 404 `not_found`: the path's agent is unknown, or not the caller's to see (the answer must
    /// not tell whether another user's agent exists).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// 500 (503 when the database is unreachable): the lookup failed.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for AuthError {
    fn from(e: sqlx::Error) -> Self {
        AuthError::Internal(e.into())
    }
}

impl AuthError {
    /// The HTTP status this refusal is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            AuthError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            AuthError::Forbidden(_) => StatusCode::FORBIDDEN,
            AuthError::NotFound(_) => StatusCode::NOT_FOUND,
            AuthError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The machine code this refusal carries.
    pub fn code(&self) -> ErrorCode {
        match self {
            AuthError::Unauthorized(_) => ErrorCode::Unauthorized,
            AuthError::Forbidden(_) => ErrorCode::Forbidden,
            AuthError::NotFound(_) => ErrorCode::NotFound,
            AuthError::Internal(_) => ErrorCode::Internal,
        }
    }
}

/// What a request without a usable API key is told by a route that takes only keys.
pub const MISSING_KEY: &str = "missing API key (x-api-key or Authorization: Bearer pk_...)";

/// Which JWTs may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tokens {
    /// None: an agent's API key only.
    None,
    /// A token of one of `roles`; another role is refused 403 with `refusal`. `takes` says what
    /// the route takes, to a request that brought an API key instead.
    Roles {
        /// The roles that may call.
        roles: &'static [CallerRole],
        /// What the route takes ("a user token").
        takes: &'static str,
        /// The 403 message for another role.
        refusal: &'static str,
    },
    /// The owner of the path's agent (a user token whose subject owns it); the platform's token
    /// as `service` says; anyone else is told the agent does not exist (404).
    OwnerOfPathAgent {
        /// What the platform's (or an operator's) token gets.
        service: ServiceToken,
    },
}

/// What the platform's token gets on a route about the path's agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceToken {
    /// It may read the agent.
    Allowed,
    /// 403 with this message.
    Forbidden(&'static str),
    /// 404, as for another user.
    NotFound,
}

/// Which agents' API keys may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// None: a JWT only.
    None,
    /// Any active agent's.
    AnyAgent(Lookup),
    /// Only the path's agent's (another agent's key is 403).
    PathAgent(Lookup),
}

/// When a key is looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Now, before the handler runs.
    Now,
    /// By the call's own SQL statement: the key travels to it as an [`AgentKey`].
    InStatement,
}

/// Which credentials may call a kind of route. A request that presents an API key is judged as
/// a key when the route takes keys; otherwise as a JWT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Which JWTs may call.
    pub tokens: Tokens,
    /// Which agents' keys may call.
    pub keys: Keys,
}

/// What a user's or the platform's routes say they take.
const ANY_TOKEN: &str = "a user's or the platform's token";

impl Policy {
    /// Any valid JWT: a user, the platform or an operator.
    pub const ANY_TOKEN: Policy =
        Policy { tokens: Tokens::Roles { roles: CallerRole::ALL, takes: ANY_TOKEN, refusal: "" }, keys: Keys::None };
    /// The platform's service token (or an operator's).
    pub const SERVICE: Policy = Policy {
        tokens: Tokens::Roles {
            roles: &[CallerRole::Service, CallerRole::Admin],
            takes: "the platform's service token",
            refusal: "this route is for the platform's service token",
        },
        keys: Keys::None,
    };
    /// A person's token.
    pub const USER: Policy = Policy {
        tokens: Tokens::Roles {
            roles: &[CallerRole::User],
            takes: "a user token",
            refusal: "this route is for a user's token",
        },
        keys: Keys::None,
    };
    /// The key of the agent in the path, looked up now.
    pub const PATH_AGENT_KEY: Policy = Policy { tokens: Tokens::None, keys: Keys::PathAgent(Lookup::Now) };
    /// The key of the agent in the path, checked by the call's own statement.
    pub const PATH_AGENT_KEY_IN_STATEMENT: Policy =
        Policy { tokens: Tokens::None, keys: Keys::PathAgent(Lookup::InStatement) };
    /// Any active agent's key, looked up now (`GET /api/agents/me`, MCP).
    pub const ANY_AGENT_KEY: Policy = Policy { tokens: Tokens::None, keys: Keys::AnyAgent(Lookup::Now) };
    /// Any agent's key, checked by the call's own statement (a delegate).
    pub const ANY_AGENT_KEY_IN_STATEMENT: Policy =
        Policy { tokens: Tokens::None, keys: Keys::AnyAgent(Lookup::InStatement) };
    /// The path's agent, by its own key or its owner's user token (its read views).
    pub const AGENT_OR_OWNER: Policy = Policy {
        tokens: Tokens::OwnerOfPathAgent { service: ServiceToken::NotFound },
        keys: Keys::PathAgent(Lookup::Now),
    };
    /// The path's agent, managed by its own key or its owner's user token; the platform may not.
    pub const AGENT_MANAGER: Policy = Policy {
        tokens: Tokens::OwnerOfPathAgent {
            service: ServiceToken::Forbidden("the platform's token may not manage an agent"),
        },
        keys: Keys::PathAgent(Lookup::Now),
    };
    /// The path's agent, read by its own key, its owner's user token or the platform.
    pub const AGENT_READER: Policy = Policy {
        tokens: Tokens::OwnerOfPathAgent { service: ServiceToken::Allowed },
        keys: Keys::PathAgent(Lookup::Now),
    };
    /// The path's agent's outbound settings (its AgentCard and the credential Parley presents to
    /// it): its owner's user token or the platform's; never an agent's key.
    pub const OWNER_OR_PLATFORM: Policy =
        Policy { tokens: Tokens::OwnerOfPathAgent { service: ServiceToken::Allowed }, keys: Keys::None };
    /// Any valid JWT or any active agent's key.
    pub const ANYONE: Policy = Policy {
        tokens: Tokens::Roles { roles: CallerRole::ALL, takes: ANY_TOKEN, refusal: "" },
        keys: Keys::AnyAgent(Lookup::Now),
    };

    /// Whether the route names an agent in its path that the credentials must fit.
    pub fn names_path_agent(&self) -> bool {
        matches!(self.keys, Keys::PathAgent(_)) || matches!(self.tokens, Tokens::OwnerOfPathAgent { .. })
    }
}

/// Who a request was let through as.
#[derive(Debug, Clone)]
pub enum Principal {
    /// A JWT's caller: a user, the platform or an operator.
    Caller(Caller),
    /// An agent: the one the key authenticated, or, on a route about the path's agent, the
    /// agent its owner or the platform acts on.
    Agent(AgentIdentity),
    /// An agent's API key not looked up yet ([`Lookup::InStatement`]): the call's own statement
    /// authenticates it.
    Key(AgentKey),
}

impl Principal {
    /// What kind of principal this is, for a log line (never a key or a subject).
    pub fn kind(&self) -> &'static str {
        match self {
            Principal::Caller(_) => "a JWT's caller",
            Principal::Agent(_) => "an agent",
            Principal::Key(_) => "a key not yet looked up",
        }
    }
}

/// Judges a request's credentials by `policy`. `path_agent` is the agent the path names: `None`
/// when it names none, or names it by something that is not an id; a route about the path's
/// agent then answers 404, but only once the credentials are found good.
pub async fn authenticate(
    headers: &HeaderMap,
    path_agent: Option<Uuid>,
    policy: &Policy,
    jwt: &JwtKeys,
    engine: &Engine,
) -> Result<Principal, AuthError> {
    if policy.keys != Keys::None
        && let Some(key) = credentials::presented_key(headers)
    {
        if !key.is_empty() && !key.starts_with(KEY_PREFIX) {
            return Err(AuthError::Unauthorized(not_a_key(key, policy, jwt)));
        }
        return by_key(key, policy.keys, path_agent, engine).await;
    }
    match policy.tokens {
        Tokens::None => Err(AuthError::Unauthorized(match credentials::presented_token(headers) {
            Some(token) => format!(
                "this route takes an agent's API key ({KEY_PREFIX}..., in `x-api-key` or as `Authorization: \
                 Bearer {KEY_PREFIX}...`), but the Authorization header holds {}",
                what_was_sent(token, jwt)
            ),
            None => MISSING_KEY.into(),
        })),
        Tokens::Roles { roles, takes, refusal } => {
            let caller = by_token(headers, takes, jwt)?;
            if !roles.contains(&caller.role) {
                return Err(AuthError::Forbidden(refusal.into()));
            }
            Ok(Principal::Caller(caller))
        }
        Tokens::OwnerOfPathAgent { service } => {
            let caller = by_token(headers, ANY_TOKEN, jwt)?;
            let agent = path_agent.ok_or(AuthError::NotFound("agent"))?;
            let mut conn = engine.pool().acquire().await?;
            let found = agents::get(&mut conn, agent).await?.ok_or(AuthError::NotFound("agent"))?;
            let allowed = if caller.is_service() {
                match service {
                    ServiceToken::Allowed => true,
                    ServiceToken::Forbidden(message) => return Err(AuthError::Forbidden(message.into())),
                    ServiceToken::NotFound => false,
                }
            } else {
                caller.role == CallerRole::User && found.owner_user_id == caller.sub
            };
            if !allowed {
                return Err(AuthError::NotFound("agent"));
            }
            Ok(Principal::Agent(AgentIdentity { agent_id: found.agent_id, owner_user_id: found.owner_user_id }))
        }
    }
}

/// The caller of the request's JWT; `takes` says, to a request that brought an API key instead,
/// what the route takes.
fn by_token(headers: &HeaderMap, takes: &str, jwt: &JwtKeys) -> Result<Caller, AuthError> {
    let token = credentials::presented_token(headers).ok_or_else(|| {
        let in_key_header = credentials::presented_key(headers).filter(|k| credentials::looks_like_jwt(k));
        AuthError::Unauthorized(match in_key_header {
            Some(token) => format!(
                "this route takes {takes} as `Authorization: Bearer <token>`; the x-api-key header, which holds {} \
                 here, is for an agent's API key",
                what_was_sent(token, jwt)
            ),
            None if credentials::carries_a_key(headers) => {
                format!(
                    "this route takes {takes} (a JWT, sent as `Authorization: Bearer <token>`), not an agent's API key"
                )
            }
            None => "missing bearer token".to_owned(),
        })
    })?;
    jwt.caller(token)
}

/// The 401 for an `x-api-key` that holds something other than an API key (keys start with
/// [`KEY_PREFIX`]), most often a person's token pasted in the wrong header: it says what the route
/// takes and what was sent instead, and is given without looking anything up.
fn not_a_key(value: &str, policy: &Policy, jwt: &JwtKeys) -> String {
    let sent = what_was_sent(value, jwt);
    match policy.tokens {
        Tokens::None => format!(
            "this route takes an agent's API key ({KEY_PREFIX}...), but the x-api-key header holds {sent}; a \
             person's or the platform's token is not taken here"
        ),
        _ if credentials::looks_like_jwt(value) => format!(
            "the x-api-key header holds {sent}, not an agent's API key ({KEY_PREFIX}...): send a token as \
             `Authorization: Bearer <token>`"
        ),
        _ => format!("the x-api-key header holds {sent}: an agent's API keys start with {KEY_PREFIX}"),
    }
}

/// What a credential that a route cannot take is, in words, never quoting it: a JWT signed with
/// the service's secret is named by its role (a person's token, the platform's, an operator's),
/// any other JWT as one.
fn what_was_sent(value: &str, jwt: &JwtKeys) -> &'static str {
    if !credentials::looks_like_jwt(value) {
        return "something that is neither an API key nor a JWT";
    }
    match jwt.caller(value).map(|caller| caller.role) {
        Ok(CallerRole::User) => "a person's token (a JWT)",
        Ok(CallerRole::Service) => "the platform's service token (a JWT)",
        Ok(CallerRole::Admin) => "an operator's token (a JWT)",
        Err(_) => "a JWT (not one this service accepts)",
    }
}

/// A presented key, judged by `keys`.
async fn by_key(key: &str, keys: Keys, path_agent: Option<Uuid>, engine: &Engine) -> Result<Principal, AuthError> {
    if key.is_empty() {
        return Err(AuthError::Unauthorized(MISSING_KEY.into()));
    }
    match (keys, path_agent) {
        (Keys::None, _) => Err(AuthError::Unauthorized(MISSING_KEY.into())),
        // A path that names no agent: a 404, once the key is found good.
        (Keys::PathAgent(_), None) => {
            judge_key(engine, &AgentKey::new(key, None)).await?;
            Err(AuthError::NotFound("agent"))
        }
        (Keys::PathAgent(Lookup::InStatement), Some(agent)) => Ok(Principal::Key(AgentKey::new(key, Some(agent)))),
        (Keys::AnyAgent(Lookup::InStatement), _) => Ok(Principal::Key(AgentKey::new(key, None))),
        (Keys::PathAgent(Lookup::Now), Some(agent)) => {
            judge_key(engine, &AgentKey::new(key, Some(agent))).await.map(Principal::Agent)
        }
        (Keys::AnyAgent(Lookup::Now), _) => judge_key(engine, &AgentKey::new(key, None)).await.map(Principal::Agent),
    }
}

/// The key's verdict (`parley_agent_of_key`, the one judge of a key, through
/// `store::agents::key_verdict`): unknown, revoked or expired is a 401; a key of another agent
/// than `key.agent_id` (when given) or of an inactive agent is a 403, in the words of
/// [`KeyRefused`]. The agent is marked seen (throttled: see `runtime::liveness`).
pub async fn judge_key(engine: &Engine, key: &AgentKey) -> Result<AgentIdentity, AuthError> {
    let mut conn = engine.pool().acquire().await?;
    let verdict = agents::key_verdict(&mut conn, &key.key_hash, key.agent_id).await?;
    drop(conn);
    let identity = verdict.identity()?;
    engine.runtime().seen(identity.agent_id).await;
    Ok(identity)
}

impl From<KeyRefused> for AuthError {
    fn from(refused: KeyRefused) -> Self {
        match refused {
            KeyRefused::Unauthorized => AuthError::Unauthorized(refused.to_string()),
            KeyRefused::Forbidden(why) => AuthError::Forbidden(why.into()),
        }
    }
}

/// The key a request presented, bound to the agent it authenticated as (for the calls whose own
/// statements check it again).
pub(crate) fn key_of(headers: &HeaderMap, agent: &AgentIdentity) -> Option<AgentKey> {
    credentials::presented_key(headers).map(|key| AgentKey::new(key, Some(agent.agent_id)))
}
