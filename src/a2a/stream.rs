//! A task's updates as Server-Sent Events: what a streaming send and a subscription answer.
//!
//! Each event's data is one JSON-RPC response carrying the call's id. The first is the task;
//! then a status update each time the delegation moves (a target takes it, an attempt ends and
//! the next target is offered it); at the end, the `delegation-result` artifact when it
//! completed, and the final status (0.3 marks it `final: true`), after which the stream closes.
//!
//! A stream follows the event log's `delegation.status` events (every attempt's every move is
//! one, written in the move's transaction): it wakes only when its delegation's request id
//! appears there, reads the delegation once (a connection held for that read only), and tells
//! what changed. No timer polls and no connection is held while it waits, so an open stream
//! costs a task and a broadcast receiver. If it falls behind the event hub it reads the
//! delegation at once instead of trusting the events it missed. Streams are counted per agent
//! (`PARLEY_A2A_STREAMS_PER_AGENT`), per user over all their agents
//! (`PARLEY_A2A_STREAMS_PER_USER`, so that one person with many agents cannot hold every place)
//! and in all (`PARLEY_SSE_MAX`), end when the process shuts down, and carry a comment every
//! 15 s so that proxies keep them open.

use std::{convert::Infallible, sync::Arc, time::Duration};

use axum::response::{
    IntoResponse, Response,
    sse::{Event as SseEvent, Sse},
};
use futures::{Stream, StreamExt, stream};
use serde_json::Value;
use tokio::sync::broadcast::{self, error::RecvError};
use uuid::Uuid;

use super::{
    A2aState,
    rpc::{self, Id, RpcError, Version},
};
use crate::{
    directory::delegation::{Record, Status},
    runtime::AgentIdentity,
    store::events::Event,
    wire::a2a_render as render,
    wire::delegation_task as task,
    wire::{error::ApiError, streams::Slot},
};

/// A place for one more stream of `agent` (counted for the agent and for its user), or 429.
pub fn slot(state: &A2aState, agent: &AgentIdentity) -> Result<Slot, ApiError> {
    let who = format!("agent:{}", agent.agent_id);
    state.streams.open(&who, &agent.owner_user_id).map_err(|full| {
        let message = match full {
            crate::wire::streams::Full::All(n) => {
                format!("the service holds {n} streams open (PARLEY_SSE_MAX); retry later")
            }
            crate::wire::streams::Full::Token(n) => format!(
                "this agent holds {n} A2A task streams open already (PARLEY_A2A_STREAMS_PER_AGENT); close one first"
            ),
            crate::wire::streams::Full::User(n) => format!(
                "this agent's user holds {n} A2A task streams open already, over all their agents \
                 (PARLEY_A2A_STREAMS_PER_USER); close one first"
            ),
        };
        ApiError::TooMany(message, Duration::from_secs(5))
    })
}

/// What a stream knows between events.
struct Following {
    state: A2aState,
    requester: Uuid,
    request_id: String,
    delegation_id: Uuid,
    events: broadcast::Receiver<Arc<Event>>,
    id: Id,
    version: Version,
    /// What the last status sent said.
    told: (&'static str, usize, Option<Status>),
    /// Events queued to send before waiting again.
    queue: std::collections::VecDeque<Value>,
    done: bool,
}

impl Following {
    fn response(&self, result: Value) -> Value {
        rpc::result(&self.id, result)
    }

    /// Queues what `record` says that the client was not told yet; true when it is the end.
    fn tell(&mut self, record: &Record) -> bool {
        let progress = task::progress(&record.delegation, &record.attempts);
        if progress == self.told {
            return false;
        }
        self.told = progress;
        let t = task::task(&record.delegation, &record.attempts);
        let last = record.delegation.status.is_terminal();
        if last {
            for artifact in &t.artifacts {
                let event = self.response(render::artifact_event(&t, artifact, self.version));
                self.queue.push_back(event);
            }
        }
        let event = self.response(render::status_event(&t, self.version, last));
        self.queue.push_back(event);
        last
    }

    /// Waits for the delegation's next move, and queues what it says.
    async fn next_move(&mut self) {
        loop {
            let reread = match self.events.recv().await {
                Ok(e) => {
                    e.kind == "delegation.status"
                        && e.data.get("requestId").and_then(Value::as_str) == Some(&self.request_id)
                }
                Err(RecvError::Lagged(_)) => true,
                Err(RecvError::Closed) => {
                    self.done = true;
                    return;
                }
            };
            if !reread {
                continue;
            }
            match self.state.delegations.requested_by(self.delegation_id, self.requester).await {
                Ok(record) => {
                    let ended = self.tell(&record);
                    if ended {
                        self.done = true;
                    }
                    if !self.queue.is_empty() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "an A2A stream could not read its delegation");
                    let error = RpcError::internal();
                    self.queue.push_back(rpc::error(&self.id, &error, self.version));
                    self.done = true;
                    return;
                }
            }
        }
    }
}

/// The SSE answer following `record`'s delegation from now: the task first, then its moves.
/// `events` was subscribed before `record` was read or made, so no move falls between them. Each
/// event answers `call` (its id, its version, and without the JSON-RPC envelope when it came over
/// the HTTP+JSON binding).
pub fn follow(
    state: &A2aState,
    requester: Uuid,
    record: Record,
    events: broadcast::Receiver<Arc<Event>>,
    slot: Slot,
    call: &super::rpc::Call,
) -> Response {
    let (id, version, rest) = (call.id.clone(), call.method.version, call.rest);
    let t = task::task(&record.delegation, &record.attempts);
    let mut following = Following {
        state: state.clone(),
        requester,
        request_id: record.delegation.request_id.to_string(),
        delegation_id: record.delegation.delegation_id,
        events,
        id: id.clone(),
        version,
        told: task::progress(&record.delegation, &record.attempts),
        queue: Default::default(),
        done: false,
    };
    let first = following.response(render::task_event(render::task(&t, version, None), version));
    following.queue.push_back(first);
    if record.delegation.status.is_terminal() {
        // Ended before the stream began (a fast target): the artifact and the final status too.
        following.told = ("", 0, None);
        following.tell(&record);
        following.done = true;
    }
    let updates = stream::unfold(following, |mut f| async move {
        loop {
            if let Some(event) = f.queue.pop_front() {
                return Some((event, f));
            }
            if f.done {
                return None;
            }
            f.next_move().await;
        }
    });
    sse(updates, state.stopped(), slot, rest).into_response()
}

/// The events as SSE, each a JSON-RPC response (`event: error` for an error), ending at shutdown,
/// holding the stream's slot until it ends.
fn sse(
    updates: impl Stream<Item = Value> + Send + 'static,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
    slot: Slot,
    rest: bool,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    super::route::sse(updates.take_until(stopped), slot, rest)
}
