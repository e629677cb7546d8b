//! Text that PostgreSQL cannot store is refused at the door.
//!
//! PostgreSQL refuses the NUL character (U+0000) in `text` and in `jsonb` (where it is the
//! escape `\u0000`), so a NUL that reached a query would fail it as an internal error. This
//! module owns the one check, and the shared entry points call it on everything a request
//! brings: every string and every object key of a JSON body, free-form parts included (the
//! HTTP extractors), every decoded query parameter (ditto), the JWT's subject (HTTP
//! authentication) and every MCP message (the MCP transport middleware). It sits beneath both
//! adapters so that each calls the same check. A NUL is answered 400 `invalid_body` naming where
//! it was, before anything is stored.
//!
//! Other bad Unicode cannot get this far: the JSON parser refuses lone surrogates and raw
//! control characters, and query strings are decoded to valid UTF-8 (invalid bytes become U+FFFD).

use axum::{extract::Query, http::Uri};
use serde_json::Value;

use super::error::ApiError;

/// The escape that spells NUL in JSON (a raw NUL byte is not valid JSON at all).
const NUL_ESCAPE: &[u8] = br"\u0000";

/// Whether `s` holds a NUL character.
pub fn has_nul(s: &str) -> bool {
    s.contains('\0')
}

/// The JSON pointer (RFC 6901) of the first string or object key in `value` that holds a NUL,
/// or `None` when there is none. A key's NUL is shown as `\u0000` in the pointer.
pub fn find_nul(value: &Value) -> Option<String> {
    fn walk(value: &Value, path: &mut Vec<String>) -> bool {
        match value {
            Value::String(s) => has_nul(s),
            Value::Array(items) => items.iter().enumerate().any(|(i, item)| {
                path.push(i.to_string());
                let found = walk(item, path);
                if !found {
                    path.pop();
                }
                found
            }),
            Value::Object(map) => map.iter().any(|(key, item)| {
                path.push(key.replace('~', "~0").replace('/', "~1").replace('\0', r"\u0000"));
                let found = has_nul(key) || walk(item, path);
                if !found {
                    path.pop();
                }
                found
            }),
            Value::Null | Value::Bool(_) | Value::Number(_) => false,
        }
    }
    let mut path = Vec::new();
    walk(value, &mut path).then(|| path.iter().map(|segment| format!("/{segment}")).collect())
}

/// The 400 for a NUL found at JSON pointer `pointer` of a body (or of an MCP message).
pub fn nul_in_body(pointer: &str) -> ApiError {
    let place = if pointer.is_empty() { "the body".to_owned() } else { format!("field {pointer}") };
    ApiError::invalid(format!("{place} contains a NUL character (\\u0000), which text may not contain"))
}

/// Checks a JSON body before it is parsed: a body with a NUL in any string or key is refused
/// with [`nul_in_body`]. Bodies without the `\u0000` escape (nearly all) pass at the cost of one
/// scan; a body that is not valid JSON passes too, for the parser to report.
pub fn check_json_bytes(bytes: &[u8]) -> Result<(), ApiError> {
    if !bytes.windows(NUL_ESCAPE.len()).any(|w| w == NUL_ESCAPE) {
        return Ok(());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => match find_nul(&value) {
            Some(pointer) => Err(nul_in_body(&pointer)),
            None => Ok(()),
        },
        Err(_) => Ok(()),
    }
}

/// Checks a request's query string: a decoded parameter name or value holding a NUL (`%00`) is
/// refused.
pub fn check_query(uri: &Uri) -> Result<(), ApiError> {
    if !uri.query().is_some_and(|q| q.contains("%00")) {
        return Ok(());
    }
    let pairs = Query::<Vec<(String, String)>>::try_from_uri(uri).map(|Query(pairs)| pairs).unwrap_or_default();
    match pairs.iter().find(|(name, value)| has_nul(name) || has_nul(value)) {
        Some((name, _)) => Err(ApiError::invalid(format!(
            "query parameter {} contains a NUL character (%00), which text may not contain",
            crate::quote::quote(&name.replace('\0', r"\u0000"))
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn finds_the_first_nul_by_json_pointer() {
        assert_eq!(find_nul(&json!({"a": "fine", "b": ["x", "y\u{0}"]})), Some("/b/1".into()));
        assert_eq!(find_nul(&json!({"p": {"k\u{0}": 1}})), Some(r"/p/k\u0000".into()));
        assert_eq!(find_nul(&json!({"a/b": {"c~d": "\u{0}"}})), Some("/a~1b/c~0d".into()));
        assert_eq!(find_nul(&json!("\u{0}")), Some(String::new()));
        assert_eq!(find_nul(&json!({"emoji": "🦀 Ünïcödé 日本語", "n": [1, null, true]})), None);
    }

    #[test]
    fn checks_raw_bodies_and_query_strings() {
        assert!(check_json_bytes(br#"{"name": "a\u0000b"}"#).is_err());
        // An escaped backslash followed by "u0000" is the text `\u0000`, which is fine.
        assert!(check_json_bytes(br#"{"name": "a\\u0000b"}"#).is_ok());
        assert!(check_json_bytes("{\"name\": \"🦀 \\u00e9\"}".as_bytes()).is_ok());
        let query = |q: &str| check_query(&q.parse::<Uri>().unwrap());
        assert!(query("/x?userId=x%00").is_err());
        assert!(query("/x?a%00=1").is_err());
        assert!(query("/x?userId=%F0%9F%A6%80&status=all").is_ok());
        assert!(query("/x").is_ok());
    }
}
