//! A small A2A 1.0 agent on 127.0.0.1, for the tests that need an agent Parley calls and want
//! to choose what it does: its card (`/.well-known/agent-card.json`) and its JSON-RPC endpoint
//! (`/a2a`: `SendMessage`, `GetTask`, `CancelTask`, `ListTasks`), each task played by the agent's
//! [`Behaviour`], every call remembered. Task states carry a `timestamp`, as the official SDK's
//! do.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{Json, Router, extract::State, routing::get, routing::post};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// What the agent does with each message it is sent.
#[derive(Clone)]
pub enum Behaviour {
    /// Its task works until it is cancelled.
    Hang,
    /// Its task fails at once, saying this.
    FailWith(String),
    /// Its task completes at once with this output (a data artifact).
    Answer(Value),
    /// Its task completes, with this output, this long before the deadline the message names
    /// (`metadata.parley.deadline`), and says so in its status's timestamp; but a read shows
    /// the end only from that deadline on (the agent's store lags behind its work).
    AnswerBeforeDeadlineSeenAfter(Value, chrono::Duration),
}

struct Task {
    context: String,
    started_at: DateTime<Utc>,
    /// When it ends by itself (never for [`Behaviour::Hang`]).
    ends_at: Option<DateTime<Utc>>,
    /// When a read first shows that end.
    seen_from: Option<DateTime<Utc>>,
    canceled_at: Option<DateTime<Utc>>,
}

struct Inner {
    behaviour: Behaviour,
    tasks: HashMap<String, Task>,
    /// Every call: its method and params.
    calls: Vec<(String, Value)>,
}

/// The agent (clones share it).
#[derive(Clone)]
pub struct LoopbackAgent {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    inner: Arc<Mutex<Inner>>,
}

impl LoopbackAgent {
    /// An agent doing `behaviour`, served until the test ends.
    pub async fn start(behaviour: Behaviour) -> LoopbackAgent {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let inner = Arc::new(Mutex::new(Inner { behaviour, tasks: HashMap::new(), calls: Vec::new() }));
        let agent = LoopbackAgent { base, inner };
        let app = Router::new()
            .route("/.well-known/agent-card.json", get(card))
            .route("/a2a", post(rpc))
            .with_state(agent.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        agent
    }

    /// Its card's URL.
    pub fn card_url(&self) -> String {
        format!("{}/.well-known/agent-card.json", self.base)
    }

    /// How many calls of `method` it got.
    pub fn calls_of(&self, method: &str) -> usize {
        self.inner.lock().unwrap().calls.iter().filter(|(m, _)| m == method).count()
    }

    /// Its tasks still working now.
    pub fn working(&self) -> usize {
        let now = Utc::now();
        self.inner.lock().unwrap().tasks.values().filter(|t| state(t, now) == "TASK_STATE_WORKING").count()
    }
}

async fn card(State(agent): State<LoopbackAgent>) -> Json<Value> {
    Json(json!({
        "name": "Loopback agent",
        "description": "An agent of the tests",
        "version": "1.0.0",
        "capabilities": {"streaming": false, "pushNotifications": false},
        "defaultInputModes": ["application/json", "text/plain"],
        "defaultOutputModes": ["application/json"],
        "skills": [{"id": "work", "name": "Work", "description": "Does what it is asked", "tags": []}],
        "supportedInterfaces": [
            {"url": format!("{}/a2a", agent.base), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
    }))
}

fn state(task: &Task, now: DateTime<Utc>) -> &'static str {
    match (task.canceled_at, task.ends_at) {
        (Some(_), _) => "TASK_STATE_CANCELED",
        (None, Some(end)) if end <= now && task.seen_from.is_none_or(|seen| seen <= now) => "ended",
        _ => "TASK_STATE_WORKING",
    }
}

/// The task `id` in 1.0's ProtoJSON, as `behaviour` plays it.
fn render(id: &str, task: &Task, behaviour: &Behaviour) -> Value {
    let now = Utc::now();
    let mut status = match state(task, now) {
        "TASK_STATE_CANCELED" => json!({"state": "TASK_STATE_CANCELED", "timestamp": task.canceled_at}),
        "TASK_STATE_WORKING" => json!({"state": "TASK_STATE_WORKING", "timestamp": task.started_at}),
        _ => match behaviour {
            Behaviour::FailWith(_) => json!({"state": "TASK_STATE_FAILED", "timestamp": task.ends_at}),
            _ => json!({"state": "TASK_STATE_COMPLETED", "timestamp": task.ends_at}),
        },
    };
    let mut rendered = json!({"id": id, "contextId": task.context});
    match behaviour {
        Behaviour::FailWith(said) if status["state"] == "TASK_STATE_FAILED" => {
            status["message"] =
                json!({"messageId": format!("{id}-why"), "role": "ROLE_AGENT", "parts": [{"text": said}]});
        }
        Behaviour::Answer(output) | Behaviour::AnswerBeforeDeadlineSeenAfter(output, _)
            if status["state"] == "TASK_STATE_COMPLETED" =>
        {
            rendered["artifacts"] = json!([{"artifactId": format!("{id}-result"), "parts": [{"data": output}]}]);
        }
        _ => {}
    }
    rendered["status"] = status;
    rendered
}

async fn rpc(State(agent): State<LoopbackAgent>, Json(call): Json<Value>) -> Json<Value> {
    let (method, params) = (call["method"].as_str().unwrap_or_default().to_owned(), call["params"].clone());
    let mut inner = agent.inner.lock().unwrap();
    inner.calls.push((method.clone(), params.clone()));
    let now = Utc::now();
    let behaviour = inner.behaviour.clone();
    let result = match method.as_str() {
        "SendMessage" => {
            let message = &params["message"];
            let context = message["contextId"].as_str().unwrap_or_default().to_owned();
            let (ends_at, seen_from) = match &behaviour {
                Behaviour::Hang => (None, None),
                Behaviour::FailWith(_) | Behaviour::Answer(_) => (Some(now), None),
                Behaviour::AnswerBeforeDeadlineSeenAfter(_, before) => {
                    let deadline = message["metadata"]["parley"]["deadline"].as_str().unwrap();
                    let deadline = DateTime::parse_from_rfc3339(deadline).unwrap().with_timezone(&Utc);
                    (Some(deadline - *before), Some(deadline))
                }
            };
            let id = uuid::Uuid::new_v4().to_string();
            let task = Task { context, started_at: now, ends_at, seen_from, canceled_at: None };
            let rendered = render(&id, &task, &behaviour);
            inner.tasks.insert(id, task);
            Ok(json!({"task": rendered}))
        }
        "GetTask" => match inner.tasks.get(params["id"].as_str().unwrap_or_default()) {
            Some(task) => Ok(render(params["id"].as_str().unwrap(), task, &behaviour)),
            None => Err((-32001, "Task not found")),
        },
        "CancelTask" => {
            let id = params["id"].as_str().unwrap_or_default().to_owned();
            match inner.tasks.get_mut(&id) {
                Some(task) if state(task, now) == "TASK_STATE_WORKING" => {
                    task.canceled_at = Some(now);
                    Ok(render(&id, task, &behaviour))
                }
                Some(_) => Err((-32002, "Task cannot be canceled")),
                None => Err((-32001, "Task not found")),
            }
        }
        "ListTasks" => {
            let context = params["contextId"].as_str().unwrap_or_default();
            let tasks: Vec<Value> = inner
                .tasks
                .iter()
                .filter(|(_, t)| t.context == context)
                .map(|(id, t)| render(id, t, &behaviour))
                .collect();
            Ok(json!({"tasks": tasks, "totalSize": tasks.len()}))
        }
        _ => Err((-32601, "Method not found")),
    };
    Json(match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": call["id"], "result": result}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": call["id"], "error": {"code": code, "message": message}})
        }
    })
}
