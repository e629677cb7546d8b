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
    from_slice_with_path(bytes).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Syntax | Category::Eof | Category::Io => ApiError::invalid(format!("invalid JSON: {e}")),
            Category::Data => ApiError::invalid(format!("invalid request: {e}")),
        }
    })
}

/// `serde_json::from_slice`, but a data error names the field by its path in the body
/// (`sourceUser.id`, `intents[0].text`) rather than by its last name alone: "missing field `id`"
/// becomes "missing field `sourceUser.id`", and any other data error is prefixed with the path of
/// the value it is about ("`sourceUser.profile`: invalid type: ..."). The line and column stay.
fn from_slice_with_path<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.classify() != serde_json::error::Category::Data || path == "." {
            return inner;
        }
        let (line, column) = (inner.line(), inner.column());
        let text = inner.to_string();
        let text = text.strip_suffix(&format!(" at line {line} column {column}")).unwrap_or(&text);
        // A missing field's path is its parent's: the field's own name is in the message.
        let message = match text.strip_prefix("missing field `").and_then(|rest| rest.strip_suffix('`')) {
            Some(field) => format!("missing field `{path}.{field}`"),
            None => format!("`{path}`: {text}"),
        };
        serde::de::Error::custom(format!("{message} at line {line} column {column}"))
    })?;
    de.end()?;
    Ok(value)
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
