//! The A2A project's own conformance kit (the TCK, `../shared/a2a-tck`, or `A2A_TCK_DIR`; used
//! unchanged, from a copy) run twice at once over JSON-RPC and HTTP+JSON: against the kit's agent
//! served by the official SDK's own server, and against a live Parley where that agent is
//! registered by its AgentCard, so that every plain message the kit sends is routed to it. The
//! test fails on any MUST requirement the SDK's server passes and Parley fails
//! (`tests/a2a/tck_compare.py` compares the two reports).
//!
//! The kit sends no credentials; `tests/a2a/tck_auth.py`, a pytest plugin loaded with `-p`, adds
//! the requester's agent key to its requests. `tests/a2a/tck_sut.py` serves the kit's agent on
//! a2a-sdk 1.3.0 (see there what it adapts, outside the kit). The kit and its agent run in a
//! virtualenv under the target directory, made on first use with their dependencies from PyPI.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use reqwest::StatusCode;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::{
    a2a_agents::venv,
    helpers::{TestAgent, TestApp},
};

/// What the kit's virtualenv holds: the SDK its agent is served by, and the kit's dependencies.
const PACKAGES: &[&str] = &[
    "a2a-sdk[http-server]==1.3.0",
    "uvicorn",
    "starlette",
    "packaging",
    "pytest>=8.0",
    "pytest-asyncio>=0.23",
    "httpx>=0.27",
    "grpcio>=1.60",
    "protobuf>=4.25",
    "googleapis-common-protos>=1.62",
    "jsonschema>=4.21",
    "pytest-html>=4.1",
    "gherkin-official>=29.0",
    "Jinja2>=3.1",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The kit: `A2A_TCK_DIR`, else `../shared/a2a-tck` beside the repository.
pub(crate) fn kit() -> PathBuf {
    let kit = std::env::var_os("A2A_TCK_DIR").map_or_else(|| root().join("../shared/a2a-tck"), PathBuf::from);
    assert!(kit.join("tests/compatibility").is_dir(), "the A2A TCK is not at {} (set A2A_TCK_DIR)", kit.display());
    kit
}

/// The kit's virtualenv's python, made on first use.
pub(crate) async fn python() -> PathBuf {
    tokio::task::spawn_blocking(|| venv("a2a-tck-venv", Path::new("python3"), PACKAGES)).await.unwrap()
}

/// The kit's agent, served by the SDK's server: its base URL and its process.
pub(crate) struct Sut {
    pub(crate) base: String,
    _child: tokio::process::Child,
}

impl Sut {
    /// The kit's agent started with `args` (`--name`, `--skill`, see `tests/a2a/tck_sut.py`).
    pub(crate) async fn start(python: &Path, args: &[&str]) -> Sut {
        let mut child = tokio::process::Command::new(python)
            .arg(root().join("tests/a2a/tck_sut.py"))
            .arg("--kit")
            .arg(kit())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("starting tests/a2a/tck_sut.py");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let base = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(base) = line.strip_prefix("ready ") {
                    return base.trim().to_owned();
                }
            }
            panic!("tck_sut.py ended before it was ready");
        })
        .await
        .expect("tck_sut.py was not ready within 60 s");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Sut { base, _child: child }
    }

    /// Its card's URL.
    pub(crate) fn card(&self) -> String {
        format!("{}/.well-known/agent-card.json", self.base)
    }
}

/// A Parley that may call agents on loopback, with room for the kit's bursts.
pub(crate) async fn parley() -> TestApp {
    TestApp::spawn_with(|c| {
        c.a2a_allow_private_targets = true;
        c.inbound_rate = 10_000;
        c.outbound_rate = 10_000;
    })
    .await
}

/// The agent of the card at `card_url`, registered for `user`.
pub(crate) async fn register_by_card(app: &TestApp, user: &str, name: &str, card_url: &str) -> TestAgent {
    let created =
        app.post("/api/agents", &app.user_token(user), &json!({"name": name, "agentCardUrl": card_url})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    TestAgent {
        id: created.body["agent"]["id"].as_str().unwrap().to_owned(),
        key: created.body["apiKey"]["key"].as_str().unwrap().to_owned(),
        key_id: created.body["apiKey"]["id"].as_str().unwrap().to_owned(),
    }
}

/// Runs the kit against `host` (over JSON-RPC and HTTP+JSON) from its copy `dir`, with `bearer`
/// added to its requests; the report's path and pytest's output.
async fn run_kit(python: &Path, dir: &Path, host: &str, bearer: &str, report: &Path) -> String {
    let out = tokio::process::Command::new(python)
        .current_dir(dir)
        .args(["-m", "pytest", "tests/compatibility/", "--tb=line", "-q", "-p", "no:cacheprovider", "-p", "tck_auth"])
        .arg(format!("--sut-host={host}"))
        .arg("--transport=jsonrpc,http_json")
        .arg(format!("--compatibility-report={}", report.display()))
        .env("PYTHONPATH", root().join("tests/a2a"))
        .env("TCK_BEARER", bearer)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(600), out).await.expect("the kit ran over 10 minutes").unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(report.with_extension("json").exists(), "the kit wrote no report: {text}");
    text
}

/// Copies the kit (read-only where it lies) to `to`, unchanged.
fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == ".venv" || name == "reports" || name == ".git" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type().unwrap().is_dir() {
            copy(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
            let mut perms = std::fs::metadata(&dst).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            std::fs::set_permissions(&dst, perms).unwrap();
        }
    }
}

#[tokio::test]
async fn the_official_tck_passes_through_parley_every_must_the_sdks_server_passes() {
    let python = python().await;
    let sut = Sut::start(&python, &[]).await;
    let app = parley().await;
    register_by_card(&app, "user-sut", "The kit's agent", &sut.card()).await;
    let requester = app.register_agent("user-tck").await;

    let work = std::env::temp_dir().join(format!("parley-tck-{}", uuid::Uuid::new_v4()));
    let (sdk_dir, parley_dir) = (work.join("kit-sdk"), work.join("kit-parley"));
    copy(&kit(), &sdk_dir);
    copy(&kit(), &parley_dir);
    let (sdk_report, parley_report) = (work.join("sdk"), work.join("parley"));
    // Both runs at once: the SDK's server's and Parley's, each its own copy of the kit.
    let (sdk_out, parley_out) = tokio::join!(
        run_kit(&python, &sdk_dir, &sut.base, "", &sdk_report),
        run_kit(&python, &parley_dir, &app.base, &requester.key, &parley_report),
    );
    let compared = std::process::Command::new(&python)
        .arg(root().join("tests/a2a/tck_compare.py"))
        .arg(sdk_report.with_extension("json"))
        .arg(parley_report.with_extension("json"))
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&compared.stdout).into_owned();
    println!("{summary}");
    let last = |out: &str| out.lines().last().unwrap_or_default().to_owned();
    println!("SDK's server: {}\nthrough Parley: {}", last(&sdk_out), last(&parley_out));
    assert!(
        compared.status.success(),
        "requirements the SDK's server passes fail through Parley:\n{summary}\n{parley_out}"
    );
    let _ = std::fs::remove_dir_all(&work);
}
