//! The failed-authentication limiter: a client address that keeps presenting bad credentials is
//! answered 429 (with `Retry-After`), and a bad credential it repeats is refused before anything
//! looks it up; a valid credential is never refused.
//!
//! Every 401 the API answers counts against the client's address in a keyed GCRA limiter
//! (`governor`): a burst of `PARLEY_AUTH_FAILURE_BURST` failures, then one more per
//! `PARLEY_AUTH_FAILURE_REFILL`. A failure past that budget is answered 429 instead of 401, and
//! until the budget has room again the same request (the same credentials on the same method and
//! path, from the same address) is refused at the door, so a client repeating a bad API key
//! costs no database lookup each. Only what failed is refused: another credential from the same
//! address is looked up as usual, so a valid token or key is served while a flood of bad ones is
//! refused, and each new bad one costs one lookup before it joins them. Successful
//! authentications consume nothing.

use std::net::IpAddr;

use axum::{
    extract::{Request, State},
    http::{StatusCode, header::AUTHORIZATION},
    middleware::Next,
    response::{IntoResponse, Response},
};
use sha2::{Digest, Sha256};

use super::{AppState, error::ApiError, serve::client_address};
use crate::failure_limiter::FailureLimiter;

/// What a refused request is recognised by at the door: the client's address and a digest of
/// the credentials it presented with the method and path it presented them on.
pub type Presented = (IpAddr, [u8; 32]);

/// Failed authentications per client address, refused at the door per [`Presented`].
pub type AuthFailureLimiter = FailureLimiter<IpAddr, Presented>;

fn carries_credentials(request: &Request) -> bool {
    request.headers().contains_key(AUTHORIZATION) || request.headers().contains_key("x-api-key")
}

/// The digest of what `request` presents: its credentials (both headers, each length-prefixed so
/// that no two different pairs read alike), its method and its path.
fn presented(address: IpAddr, request: &Request) -> Presented {
    let mut digest = Sha256::new();
    for part in [
        request.headers().get(AUTHORIZATION).map_or(&b""[..], |v| v.as_bytes()),
        request.headers().get("x-api-key").map_or(&b""[..], |v| v.as_bytes()),
        request.method().as_str().as_bytes(),
        request.uri().path().as_bytes(),
    ] {
        digest.update((part.len() as u64).to_be_bytes());
        digest.update(part);
    }
    (address, digest.finalize().into())
}

/// The middleware: refuses a blocked request's credentials at the door, counts every 401.
pub async fn limit_failed_authentication(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(address) = client_address(request.extensions()).map(|a| a.ip()) else {
        return next.run(request).await;
    };
    let limiter = &state.auth_failures;
    let door = presented(address, &request);
    if carries_credentials(&request)
        && let Some(wait) = limiter.blocked_for(&door)
    {
        return ApiError::RateLimited(wait).into_response();
    }
    let response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED
        && let Err(wait) = limiter.failed_at(&address, door)
    {
        tracing::info!(%address, "too many failed authentications from one address");
        return ApiError::RateLimited(wait).into_response();
    }
    response
}
