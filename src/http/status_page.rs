//! `GET /`: the status page, one self-contained HTML file compiled into the binary.

use axum::{Router, response::Html, routing::get};

use super::AppState;

/// The page (plain HTML, CSS and JS; no build step, no external fetches).
pub const PAGE: &str = include_str!("status_page.html");

/// The route.
pub fn router() -> Router<AppState> {
    Router::new().route("/", get(status_page))
}

/// The status page: paste a user token, watch your opportunities, decide on pending ones.
#[utoipa::path(get, path = "/", tag = "ui", operation_id = "statusPage",
    responses((status = 200, description = "The status page", content_type = "text/html", body = String)))]
pub async fn status_page() -> Html<&'static str> {
    Html(PAGE)
}
