//! The failed-authentication limiter: a client address that keeps presenting bad credentials is
//! answered 429 (with `Retry-After`) before anything looks its credentials up.
//!
//! Every 401 the API answers counts against the client's address in a keyed GCRA limiter
//! (`governor`): a burst of `PARLEY_AUTH_FAILURE_BURST` failures, then one more per
//! `PARLEY_AUTH_FAILURE_REFILL`. The failure that overflows the budget is answered 429 instead of
//! 401, and until the budget has room again every request of that address that carries
//! credentials is refused at the door, so a flood of bad API keys costs no database lookup each.
//! Successful authentications consume nothing.

use std::{
    collections::HashMap,
    net::IpAddr,
    num::NonZeroU32,
    sync::Mutex,
    time::{Duration, Instant},
};

use axum::{
    extract::{Request, State},
    http::{StatusCode, header::AUTHORIZATION},
    middleware::Next,
    response::{IntoResponse, Response},
};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter, clock::Clock};

use super::{AppState, error::ApiError, serve::client_address};

/// Above this many tracked addresses, addresses whose budget is full again are forgotten.
const TRACKED_ADDRESSES: usize = 10_000;

/// Failed authentications per client address.
pub struct AuthFailureLimiter {
    failures: DefaultKeyedRateLimiter<IpAddr>,
    /// Addresses over their budget, and until when.
    blocked: Mutex<HashMap<IpAddr, Instant>>,
}

impl AuthFailureLimiter {
    /// A burst of `burst` failures, then one more per `refill`.
    pub fn new(burst: u32, refill: Duration) -> AuthFailureLimiter {
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::with_period(refill.max(Duration::from_nanos(1)))
            .expect("a non-zero period")
            .allow_burst(burst);
        AuthFailureLimiter { failures: RateLimiter::keyed(quota), blocked: Mutex::new(HashMap::new()) }
    }

    /// How long `address` is still refused, if it is.
    pub fn blocked_for(&self, address: IpAddr) -> Option<Duration> {
        let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        let until = *blocked.get(&address)?;
        let now = Instant::now();
        if until > now {
            Some(until - now)
        } else {
            blocked.remove(&address);
            None
        }
    }

    /// Counts a failed authentication of `address`; `Err(wait)` when it is one too many.
    pub fn failed(&self, address: IpAddr) -> Result<(), Duration> {
        if self.failures.len() > TRACKED_ADDRESSES {
            self.failures.retain_recent();
        }
        match self.failures.check_key(&address) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
                let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                blocked.retain(|_, until| *until > now);
                blocked.insert(address, now + wait);
                Err(wait)
            }
        }
    }
}

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
        && let Some(wait) = limiter.blocked_for(address)
    {
        return ApiError::RateLimited(wait).into_response();
    }
    let response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED
        && let Err(wait) = limiter.failed(address)
    {
        tracing::info!(%address, "too many failed authentications from one address");
        return ApiError::RateLimited(wait).into_response();
    }
    response
}
