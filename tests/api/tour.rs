//! The README's "A tour with curl", run as written: its shell blocks, in one bash, against a real
//! service. Only the address changes (the service listens on a free port, not 8080), and
//! `cargo run -q -- ...` runs the `parley` binary the tests were built with; `cargo run -- serve &`
//! has nothing to do, since the service is already up. What a newcomer pastes must work.

use std::process::Command;

use serde_json::Value;

use crate::helpers::{TEST_SECRET, TestApp};

/// The `sh` blocks of the README section headed `heading`, in order.
fn shell_blocks(readme: &str, heading: &str) -> Vec<String> {
    let start =
        readme.find(&format!("\n{heading}\n")).unwrap_or_else(|| panic!("the README has no section {heading:?}"));
    let section = &readme[start + heading.len() + 2..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut blocks = Vec::new();
    let mut rest = section;
    while let Some(open) = rest.find("```sh\n") {
        let body = &rest[open + 6..];
        let close = body.find("\n```").expect("a shell block is closed");
        blocks.push(body[..close].to_owned());
        rest = &body[close + 4..];
    }
    blocks
}

/// Every JSON document `text` holds, in order (jq prints one after another).
fn documents(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text).into_iter::<Value>().map(|d| d.expect("the tour prints JSON")).collect()
}

#[tokio::test]
async fn the_readme_tour_runs_as_written() {
    let app = TestApp::spawn().await;
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let blocks = shell_blocks(&readme, "## A tour with curl");
    assert_eq!(blocks.len(), 2, "the tour's shell blocks: {blocks:?}");
    let address = app.base.trim_start_matches("http://").to_owned();
    let script = blocks.join("\n").replace("localhost:8080", &address);
    let prelude = r#"
set -u
cargo() {
    case "$*" in
        "run -- serve") ;;
        "run -q -- "*) shift 3; "$PARLEY_BIN" "$@" ;;
        *) echo "the tour runs cargo as: cargo $*" >&2; return 2 ;;
    esac
}
"#;
    let out = tokio::task::spawn_blocking(move || {
        Command::new("bash")
            .arg("-c")
            .arg(format!("{prelude}\n{script}\nwait"))
            .env("PARLEY_BIN", env!("CARGO_BIN_EXE_parley"))
            .env("PARLEY_JWT_SECRET", TEST_SECRET)
            .env_remove("DATABASE_URL")
            .env("RUST_LOG", "error")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}\n{stdout}\n{stderr}", out.status);
    assert!(stderr.trim().is_empty(), "{stderr}");

    let docs = documents(&stdout);
    assert_eq!(docs.len(), 8, "{stdout}");
    // The platform's match between two system negotiators: pending, with its turns and outcome.
    assert_eq!(docs[0]["status"], "pending", "{}", docs[0]);
    assert!(docs[0]["turns"].as_array().is_some_and(|t| t.len() >= 2), "{}", docs[0]);
    assert!(docs[0]["outcome"].as_str().is_some_and(|s| !s.is_empty()), "{}", docs[0]);
    // Maya sees it, and accepts.
    assert_eq!(docs[1]["status"], "pending", "{}", docs[1]);
    assert_eq!(docs[1]["counterpartName"], "Tomas Novak", "{}", docs[1]);
    assert_eq!(docs[2]["myDecision"], "accept", "{}", docs[2]);
    // Tomas's agent is registered; his turn waits for it; the platform cancels: stalled.
    assert!(docs[3]["agent"].is_string(), "{}", docs[3]);
    assert_eq!(docs[4]["awaitingUserId"], "user-tomas", "{}", docs[4]);
    // ...and until when, and what then: the README's words about an agent that never ran.
    assert!(docs[4]["awaitingUntil"].is_string(), "{}", docs[4]);
    assert_eq!(docs[4]["awaitingThen"], "system_negotiator", "{}", docs[4]);
    assert_eq!(docs[5]["status"], "canceled", "{}", docs[5]);
    // Reactivated: a new round; the pending opportunity is refused, with the reason shown.
    assert_eq!(docs[6]["status"], "negotiating", "{}", docs[6]);
    assert!(docs[6]["negotiation"].is_string(), "{}", docs[6]);
    assert_eq!(docs[7]["code"], "not_reactivatable", "{}", docs[7]);
    assert!(docs[..7].iter().all(|d| d.get("error").is_none()), "{stdout}");
}
