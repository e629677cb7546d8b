//! Agents that never poll: an agent served by the official A2A SDK's server (Python `a2a-sdk`,
//! pinned; spoken to in 1.0, and in 0.3 when its card offers only that) and a real Bindu agent (`bindu` on Python 3.12), each registered by
//! its AgentCard URL and each sent its work by Parley: a delegation completed with the input
//! received as data, a requester's cancel and a timeout reaching the agent as a cancel of its
//! task, an output its capability's schema refuses failing the attempt with why; and a
//! negotiation turn answered end to end by the SDK agent. `tests/a2a/sdk_agent.py` and
//! `tests/a2a/bindu_agent.py` are the agents; each logs every message and cancel it receives,
//! which is what the tests read of the agent's side.
//!
//! The agents run on 127.0.0.1, so these tests set `PARLEY_A2A_ALLOW_PRIVATE_TARGETS`. Their
//! virtualenvs are made under the target directory on first use (from PyPI, as the other
//! Python checks make theirs): the SDK agent's is the example A2A agent's, with the packages
//! `examples/a2a_agent/requirements.txt` pins (`examples/a2a_agent/run.sh --setup` makes it); with
//! no Python 3.12 to be had, the Bindu tests fail saying so.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::helpers::{TestAgent, TestApp};

/// What the Bindu agent's virtualenv holds.
const BINDU: &[&str] = &["bindu==2026.36.7"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

fn run(cmd: &mut std::process::Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// A virtualenv `name` under the target directory made by `python` with `packages`, on first
/// use (a marker file names what it holds); returns its python.
///
/// Tests running at once (threads of this binary, or other test binaries) ask for the same
/// virtualenv: its making is held under an exclusive lock on a file beside it, so that no test
/// clears a virtualenv another is installing into or already runs from.
pub(crate) fn venv(name: &str, python: &Path, packages: &[&str]) -> PathBuf {
    let venv = target_dir().join(name);
    let marker = venv.join(format!("installed-{}", packages.join("+").replace(['/', '[', ']'], "_")));
    let bin = venv.join("bin/python");
    if marker.exists() {
        return bin;
    }
    std::fs::create_dir_all(target_dir()).unwrap();
    let lock = std::fs::File::create(target_dir().join(format!("{name}.lock"))).unwrap();
    lock.lock().unwrap();
    if marker.exists() {
        return bin;
    }
    run(std::process::Command::new(python).args(["-m", "venv", "--clear"]).arg(&venv), "making a virtualenv");
    run(
        std::process::Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "--disable-pip-version-check"])
            .args(packages),
        &format!("pip install {} (PyPI must be reachable)", packages.join(" ")),
    );
    std::fs::write(&marker, "").unwrap();
    bin
}

/// A Python 3.12 or newer: `python3.12` on the path, else pyenv's.
fn python_3_12() -> PathBuf {
    let on_path = std::process::Command::new("python3.12").arg("--version").output();
    if on_path.is_ok_and(|o| o.status.success()) {
        return PathBuf::from("python3.12");
    }
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")))
        .map(|r| r.join("versions"));
    let mut found: Vec<PathBuf> = pyenv
        .and_then(|dir| std::fs::read_dir(dir).ok())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("3.12"))
        .map(|e| e.path().join("bin/python3.12"))
        .filter(|p| p.exists())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!("the Bindu agent needs Python 3.12 (bindu requires it): neither python3.12 on PATH nor pyenv's 3.12")
    })
}

/// A running agent: its base URL and the log of what it received.
pub(crate) struct RunningAgent {
    pub(crate) base: String,
    log: PathBuf,
    _child: tokio::process::Child,
}

impl RunningAgent {
    /// Starts `script` with `python` on a free port.
    async fn start(python: PathBuf, script: &str, env: &[(&str, &str)]) -> RunningAgent {
        let log = std::env::temp_dir().join(format!("parley-a2a-agent-{}.jsonl", uuid::Uuid::new_v4()));
        let mut child = tokio::process::Command::new(&python)
            .arg(root().join("tests/a2a").join(script))
            .args(["--port", "0", "--log"])
            .arg(&log)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {script}: {e}"));
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = tokio::time::timeout(Duration::from_secs(90), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(base) = line.strip_prefix("ready ") {
                    return base.trim().to_owned();
                }
            }
            panic!("{script} ended before it was ready");
        })
        .await
        .unwrap_or_else(|_| panic!("{script} was not ready within 90 s"));
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        RunningAgent { base: ready, log, _child: child }
    }

    /// What the agent has logged so far.
    pub(crate) fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits until the log holds a line `matches` accepts, and returns it.
    pub(crate) async fn wait_for(&self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(line) = self.received().into_iter().find(|l| matches(l)) {
                return line;
            }
            assert!(tokio::time::Instant::now() < deadline, "the agent never logged {what}: {:#?}", self.received());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The example A2A agent's virtualenv, made on first use by its own script (which installs its
/// pinned packages once, whoever asks first); returns its python.
pub(crate) fn example_agent_python() -> PathBuf {
    let out = std::process::Command::new("bash")
        .arg(root().join("examples/a2a_agent/run.sh"))
        .arg("--setup")
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .unwrap_or_else(|e| panic!("examples/a2a_agent/run.sh --setup: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "examples/a2a_agent/run.sh --setup failed (python3 with venv, and PyPI, are needed): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(stdout.trim())
}

/// The SDK agent, started (in the example agent's virtualenv: the same SDK and server).
pub(crate) async fn sdk_agent(env: &[(&str, &str)]) -> RunningAgent {
    let python = tokio::task::spawn_blocking(example_agent_python).await.unwrap();
    RunningAgent::start(python, "sdk_agent.py", env).await
}

/// The Bindu agent, started.
pub(crate) async fn bindu_agent() -> RunningAgent {
    let python = tokio::task::spawn_blocking(|| venv("bindu-venv", &python_3_12(), BINDU)).await.unwrap();
    RunningAgent::start(python, "bindu_agent.py", &[]).await
}

/// A Parley that may call agents on loopback, with delegation and turn timers in seconds.
pub(crate) async fn spawn() -> TestApp {
    TestApp::spawn_with(|c| {
        c.a2a_allow_private_targets = true;
        c.delegation_accept_timeout = Duration::from_secs(20);
        c.delegation_min_timeout = Duration::from_secs(1);
    })
    .await
}

/// The capability the agents offer: a summary, checked by its output schema.
fn capability() -> Value {
    json!({
        "taskType": "summarization",
        "inputSchema": {"type": "object", "required": ["mode"]},
        "outputSchema": {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}},
        "estimatedLatencyMs": 100
    })
}

/// An agent registered for `user` by the card at `card_url`, offering [`capability`]; its
/// anonymous id.
pub(crate) async fn register_by_card(app: &TestApp, user: &str, card_url: &str) -> (TestAgent, String) {
    let created =
        app.post("/api/agents", &app.user_token(user), &json!({"name": "Called", "agentCardUrl": card_url})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let agent = TestAgent {
        id: created.body["agent"]["id"].as_str().unwrap().to_owned(),
        key: created.body["apiKey"]["key"].as_str().unwrap().to_owned(),
        key_id: created.body["apiKey"]["id"].as_str().unwrap().to_owned(),
    };
    let put = app.agent_call(&agent, Method::PUT, "/capabilities", Some(&capability())).await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    (agent, put.body["anonymousAgentId"].as_str().unwrap().to_owned())
}

/// Delegates `input` to the agent known as `target`, with `timeout_ms`; its request id.
async fn delegate(app: &TestApp, requester: &TestAgent, target: &str, input: Value, timeout_ms: u64) -> String {
    let rid = uuid::Uuid::new_v4().to_string();
    let body = json!({
        "requestId": rid, "agentId": requester.id, "targetAnonymousId": target, "taskType": "summarization",
        "input": input, "timeoutMs": timeout_ms, "fallbackEnabled": false,
    });
    let sent = app.delegate_async(requester, &body).await;
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.text);
    rid
}

/// The delegation once `done` holds for it (long-polled).
async fn delegation_when(app: &TestApp, requester: &TestAgent, rid: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let read = app.keyed(requester, Method::GET, &format!("/api/delegations/{rid}?wait=2"), None).await;
        assert!(matches!(read.status, StatusCode::OK | StatusCode::ACCEPTED), "{}", read.text);
        let delegation = &read.body["delegation"];
        if done(delegation) {
            return delegation.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "the delegation never got there: {:#}", read.body);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn ended(d: &Value) -> bool {
    !matches!(d["status"].as_str(), Some("request" | "accepted"))
}

/// The four delegation cases against a running agent registered at `card_url`, spoken to in
/// `dialect`.
async fn delegations_reach(app: &TestApp, agent: &RunningAgent, card_url: &str, dialect: &str) {
    let requester = app.register_agent("user-rhea").await;
    let (called, target) = register_by_card(app, "user-tomas", card_url).await;
    let chosen: String = sqlx::query_scalar("SELECT dialect FROM agent_cards WHERE agent_id = $1::uuid")
        .bind(&called.id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(chosen, dialect);

    // Completed: the agent got the input as data and Parley's metadata; its output came back.
    let input = json!({"mode": "reply", "output": {"summary": "short"}, "text": "a long text"});
    let rid = delegate(app, &requester, &target, input.clone(), 20_000).await;
    let done = delegation_when(app, &requester, &rid, ended).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(done["output"], json!({"summary": "short"}));
    let got = agent.wait_for("the delegation", |l| l["event"] == "message" && l["data"]["text"] == "a long text").await;
    assert_eq!(got["data"], input, "the handler received the input as data");

    // An output the capability's schema refuses fails the attempt, saying why.
    let rid = delegate(app, &requester, &target, json!({"mode": "reply", "output": {"wrong": 1}}), 20_000).await;
    let failed = delegation_when(app, &requester, &rid, ended).await;
    assert_eq!(failed["status"], "error", "{failed:#}");
    let reason = failed["attempts"][0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("output") && reason.contains("summary"), "{reason}");

    // The requester's cancel reaches the agent's task.
    let rid = delegate(app, &requester, &target, json!({"mode": "sleep", "seconds": 60}), 60_000).await;
    delegation_when(app, &requester, &rid, |d| d["status"] == "accepted").await;
    let remote = remote_task_of(app, &rid).await;
    let canceled = app.keyed(&requester, Method::POST, &format!("/api/delegations/{rid}/cancel"), None).await;
    assert_eq!(canceled.status, StatusCode::OK, "{}", canceled.text);
    agent.wait_for("the requester's cancel", |l| l["event"] == "cancel" && l["taskId"] == remote.as_str()).await;

    // A timeout cancels it too, and the delegation ends `timeout`.
    let rid = delegate(app, &requester, &target, json!({"mode": "sleep", "seconds": 60}), 3_000).await;
    let timed_out = delegation_when(app, &requester, &rid, ended).await;
    assert_eq!(timed_out["status"], "timeout", "{timed_out:#}");
    let remote = remote_task_of(app, &rid).await;
    agent.wait_for("the timeout's cancel", |l| l["event"] == "cancel" && l["taskId"] == remote.as_str()).await;

    // Trust counts these attempts as it counts polled ones: the completed one for it, the
    // refused output and the timeout against it (both after it took them), the cancel not at all.
    let counts: (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT sum(attempts_completed)::bigint, sum(attempts_unfinished)::bigint,
                sum(accepted_completed)::bigint, sum(accepted_unfinished)::bigint
           FROM agent_trust_days WHERE agent_id = $1::uuid",
    )
    .bind(&called.id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(counts, (1, 2, 1, 2));

    // Each message was sent once: no message id twice in the agent's log.
    let ids: Vec<String> = agent
        .received()
        .iter()
        .filter(|l| l["event"] == "message")
        .filter_map(|l| l["messageId"].as_str().map(str::to_owned))
        .collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(ids.len(), unique.len(), "a message was sent twice: {ids:?}");
}

/// The agent's task id of the delegation's first attempt.
async fn remote_task_of(app: &TestApp, rid: &str) -> String {
    sqlx::query_scalar(
        "SELECT a.remote_task_id FROM delegation_attempts a JOIN delegations d USING (delegation_id)
          WHERE d.request_id = $1::uuid AND a.attempt = 1",
    )
    .bind(rid)
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn an_sdk_agent_registered_by_its_card_is_sent_its_delegations_and_their_cancels() {
    let agent = sdk_agent(&[]).await;
    let app = spawn().await;
    let card_url = format!("{}/.well-known/agent-card.json", agent.base);
    delegations_reach(&app, &agent, &card_url, "1.0").await;
    // Its calls are counted by method and outcome, and the last one shows on its card.
    let scraped = crate::metrics::scrape(&app).await;
    for method in ["send", "get", "cancel"] {
        let ok = crate::metrics::total(
            &scraped,
            "parley_a2a_outbound_calls_total",
            &[("method", method), ("outcome", "ok")],
        );
        assert!(ok >= 1.0, "{method}: {ok}");
    }
    let calls: i64 = app.counted("SELECT count(*) FROM agent_cards WHERE last_call_outcome IS NOT NULL").await;
    assert_eq!(calls, 1);
}

#[tokio::test]
async fn an_sdk_agent_offering_only_0_3_is_spoken_to_in_0_3() {
    let agent = sdk_agent(&[("SDK_AGENT_PROTOCOLS", "0.3")]).await;
    let app = spawn().await;
    let card_url = format!("{}/.well-known/agent-card.json", agent.base);
    delegations_reach(&app, &agent, &card_url, "0.3").await;
}

#[tokio::test]
async fn a_bindu_agent_registered_by_its_card_is_sent_its_delegations_and_their_cancels() {
    let agent = bindu_agent().await;
    let app = spawn().await;
    let card_url = format!("{}/.well-known/agent.json", agent.base);
    delegations_reach(&app, &agent, &card_url, "bindu").await;
}

/// Turn 1 of a negotiation as stored, once it is played (at most 40 s).
#[derive(Debug, sqlx::FromRow)]
struct Played {
    action: String,
    played_by: String,
    agent_id: Option<String>,
    fallback_reason: Option<String>,
}

async fn turn_one(app: &TestApp, negotiation: &str, agent: &RunningAgent) -> Played {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let row: Option<Played> = sqlx::query_as(
            "SELECT action, played_by, agent_id::text, fallback_reason FROM messages
              WHERE task_id = $1::uuid AND turn_number = 1",
        )
        .bind(negotiation)
        .fetch_optional(&app.pool)
        .await
        .unwrap();
        if let Some(row) = row {
            return row;
        }
        assert!(tokio::time::Instant::now() < deadline, "turn 1 was never played: {:#?}", agent.received());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn an_sdk_agent_takes_its_users_negotiation_turn_end_to_end() {
    let agent = sdk_agent(&[("SDK_AGENT_TURN_ACTION", "accept")]).await;
    let app = spawn().await;
    let card_url = format!("{}/.well-known/agent-card.json", agent.base);
    let (called, _) = register_by_card(&app, "user-tomas", &card_url).await;
    // Tomas's turn parks for his agent, which never polls: Parley sends it the turn.
    let started = app.start(&crate::fixtures::good_match()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let got = agent
        .wait_for("the turn", |l| l["event"] == "message" && l["metadata"]["parley"]["negotiationId"] == id.as_str())
        .await;
    assert!(got["data"].get("claimToken").is_none(), "the claim token was sent: {got:#}");
    assert_eq!(got["data"]["negotiationId"], id.as_str());
    // The agent's answer is the turn, played by it and applied under respond's rules.
    let played = turn_one(&app, &id, &agent).await;
    assert_eq!((played.action.as_str(), played.played_by.as_str()), ("accept", "personal"));
    assert_eq!(played.agent_id.as_deref(), Some(called.id.as_str()));
    let view = app.wait_for(&id, Duration::from_secs(10), |v| v["status"] == "completed").await;
    assert_eq!(view["status"], "completed");
    assert!(agent.received().iter().all(|l| l["event"] != "cancel"));
}

#[tokio::test]
async fn an_agents_answers_that_respond_refuses_hand_the_turn_back_after_three() {
    let agent =
        sdk_agent(&[("SDK_AGENT_TURN_ANSWER", r#"{"action": "dance", "assessment": {"reasoning": "?"}}"#)]).await;
    let app = spawn().await;
    let card_url = format!("{}/.well-known/agent-card.json", agent.base);
    register_by_card(&app, "user-tomas", &card_url).await;
    let started = app.start(&crate::fixtures::good_match()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    // Each refused answer releases the turn with why; the third hands it to the system negotiator.
    let played = turn_one(&app, &id, &agent).await;
    assert_eq!((played.played_by.as_str(), played.fallback_reason.as_deref()), ("system", Some("hand_back")));
    // Three claims, each sent under its own message id, none sent twice.
    let claims: i64 = sqlx::query_scalar("SELECT claim_generation FROM tasks WHERE task_id = $1::uuid")
        .bind(&id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(claims, 3);
    let sent: Vec<String> = agent
        .received()
        .iter()
        .filter(|l| l["event"] == "message")
        .filter_map(|l| l["messageId"].as_str().map(str::to_owned))
        .collect();
    assert!((1..=3).contains(&sent.len()), "{sent:?}");
    assert_eq!(sent.iter().collect::<std::collections::HashSet<_>>().len(), sent.len(), "{sent:?}");
    // The status page's source: the agent shows how its last call ended.
    let listed = app.get("/api/agents", &app.user_token("user-tomas")).await;
    let last = &listed.body["agents"][0]["lastCall"];
    assert!(last["outcome"].as_str().is_some_and(|o| o.ends_with(": ok")), "{last:#}");
}

#[tokio::test]
async fn the_key_parley_holds_is_listed_with_the_agents_keys_and_revoking_it_stops_the_pushes() {
    let agent = sdk_agent(&[]).await;
    let app = spawn().await;
    let card_url = format!("{}/.well-known/agent-card.json", agent.base);
    let (called, _) = register_by_card(&app, "user-tomas", &card_url).await;
    let owner = app.user_token("user-tomas");
    let read = app.get(&format!("/api/agents/{}", called.id), &owner).await;
    let keys = read.body["keys"].as_array().unwrap().clone();
    let held: Vec<&Value> = keys.iter().filter(|k| k["prefix"] == "pk_a2a_held_by_parley").collect();
    assert_eq!((keys.len(), held.len()), (2, 1), "{keys:#?}");
    let revoked = app
        .call(
            Method::DELETE,
            &format!("/api/agents/{}/keys/{}", called.id, held[0]["id"].as_str().unwrap()),
            Some(&owner),
            None,
        )
        .await;
    assert!(revoked.status.is_success(), "{}", revoked.text);

    // Tomas's turn parks; Parley no longer takes it for his agent, and it waits as for any agent.
    let started = app.start(&crate::fixtures::good_match()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    assert_eq!(started["negotiation"]["status"], "waiting_for_agent");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(agent.received().is_empty(), "{:#?}", agent.received());
    let (state, turns, _) = app.snapshot(&id).await;
    assert_eq!((state.as_str(), turns), ("waiting_for_agent", 1));
    // Storing the card again does not bring the revoked key back.
    let put = app
        .call(
            Method::PUT,
            &format!("/api/agents/{}/agent-card", called.id),
            Some(&owner),
            Some(&json!({"agentCardUrl": card_url})),
        )
        .await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.text);
    let read = app.get(&format!("/api/agents/{}", called.id), &owner).await;
    let held = read.body["keys"].as_array().unwrap().iter().find(|k| k["prefix"] == "pk_a2a_held_by_parley").cloned();
    assert!(held.is_some_and(|k| k["revokedAt"].is_string()), "{}", read.text);
}
