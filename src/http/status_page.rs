//! `GET /`: the status page, one self-contained HTML file compiled into the binary.

use axum::{Router, response::Html, routing::get};

use super::AppState;

/// The page (plain HTML, CSS and JS; no build step, no external fetches).
pub const PAGE: &str = include_str!("status_page.html");

/// The route.
pub fn router() -> Router<AppState> {
    Router::new().route("/", get(|| async { Html(PAGE) }))
}
