//! The README and the reference pages under `docs/` name only what the service has.
//!
//! - **Routes.** Every route they name, as a method and a path in their text (`POST
//!   /api/delegations/{requestId}/cancel`) or in a curl command against `$PARLEY_URL`, is one the
//!   OpenAPI document (`api-spec/openapi.json`) declares with that method, or one of the few the
//!   service answers outside it ([`OUTSIDE_THE_DOCUMENT`]). A page that promises a call the
//!   service does not have, or denies one it has, sends a reader astray; the second kind is a
//!   sentence, which this cannot read, but the first is caught here.
//! - **Links.** Every link from one of them to a heading (`[text](file.md#anchor)`, or `#anchor`
//!   within the page) leads to a heading that exists, by GitHub's rule for heading anchors, or to
//!   an `<a id>`: moving a section must not leave links to where it was.
//!
//! Placeholders in a path (`{id}`, `:agentId`, `$AGENT`, `$(jq ...)`) stand for one segment and
//! match a parameter of the document's path. No database is involved.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

/// Routes the service answers that the OpenAPI document does not describe, with why.
const OUTSIDE_THE_DOCUMENT: [(&str, &str, &str); 3] = [
    ("POST", "/mcp", "MCP's streamable HTTP transport: its tools are described in docs/agents.md"),
    ("GET", "/mcp", "the same transport, refused 405 with an Allow header"),
    ("GET", "/.well-known/agent.json", "the A2A card at the path A2A 0.3 clients look, beside agent-card.json"),
];

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The pages checked: the README and every markdown file under `docs/`.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("a docs/ directory")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

fn relative(page: &Path) -> String {
    page.strip_prefix(root()).unwrap_or(page).display().to_string()
}

/// The page's lines, each with whether it is inside a fenced code block.
fn lines(text: &str) -> Vec<(bool, &str)> {
    let mut in_code = false;
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                return (true, line);
            }
            (in_code, line)
        })
        .collect()
}

/// The document's routes: (method, path segments), parameters as `None`.
fn declared() -> Vec<(String, Vec<Option<String>>)> {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("api-spec/openapi.json")).unwrap()).unwrap();
    let mut routes = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let segments = segments(path).into_iter().map(|s| (!s.starts_with('{')).then_some(s)).collect();
            routes.push((method.to_uppercase(), segments));
        }
    }
    for (method, path, _) in OUTSIDE_THE_DOCUMENT {
        routes.push((method.to_owned(), segments(path).into_iter().map(Some).collect()));
    }
    routes
}

fn segments(path: &str) -> Vec<String> {
    path.trim_start_matches('/').split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// Whether a documented segment is a placeholder rather than a literal.
fn is_placeholder(segment: &str) -> bool {
    segment.starts_with('{') || segment.starts_with(':') || segment.starts_with('$') || segment.starts_with('<')
}

/// Whether the document declares `method path` (a documented path, placeholders as they are).
fn declares(routes: &[(String, Vec<Option<String>>)], method: &str, path: &str) -> bool {
    let documented = segments(path);
    routes.iter().any(|(m, declared)| {
        m == method
            && declared.len() == documented.len()
            && declared.iter().zip(&documented).all(|(d, s)| match d {
                None => true,
                Some(literal) => !is_placeholder(s) && literal == s,
            })
    })
}

/// A path as written after a method or `$PARLEY_URL`: up to a space, quote, backtick or
/// bracket, without its query string; a command substitution `$(...)` is one placeholder.
fn path_at(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' if chars.peek() == Some(&'(') => {
                let mut depth = 0;
                for d in chars.by_ref() {
                    match d {
                        '(' => depth += 1,
                        ')' if depth == 1 => break,
                        ')' => depth -= 1,
                        _ => {}
                    }
                }
                out.push_str("$SUBST");
            }
            '?' | '#' => break,
            c if c.is_whitespace() || "`\"'),;|<>".contains(c) => break,
            c => out.push(c),
        }
    }
    out.trim_end_matches(['.', ':']).to_owned()
}

/// The routes a page names: `METHOD /path` in its text and in its code, and curl commands
/// against `$PARLEY_URL` (their method from `-X`, else POST with a body, else GET).
fn named_routes(text: &str) -> Vec<(usize, String, String)> {
    let mut found = Vec::new();
    let all = lines(text);
    for (i, (_, line)) in all.iter().enumerate() {
        for method in METHODS {
            let mut rest = *line;
            while let Some(at) = rest.find(&format!("{method} /")) {
                let before = rest[..at].chars().last();
                let path = path_at(&rest[at + method.len() + 1..]);
                rest = &rest[at + method.len() + 1..];
                if before.is_some_and(|c| c.is_alphanumeric()) || path.contains("...") || path.len() < 2 {
                    continue;
                }
                found.push((i + 1, method.to_owned(), path));
            }
        }
    }
    // Curl commands, their continuation lines joined.
    let mut i = 0;
    while i < all.len() {
        let (in_code, line) = all[i];
        let start = i;
        let mut command = line.to_owned();
        while command.trim_end().ends_with('\\') && i + 1 < all.len() {
            i += 1;
            command = format!("{} {}", command.trim_end().trim_end_matches('\\'), all[i].1);
        }
        i += 1;
        if !in_code || !command.contains("curl ") {
            continue;
        }
        let Some(at) = command.find("$PARLEY_URL/") else { continue };
        let path = path_at(&command[at + "$PARLEY_URL".len()..]);
        let words: Vec<&str> = command.split_whitespace().collect();
        let method = words
            .windows(2)
            .find(|w| w[0] == "-X")
            .map(|w| w[1].to_owned())
            .unwrap_or_else(|| if words.contains(&"-d") { "POST".into() } else { "GET".into() });
        found.push((start + 1, method, path));
    }
    found
}

#[test]
fn every_route_the_readme_and_docs_name_is_one_the_service_has() {
    let routes = declared();
    let mut wrong = Vec::new();
    let mut named = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (line, method, path) in named_routes(&text) {
            named += 1;
            if !declares(&routes, &method, &path) {
                wrong.push(format!("{}:{line}: {method} {path}", relative(&page)));
            }
        }
    }
    assert!(named > 100, "only {named} routes found: the reading of the pages is broken");
    assert!(wrong.is_empty(), "routes the OpenAPI document does not have:\n{}", wrong.join("\n"));
}

#[test]
fn the_cancel_of_a_delegation_is_found_as_documented_and_a_made_up_route_is_not() {
    // The reading itself: what a page says, found and judged.
    let routes = declared();
    let text = "cancel: `POST /api/delegations/{requestId}/cancel`; read `GET /api/trust/:agentId`.\n\
                ```sh\ncurl -s -X POST $PARLEY_URL/api/delegations/$RID/cancel -H \"x-api-key: $KEY\"\n\
                curl -s $PARLEY_URL/api/agents/$(jq -r .agent.id <<<\"$X\")/capabilities -d '{}'\n```\n\
                `DELETE /api/delegations/{requestId}` and `GET /api/agents/me/secrets`\n";
    let judged: Vec<(String, String, bool)> =
        named_routes(text).into_iter().map(|(_, m, p)| (m.clone(), p.clone(), declares(&routes, &m, &p))).collect();
    let expected = [
        ("GET", "/api/trust/:agentId", true),
        ("POST", "/api/delegations/{requestId}/cancel", true),
        ("GET", "/api/agents/me/secrets", false),
        ("DELETE", "/api/delegations/{requestId}", false),
        ("POST", "/api/delegations/$RID/cancel", true),
        // A body makes it a POST, which that path does not take (PUT registers a capability).
        ("POST", "/api/agents/$SUBST/capabilities", false),
    ];
    assert_eq!(judged, expected.map(|(m, p, ok)| (m.to_owned(), p.to_owned(), ok)));
}

/// GitHub's anchor for a heading: lower case, without punctuation but `-` and `_`, spaces as `-`.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors a page offers: its headings' and its `<a id="...">`s.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (in_code, line) in lines(text) {
        if in_code {
            continue;
        }
        if line.starts_with('#') {
            out.insert(anchor_of(line.trim_start_matches('#')));
        }
        let mut rest = line;
        while let Some(at) = rest.find("<a id=\"") {
            rest = &rest[at + 7..];
            out.insert(rest[..rest.find('"').unwrap_or(0)].to_owned());
        }
    }
    out
}

#[test]
fn every_link_to_a_heading_leads_to_one_that_exists() {
    assert_eq!(anchor_of(" `parley agent`"), "parley-agent");
    assert_eq!(anchor_of("For the platform's backend"), "for-the-platforms-backend");
    assert_eq!(anchor_of("Agents Parley calls (by their AgentCard)"), "agents-parley-calls-by-their-agentcard");
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (number, (in_code, line)) in lines(&text).into_iter().enumerate() {
            if in_code {
                continue;
            }
            let mut rest = line;
            while let Some(at) = rest.find("](") {
                rest = &rest[at + 2..];
                let Some(end) = rest.find(')') else { break };
                let target = &rest[..end];
                rest = &rest[end..];
                let Some((file, anchor)) = target.split_once('#') else { continue };
                if file.contains("://") || !(file.is_empty() || file.ends_with(".md")) {
                    continue;
                }
                let linked = if file.is_empty() { page.clone() } else { page.parent().unwrap().join(file) };
                let offered = std::fs::read_to_string(&linked).map(|t| anchors(&t)).unwrap_or_default();
                if !offered.contains(anchor) {
                    broken.push(format!("{}:{}: {target}", relative(&page), number + 1));
                }
            }
        }
    }
    assert!(broken.is_empty(), "links to headings that do not exist:\n{}", broken.join("\n"));
}
