//! A delegation attempt pushed to an agent Parley calls: the steps of its
//! `parley_jobs::A2aCall` job (subject `delegation`), armed when the attempt is offered.
//!
//! - **Send** (the attempt offered): a non-blocking send of the input as a data part, with
//!   `metadata.parley` (requestId, taskType, attempt, deadline, outputSchema) and a line of text
//!   saying what is asked; its message id is the attempt's task id, so a send repeated after a
//!   crash is the same message. A task or a message in answer means the agent took it: the
//!   attempt is accepted, the agent's task id kept and the first read armed, in one
//!   transaction. A refusal (a JSON-RPC error, a 4xx, an answer that cannot be read) rejects
//!   the attempt with why; a failure that may pass (the network, a 5xx, a 429) is tried again
//!   with backoff while the accept deadline lasts, after which the attempt's timer ends it.
//! - **Follow** (accepted): the agent's task is read, a second after the send and then a
//!   second more each time up to 5 s, until it ends or the attempt's deadline passes. Completed:
//!   its output (the first data part of its last artifact, else its JSON text) is checked
//!   against the capability's `outputSchema` and completes the attempt, or fails it with why.
//!   Failed, rejected, cancelled by the agent, or asking for input: the attempt fails (or is
//!   rejected) with the agent's own words.
//! - **Cancel**: when the attempt has ended without the agent (the requester cancelled it, or
//!   its deadline passed), the step that runs next (brought forward to at once by the end) sends
//!   the agent's task a cancel, once; a task whose send answer was lost is found by its message
//!   first. An attempt past the time it could be taken is not sent at all.
//! - The reads back off, but the last one comes a second before the deadline, so that work
//!   finished in time is taken.
//!
//! Every end goes through the delegations service (`Delegations::pushed_*`), so trust counts
//! these attempts exactly as polled ones, and a failure falls back to the next target.

use parley_jobs::{A2aCall, HandlerError};
use serde_json::json;
use uuid::Uuid;

use super::{Pusher, after, poll_delay, retry_delay};
use crate::{
    a2a_client::{
        call::{self, Outgoing, RemoteState, RemoteTask},
        card::Dialect,
        outbound::Endpoint,
    },
    directory::delegation::{Event, Status, pushed::PushedAttempt},
};

/// One step of pushing attempt `attempt` of `delegation_id` (see the module docs).
pub(super) async fn step(p: &Pusher, job: &A2aCall, delegation_id: Uuid, attempt: i32) -> Result<(), HandlerError> {
    let Some(read) = p.delegations.pushed_attempt(delegation_id, attempt).await.map_err(HandlerError::new)? else {
        return Ok(());
    };
    // A card detached meanwhile: the agent polls now, and the attempt's timer still ends it.
    let Some(endpoint) = p.endpoint(read.attempt.target_agent_id).await? else { return Ok(()) };
    let a = &read.attempt;
    let too_late = a.status == Status::Request && a.accept_deadline.min(a.deadline) <= chrono::Utc::now();
    if !read.is_live() || too_late {
        // Ended without the agent (cancelled, timed out), or past the time it could be taken:
        // no send, and a task the agent started for it is cancelled, even one whose send
        // answer was lost (it is looked up by its message).
        if matches!(a.status, Status::Canceled | Status::Timeout) || too_late {
            let remote = match &read.remote_task_id {
                Some(remote) => Some(remote.clone()),
                None => p.begun_task(&endpoint, a.task_id).await?.filter(|t| t.state.is_running()).and_then(|t| t.id),
            };
            if let Some(remote) = remote {
                p.cancel_remote(&endpoint, &remote).await;
            }
        }
        return Ok(());
    }
    match a.status {
        Status::Request => send(p, job, &endpoint, &read).await,
        Status::Accepted => follow(p, job, &endpoint, &read).await,
        _ => Ok(()),
    }
}

/// The send of an offered attempt.
async fn send(p: &Pusher, job: &A2aCall, endpoint: &Endpoint, read: &PushedAttempt) -> Result<(), HandlerError> {
    let (d, a) = (&read.delegation, &read.attempt);
    let text = format!(
        "Parley delegates a {} task to you: the data part is its input. Answer with a data part that \
         matches metadata.parley.outputSchema.",
        d.task_type
    );
    let message = Outgoing {
        message_id: a.task_id,
        data: &d.input,
        text: &text,
        parley: json!({
            "requestId": d.request_id,
            "taskType": d.task_type,
            "attempt": a.attempt,
            "deadline": a.deadline,
            "outputSchema": a.output_schema,
        }),
    };
    let task = match p.send_once(endpoint, &message).await? {
        Ok(task) => task,
        Err(e) if e.is_transient() => return retry(p, job, a.accept_deadline.min(a.deadline)).await,
        Err(e) => return end(p, read, Event::Reject, &format!("the agent refused the message: {e}")).await,
    };
    // Bindu's task is the one Parley named; the others name theirs.
    let remote = task.id.clone().or_else(|| (endpoint.dialect == Dialect::Bindu).then(|| a.task_id.to_string()));
    let running = task.state.is_running() && remote.is_some();
    let next = A2aCall::first(job.subject.clone());
    let then = running.then(|| (&next, after(poll_delay(0))));
    let accepted = p
        .delegations
        .pushed_accepted(d.delegation_id, a.attempt, remote.as_deref(), then)
        .await
        .map_err(HandlerError::new)?;
    if !accepted {
        // Cancelled or timed out while the send was on its way: the agent's task is not wanted.
        if let (Some(remote), true) = (&remote, task.state.is_running()) {
            p.cancel_remote(endpoint, remote).await;
        }
        return Ok(());
    }
    if !running {
        finish(p, read, &task).await?;
    }
    Ok(())
}

/// A read of an accepted attempt's task at the agent.
async fn follow(p: &Pusher, job: &A2aCall, endpoint: &Endpoint, read: &PushedAttempt) -> Result<(), HandlerError> {
    let a = &read.attempt;
    let Some(remote) = &read.remote_task_id else {
        // Accepted by a message answer that was then lost before its end: nothing to read.
        return Ok(());
    };
    if a.deadline <= chrono::Utc::now() {
        // The attempt's timer ends it now; the agent stops too.
        p.cancel_remote(endpoint, remote).await;
        return Ok(());
    }
    let task = match p.call(endpoint, &call::get(endpoint.dialect, remote), "get").await {
        Ok(result) => match call::read_task(endpoint.dialect, &result) {
            Ok(task) => task,
            Err(unreadable) => {
                let why = format!("the agent's task could not be read: {unreadable}");
                return end(p, read, Event::Fail, &why).await;
            }
        },
        Err(e) if e.is_transient() => return retry(p, job, a.deadline).await,
        Err(e) => return end(p, read, Event::Fail, &format!("the agent's task could not be read: {e}")).await,
    };
    if task.state.is_running() {
        let next = A2aCall { polls: job.polls + 1, failures: 0, ..job.clone() };
        // The last read comes a second before the deadline (work finished by then is taken);
        // after it, the next step comes a second after the deadline, to cancel.
        let last_read = a.deadline - chrono::Duration::seconds(1);
        let at = after(poll_delay(job.polls));
        let at = if at <= last_read {
            at
        } else if chrono::Utc::now() < last_read {
            last_read
        } else {
            a.deadline + chrono::Duration::seconds(1)
        };
        return p.arm(&next, at).await;
    }
    finish(p, read, &task).await
}

/// What the agent's ended task means for the attempt.
async fn finish(p: &Pusher, read: &PushedAttempt, task: &RemoteTask) -> Result<(), HandlerError> {
    let said = |fallback: &str| task.message.clone().unwrap_or_else(|| fallback.to_owned());
    match (task.state, &task.output) {
        (RemoteState::Completed, Some(output)) => {
            let (delegation_id, attempt) = (read.delegation.delegation_id, read.attempt.attempt);
            p.delegations.pushed_output(delegation_id, attempt, output).await.map_err(HandlerError::new)
        }
        (RemoteState::Completed, None) => {
            end(p, read, Event::Fail, "the agent's task completed without an output").await
        }
        (RemoteState::Rejected, _) => end(p, read, Event::Reject, &said("the agent rejected the task")).await,
        (RemoteState::Canceled, _) => end(p, read, Event::Fail, &said("the agent canceled its task")).await,
        (RemoteState::InputRequired | RemoteState::AuthRequired, _) => {
            let why =
                format!("the agent asked for more input, which a delegation cannot give: {}", said("no reason given"));
            end(p, read, Event::Fail, &why).await
        }
        _ => end(p, read, Event::Fail, &said("the agent's task failed")).await,
    }
}

/// Ends the attempt by `event` with `why`, unless it has moved on.
async fn end(p: &Pusher, read: &PushedAttempt, event: Event, why: &str) -> Result<(), HandlerError> {
    p.delegations
        .pushed_ended(read.delegation.delegation_id, read.attempt.attempt, event, why)
        .await
        .map_err(HandlerError::new)?;
    Ok(())
}

/// The same step again after a failure that may pass, no later than a second after `until`
/// (by then the attempt's timer has ended the attempt, and the step only cancels).
async fn retry(p: &Pusher, job: &A2aCall, until: chrono::DateTime<chrono::Utc>) -> Result<(), HandlerError> {
    let at = after(retry_delay(job.failures)).min(until + chrono::Duration::seconds(1));
    p.arm(&A2aCall { failures: job.failures + 1, ..job.clone() }, at).await
}
