//! `GET /`: the status page, one self-contained HTML file compiled into the binary: the user's
//! opportunities, their insights and the console for their agents.
//!
//! The page's policy allows its one inline `<script>` and one inline `<style>` by their SHA-256
//! hashes, computed here from the page itself, so that nothing else inline runs or applies:
//! no injected script, no inline event handler, no `style` attribute.

use std::sync::LazyLock;

use axum::{
    Router,
    http::{HeaderValue, header},
    response::{Html, IntoResponse},
    routing::get,
};
use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::AppState;

/// The page (plain HTML, CSS and JS; no build step, no external fetches).
pub const PAGE: &str = include_str!("status_page.html");

/// The CSP source naming the text of the page's one `<tag>` element by its SHA-256 hash.
fn inline_hash(tag: &str) -> String {
    let open = format!("<{tag}>");
    let start = PAGE.find(&open).unwrap_or_else(|| panic!("the status page has no <{tag}>")) + open.len();
    let end = start + PAGE[start..].find(&format!("</{tag}>")).unwrap_or_else(|| panic!("<{tag}> is not closed"));
    let digest = Sha256::digest(&PAGE.as_bytes()[start..end]);
    format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(digest))
}

/// The page's Content-Security-Policy: its own inline script and style only, requests to this
/// origin only, and never inside a frame (a header, since `frame-ancestors` is ignored in a
/// `<meta>`).
pub static CSP: LazyLock<HeaderValue> = LazyLock::new(|| {
    let policy = format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src data:; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        inline_hash("script"),
        inline_hash("style"),
    );
    HeaderValue::from_str(&policy).expect("the policy is ASCII")
});

/// The route.
pub fn router() -> Router<AppState> {
    Router::new().route("/", get(status_page))
}

/// The status page: paste a user token, decide on your opportunities, manage your agents.
#[utoipa::path(get, path = "/", tag = "ui", operation_id = "statusPage",
    responses((status = 200, description = "The status page", content_type = "text/html", body = String)))]
pub async fn status_page() -> impl IntoResponse {
    ([(header::CONTENT_SECURITY_POLICY, CSP.clone())], Html(PAGE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_only_the_pages_own_script_and_style() {
        let policy = CSP.to_str().unwrap();
        assert!(!policy.contains("unsafe"), "{policy}");
        assert_eq!(PAGE.matches("<script").count(), 1, "one inline script, hashed");
        assert_eq!(PAGE.matches("<style").count(), 1, "one inline style, hashed");
        assert!(!PAGE.contains(" style=\""), "style attributes would be refused");
        let script = policy.split("; ").find(|d| d.starts_with("script-src ")).unwrap();
        assert!(script.starts_with("script-src 'sha256-"), "{script}");
        assert_eq!(script.split(' ').count(), 2, "one hash, nothing else: {script}");
    }
}
