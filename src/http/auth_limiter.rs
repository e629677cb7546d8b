//! The failed-authentication limiter: a client address that keeps presenting bad credentials is
//! answered 429 (with `Retry-After`) before anything looks its credentials up.
//!
//! Every 401 the API answers counts against the client's address in a keyed GCRA limiter
//! (`governor`): a burst of `PARLEY_AUTH_FAILURE_BURST` failures, then one more per
//! `PARLEY_AUTH_FAILURE_REFILL`. The failure that overflows the budget is answered 429 instead of
//! 401, and until the budget has room again every request of that address that carries
//! credentials is refused at the door, so a flood of bad API keys costs no database lookup each.
//! Successful authentications consume nothing.

use std::net::IpAddr;

use axum::{
    extract::{Request, State},
    http::{StatusCode, header::AUTHORIZATION},
    middleware::Next,
    response::{IntoResponse, Response},
};
use super::{AppState, error::ApiError, serve::client_address};
use crate::failure_limiter::FailureLimiter;

/// Failed authentications per client address.
pub type AuthFailureLimiter = FailureLimiter<IpAddr>;

fn carries_credentials(request: &Request) -> bool {
    request.headers().contains_key(AUTHORIZATION) || request.headers().contains_key("x-api-key")
}

/// The middleware: refuses blocked addresses' credentials, counts every 401.
pub async fn limit_failed_authentication(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(address) = client_address(request.extensions()).map(|a| a.ip()) else {
        return next.run(request).await;
    };
    let limiter = &state.auth_failures;
    if carries_credentials(&request)
        && let Some(wait) = limiter.blocked_for(&address)
    {
        return ApiError::RateLimited(wait).into_response();
    }
    let response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED
        && let Err(wait) = limiter.failed(&address)
    {
        tracing::info!(%address, "too many failed authentications from one address");
        return ApiError::RateLimited(wait).into_response();
    }
    response
}
