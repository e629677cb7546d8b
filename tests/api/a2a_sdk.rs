//! The official A2A SDK's clients (Python `a2a-sdk`, pinned), unchanged, against a live Parley:
//! the card resolved, a 1.0 and a 0.3 client each sending, reading, cancelling, streaming and
//! subscribing while a polling target does the work, the refusals an SDK raises, and 200
//! concurrent streams that hold no database connection each (`tests/a2a/sdk_client.py` is the
//! client; this test starts everything around it).
//!
//! The SDK is installed into a virtualenv under the target directory on first use (from PyPI,
//! as the schemathesis and browser checks install theirs); without Python or PyPI the test
//! fails saying so.

use std::{path::PathBuf, process::Stdio, time::Duration};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::{a2a_server, helpers::TestApp};

/// The SDK's version the client is written against.
const SDK: &str = "a2a-sdk==1.3.0";
/// Concurrent streams opened at the end.
const STREAMS: usize = 200;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The virtualenv with the SDK, made on first use.
fn venv() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from);
    let venv = target.join("a2a-sdk-venv");
    let python = venv.join("bin/python");
    let marker = venv.join(SDK);
    if marker.exists() {
        return python;
    }
    let run = |cmd: &mut std::process::Command, what: &str| {
        let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e} (python3 with venv is needed)"));
        assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(std::process::Command::new("python3").args(["-m", "venv"]).arg(&venv), "python3 -m venv");
    run(
        std::process::Command::new(venv.join("bin/pip")).args(["install", "-q", "--disable-pip-version-check", SDK]),
        "pip install a2a-sdk (PyPI must be reachable)",
    );
    std::fs::write(&marker, "").unwrap();
    python
}

#[tokio::test]
async fn the_official_sdks_1_0_and_0_3_clients_delegate_through_parley_unchanged() {
    let python = tokio::task::spawn_blocking(venv).await.unwrap();
    // The run sends a few dozen delegations to one target within a minute: the rate limits stay
    // out of its way.
    let app = TestApp::spawn_with(|c| {
        c.a2a_streams_per_agent = STREAMS as u32 + 10;
        c.inbound_rate = 10_000;
        c.outbound_rate = 10_000;
    })
    .await;
    let (requester, target, _) = a2a_server::parties(&app).await;
    let capability = app.agent_call(&target, reqwest::Method::GET, "/capabilities", None).await;
    let permissions =
        format!("/capabilities/{}/permissions", capability.body["capabilities"][0]["id"].as_str().unwrap());
    let limits = serde_json::json!({"inboundRateLimit": 10_000, "outboundRateLimit": 10_000});
    let set = app.agent_call(&target, reqwest::Method::PUT, &permissions, Some(&limits)).await;
    assert_eq!(set.status, reqwest::StatusCode::OK, "{}", set.text);
    let stranger = app.register_agent("mallory").await;
    let _target = a2a_server::serve(&app, &target);

    let script = root().join("tests/a2a/sdk_client.py");
    let mut child = tokio::process::Command::new(&python)
        .arg(&script)
        .env("PARLEY_BASE", &app.base)
        .env("REQUESTER_KEY", &requester.key)
        .env("STRANGER_KEY", &stranger.key)
        .env("STREAMS", STREAMS.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("running the SDK client");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut said = Vec::new();
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(task) = line.strip_prefix("streams-open ") {
                // Every stream is open: none holds a connection of the pool (ten at most here),
                // and the service still answers at once.
                let connections: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
                )
                .fetch_one(&app.pool)
                .await
                .unwrap();
                assert!(connections <= 12, "{connections} connections while {STREAMS} streams are open");
                // Of the pool's connections, the streams hold none: only the timer workers'
                // polls take one now and then (one per queue, for a moment). A stream that held
                // one would be seen in every sample, so the fewest in use over a second counts.
                let mut fewest = usize::MAX;
                for _ in 0..20 {
                    fewest = fewest.min(app.pool.size() as usize - app.pool.num_idle());
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                assert!(fewest <= 3, "at least {fewest} of the pool's connections in use beside {STREAMS} streams");
                let started = std::time::Instant::now();
                let got = app
                    .client
                    .get(format!("{}/api/tasks/{task}", app.base))
                    .bearer_auth(&requester.key)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(got.status(), reqwest::StatusCode::OK);
                assert!(
                    started.elapsed() < Duration::from_secs(2),
                    "a read took {:?} beside the streams",
                    started.elapsed()
                );
                said.push(format!(
                    "{connections} connections to the database, at least {fewest} of the pool's in use, with the streams open"
                ));
                stdin.write_all(b"go\n").await.unwrap();
                stdin.flush().await.unwrap();
            }
            said.push(line);
        }
    };
    tokio::time::timeout(Duration::from_secs(300), read).await.expect("the SDK client finished in time");
    let out = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the SDK client failed after:\n{}\n{stderr}", said.join("\n"));
    for check in [
        "ok the card resolves at both paths",
        "ok 1.0 send completes with the output as a data artifact",
        "ok 1.0 cancel",
        "ok 1.0 stream closes after the final status",
        "ok 1.0 subscribe",
        "ok 0.3 client sends, gets, streams, subscribes and cancels",
        "ok an unknown task and another agent's task are not found",
        "ok input the schema refuses is -32602 with Parley's code",
        "ok a repeated messageId answers the same task",
        "ok no credentials is 401",
    ] {
        assert!(said.iter().any(|l| l == check), "missing {check:?} in:\n{}", said.join("\n"));
    }
    assert!(
        said.iter().any(|l| l == &format!("ok {STREAMS} concurrent streams all end canceled")),
        "{}",
        said.join("\n")
    );
    eprintln!("{}", said.join("\n"));
}
