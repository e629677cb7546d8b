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
//!
//! **What an address is** ([`client_key`]). One client may hold many addresses, so failures
//! count against the block a client gets as a whole, not the address it happens to use: an
//! IPv6 address by its /64 (the block one subscriber, one host or one virtual machine is
//! given; its 2^64 addresses are otherwise 2^64 budgets), an IPv4 address carried in IPv6
//! (`::ffff:a.b.c.d`, what a dual-stack listener sees of an IPv4 client) as that IPv4 address,
//! and all of loopback (`127.0.0.0/8`, `::1`) as one: it is one machine. Other IPv4 addresses
//! count one by one: an IPv4 address is scarce, and a /24 commonly holds unrelated customers
//! of one provider, or the users behind one carrier's NAT, whom one client's failures must not
//! lock out.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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

/// Failed authentications per client ([`client_key`]), refused at the door per [`Presented`].
pub type AuthFailureLimiter = FailureLimiter<IpAddr, Presented>;

/// The key the failures of a client at `address` count against (see the module docs): an IPv6
/// address's /64 (its first 64 bits, the rest zero), an IPv4-mapped IPv6 address's IPv4
/// address, `127.0.0.1` for every loopback address, any other IPv4 address as it is.
pub fn client_key(address: IpAddr) -> IpAddr {
    let address = match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    };
    match address {
        a if a.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
    }
}

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
    let Some(address) = client_address(request.extensions()).map(|a| client_key(a.ip())) else {
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
        tracing::info!(client = %address, "too many failed authentications from one client");
        return ApiError::RateLimited(wait).into_response();
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(address: &str) -> String {
        client_key(address.parse().unwrap()).to_string()
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_loopback_is_one_machine() {
        // Every address of one /64 is one client; the next /64 is another.
        assert_eq!(key("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::");
        assert_eq!(key("2001:db8:1:2:ffff:ffff:ffff:ffff"), "2001:db8:1:2::");
        assert_eq!(key("2001:db8:1:3::1"), "2001:db8:1:3::");
        // An IPv4 client seen by a dual-stack listener is its IPv4 address, not the one /64
        // every mapped address shares.
        assert_eq!(key("::ffff:203.0.113.7"), "203.0.113.7");
        assert_ne!(key("::ffff:203.0.113.7"), key("::ffff:198.51.100.9"));
        // Loopback, however spelled, is one machine.
        for loopback in ["127.0.0.1", "127.0.0.20", "127.255.1.2", "::1", "::ffff:127.0.0.5"] {
            assert_eq!(key(loopback), "127.0.0.1", "{loopback}");
        }
        // Other IPv4 addresses count one by one.
        assert_eq!(key("203.0.113.7"), "203.0.113.7");
        assert_ne!(key("203.0.113.7"), key("203.0.113.8"));
    }
}
