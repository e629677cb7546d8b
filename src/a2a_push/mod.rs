//! Parley calling agents that never poll: an agent registered by its AgentCard is sent its
//! delegation attempts ([`delegation`]) and its user's negotiation turns ([`turn`]) over A2A,
//! by durable jobs, instead of waiting for it to pick them up.
//!
//! Each push is a chain of steps of one `parley_jobs::A2aCall` job per subject (an attempt, a
//! turn): a step reads where its subject stands, makes at most one call to the agent and arms
//! the next step, in the transaction that records what the call answered where it changes
//! something. So a step lost to a crash (Parley killed mid-call) runs again from what was
//! committed: a send repeated carries the same message id (the attempt's task id, or one derived
//! from the turn), and the agent's task id, once answered, is stored before any step reads it.
//!
//! The calls ([`Pusher::call`]) go through `a2a_client::outbound` (the address guard again at
//! call time, places per agent and in all, a timeout, an answer's size); each is counted in
//! `/metrics` (`parley_a2a_outbound_calls_total`) and recorded on the agent's card row (the last
//! call's time and outcome, which the status page shows; a success also marks the agent seen,
//! which is what its liveness reads).

pub mod delegation;
pub mod turn;

use std::time::Duration;

use chrono::{DateTime, Utc};
use parley_jobs::{A2aCall, A2aSubject, HandlerError};
use serde_json::Value;
use uuid::Uuid;

use crate::{
    a2a_client::{
        call::{self, Outgoing, RemoteTask, Request, Unreadable},
        outbound::{CallError, Endpoint, Limits, Outbound},
    },
    config::Config,
    delivery::Engine,
    directory::delegation::Delegations,
    metrics,
    quote::logged,
    store::agent_cards,
};

/// The first wait between two reads of an agent's task; each read waits a second more.
const FIRST_POLL: Duration = Duration::from_secs(1);
/// The longest wait between two reads of an agent's task.
const MAX_POLL: Duration = Duration::from_secs(5);
/// The longest wait before a failed call is tried again.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// What pushes work to agents: the services whose state a push changes, and the calls.
#[derive(Clone)]
pub struct Pusher {
    engine: Engine,
    delegations: Delegations,
    outbound: Outbound,
}

impl Pusher {
    /// The pusher over the process's services, its calls bounded as `config` says.
    pub fn new(engine: Engine, delegations: Delegations, config: &Config) -> anyhow::Result<Pusher> {
        let outbound = Outbound::new(Limits {
            timeout: config.a2a_call_timeout,
            per_agent: config.a2a_calls_per_agent as usize,
            total: config.a2a_calls_max as usize,
            allow_private: config.a2a_allow_private_targets,
        })?;
        Ok(Pusher { engine, delegations, outbound })
    }

    /// Runs one step of `call`.
    pub async fn step(&self, call: A2aCall) -> Result<(), HandlerError> {
        match call.subject {
            A2aSubject::Delegation { delegation_id, attempt } => {
                delegation::step(self, &call, delegation_id, attempt).await
            }
            A2aSubject::Turn { task_id, turn_number } => turn::step(self, &call, task_id, turn_number).await,
        }
    }

    /// The endpoint of `agent`, when it still has a card.
    async fn endpoint(&self, agent: Uuid) -> Result<Option<Endpoint>, HandlerError> {
        let mut conn = self.engine.pool().acquire().await?;
        let card = agent_cards::get(&mut conn, agent).await.map_err(HandlerError::new)?;
        Ok(card.map(|c| Endpoint { agent_id: agent, url: c.interface_url, dialect: c.dialect, auth: c.auth }))
    }

    /// Makes `request` at `endpoint` (`what`: `send`, `lookup`, `get` or `cancel`), counts it, records its
    /// outcome on the agent's card row, and marks the agent seen when it succeeded.
    async fn call(&self, endpoint: &Endpoint, request: &Request, what: &'static str) -> Result<Value, CallError> {
        self.call_before(endpoint, request, what, None).await
    }

    /// [`Self::call`], made only if it can be made before `not_after` (see `Outbound::call`).
    async fn call_before(
        &self,
        endpoint: &Endpoint,
        request: &Request,
        what: &'static str,
        not_after: Option<DateTime<Utc>>,
    ) -> Result<Value, CallError> {
        let answer = self.outbound.call(endpoint, request, not_after).await;
        let (label, outcome) = match &answer {
            Ok(_) => ("ok", format!("{what}: ok")),
            Err(e) => (e.outcome(), format!("{what}: {e}")),
        };
        metrics::a2a_outbound(what, label);
        let recorded = async {
            let mut conn = self.engine.pool().acquire().await?;
            agent_cards::record_call(&mut conn, endpoint.agent_id, &outcome, answer.is_ok()).await
        };
        if let Err(e) = recorded.await {
            tracing::warn!(agent.id = %endpoint.agent_id, error = %e, "could not record a call's outcome");
        }
        if answer.is_ok() {
            self.engine.runtime().seen(endpoint.agent_id).await;
        }
        if let Err(e) = &answer {
            let error = logged(&e.to_string());
            tracing::info!(agent.id = %endpoint.agent_id, call = what, %error, "a call to an agent failed");
        }
        answer
    }

    /// Sends `message` once: a message begun before (a crash interrupted its step) is first
    /// looked up at the agent, and sent again only when the agent has no task of it (or, in
    /// 0.3, cannot say); the send is made only before `not_after`. What the agent answered, or
    /// why the send failed.
    async fn send_once(
        &self,
        endpoint: &Endpoint,
        message: &Outgoing<'_>,
        not_after: Option<DateTime<Utc>>,
    ) -> Result<Result<RemoteTask, SendFailure>, HandlerError> {
        let first = {
            let mut conn = self.engine.pool().acquire().await?;
            agent_cards::begin_send(&mut conn, endpoint.agent_id, message.message_id).await?
        };
        if !first {
            match self.lookup(endpoint, message.message_id).await {
                Ok(Some(task)) => return Ok(Ok(task)),
                Ok(None) => {}
                Err(e) => return Ok(Err(e)),
            }
        }
        Ok(match self.call_before(endpoint, &call::send(endpoint.dialect, message), "send", not_after).await {
            Ok(result) => call::read_send(endpoint.dialect, &result).map_err(SendFailure::Unreadable),
            Err(e) => Err(SendFailure::Call(e)),
        })
    }

    /// The task the message `message_id` started at the agent, as the agent says (`None`: it
    /// has none, or in 0.3 cannot say; a JSON-RPC error is read as "no such task").
    async fn lookup(&self, endpoint: &Endpoint, message_id: Uuid) -> Result<Option<RemoteTask>, SendFailure> {
        let Some(lookup) = call::lookup(endpoint.dialect, message_id) else { return Ok(None) };
        match self.call(endpoint, &lookup, "lookup").await {
            Ok(result) => call::read_lookup(endpoint.dialect, &result).map_err(SendFailure::Unreadable),
            Err(CallError::Rpc { .. }) => Ok(None),
            Err(e) => Err(SendFailure::Call(e)),
        }
    }

    /// The task the message `message_id` started at the agent, when Parley began to send it
    /// (its answer may have been lost) and the agent can say; `None` when it was never sent or
    /// the agent has no such task (or, in 0.3, cannot say); why the look-up failed otherwise.
    async fn begun_task(
        &self,
        endpoint: &Endpoint,
        message_id: Uuid,
    ) -> Result<Result<Option<RemoteTask>, SendFailure>, HandlerError> {
        let begun = {
            let mut conn = self.engine.pool().acquire().await?;
            agent_cards::send_begun(&mut conn, message_id).await?
        };
        Ok(if begun { self.lookup(endpoint, message_id).await } else { Ok(None) })
    }

    /// Arms `next`, the next step of a push, to run at `at`.
    async fn arm(&self, next: &A2aCall, at: DateTime<Utc>) -> Result<(), HandlerError> {
        let mut conn = self.engine.pool().acquire().await?;
        parley_jobs::schedule_a2a_call(&mut conn, next, at).await?;
        Ok(())
    }

    /// Cancels the agent's task `remote`; a failure is logged and answered (whether trying again
    /// may help is the caller's to judge).
    async fn cancel_remote(&self, endpoint: &Endpoint, remote: &str) -> Result<(), CallError> {
        let request = call::cancel(endpoint.dialect, remote);
        self.call(endpoint, &request, "cancel").await.map(drop)
    }

    /// Before attempt `attempt` of `delegation_id` times out: when it was pushed to an agent and
    /// taken, the agent's task is read once more, and an end the agent reached by the attempt's
    /// deadline decides it (work done in time completes the attempt). True when that ended the
    /// attempt (see `delegation::last_read`).
    pub async fn before_timeout(&self, delegation_id: Uuid, attempt: i32) -> Result<bool, HandlerError> {
        delegation::last_read(self, delegation_id, attempt).await
    }

    /// After attempt `attempt` of `delegation_id` ended without the agent (timed out): its task
    /// at the agent, if it still works, is cancelled at once (see `delegation::cancel_left`).
    pub async fn after_timeout(&self, delegation_id: Uuid, attempt: i32) -> Result<(), HandlerError> {
        delegation::cancel_ended(self, delegation_id, attempt).await
    }
}

/// Why a send failed: the call, or its answer.
#[derive(Debug)]
enum SendFailure {
    /// The call failed.
    Call(CallError),
    /// The answer could not be read.
    Unreadable(Unreadable),
}

impl SendFailure {
    /// Whether sending again later may succeed.
    fn is_transient(&self) -> bool {
        matches!(self, SendFailure::Call(e) if e.is_transient())
    }
}

impl std::fmt::Display for SendFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendFailure::Call(e) => write!(f, "{e}"),
            SendFailure::Unreadable(e) => write!(f, "its answer could not be read: {e}"),
        }
    }
}

/// The wait before the read after `polls` reads: 1 s, then a second more each time, at most 5 s.
fn poll_delay(polls: u32) -> Duration {
    (FIRST_POLL * (polls + 1)).min(MAX_POLL)
}

/// The wait before a call tried again after `failures` failures in a row: 1, 2, 4 ... at most
/// 30 s.
fn retry_delay(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.min(5)).min(MAX_RETRY)
}

/// `now + d`.
fn after(d: Duration) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_off_from_one_second_to_five_and_retries_to_thirty() {
        let polls: Vec<u64> = (0..7).map(|n| poll_delay(n).as_secs()).collect();
        assert_eq!(polls, [1, 2, 3, 4, 5, 5, 5]);
        let retries: Vec<u64> = (0..8).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(retries, [1, 2, 4, 8, 16, 30, 30, 30]);
    }
}
