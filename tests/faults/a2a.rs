//! A2A targets in the fault run: agents registered by their AgentCard, which never poll, so that
//! Parley pushes each attempt to them (`SendMessage`, then `GetTask` until the task ends,
//! `CancelTask` when the attempt ends without them) while it is killed, its database restarted and
//! its connections terminated.
//!
//! The agents are served by one in-process A2A 1.0 JSON-RPC server ([`AgentServer`], one card
//! and one endpoint per agent under `/agents/{i}/`), which outlives every kill and remembers
//! every message and task. A task completes, fails or never ends by itself (until it is
//! canceled); now and then the server takes a message, starts its task and then answers 503, as
//! if the answer were lost, which is what a crash of Parley mid-call looks like from the agent.
//!
//! Afterwards [`check`] holds the agent's memory against the database: nothing lost (every
//! acknowledged delegation exists and ended; every attempt pushed to an A2A agent ended), nothing
//! duplicated (no message id started two tasks: a repeated send must find the first task with
//! `ListTasks` instead), nothing unexpected (every message names an attempt, every completed
//! attempt carries its task's output, every request keeps the protocol). And nothing late or
//! left behind ([`Timeliness`], each required to be 0): no accepted attempt timed out though its
//! task had completed before the deadline (the agent dates each state, as the SDK's agents do,
//! and Parley reads once more before it times an attempt out), no task left working for an
//! attempt that ended (its cancel is tried again until it lands), and no message reaching the
//! agent after its attempt's accept deadline.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use chrono::{DateTime, Utc};
use parley::{CallerRole, JwtKeys};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{Lcg, Report};
use crate::delegations::{self, Agent};

/// The task type the A2A agents offer and the requesters ask for.
const TASK_TYPE: &str = "translation";

/// What the agent does with a task it started.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Plan {
    Complete,
    Fail,
    /// Works until canceled.
    Hang,
}

/// A task at the agent. Its state is read from the clock: it ends at `ends_at` as planned.
struct Task {
    id: String,
    agent: usize,
    context: String,
    seq: u64,
    started_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
    plan: Plan,
    canceled: bool,
    /// When it was canceled.
    canceled_at: Option<DateTime<Utc>>,
}

impl Task {
    fn state(&self, now: DateTime<Utc>) -> &'static str {
        match self.plan {
            _ if self.canceled => "TASK_STATE_CANCELED",
            Plan::Hang => "TASK_STATE_WORKING",
            _ if now < self.ends_at => "TASK_STATE_WORKING",
            Plan::Complete => "TASK_STATE_COMPLETED",
            Plan::Fail => "TASK_STATE_FAILED",
        }
    }

    fn output(&self) -> Value {
        json!({"summary": format!("summary of {}", self.context)})
    }

    /// The task in 1.0's ProtoJSON, its status dated as the SDK's agents date it.
    fn render(&self, artifacts: bool) -> Value {
        let state = self.state(Utc::now());
        let at = match state {
            "TASK_STATE_CANCELED" => self.canceled_at.unwrap_or(self.ends_at),
            "TASK_STATE_WORKING" => self.started_at,
            _ => self.ends_at,
        };
        let mut task = json!({"id": self.id, "contextId": self.context, "status": {"state": state, "timestamp": at}});
        if state == "TASK_STATE_COMPLETED" && artifacts {
            task["artifacts"] =
                json!([{"artifactId": format!("{}-result", self.id), "parts": [{"data": self.output()}]}]);
        }
        if state == "TASK_STATE_FAILED" {
            task["status"]["message"] = json!({
                "messageId": Uuid::new_v4(), "role": "ROLE_AGENT", "parts": [{"text": "the summarizer crashed"}],
            });
        }
        task
    }
}

/// What the agent server saw.
struct Seen {
    rng: Lcg,
    tasks: HashMap<String, Task>,
    /// Message id -> `SendMessage` calls that carried it.
    sends: HashMap<String, u32>,
    /// Message id -> the tasks it started.
    started: HashMap<String, Vec<String>>,
    /// Answers to `SendMessage` dropped (503) after the task was started.
    dropped: u64,
    lookups: u64,
    found: u64,
    gets: u64,
    cancels: u64,
    /// Requests that broke the protocol: how many, and the first few.
    malformed: u64,
    malformed_first: Vec<String>,
}

impl Seen {
    fn malformed(&mut self, what: String) {
        self.malformed += 1;
        if self.malformed_first.len() < 5 {
            self.malformed_first.push(what);
        }
    }
}

/// The in-process A2A 1.0 server of every A2A agent of the run.
#[derive(Clone)]
pub struct AgentServer {
    base: String,
    seen: Arc<Mutex<Seen>>,
}

impl AgentServer {
    /// Serves on 127.0.0.1 (a port of its own) until the test ends.
    pub async fn start(seed: u64) -> AgentServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let seen = Seen {
            rng: Lcg(seed),
            tasks: HashMap::new(),
            sends: HashMap::new(),
            started: HashMap::new(),
            dropped: 0,
            lookups: 0,
            found: 0,
            gets: 0,
            cancels: 0,
            malformed: 0,
            malformed_first: Vec::new(),
        };
        let server = AgentServer { base, seen: Arc::new(Mutex::new(seen)) };
        let app = Router::new()
            .route("/agents/{i}/.well-known/agent-card.json", get(card))
            .route("/agents/{i}/a2a", post(rpc))
            .with_state(server.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        server
    }

    fn card_url(&self, i: usize) -> String {
        format!("{}/agents/{i}/.well-known/agent-card.json", self.base)
    }
}

async fn card(State(s): State<AgentServer>, Path(i): Path<usize>) -> Json<Value> {
    Json(json!({
        "name": format!("fault agent {i}"),
        "description": "A summarizer of the fault run",
        "version": "1.0.0",
        "capabilities": {"streaming": false, "pushNotifications": false},
        "defaultInputModes": ["application/json", "text/plain"],
        "defaultOutputModes": ["application/json"],
        "skills": [{"id": "summarize", "name": "Summaries", "description": "Summarizes", "tags": []}],
        "supportedInterfaces": [
            {"url": format!("{}/agents/{i}/a2a", s.base), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
    }))
}

/// One JSON-RPC call to agent `i`, answered after the pause [`answer`] chose.
async fn rpc(State(s): State<AgentServer>, Path(i): Path<usize>, headers: HeaderMap, body: Bytes) -> Response {
    let (pause, response) = answer(&s, i, &headers, &body);
    tokio::time::sleep(Duration::from_millis(pause)).await;
    response
}

/// What agent `i` answers to `body`, and after how many milliseconds.
fn answer(s: &AgentServer, i: usize, headers: &HeaderMap, body: &[u8]) -> (u64, Response) {
    let Ok(call) = serde_json::from_slice::<Value>(body) else {
        s.seen.lock().unwrap().malformed("a body that is not JSON".into());
        return (0, StatusCode::BAD_REQUEST.into_response());
    };
    let id = call["id"].clone();
    let reply = |result: Result<Value, (i64, &str)>| {
        let mut envelope = json!({"jsonrpc": "2.0", "id": id});
        match result {
            Ok(r) => envelope["result"] = r,
            Err((code, message)) => envelope["error"] = json!({"code": code, "message": message}),
        }
        (0, Json(envelope).into_response())
    };
    let params = &call["params"];
    let mut seen = s.seen.lock().unwrap();
    if call["jsonrpc"] != "2.0" || !id.is_string() || headers.get("a2a-version").is_none_or(|v| v != "1.0") {
        seen.malformed(format!("an envelope or header off: {call}"));
        return reply(Err((-32600, "Invalid request")));
    }
    let now = Utc::now();
    match call["method"].as_str().unwrap_or_default() {
        "SendMessage" => {
            let m = &params["message"];
            let (Some(mid), Some(context)) = (m["messageId"].as_str(), m["contextId"].as_str()) else {
                seen.malformed(format!("a message without ids: {m}"));
                return reply(Err((-32602, "Invalid params")));
            };
            if context != mid
                || m["role"] != "ROLE_USER"
                || !m["parts"][0]["data"].is_object()
                || !m["parts"][1]["text"].is_string()
                || params["configuration"]["returnImmediately"] != true
            {
                seen.malformed(format!("a message off: {params}"));
            }
            *seen.sends.entry(mid.to_owned()).or_default() += 1;
            let plan = match seen.rng.below(100) {
                0..80 => Plan::Complete,
                80..92 => Plan::Fail,
                _ => Plan::Hang,
            };
            let task = Task {
                id: Uuid::new_v4().to_string(),
                agent: i,
                context: context.to_owned(),
                seq: seen.tasks.len() as u64,
                started_at: now,
                ends_at: now + chrono::Duration::milliseconds(200 + seen.rng.below(1800) as i64),
                plan,
                canceled: false,
                canceled_at: None,
            };
            let rendered = task.render(true);
            seen.started.entry(mid.to_owned()).or_default().push(task.id.clone());
            seen.tasks.insert(task.id.clone(), task);
            // A slow answer widens the window in which a kill lands mid-call; a dropped one is
            // that window seen from the agent.
            let (pause, drop) = (seen.rng.below(300), seen.rng.below(100) < 8);
            if drop {
                seen.dropped += 1;
                return (pause, StatusCode::SERVICE_UNAVAILABLE.into_response());
            }
            (pause, reply(Ok(json!({"task": rendered}))).1)
        }
        "GetTask" => {
            seen.gets += 1;
            match seen.tasks.get(params["id"].as_str().unwrap_or_default()).filter(|t| t.agent == i) {
                Some(t) => reply(Ok(t.render(true))),
                None => reply(Err((-32001, "Task not found"))),
            }
        }
        "CancelTask" => {
            seen.cancels += 1;
            match seen.tasks.get_mut(params["id"].as_str().unwrap_or_default()).filter(|t| t.agent == i) {
                Some(t) if t.state(now) == "TASK_STATE_WORKING" => {
                    t.canceled = true;
                    t.canceled_at = Some(now);
                    reply(Ok(t.render(true)))
                }
                Some(_) => reply(Err((-32002, "Task cannot be canceled"))),
                None => reply(Err((-32001, "Task not found"))),
            }
        }
        "ListTasks" => {
            seen.lookups += 1;
            let context = params["contextId"].as_str().unwrap_or_default();
            let mut tasks: Vec<&Task> = seen.tasks.values().filter(|t| t.agent == i && t.context == context).collect();
            tasks.sort_by_key(|t| std::cmp::Reverse(t.seq));
            let total = tasks.len();
            let page = params["pageSize"].as_u64().unwrap_or(50) as usize;
            let artifacts = params["includeArtifacts"] == true;
            let listed: Vec<Value> = tasks.iter().take(page).map(|t| t.render(artifacts)).collect();
            if !listed.is_empty() {
                seen.found += 1;
            }
            reply(Ok(json!({"tasks": listed, "totalSize": total})))
        }
        other => {
            seen.malformed(format!("method {other}"));
            reply(Err((-32601, "Method not found")))
        }
    }
}

/// Registers `n` agents by their cards on `server` (one user each), each offering [`TASK_TYPE`]
/// with its limits at the top, as the polled targets do.
pub async fn cast(client: &reqwest::Client, base: &str, jwt: &JwtKeys, server: &AgentServer, n: usize) -> Vec<Agent> {
    let mut agents = Vec::new();
    for i in 0..n {
        let token = jwt.mint(&format!("a2a-agent-user-{i}"), CallerRole::User, Duration::from_secs(3600)).unwrap();
        let body = json!({"name": format!("a2a agent {i}"), "agentCardUrl": server.card_url(i)});
        let created = client.post(format!("{base}/api/agents")).bearer_auth(&token).json(&body).send().await.unwrap();
        assert_eq!(created.status().as_u16(), 201, "registering by card: {}", created.text().await.unwrap_or_default());
        let created: Value = created.json().await.unwrap();
        let (id, key) = (
            created["agent"]["id"].as_str().unwrap().to_owned(),
            created["apiKey"]["key"].as_str().unwrap().to_owned(),
        );
        let capability = json!({
            "taskType": TASK_TYPE,
            "inputSchema": {"type": "object", "required": ["text"]},
            "outputSchema": {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}},
        });
        delegations::offer(client, base, (&id, &key), &capability, &json!({"inboundRateLimit": 10000})).await;
        agents.push((id, key));
    }
    agents
}

/// What the A2A requesters were told.
#[derive(Default)]
pub struct Ledger {
    /// Request ids answered 202 (or 200).
    acknowledged: Mutex<HashSet<Uuid>>,
    /// Of them, acknowledged only after a resend.
    resent: AtomicU64,
    /// Delegates never answered 2xx (given up after 30 s).
    unanswered: AtomicU64,
    /// No answer, or 503: the service or its database was down.
    refused: AtomicU64,
    /// Other answers: how many, and the first few.
    unexpected: AtomicU64,
    surprises: Mutex<Vec<String>>,
}

impl Ledger {
    fn surprise(&self, what: String) {
        self.unexpected.fetch_add(1, Ordering::Relaxed);
        let mut s = self.surprises.lock().unwrap();
        if s.len() < 10 {
            s.push(what);
        }
    }
}

/// One requester delegating [`TASK_TYPE`] until `stop`, each delegation sent again with the same
/// request id and body until it is acknowledged.
pub async fn requester_loop(
    base: Arc<Mutex<String>>,
    requester: Agent,
    ledger: Arc<Ledger>,
    stop: Arc<AtomicBool>,
    seed: u64,
) {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let mut rng = Lcg(seed);
    let (agent_id, key) = requester;
    while !stop.load(Ordering::Relaxed) {
        let rid = Uuid::new_v4();
        let body = json!({
            "requestId": rid,
            "agentId": agent_id,
            "taskType": TASK_TYPE,
            "input": {"text": format!("a long text {rid}")},
            "timeoutMs": 3000 + rng.below(3001),
            "maxRetries": rng.below(3),
            "fallbackEnabled": rng.below(4) != 0,
        });
        let give_up = Instant::now() + Duration::from_secs(30);
        for sent in 0.. {
            let url = base.lock().unwrap().clone();
            let req = client
                .post(format!("{url}/api/agents/delegate"))
                .header("x-api-key", &key)
                .header("prefer", "respond-async")
                .json(&body);
            match req.send().await {
                Ok(r) if r.status().is_success() => {
                    // (The body may be cut short when the service is killed while answering.)
                    let answer: Value = r.json().await.unwrap_or(Value::Null);
                    if answer.is_null() || answer["delegation"]["requestId"] == json!(rid) {
                        ledger.acknowledged.lock().unwrap().insert(rid);
                        if sent > 0 {
                            ledger.resent.fetch_add(1, Ordering::Relaxed);
                        }
                    } else {
                        ledger.surprise(format!("delegate {rid}: {answer}"));
                    }
                    break;
                }
                Ok(r) if r.status().as_u16() == 503 => {
                    ledger.refused.fetch_add(1, Ordering::Relaxed);
                }
                Ok(r) => {
                    let status = r.status();
                    ledger.surprise(format!("delegate {rid}: {status} {}", r.text().await.unwrap_or_default()));
                    break;
                }
                Err(_) => {
                    ledger.refused.fetch_add(1, Ordering::Relaxed);
                }
            }
            if Instant::now() > give_up {
                ledger.unanswered.fetch_add(1, Ordering::Relaxed);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(200 + rng.below(400))).await;
    }
}

/// An attempt pushed to an A2A agent, as stored.
struct Pushed {
    delegation: Uuid,
    attempt: i32,
    status: String,
    reason: Option<String>,
    remote: Option<String>,
    /// When it had to be accepted by (the sooner of its accept deadline and its deadline).
    accept_by: DateTime<Utc>,
    deadline: DateTime<Utc>,
    output: Option<Value>,
}

/// The attempts to `agents`, by their message (task) id.
async fn pushed(pool: &sqlx::PgPool, agents: &[Uuid]) -> HashMap<String, Pushed> {
    type Row = (Uuid, i32, Uuid, String, Option<String>, Option<String>, DateTime<Utc>, DateTime<Utc>, Option<Value>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT delegation_id, attempt, task_id, status, reason, remote_task_id,
                least(accept_deadline, deadline), deadline, output
           FROM delegation_attempts WHERE target_agent_id = ANY($1)",
    )
    .bind(agents)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(delegation, attempt, task, status, reason, remote, accept_by, deadline, output)| {
            (task.to_string(), Pushed { delegation, attempt, status, reason, remote, accept_by, deadline, output })
        })
        .collect()
}

/// Tasks still working at the agent for attempts that ended: all of them, and those Parley knew
/// (and so could cancel).
fn left_working(seen: &Seen, attempts: &HashMap<String, Pushed>) -> (usize, usize) {
    let now = Utc::now();
    let mut left = (0, 0);
    for t in seen.tasks.values().filter(|t| t.state(now) == "TASK_STATE_WORKING") {
        if let Some(a) = attempts.get(&t.context).filter(|a| a.status != "request" && a.status != "accepted") {
            left.0 += 1;
            if a.remote.as_deref() == Some(t.id.as_str()) {
                left.1 += 1;
            }
        }
    }
    left
}

/// What came late or was left behind, each required to be 0.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Timeliness {
    /// Accepted attempts that timed out though their task had completed before the deadline.
    pub timed_out_in_time: usize,
    /// Tasks left working at the agent for attempts that ended.
    pub left_working: usize,
    /// Messages that reached the agent after their attempt's accept deadline.
    pub sent_late: usize,
}

/// Every A2A check against what the agent server saw; the report, what came late or was left
/// behind, and the line that tells it. Run once every delegation has ended.
pub async fn check(
    pool: &sqlx::PgPool,
    server: &AgentServer,
    agents: &[Agent],
    ledger: &Ledger,
    in_flight_at_faults: &HashSet<Uuid>,
) -> (Report, Timeliness, String) {
    let mut report = Report::default();
    let mut failures = Vec::new();
    let mut fail = |counter: &mut u64, what: String| {
        *counter += 1;
        if failures.len() < 20 {
            failures.push(what);
        }
    };
    let ids: Vec<Uuid> = agents.iter().map(|a| a.0.parse().unwrap()).collect();
    // The cancels of ended attempts go out at once, and are tried again (up to about half a
    // minute) when they fail; give them that long to land.
    let mut attempts = pushed(pool, &ids).await;
    for _ in 0..160 {
        if left_working(&server.seen.lock().unwrap(), &attempts).0 == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        attempts = pushed(pool, &ids).await;
    }
    let terminal = |s: &str| ["completed", "rejected", "timeout", "error"].contains(&s);

    // Lost: an acknowledged delegation missing or not ended; an attempt to an A2A agent not ended.
    let acknowledged: Vec<Uuid> = ledger.acknowledged.lock().unwrap().iter().copied().collect();
    let delegations: HashMap<Uuid, (Uuid, String)> = sqlx::query_as::<_, (Uuid, Uuid, String)>(
        "SELECT request_id, delegation_id, status FROM delegations WHERE request_id = ANY($1)",
    )
    .bind(&acknowledged[..])
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .map(|(rid, id, status)| (rid, (id, status)))
    .collect();
    for rid in &acknowledged {
        match delegations.get(rid) {
            None => fail(&mut report.lost, format!("acknowledged request {rid} is not stored")),
            Some((_, status)) if !terminal(status) => {
                fail(&mut report.lost, format!("delegation {rid} never ended ({status})"))
            }
            Some(_) => {}
        }
    }
    for (mid, a) in &attempts {
        if !terminal(&a.status) {
            fail(
                &mut report.lost,
                format!("attempt {} of {} (message {mid}) never ended ({})", a.attempt, a.delegation, a.status),
            );
        }
    }

    let seen = server.seen.lock().unwrap();
    // Duplicated: a message that started two tasks.
    for (mid, tasks) in &seen.started {
        if tasks.len() > 1 {
            fail(&mut report.duplicated, format!("message {mid} started {} tasks", tasks.len()));
        }
    }
    // Unexpected: a message no attempt sent; a completed attempt without its task's output; a
    // request off the protocol; an answer to the requesters off the contract. Late: messages
    // that reached the agent when their attempt could no longer be accepted, and accepted
    // attempts that timed out though the agent had finished in time.
    let (mut timed_out_in_time, mut sent_late) = (0, 0);
    for (mid, tasks) in &seen.started {
        let Some(a) = attempts.get(mid) else {
            fail(&mut report.unexpected, format!("message {mid} names no attempt to an A2A agent"));
            continue;
        };
        // The task Parley adopted, else the first one.
        let task = tasks.iter().map(|t| &seen.tasks[t]).find(|t| a.remote.as_deref() == Some(t.id.as_str()));
        let task = task.unwrap_or(&seen.tasks[&tasks[0]]);
        if a.status == "completed" {
            let adopted = a.remote.as_deref() == Some(task.id.as_str());
            if !adopted || task.state(Utc::now()) != "TASK_STATE_COMPLETED" || a.output.as_ref() != Some(&task.output())
            {
                fail(&mut report.unexpected, format!("attempt {mid} completed, its task at the agent did not"));
            }
        }
        if seen.tasks[&tasks[0]].started_at > a.accept_by {
            sent_late += 1;
            eprintln!("a2a: message {mid} reached the agent after its attempt's accept deadline");
        }
        let finished = task.plan == Plan::Complete && !task.canceled && task.ends_at < a.deadline;
        if a.status == "timeout" && a.remote.is_some() && finished {
            timed_out_in_time += 1;
            eprintln!("a2a: attempt {mid} timed out though its task completed before the deadline");
        }
    }
    for (mid, a) in &attempts {
        if a.status == "completed" && !seen.started.contains_key(mid) {
            fail(&mut report.unexpected, format!("attempt {mid} completed, the agent never got it"));
        }
    }
    report.unexpected += seen.malformed + ledger.unexpected.load(Ordering::Relaxed);
    for m in &seen.malformed_first {
        eprintln!("a2a: off the protocol: {m}");
    }
    for s in ledger.surprises.lock().unwrap().iter() {
        eprintln!("a2a: unexpected answer: {s}");
    }
    for f in &failures {
        eprintln!("a2a: {f}");
    }
    // Recovered: delegations in flight at a fault that still ended.
    let ours: HashMap<Uuid, bool> = delegations.values().map(|(id, s)| (*id, terminal(s))).collect();
    let at_faults: Vec<bool> = in_flight_at_faults.iter().filter_map(|d| ours.get(d).copied()).collect();
    report.recovered = at_faults.iter().filter(|ended| **ended).count() as u64;

    // Why attempts ended otherwise than completed, for the eye.
    let mut endings: HashMap<String, usize> = HashMap::new();
    for a in attempts.values() {
        let why: String = a.reason.as_deref().unwrap_or("").chars().take(50).collect();
        *endings.entry(format!("{} {why}", a.status).trim().to_owned()).or_default() += 1;
    }
    let mut endings: Vec<_> = endings.into_iter().collect();
    endings.sort_by_key(|e| std::cmp::Reverse(e.1));
    let endings: Vec<String> = endings.iter().map(|(k, n)| format!("{n} {k}")).collect();
    eprintln!("a2a attempts ended: {}", endings.join("; "));

    let now = Utc::now();
    let repeats = seen.sends.values().filter(|n| **n > 1).count();
    let hung = seen.tasks.values().filter(|t| t.plan == Plan::Hang).count();
    let canceled = seen.tasks.values().filter(|t| t.canceled).count();
    let (left, left_known) = left_working(&seen, &attempts);
    let still = seen.tasks.values().filter(|t| t.state(now) == "TASK_STATE_WORKING").count();
    let line = format!(
        "{} acknowledged ({} after a resend, {} never answered), {} attempts pushed to {} A2A agents; agent: {} \
         messages, {} sent more than once, {} tasks, {} answers dropped, {} look-ups ({} found a task), {} reads, \
         {} cancels ({} tasks canceled, {} never finishing by themselves); {} messages reached the agent after \
         their attempt's accept deadline; {} tasks left working for ended attempts ({} of them known to Parley, \
         {} working in all); {} accepted attempts timed out though their task had completed before the deadline; \
         {} refused requests during faults | lost {} duplicated {} unexpected {} recovered {} (of {} in flight at \
         faults)",
        acknowledged.len(),
        ledger.resent.load(Ordering::Relaxed),
        ledger.unanswered.load(Ordering::Relaxed),
        attempts.len(),
        agents.len(),
        seen.sends.len(),
        repeats,
        seen.tasks.len(),
        seen.dropped,
        seen.lookups,
        seen.found,
        seen.gets,
        seen.cancels,
        canceled,
        hung,
        sent_late,
        left,
        left_known,
        still,
        timed_out_in_time,
        ledger.refused.load(Ordering::Relaxed),
        report.lost,
        report.duplicated,
        report.unexpected,
        report.recovered,
        at_faults.len(),
    );
    (report, Timeliness { timed_out_in_time, left_working: left, sent_late }, line)
}
