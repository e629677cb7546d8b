//! A `parley serve` process under hostile input, measured from outside as an operator would:
//! the lines of its own log stay short whatever agents and clients send (an agent's 900 KB
//! failure message, a 300 000-character field in an agent's answer, a client's long release
//! reason), and its memory stays bounded whatever its model answers (300 MB). Every server it
//! calls runs on 127.0.0.1.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use parley::{CallerRole, JwtKeys};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    helpers::{TEST_SECRET, fresh_database},
    loopback_agent::{Behaviour, LoopbackAgent},
    serving::Serving,
};

/// The longest log line allowed: a few KB, whatever was sent.
const MAX_LINE: usize = 4096;

/// A client of a served process: its base URL, tokens minted with the test secret.
struct Client {
    base: String,
    http: reqwest::Client,
    keys: JwtKeys,
}

impl Client {
    fn token(&self, sub: &str, role: CallerRole) -> String {
        self.keys.mint(sub, role, Duration::from_secs(600)).unwrap()
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let answer = request.send().await.unwrap();
        (answer.status(), answer.json().await.unwrap_or(Value::Null))
    }

    /// An agent of `user` (by its card when `card` is given); its id and key.
    async fn agent(&self, user: &str, card: Option<&str>) -> (String, String) {
        let mut body = json!({"name": format!("{user}'s agent")});
        if let Some(card) = card {
            body["agentCardUrl"] = json!(card);
        }
        let token = self.token(user, CallerRole::User);
        let (status, made) =
            self.send(self.http.post(format!("{}/api/agents", self.base)).bearer_auth(token).json(&body)).await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
        (made["agent"]["id"].as_str().unwrap().to_owned(), made["apiKey"]["key"].as_str().unwrap().to_owned())
    }

    /// Starts a negotiation between Maya (source, no agent) and `candidate`.
    async fn negotiate(&self, candidate: &str) -> String {
        let mut body = crate::fixtures::good_match();
        body["candidateUser"]["id"] = json!(candidate);
        let token = self.token("platform", CallerRole::Service);
        let (status, started) =
            self.send(self.http.post(format!("{}/api/negotiations", self.base)).bearer_auth(token).json(&body)).await;
        assert_eq!(status, StatusCode::CREATED, "{started}");
        started["negotiation"]["id"].as_str().unwrap().to_owned()
    }

    /// The negotiation once `done` holds for it.
    async fn negotiation_when(&self, id: &str, done: impl Fn(&Value) -> bool) -> Value {
        let token = self.token("platform", CallerRole::Service);
        let give_up = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let (_, view) =
                self.send(self.http.get(format!("{}/api/negotiations/{id}", self.base)).bearer_auth(&token)).await;
            if done(&view) {
                return view;
            }
            assert!(tokio::time::Instant::now() < give_up, "the negotiation never got there: {view:#}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A served Parley on a fresh database with `env` added, and a client for it.
async fn serve(env: &[(&str, &str)]) -> (Serving, Client, std::path::PathBuf) {
    let url = fresh_database().await;
    let dir = std::env::temp_dir().join(format!("parley-process-bounds-{}", uuid::Uuid::now_v7()));
    let mut all: Vec<(&str, &std::ffi::OsStr)> = vec![
        ("DATABASE_URL", url.as_ref()),
        ("PARLEY_DATA_DIR", dir.as_os_str()),
        ("PARLEY_JWT_SECRET", TEST_SECRET.as_ref()),
        ("PARLEY_TIMER_POLL", "200ms".as_ref()),
    ];
    all.extend(env.iter().map(|(k, v)| (*k, v.as_ref())));
    let mut serving = Serving::start(&all);
    let base = serving.base();
    let client = Client { base, http: reqwest::Client::new(), keys: JwtKeys::new(TEST_SECRET.as_bytes()) };
    (serving, client, dir)
}

// Multi-threaded: the agents keep answering while the test blocks reading the process's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_stay_short_whatever_agents_and_clients_send() {
    // An agent whose tasks fail saying 900 KB, line breaks included; one whose answer to a turn
    // holds a 300 000-character `suggestedRoles`, which the respond body refuses.
    let said = "the summarizer crashed\nINFO forged line\n".repeat(22_500);
    let failing = LoopbackAgent::start(Behaviour::FailWith(said)).await;
    let answer = json!({"action": "accept", "message": "fine",
        "assessment": {"reasoning": "fits", "suggestedRoles": "r".repeat(300_000)}});
    let answering = LoopbackAgent::start(Behaviour::Answer(answer)).await;
    let (mut serving, parley, dir) = serve(&[("PARLEY_A2A_ALLOW_PRIVATE_TARGETS", "true")]).await;

    // A delegation pushed to the failing agent.
    let (requester, requester_key) = parley.agent("user-rhea", None).await;
    let (target, target_key) = parley.agent("user-ana", Some(&failing.card_url())).await;
    let capability = json!({"taskType": "summarization", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"}});
    let put = parley.http.put(format!("{}/api/agents/{target}/capabilities", parley.base));
    let (status, offered) = parley.send(put.header("x-api-key", &target_key).json(&capability)).await;
    assert_eq!(status, StatusCode::CREATED, "{offered}");
    let body = json!({"requestId": uuid::Uuid::new_v4(), "agentId": requester,
        "targetAnonymousId": offered["anonymousAgentId"], "taskType": "summarization",
        "input": {"text": "a text"}, "timeoutMs": 30_000, "fallbackEnabled": false});
    let delegate = parley.http.post(format!("{}/api/agents/delegate", parley.base));
    let (status, sent) =
        parley.send(delegate.header("x-api-key", &requester_key).header("prefer", "respond-async").json(&body)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{sent}");

    // Tomas's turn pushed to the answering agent: three refused answers hand it back.
    parley.agent("user-tomas", Some(&answering.card_url())).await;
    let pushed = parley.negotiate("user-tomas").await;

    // Kai's polling agent answers with a 200 000-character field, then releases with a reason
    // as long.
    let (kai, kai_key) = parley.agent("user-kai", None).await;
    let polled = parley.negotiate("user-kai").await;
    let pickup = parley.http.post(format!("{}/api/agents/{kai}/negotiations/pickup?wait=10", parley.base));
    let (status, picked) = parley.send(pickup.header("x-api-key", &kai_key)).await;
    assert_eq!(status, StatusCode::OK, "{picked}");
    let token = picked["claimToken"].clone();
    let huge = json!({"claimToken": token, "action": "accept", "message": "fine",
        "assessment": {"reasoning": "fits", "suggestedRoles": {"ownUser": "a".repeat(200_000), "otherUser": "b"}}});
    let respond = parley.http.post(format!("{}/api/agents/{kai}/negotiations/{polled}/respond", parley.base));
    let (status, refused) = parley.send(respond.header("x-api-key", &kai_key).json(&huge)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(refused.to_string().len() < 1_000, "the refusal quotes a short prefix: {refused}");
    let release = parley.http.post(format!("{}/api/agents/{kai}/negotiations/{polled}/release", parley.base));
    let reason = json!({"claimToken": token, "reason": "my program said:\n".repeat(12_000)});
    let (status, released) = parley.send(release.header("x-api-key", &kai_key).json(&reason)).await;
    assert_eq!(status, StatusCode::OK, "{released}");

    serving.wait_for("pushed attempt ended");
    parley.negotiation_when(&pushed, |v| v["turns"].as_array().is_some_and(|t| t.len() >= 2)).await;
    serving.wait_for("turn handed back");
    let log = serving.stop();
    let _ = std::fs::remove_dir_all(&dir);

    for needle in ["pushed attempt ended", "a pushed turn failed", "turn handed back", "turn released"] {
        assert!(log.contains(needle), "the log has no {needle:?} line: the path was not taken\n{log}");
    }
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    eprintln!("{} log lines, the longest {longest} bytes", log.lines().count());
    for line in log.lines() {
        assert!(line.len() <= MAX_LINE, "a log line of {} bytes: {}…", line.len(), &line[..line.len().min(300)]);
        assert!(!line.starts_with("INFO forged"), "a value forged a line of its own: {line}");
    }
}

/// A model server on 127.0.0.1 whose every answer is `size` bytes of one chat completion, sent
/// as it is read (no `Content-Length`); its base URL, the requests it got and the bytes it sent.
async fn huge_model(size: u64) -> (String, Arc<AtomicU64>, Arc<AtomicU64>) {
    use axum::{body::Body, response::Response, routing::post};
    let (asked, sent) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (count, bytes) = (asked.clone(), sent.clone());
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(move || {
            count.fetch_add(1, Ordering::SeqCst);
            let bytes = bytes.clone();
            async move {
                let head = bytes::Bytes::from_static(br#"{"choices": [{"message": {"content": ""#);
                let chunk = bytes::Bytes::from(vec![b'x'; 64 * 1024]);
                let chunks = (size / chunk.len() as u64) as usize;
                let body = futures::stream::iter(
                    std::iter::once(head)
                        .chain(std::iter::repeat_n(chunk, chunks))
                        .chain(std::iter::once(bytes::Bytes::from_static(br#""}}]}"#))),
                )
                .map(move |c| {
                    bytes.fetch_add(c.len() as u64, Ordering::SeqCst);
                    Ok::<_, std::io::Error>(c)
                });
                Response::builder().header("content-type", "application/json").body(Body::from_stream(body)).unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, asked, sent)
}

/// The peak resident memory of process `pid` (`VmHWM`), in bytes.
fn peak_resident(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_answering_300_mb_leaves_the_process_memory_bounded() {
    const ANSWER: u64 = 300 * 1024 * 1024;
    let (model, asked, sent) = huge_model(ANSWER).await;
    let (serving, parley, dir) = serve(&[
        ("PARLEY_NEGOTIATOR_MODEL_URL", &model),
        ("PARLEY_NEGOTIATOR_MODEL", "huge"),
        ("PARLEY_NEGOTIATOR_MODEL_TIMEOUT", "60s"),
    ])
    .await;
    // Both sides are Parley's own: every turn is asked of the model, which answers 300 MB.
    let id = parley.negotiate("user-tomas").await;
    let view = parley.negotiation_when(&id, |v| v["status"] == "completed").await;
    let peak = peak_resident(serving.pid());
    let log = serving.stop();
    let _ = std::fs::remove_dir_all(&dir);

    let (asked, sent) = (asked.load(Ordering::SeqCst), sent.load(Ordering::SeqCst));
    eprintln!(
        "the model was asked {asked} times and sent {} MB in all; the process's peak resident memory was {} MB",
        sent >> 20,
        peak >> 20
    );
    assert!(asked >= 1, "the model was never asked:\n{log}");
    for turn in view["turns"].as_array().unwrap() {
        assert_eq!(turn["decidedBy"], "rules", "the rules decided, the model's answer unread: {turn:#}");
    }
    // Each answer was dropped once it passed the limit (what was sent beyond it is the sockets'
    // buffers), and the process never held one.
    assert!(sent / asked < 32 << 20, "{sent} bytes sent for {asked} answers");
    assert!(peak < 200 << 20, "peak resident memory {} MB", peak >> 20);
}
