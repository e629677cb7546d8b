//! Extractors that turn every malformed input into our error body instead of axum's plain text:
//! JSON bodies, query strings and path ids. Bodies and query strings pass the NUL check of
//! [`super::input`] here, so no route can forget it. Reading the body and the listing's page
//! parameters are the wire's (`crate::wire::body`, `crate::wire::page`), shared with MCP.

use axum::{
    extract::{FromRequest, FromRequestParts, Path, Query, Request},
    http::request::Parts,
};
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::{error::ApiError, input};
pub use crate::wire::{
    body::{BODY_LIMIT, body_bytes},
    page::{MAX_PAGE, Page},
};

/// A JSON body: any content type, at most [`BODY_LIMIT`] bytes, errors as 400 `invalid_body`.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes(req, state).await?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// Parses a JSON body with a message that says what is wrong and where.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::invalid("the request body is empty; a JSON object is expected"));
    }
    input::check_json_bytes(bytes)?;
    serde_json::from_slice(bytes).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Syntax | Category::Eof | Category::Io => ApiError::invalid(format!("invalid JSON: {e}")),
            Category::Data => ApiError::invalid(format!("invalid request: {e}")),
        }
    })
}

/// A query string, errors as 400 `invalid_body`.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        input::check_query(&parts.uri)?;
        Query::<T>::from_request_parts(parts, state).await.map(|Query(q)| ApiQuery(q)).map_err(|e| {
            // The library's text quotes what it did not understand, sometimes unquoted: cut.
            let text: String = e.body_text().chars().take(160).collect();
            ApiError::invalid(format!("invalid query string: {text}"))
        })
    }
}

/// A path made of ids; a segment that is not a UUID cannot name anything, so it is a 404.
pub struct Ids<T>(pub T);

impl<S: Send + Sync> FromRequestParts<S> for Ids<Uuid> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) =
            Path::<String>::from_request_parts(parts, state).await.map_err(|_| ApiError::NotFound("resource"))?;
        Uuid::parse_str(&raw).map(Ids).map_err(|_| ApiError::NotFound("resource"))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Ids<(Uuid, Uuid)> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path((a, b)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::NotFound("resource"))?;
        match (Uuid::parse_str(&a), Uuid::parse_str(&b)) {
            (Ok(a), Ok(b)) => Ok(Ids((a, b))),
            _ => Err(ApiError::NotFound("resource")),
        }
    }
}

/// A JSON body that may be absent: an empty body reads as `T::default()`.
pub struct OptionalJson<T>(pub T);

impl<T: DeserializeOwned + Default, S: Send + Sync> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        parse_json(&bytes).map(OptionalJson)
    }
}
