//! The `parley` binary's start-up checks and small commands.

use std::{path::PathBuf, process::Command};

use crate::{
    helpers::{TEST_SECRET, post_for_json},
    serving::Serving,
};

/// A path of its own under the system's temporary directory, named after `what` (not created).
fn temp_path(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("parley-{what}-{}", uuid::Uuid::now_v7()))
}

/// A new directory of its own under the system's temporary directory, holding `files` (name
/// and contents).
fn temp_dir_with(what: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = temp_path(what);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, contents) in files {
        std::fs::write(dir.join(name), contents).unwrap();
    }
    dir
}

fn parley() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_parley"));
    c.env_remove("DATABASE_URL").env("RUST_LOG", "error");
    c
}

#[test]
fn a_bad_configuration_value_stops_the_start_naming_the_variable() {
    let out = parley().arg("serve").env("PARLEY_CLAIM_TIMEOUT", "soon").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("PARLEY_CLAIM_TIMEOUT"), "{err}");
}

#[test]
fn a_malformed_skill_file_stops_the_start_naming_the_file_and_the_field() {
    let dir = temp_dir_with("skills", &[("broken.yaml", "id: x\nname: X\ntags: 5\n")]);
    let file = dir.join("broken.yaml");
    let out = parley()
        .arg("serve")
        .env("PARLEY_SKILLS", &file)
        .env("PARLEY_DATA_DIR", &dir)
        .env("PARLEY_BIND", "127.0.0.1:0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.yaml") && err.contains("tags"), "{err}");
}

#[test]
fn token_prints_a_jwt_for_the_services_secret_and_refuses_bad_arguments() {
    // `parley serve` generated the secret into its data directory; `token` reads it.
    let secret = "0123456789abcdef0123456789abcdef";
    let dir = temp_dir_with("token", &[("jwt_secret", &format!("{secret}\n"))]);
    let out = parley()
        .args(["token", "--sub", "user-maya", "--role", "service", "--ttl", "2h"])
        .env("PARLEY_DATA_DIR", &dir)
        .env_remove("PARLEY_JWT_SECRET")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap();
    assert_eq!(token.trim().split('.').count(), 3);
    let keys = parley::JwtKeys::new(secret.as_bytes());
    let claims = keys.verify(token.trim()).unwrap();
    assert_eq!(claims.sub, "user-maya");
    assert_eq!(claims.role, parley::CallerRole::Service);
    // PARLEY_JWT_SECRET, when set, is the secret.
    let out = parley()
        .args(["token", "--sub", "x"])
        .env("PARLEY_DATA_DIR", &dir)
        .env("PARLEY_JWT_SECRET", TEST_SECRET)
        .output()
        .unwrap();
    assert!(out.status.success());
    parley::JwtKeys::new(TEST_SECRET.as_bytes()).verify(String::from_utf8(out.stdout).unwrap().trim()).unwrap();

    let bad = parley().args(["token", "--sub", "x", "--role", "root"]).env("PARLEY_DATA_DIR", &dir).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    // A lifetime that is not one says what a lifetime looks like.
    let forever =
        parley().args(["token", "--sub", "x", "--ttl", "forever"]).env("PARLEY_DATA_DIR", &dir).output().unwrap();
    assert_eq!(forever.status.code(), Some(2));
    let err = String::from_utf8_lossy(&forever.stderr);
    assert!(
        err.contains("--ttl \"forever\"") && err.contains("such as 1h") && !err.contains("expected number"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn parley_agent_says_what_is_missing_or_wrong_before_it_starts() {
    let agent = || {
        let mut c = parley();
        c.args(["agent", "--exec", "true"])
            .env_remove("PARLEY_URL")
            .env_remove("PARLEY_AGENT_KEY")
            .env_remove("PARLEY_LLM_API_KEY");
        c
    };
    // Neither the URL nor the key: both named, with their environment variables.
    let out = agent().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("PARLEY_URL") && err.contains("PARLEY_AGENT_KEY"), "{err}");
    let out = agent().env("PARLEY_URL", "http://127.0.0.1:9").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(2) && err.contains("PARLEY_AGENT_KEY") && !err.contains("PARLEY_URL="), "{err}");

    // A person's token where the agent's key belongs: said so, before anything is sent (nothing
    // listens at that address).
    let user_token = parley::JwtKeys::new(TEST_SECRET.as_bytes())
        .mint("user-tomas", parley::CallerRole::User, std::time::Duration::from_secs(60))
        .unwrap();
    let out = agent().env("PARLEY_URL", "http://127.0.0.1:9").env("PARLEY_AGENT_KEY", &user_token).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is a user token (a JWT), not an agent's API key") && !err.contains("unknown, revoked"),
        "{err}"
    );

    // A model server that does not answer: said at start, not once per turn.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = parley()
        .args(["agent", "--llm", &format!("http://127.0.0.1:{port}/v1"), "--model", "llama3.1"])
        .env("PARLEY_URL", "http://127.0.0.1:9")
        .env("PARLEY_AGENT_KEY", "pk_some_key")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("the model's server at http://127.0.0.1:{port}/v1 does not answer")), "{err}");
}

#[test]
fn token_without_a_secret_makes_none_and_says_how_to_set_one() {
    // Run from a directory where no service ever ran: nothing to sign with.
    let dir = temp_path("no-secret");
    let out = parley()
        .args(["token", "--sub", "user-maya"])
        .env("PARLEY_DATA_DIR", &dir)
        .env_remove("PARLEY_JWT_SECRET")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no token is printed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("PARLEY_JWT_SECRET") && err.contains("parley serve"), "{err}");
    assert!(err.contains(&dir.join("jwt_secret").display().to_string()), "it names where it looked: {err}");
    assert!(!dir.exists(), "no data directory and no secret were made");
}

#[test]
fn worker_without_database_url_refuses_to_start_a_database_of_its_own() {
    let dir = temp_path("worker");
    let out =
        parley().arg("worker").env("PARLEY_DATA_DIR", &dir).env("PARLEY_JWT_SECRET", TEST_SECRET).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("DATABASE_URL"), "{err}");
    assert!(!dir.exists(), "no embedded database was made");
}

#[test]
fn a_skill_file_without_an_id_is_assessed_as_bindu_does_named_unknown_with_a_warning() {
    // Bindu's calculator reads `skill.get("id", "unknown")`: a skill without an id is assessed
    // like any other and reported as `unknown`. The same skill with the id `unknown` written
    // out is what Bindu answers for it, to the last digit.
    let dir = temp_dir_with(
        "skill-id",
        &[
            ("skills.yaml", "name: PDF Processing\ntags: [pdf, invoice]\n"),
            ("named.yaml", "id: unknown\nname: PDF Processing\ntags: [pdf, invoice]\n"),
            ("request.json", r#"{"task_summary": "Extract tables from PDF invoices"}"#),
        ],
    );
    let assess = |file: &str| {
        parley()
            .arg("assess")
            .arg("--skills")
            .arg(dir.join(file))
            .arg("--request")
            .arg(dir.join("request.json"))
            .output()
            .unwrap()
    };
    let (unnamed, named) = (assess("skills.yaml"), assess("named.yaml"));
    assert_eq!(unnamed.status.code(), Some(0), "{}", String::from_utf8_lossy(&unnamed.stderr));
    assert_eq!(unnamed.stdout, named.stdout, "the same answer as for the skill named `unknown`");
    let answer: serde_json::Value = serde_json::from_slice(&unnamed.stdout).unwrap();
    assert_eq!(answer["accepted"], true, "{answer}");
    assert_eq!(answer["skill_matches"][0]["skill_id"], "unknown", "{answer}");
    assert_eq!(answer["skill_matches"][0]["skill_name"], "PDF Processing", "{answer}");
    let warning = String::from_utf8_lossy(&unnamed.stderr);
    assert!(
        warning.contains("warning") && warning.contains("skills.yaml") && warning.contains("`unknown`"),
        "{warning}"
    );
    assert!(named.stderr.is_empty(), "no warning for a skill with an id: {}", String::from_utf8_lossy(&named.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_second_serve_on_one_data_directory_says_another_parley_runs_there() {
    let dir = temp_dir_with("twice", &[]);
    let mut first = Serving::start(&[("PARLEY_DATA_DIR", dir.as_os_str())]);
    first.base();
    let second = parley().arg("serve").env("PARLEY_DATA_DIR", &dir).env("PARLEY_BIND", "127.0.0.1:0").output().unwrap();
    let first_log = first.stop();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(second.status.code(), Some(1), "{}", String::from_utf8_lossy(&second.stderr));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("another Parley is already running with the data directory"), "{err}");
    assert!(err.contains("PARLEY_DATA_DIR"), "{err}");
    assert!(!err.contains("postmaster.pid"), "PostgreSQL's own words are not shown: {err}");
    assert!(first_log.contains("listening on"), "{first_log}");
}
#[tokio::test]
async fn logs_say_values_in_words_and_the_mcp_library_stays_quiet() {
    let url = crate::helpers::fresh_database().await;
    let dir = temp_path("logs");
    // RUST_LOG unset: the default filter.
    let mut serving = Serving::start(&[
        ("DATABASE_URL", url.as_ref()),
        ("PARLEY_DATA_DIR", dir.as_os_str()),
        ("PARLEY_JWT_SECRET", TEST_SECRET.as_ref()),
    ]);
    let base = serving.base();
    let keys = parley::JwtKeys::new(TEST_SECRET.as_bytes());
    let service = keys.mint("platform", parley::CallerRole::Service, std::time::Duration::from_secs(600)).unwrap();
    let tomas = keys.mint("user-tomas", parley::CallerRole::User, std::time::Duration::from_secs(600)).unwrap();
    let client = reqwest::Client::new();
    let agent =
        post_for_json(&client, &format!("{base}/api/agents"), &tomas, &serde_json::json!({"name": "Tomas's agent"}))
            .await;
    let key = agent["apiKey"]["key"].as_str().unwrap();
    // Tomas's turn is parked for his agent; the platform cancels the negotiation.
    let started =
        post_for_json(&client, &format!("{base}/api/negotiations"), &service, &crate::fixtures::good_match()).await;
    let id = started["negotiation"]["id"].as_str().unwrap();
    let canceled = client.delete(format!("{base}/api/negotiations/{id}")).bearer_auth(&service).send().await.unwrap();
    assert!(canceled.status().is_success());
    // Two MCP requests.
    for body in [
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "log-test-client", "version": "1.0"}}}),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ] {
        let answer = client
            .post(format!("{base}/mcp"))
            .header("x-api-key", key)
            .header("accept", "application/json, text/event-stream")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success(), "{}", answer.text().await.unwrap());
    }
    serving.wait_for("negotiation ended");
    let log = serving.stop();
    let _ = std::fs::remove_dir_all(&dir);

    let ended = log.lines().find(|l| l.contains("negotiation ended")).unwrap();
    assert!(ended.contains("canceled") && !ended.contains("Some("), "{ended}");
    assert!(!log.contains("Some(") && !log.contains("None,"), "a value logged as Rust syntax:\n{log}");
    assert!(!log.contains("rmcp") && !log.contains("log-test-client"), "the MCP library logged at info:\n{log}");
    // Not started by cargo: the installed binary's own command.
    assert!(log.contains("mint a token: parley token --sub <user id>"), "{log}");
}

#[tokio::test]
async fn serve_logs_its_address_its_database_without_the_password_and_how_to_mint_a_token() {
    // The test server trusts local connections and ignores the password; the log must not show it.
    let password = "pw-must-not-be-logged-7f3a";
    let url = crate::helpers::fresh_database().await;
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, host) = rest.split_once('@').expect("the test database URL names a user");
    let user = user.split(':').next().unwrap();
    let dir = temp_path("startup");
    let with_password = format!("{scheme}://{user}:{password}@{host}");
    // Started the way the README starts it (`cargo run -- serve`, which sets CARGO), on a host
    // name rather than an address.
    let mut serving = Serving::start(&[
        ("DATABASE_URL", with_password.as_ref()),
        ("PARLEY_DATA_DIR", dir.as_os_str()),
        ("RUST_LOG", "info".as_ref()),
        ("PARLEY_BIND", "localhost:0".as_ref()),
        ("CARGO", "cargo".as_ref()),
    ]);
    serving.wait_for("listening on");
    serving.wait_for("mint a token");
    let log = serving.stop();
    // Only `serve` makes the secret, and it did.
    assert!(dir.join("jwt_secret").exists(), "{log}");
    let _ = std::fs::remove_dir_all(&dir);

    assert!(!log.contains(password), "the password was logged:\n{log}");
    assert!(log.contains("listening on http://127.0.0.1:"), "{log}");
    assert!(log.contains(&format!("database: {scheme}://{user}:***@{host}")), "{log}");
    let dir = dir.to_string_lossy();
    assert!(
        log.contains(&format!(
            "mint a token: PARLEY_DATA_DIR={dir} cargo run -q -- token --sub <user id> [--role user|service|admin]"
        )),
        "{log}"
    );
}

#[test]
fn a_missing_wordnet_is_said_in_words_at_start_and_the_service_runs_without_it() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = temp_dir_with("no-wordnet", &[]);
    let mut child = parley()
        .arg("serve")
        .env("RUST_LOG", "warn")
        .env("PARLEY_WORDNET_DIR", dir.join("nowhere"))
        .env("PARLEY_DATA_DIR", &dir)
        .env("PARLEY_BIND", "127.0.0.1:0")
        // A database that is not there: the lexicon is read (and its absence said) before it.
        .env("DATABASE_URL", "postgres://postgres@127.0.0.1:9/parley_no_such_server")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, received) = std::sync::mpsc::channel::<String>();
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
    }
    drop(lines);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = Vec::new();
    let found = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match received.recv_timeout(left) {
            Ok(line) if line.contains("lexicon is missing") => break Some(line),
            Ok(line) => seen.push(line),
            Err(_) => break None,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    let line = found.unwrap_or_else(|| panic!("no word of the missing lexicon in the log: {seen:#?}"));
    assert!(line.contains("nowhere"), "names where it looked: {line}");
    assert!(
        line.contains("apt-get install wordnet-base") && line.contains("PARLEY_WORDNET_DIR"),
        "says what to do: {line}"
    );
    assert!(line.contains("synonyms") && line.contains("senses"), "says what is lost: {line}");
}
