//! What a request presents: the one reading of the `Authorization` and `x-api-key` headers that
//! every adapter uses.
//!
//! An agent's API key comes in `x-api-key`, or as a bearer token that starts with [`KEY_PREFIX`]
//! (the prefix tells keys and JWTs apart). An `x-api-key` header is a key whatever else the
//! request carries, even when it is empty: a request that names a key authenticates with that
//! key and is never let through on a bearer token beside it. An empty key is refused as a
//! missing one, without a lookup.

use axum::http::{HeaderMap, header::AUTHORIZATION};

/// Every API key starts with this, which also tells keys and JWTs apart (the engine's, beside
/// `AgentKey`).
pub use crate::delivery::KEY_PREFIX;

/// The header an agent's API key may come in (besides `Authorization: Bearer pk_...`).
pub const API_KEY_HEADER: &str = "x-api-key";

/// The bearer token in `headers`, if any (not empty).
pub fn bearer_of(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token.trim()).filter(|t| !t.is_empty())
}

/// The API key the request presents (`x-api-key`, trimmed, possibly empty; or a bearer token
/// that is a key), if any.
pub fn presented_key(headers: &HeaderMap) -> Option<&str> {
    if let Some(v) = headers.get(API_KEY_HEADER).and_then(|v| v.to_str().ok()) {
        return Some(v.trim());
    }
    bearer_of(headers).filter(|t| t.starts_with(KEY_PREFIX))
}

/// The JWT the request presents: a bearer token that is not an API key.
pub fn presented_token(headers: &HeaderMap) -> Option<&str> {
    bearer_of(headers).filter(|t| !t.starts_with(KEY_PREFIX))
}

/// Whether the request carries anything that looks like an API key (for a route that takes a
/// JWT, to say that a key is not one).
pub fn carries_a_key(headers: &HeaderMap) -> bool {
    headers.contains_key(API_KEY_HEADER) || bearer_of(headers).is_some()
}

/// Whether `value` has a JWT's shape: three non-empty base64url parts joined by dots. Used to
/// tell a person who pasted a token where a key goes what they sent, never to trust it.
pub fn looks_like_jwt(value: &str) -> bool {
    let parts: Vec<&str> = value.trim().split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (axum::http::HeaderName::from_static(k), v.parse().unwrap())).collect()
    }

    #[test]
    fn a_key_header_is_a_key_even_empty_and_wins_over_a_bearer_token() {
        assert_eq!(presented_key(&headers(&[("x-api-key", " pk_a ")])), Some("pk_a"));
        assert_eq!(presented_key(&headers(&[("x-api-key", "  ")])), Some(""));
        let both = headers(&[("x-api-key", ""), ("authorization", "Bearer pk_b")]);
        assert_eq!(presented_key(&both), Some(""));
        assert_eq!(presented_key(&headers(&[("authorization", "Bearer pk_b")])), Some("pk_b"));
        assert_eq!(presented_key(&headers(&[("authorization", "bearer eyJ.x.y")])), None);
        assert_eq!(presented_token(&headers(&[("authorization", "bearer eyJ.x.y")])), Some("eyJ.x.y"));
        assert_eq!(presented_token(&headers(&[("authorization", "Bearer pk_b")])), None);
        assert_eq!(bearer_of(&headers(&[("authorization", "Bearer   ")])), None);
        assert_eq!(bearer_of(&headers(&[("authorization", "Basic abc")])), None);
    }
}
