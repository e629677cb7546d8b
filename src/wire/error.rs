//! The one error type of the wire and its body `{"error": ..., "code": ...}`.
//!
//! HTTP answers it as a status with the body; MCP answers it as a tool error with the same
//! `{error, code}` ([`ApiError::code`], [`ApiError::message`]). The services' own errors
//! (delivery, delegation, capabilities, ranking) convert into it here, once for both adapters.
//!
//! Every `code` the API answers is an [`ErrorCode`]; `docs/errors.md`'s table lists each
//! with its status and when it happens (a unit test of `crate::error_code` keeps them equal).
//!
//! Handlers return [`ApiError`]; internal failures are logged once here with their whole cause
//! chain and answered with a generic 500 that carries no internal detail.

use crate::error_code::ErrorCode;
use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde::Serialize;

use crate::{
    auth::AuthError,
    delivery::DeliveryError,
    directory::{CapabilityError, delegation::DelegationError, ranking::RankError},
};

/// An error answer.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the request is malformed or not allowed now.
    #[error("{message}")]
    BadRequest {
        /// `invalid_body`, `action_not_allowed`, ...
        code: ErrorCode,
        /// What is wrong, for a human.
        message: String,
    },
    /// 401: no or bad credentials.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: valid credentials that may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// 404: unknown or not visible to the caller.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// 404 with its own code (`unknown_target`).
    #[error("{message}")]
    NotFoundCode {
        /// `unknown_target`.
        code: ErrorCode,
        /// What is missing, for a human.
        message: String,
    },
    /// 409: the state does not allow it.
    #[error("{message}")]
    Conflict {
        /// `not_claimed`, `claimed_by_other`, `claim_stale`, `already_completed`, ...
        code: ErrorCode,
        /// What happened, for a human.
        message: String,
    },
    /// 409 `limit_reached`: the user has as many of something as they may (the body carries the
    /// limit).
    #[error("{message}")]
    LimitReached {
        /// What the limit is of, for a human.
        message: String,
        /// The limit.
        limit: u32,
    },
    /// 408: the request body did not arrive whole in time.
    #[error("the request body did not arrive in time; send it at once")]
    RequestTimeout,
    /// 413: the body is larger than the limit.
    #[error("request body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    /// 429: too many failed authentications from the client's address; retry after the duration.
    #[error("too many failed authentications from this address; retry later")]
    RateLimited(std::time::Duration),
    /// 429: too many of one kind of request (the message says which); retry after the duration.
    #[error("{0}")]
    TooMany(String, std::time::Duration),
    /// 503: a dependency is down.
    #[error("{0}")]
    Unavailable(String),
    /// 500: a failure the caller cannot fix; details are logged, never sent.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// The error body every 4xx/5xx carries.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"error": "the API key is unknown, revoked or expired", "code": "unauthorized"}))]
pub struct ErrorBody {
    /// A human-readable message.
    pub error: String,
    /// A machine-readable code: `invalid_body`, `action_not_allowed`, `unauthorized`, `forbidden`, `not_found`, `not_claimed`,
    /// `claimed_by_other`, `claim_stale`, `turn_already_answered`, `unknown_claim_token`,
    /// `no_system_negotiator`, `already_completed`, `opportunity_id_reused`, `invalid_state`,
    /// `not_pending`, `already_decided`, `not_reactivatable`, `input_invalid`, `output_invalid`,
    /// `target_not_eligible`, `unknown_target`, `schema_too_complex`, `agent_card_invalid`, `url_refused`, `request_id_reused`,
    /// `request_id_taken`, `not_addressed`, `limit_reached`, `request_timeout`,
    /// `payload_too_large`, `rate_limited`, `unavailable`, `internal`.
    #[schema(value_type = String)]
    pub code: &'static str,
    /// With `limit_reached`: the limit that was reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

impl ApiError {
    /// A 400 `invalid_body` with `message`.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::BadRequest { code: ErrorCode::InvalidBody, message: message.into() }
    }

    /// The message a client is given: every quoted run in it cut to a short prefix and the whole
    /// to a few hundred characters (see `crate::quote`), so that no answer echoes what was sent
    /// at length; nothing of an internal failure.
    pub fn message(&self) -> String {
        match self {
            ApiError::Internal(_) => "internal server error".to_owned(),
            other => crate::quote::shorten_quoted(&other.to_string()),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) | ApiError::NotFoundCode { .. } => StatusCode::NOT_FOUND,
            ApiError::Conflict { .. } | ApiError::LimitReached { .. } => StatusCode::CONFLICT,
            ApiError::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RateLimited(_) | ApiError::TooMany(..) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The machine-readable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            ApiError::BadRequest { code, .. }
            | ApiError::Conflict { code, .. }
            | ApiError::NotFoundCode { code, .. } => *code,
            ApiError::Unauthorized(_) => ErrorCode::Unauthorized,
            ApiError::Forbidden(_) => ErrorCode::Forbidden,
            ApiError::NotFound(_) => ErrorCode::NotFound,
            ApiError::LimitReached { .. } => ErrorCode::LimitReached,
            ApiError::RequestTimeout => ErrorCode::RequestTimeout,
            ApiError::PayloadTooLarge(_) => ErrorCode::PayloadTooLarge,
            ApiError::RateLimited(_) | ApiError::TooMany(..) => ErrorCode::RateLimited,
            ApiError::Unavailable(_) => ErrorCode::Unavailable,
            ApiError::Internal(_) => ErrorCode::Internal,
        }
    }
}

/// Whether an internal error is the database being unreachable or restarting (a 503 the client
/// may retry) rather than a bug (a 500).
pub fn is_database_unavailable(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| match cause.downcast_ref::<sqlx::Error>() {
        Some(
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed,
        ) => true,
        Some(sqlx::Error::Database(d)) => {
            d.code().is_some_and(|c| c.starts_with("57P") || c.starts_with("08") || c == "53300")
        }
        _ => false,
    })
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let this = match self {
            ApiError::Internal(e) if is_database_unavailable(&e) => {
                let error = crate::quote::logged(&format!("{e:#}"));
                tracing::warn!(%error, "the database is unavailable");
                ApiError::Unavailable("the database is unavailable; retry shortly".into())
            }
            other => other,
        };
        let status = this.status();
        if let ApiError::Internal(e) = &this {
            let error = crate::quote::logged(&format!("{e:#}"));
            tracing::error!(%error, "internal error");
        }
        let message = this.message();
        let limit = match &this {
            ApiError::LimitReached { limit, .. } => Some(*limit),
            _ => None,
        };
        let mut response =
            (status, Json(ErrorBody { error: message, code: this.code().as_str(), limit })).into_response();
        if let ApiError::RateLimited(wait) | ApiError::TooMany(_, wait) = this {
            // Whole seconds, rounded up: retrying earlier would only be refused again.
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.max(1).into());
        }
        if status == StatusCode::REQUEST_TIMEOUT {
            // The rest of the body may still be on its way; the connection cannot be reused.
            response
                .headers_mut()
                .insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
        }
        response
    }
}

impl From<DeliveryError> for ApiError {
    fn from(e: DeliveryError) -> Self {
        match e {
            DeliveryError::Unauthorized => ApiError::Unauthorized(e.to_string()),
            DeliveryError::Forbidden(message) => ApiError::Forbidden(message.into()),
            DeliveryError::NotFound => ApiError::NotFound("negotiation"),
            DeliveryError::OpportunityNotFound => ApiError::NotFound("opportunity"),
            DeliveryError::NotPending(_) => ApiError::Conflict { code: ErrorCode::NotPending, message: e.to_string() },
            DeliveryError::AlreadyDecided => {
                ApiError::Conflict { code: ErrorCode::AlreadyDecided, message: e.to_string() }
            }
            DeliveryError::NotReactivatable(_) => {
                ApiError::Conflict { code: ErrorCode::NotReactivatable, message: e.to_string() }
            }
            DeliveryError::AlreadyCompleted => ApiError::Conflict {
                code: ErrorCode::AlreadyCompleted,
                message: "the negotiation has already ended".into(),
            },
            DeliveryError::NotClaimed => ApiError::Conflict { code: ErrorCode::NotClaimed, message: e.to_string() },
            DeliveryError::ClaimedByOther => {
                ApiError::Conflict { code: ErrorCode::ClaimedByOther, message: e.to_string() }
            }
            DeliveryError::ClaimStale => ApiError::Conflict { code: ErrorCode::ClaimStale, message: e.to_string() },
            DeliveryError::TurnAlreadyAnswered => {
                ApiError::Conflict { code: ErrorCode::TurnAlreadyAnswered, message: e.to_string() }
            }
            DeliveryError::UnknownClaimToken => {
                ApiError::Conflict { code: ErrorCode::UnknownClaimToken, message: e.to_string() }
            }
            DeliveryError::OpportunityIdReused => {
                ApiError::Conflict { code: ErrorCode::OpportunityIdReused, message: e.to_string() }
            }
            DeliveryError::NoSystemNegotiator => {
                ApiError::Conflict { code: ErrorCode::NoSystemNegotiator, message: e.to_string() }
            }
            DeliveryError::QuestionLimit => ApiError::LimitReached {
                message: e.to_string(),
                limit: u32::try_from(crate::delivery::MAX_QUESTIONS).unwrap_or(u32::MAX),
            },
            DeliveryError::QuestionClosed(_) => {
                ApiError::Conflict { code: ErrorCode::QuestionClosed, message: e.to_string() }
            }
            DeliveryError::Invalid(message) => ApiError::invalid(message),
            DeliveryError::ActionNotAllowed(message) => {
                ApiError::BadRequest { code: ErrorCode::ActionNotAllowed, message }
            }
            DeliveryError::Transition(t) => {
                ApiError::Conflict { code: ErrorCode::InvalidState, message: t.to_string() }
            }
            DeliveryError::Unexpected(e) => ApiError::Internal(e),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        ApiError::Internal(e.into())
    }
}

impl From<DelegationError> for ApiError {
    fn from(e: DelegationError) -> Self {
        let message = e.to_string();
        match e {
            DelegationError::Invalid { .. } => ApiError::invalid(message),
            DelegationError::Unauthorized => ApiError::Unauthorized(message),
            DelegationError::Forbidden(m) => ApiError::Forbidden(m.into()),
            DelegationError::NotFound => ApiError::NotFound("delegation"),
            DelegationError::UnknownTarget => ApiError::NotFoundCode { code: ErrorCode::UnknownTarget, message },
            DelegationError::NotEligible(m) => ApiError::BadRequest { code: ErrorCode::TargetNotEligible, message: m },
            DelegationError::InputInvalid(m) => ApiError::BadRequest { code: ErrorCode::InputInvalid, message: m },
            DelegationError::OutputInvalid(m) => ApiError::BadRequest { code: ErrorCode::OutputInvalid, message: m },
            DelegationError::RequestIdReused => ApiError::Conflict { code: ErrorCode::RequestIdReused, message },
            DelegationError::RequestIdTaken => ApiError::Conflict { code: ErrorCode::RequestIdTaken, message },
            DelegationError::NotAddressed => ApiError::Conflict { code: ErrorCode::NotAddressed, message },
            DelegationError::Ended => ApiError::Conflict { code: ErrorCode::DelegationEnded, message },
            DelegationError::InvalidState(_) => ApiError::Conflict { code: ErrorCode::InvalidState, message },
            DelegationError::ClaimStale(_) => ApiError::Conflict { code: ErrorCode::ClaimStale, message },
            DelegationError::RateLimited(_, wait)
            | DelegationError::TooManyInvalid(wait)
            | DelegationError::CheckBudget(wait) => ApiError::TooMany(message, wait),
            DelegationError::Rescreen => ApiError::Conflict { code: ErrorCode::InvalidState, message },
            DelegationError::Overloaded => ApiError::Unavailable(message),
            DelegationError::Unexpected(e) => ApiError::Internal(e),
        }
    }
}

/// Who may not call, as every adapter answers it: the status and code the refusal names.
impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Unauthorized(message) => ApiError::Unauthorized(message),
            AuthError::Forbidden(message) => ApiError::Forbidden(message),
            AuthError::NotFound(what) => ApiError::NotFound(what),
            AuthError::Internal(e) => ApiError::Internal(e),
        }
    }
}

impl From<CapabilityError> for ApiError {
    fn from(e: CapabilityError) -> Self {
        ApiError::BadRequest { code: e.code, message: format!("{} {}", e.field, e.message) }
    }
}

impl From<RankError> for ApiError {
    fn from(e: RankError) -> Self {
        match e {
            RankError::Field(f) => f.into(),
            RankError::Request(r) => ApiError::invalid(r.message),
        }
    }
}

/// Handler result.
pub type ApiResult<T> = Result<T, ApiError>;
