//! The README's tours, run as written: the shell blocks of "A tour with curl" (the platform's
//! calls), "Run a personal agent" (`parley agent` with `examples/my_agent.py`) and "An agent
//! Parley calls over A2A" (the example agent of `examples/a2a_agent/`, installed by its own
//! script, registered by its card, playing a negotiation, found in the directory and delegated
//! to), in one bash, against a real service. Only the addresses change: `PARLEY_URL`'s one
//! assignment names the test's service, and the example agent listens on a free port instead of
//! 8090. `cargo run -q -- ...` runs the `parley` binary the tests were built with; `cargo run --
//! serve &` has nothing to start, since the service is up (it stands in as a job the tour can
//! stop), so the service is configured as the tour restarts it (`PARLEY_A2A_ALLOW_PRIVATE_TARGETS`).
//! What a newcomer pastes must work, and print what the sentences around it promise.

use std::{process::Command, time::Duration};

use serde_json::Value;

use crate::{
    a2a_agents::example_agent_python,
    helpers::{TEST_SECRET, TestApp},
};

/// The README's tours, in the order they run.
const TOURS: [&str; 3] = ["## A tour with curl", "## Run a personal agent", "## An agent Parley calls over A2A"];

/// The one address of the service the tours name (in `PARLEY_URL`'s assignment).
const SERVICE_LINE: &str = "export PARLEY_URL=http://127.0.0.1:8080";

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

/// The turns of a negotiation view the tour printed, as (user, playedBy).
fn players(view: &Value) -> Vec<(String, String)> {
    view["turns"]
        .as_array()
        .unwrap_or_else(|| panic!("no turns: {view}"))
        .iter()
        .map(|t| (t["userId"].as_str().unwrap().to_owned(), t["playedBy"].as_str().unwrap().to_owned()))
        .collect()
}

#[tokio::test]
async fn the_readme_tours_run_as_written() {
    // The example agent's packages, installed before the clock of the tour starts (the tour's
    // own first run would install them the same way, by the same script).
    tokio::task::spawn_blocking(example_agent_python).await.unwrap();
    let app = TestApp::spawn_with(|c| {
        // As the tour restarts it, and with the default hold of a delegate call.
        c.a2a_allow_private_targets = true;
        c.long_poll_max = Duration::from_secs(30);
    })
    .await;
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let blocks: Vec<Vec<String>> = TOURS.iter().map(|t| shell_blocks(&readme, t)).collect();
    assert_eq!(blocks.iter().map(Vec::len).collect::<Vec<_>>(), [2, 1, 1], "the tours' shell blocks: {blocks:?}");
    let script = blocks.concat().join("\n");
    // One place names the service: a busy port means changing one line, not twenty.
    assert_eq!(script.matches("127.0.0.1:8080").count(), 1, "the service's address outside PARLEY_URL");
    assert!(script.contains(SERVICE_LINE) && !script.contains("localhost"), "{script}");
    let agent_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let script = script
        .replace(SERVICE_LINE, &format!("export PARLEY_URL={}", app.base))
        .replace("--port 8090", &format!("--port {agent_port}"))
        .replace("127.0.0.1:8090", &format!("127.0.0.1:{agent_port}"));
    // `cargo run -- serve &` stands in for the running service as a job that stops cleanly when
    // the tour stops it; at the end every job the tour left running is stopped.
    let prelude = r#"
set -u
cargo() {
    case "$*" in
        "run -- serve") exec bash -c 'trap "kill \$! 2>/dev/null; exit 0" TERM; sleep 3600 & wait' ;;
        "run -q -- "*) shift 3; "$PARLEY_BIN" "$@" ;;
        *) echo "the tour runs cargo as: cargo $*" >&2; return 2 ;;
    esac
}
"#;
    let epilogue = "exec 2>/dev/null\nkill $(jobs -p)\nwait";
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"), Into::into);
    let out = tokio::task::spawn_blocking(move || {
        Command::new("timeout")
            .args(["--kill-after=10", "600", "bash", "-c"])
            .arg(format!("{prelude}\n{script}\n{epilogue}"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("PARLEY_BIN", env!("CARGO_BIN_EXE_parley"))
            .env("PARLEY_JWT_SECRET", TEST_SECRET)
            .env("CARGO_TARGET_DIR", target)
            .env_remove("DATABASE_URL")
            .env_remove("PARLEY_URL")
            .env_remove("PARLEY_AGENT_KEY")
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
    assert_eq!(docs.len(), 14, "{stdout}");
    assert!(docs.iter().all(|d| d.get("code").is_none() || d["code"] == "not_reactivatable"), "{stdout}");

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

    // His phone agent, run by `parley agent` with the example program, answers his turns of the
    // round that waited for it.
    let round2 = players(&docs[8]);
    assert!(round2.contains(&("user-tomas".into(), "agent".into())), "{}", docs[8]);
    assert!(docs[8]["outcome"].as_str().is_some_and(|s| !s.is_empty()), "{}", docs[8]);

    // The example A2A agent, registered by its card: Parley speaks A2A 1.0 to it on loopback.
    assert_eq!(docs[9]["delivery"], "a2a", "{}", docs[9]);
    assert_eq!(docs[9]["dialect"], "1.0", "{}", docs[9]);
    assert_eq!(docs[9]["interface"], format!("http://127.0.0.1:{agent_port}/"), "{}", docs[9]);
    // It plays Tomas's seat: every turn of his is its own, none Parley's.
    let over_a2a = players(&docs[10]);
    let his: Vec<_> = over_a2a.iter().filter(|(user, _)| user == "user-tomas").collect();
    assert!(!his.is_empty() && his.iter().all(|(_, by)| by == "agent"), "{}", docs[10]);
    // Its capability, found by discovery as the sentence says (the only code reviewer here),
    // under the anonymous id the registration gave it.
    assert_eq!(docs[11]["taskType"], "code-review", "{}", docs[11]);
    let anonymous = docs[11]["anonymousAgentId"].as_str().unwrap_or_else(|| panic!("{}", docs[11]));
    assert_eq!(docs[12]["total"], 1, "{}", docs[12]);
    assert_eq!(docs[12]["results"][0]["anonymousAgentId"], anonymous, "{}", docs[12]);
    // The delegation, done by the agent over A2A and handed back by Parley.
    assert_eq!(docs[13]["status"], "success", "{}", docs[13]);
    let feedback = docs[13]["output"]["feedback"].as_str().unwrap_or_else(|| panic!("{}", docs[13]));
    assert!(feedback.contains("unwrap()"), "{feedback}");
}
