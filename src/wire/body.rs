//! Reading a request body, for both adapters: the one size limit and the one way a body that is
//! too large or too slow is refused (413 `payload_too_large`, 408 `request_timeout`).

use axum::{
    body::Bytes,
    extract::{FromRequest, Request},
    http::StatusCode,
};

use super::{body_deadline::BodyDeadline, error::ApiError};

/// The largest body any route accepts (256 KiB); a larger one answers 413 `payload_too_large`.
pub const BODY_LIMIT: usize = 256 * 1024;

/// Reads the raw body, mapping the size limit to 413 and a body that did not arrive in time to
/// 408.
pub async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(BODY_LIMIT)
        } else if is_body_timeout(&e) {
            ApiError::RequestTimeout
        } else {
            ApiError::invalid(format!("could not read the request body: {e}"))
        }
    })
}

/// Whether reading a body failed because it did not arrive within the body timeout or by its
/// deadline.
fn is_body_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.is::<tower_http::timeout::TimeoutError>() || c.is::<BodyDeadline>() {
            return true;
        }
        cause = c.source();
    }
    false
}
