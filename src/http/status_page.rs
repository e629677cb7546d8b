//! `GET /`: the status page, one self-contained HTML file compiled into the binary.

use axum::{
    Router,
    http::header,
    response::{Html, IntoResponse},
    routing::get,
};

use super::AppState;

/// The page (plain HTML, CSS and JS; no build step, no external fetches).
pub const PAGE: &str = include_str!("status_page.html");

/// The page's Content-Security-Policy: its own inline script and style, requests to this origin
/// only, and never inside a frame (a header, since `frame-ancestors` is ignored in a `<meta>`).
pub const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The route.
pub fn router() -> Router<AppState> {
    Router::new().route("/", get(status_page))
}

/// The status page: paste a user token, watch your opportunities, decide on pending ones.
#[utoipa::path(get, path = "/", tag = "ui", operation_id = "statusPage",
    responses((status = 200, description = "The status page", content_type = "text/html", body = String)))]
pub async fn status_page() -> impl IntoResponse {
    ([(header::CONTENT_SECURITY_POLICY, CSP)], Html(PAGE))
}
