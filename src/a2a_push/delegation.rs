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
//!   the agent's task a cancel; a task whose send answer was lost is found by its message first.
//!   A cancel (or look-up) that failed in a way that may pass is tried again, up to
//!   [`CANCEL_TRIES`] times with the same backoff; the timeout itself also cancels at once
//!   ([`cancel_ended`]), so a step lost to a crash does not leave the agent working. An attempt
//!   the push ends itself because its task could not be read cancels that task too.
//! - **No late sends**: a send is begun only while [`SEND_MARGIN`] of the attempt's accept
//!   window is left, and is not made at all if its places among the calls came later than that:
//!   no message reaches an agent for an attempt it can no longer take.
//! - **The last read decides**: the reads back off, and the last one comes a second before the
//!   deadline; then, when the attempt's timer is due, the agent's task is read once more before
//!   it times out ([`last_read`], within [`TIMER_CALL_BUDGET`], so that a slow agent holds the
//!   timers' queue no longer): a task the agent says ended by the deadline (its status's
//!   `timestamp`) ends the attempt as if read in time, completed with its output, or failed with
//!   its words. A task still working, or one that names no time or a later one, times out. The
//!   same holds after a restart: a timer that came due while Parley was down reads first. (The
//!   timestamp is the agent's word: it can move its end to before the deadline only between the
//!   deadline and that read.)
//!
//! Every end goes through the delegations service (`Delegations::pushed_*`), so trust counts
//! these attempts exactly as polled ones, and a failure falls back to the next target.

use chrono::{DateTime, Utc};
use parley_jobs::{A2aCall, HandlerError};
use serde_json::json;
use uuid::Uuid;

use super::{Pusher, SendFailure, after, poll_delay, retry_delay};
use crate::{
    a2a_client::{
        call::{self, Outgoing, RemoteState, RemoteTask},
        card::Dialect,
        outbound::{CallError, Endpoint},
    },
    directory::delegation::{Event, Status, pushed::PushedAttempt},
};

/// How much of an attempt's accept window must be left for its send to begin: the agent's
/// answer has to come back by the accept deadline to be taken, so a send begun later is wasted
/// work for the agent (and a task to cancel), and might reach it after that deadline.
pub const SEND_MARGIN: chrono::Duration = chrono::Duration::milliseconds(500);

/// Tries of a cancel (or of the look-up before it) that failed in a way that may pass.
pub const CANCEL_TRIES: u32 = 5;

/// The longest the delegation timer waits for the agent, for its last read and for the cancel
/// after a timeout: the timer's queue serves every delegation, so a slow agent holds it this
/// long at most (a read it does not answer in time leaves the attempt to time out; a cancel,
/// to the attempt's own step).
pub const TIMER_CALL_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

/// One step of pushing attempt `attempt` of `delegation_id` (see the module docs).
pub(super) async fn step(p: &Pusher, job: &A2aCall, delegation_id: Uuid, attempt: i32) -> Result<(), HandlerError> {
    let Some(read) = p.delegations.pushed_attempt(delegation_id, attempt).await.map_err(HandlerError::new)? else {
        return Ok(());
    };
    // A card detached meanwhile: the agent polls now, and the attempt's timer still ends it.
    let Some(endpoint) = p.endpoint(read.attempt.target_agent_id).await? else { return Ok(()) };
    let a = &read.attempt;
    let too_late = a.status == Status::Request && accept_by(&read) - SEND_MARGIN <= Utc::now();
    if !read.is_live() || too_late {
        // Ended without the agent (cancelled, timed out), or past the time it could be taken:
        // no send, and a task the agent started for it is cancelled, even one whose send
        // answer was lost (it is looked up by its message).
        if matches!(a.status, Status::Canceled | Status::Timeout) || too_late {
            return match cancel_left(p, &endpoint, &read).await? {
                Err(e) if e.is_transient() && job.failures + 1 < CANCEL_TRIES => {
                    let again = A2aCall { failures: job.failures + 1, ..job.clone() };
                    p.arm(&again, after(retry_delay(job.failures))).await
                }
                _ => Ok(()),
            };
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
    let task = match p.send_once(endpoint, &message, Some(accept_by(read) - SEND_MARGIN)).await? {
        Ok(task) => task,
        Err(e) if e.is_transient() => return retry(p, job, accept_by(read)).await,
        Err(e) => return end(p, read, Event::Reject, &format!("the agent refused the message: {e}")).await.map(drop),
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
            let _ = p.cancel_remote(endpoint, remote).await;
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
    if a.deadline <= Utc::now() {
        // The attempt's timer reads the task once more and ends the attempt; this step comes
        // back after it, to cancel the task if it still works.
        return p.arm(&A2aCall { polls: job.polls + 1, ..job.clone() }, after(std::time::Duration::from_secs(1))).await;
    }
    let why = match p.call(endpoint, &call::get(endpoint.dialect, remote), "get").await {
        Ok(result) => match call::read_task(endpoint.dialect, &result) {
            Ok(task) => return on_read(p, job, read, &task).await,
            Err(unreadable) => format!("the agent's task could not be read: {unreadable}"),
        },
        Err(e) if e.is_transient() => return retry(p, job, a.deadline).await,
        Err(e) => format!("the agent's task could not be read: {e}"),
    };
    // The task may still run at the agent: it is no longer wanted.
    end(p, read, Event::Fail, &why).await?;
    let _ = p.cancel_remote(endpoint, remote).await;
    Ok(())
}

/// What a read of an accepted attempt's task leads to: the next read while it runs, else its
/// end.
async fn on_read(p: &Pusher, job: &A2aCall, read: &PushedAttempt, task: &RemoteTask) -> Result<(), HandlerError> {
    let a = &read.attempt;
    if task.state.is_running() {
        let next = A2aCall { polls: job.polls + 1, failures: 0, ..job.clone() };
        // The last read comes a second before the deadline (work finished by then is taken);
        // after it, the next step comes a second after the deadline, to cancel.
        let last_read = a.deadline - chrono::Duration::seconds(1);
        let at = after(poll_delay(job.polls));
        let at = if at <= last_read {
            at
        } else if Utc::now() < last_read {
            last_read
        } else {
            a.deadline + chrono::Duration::seconds(1)
        };
        return p.arm(&next, at).await;
    }
    finish(p, read, task).await.map(drop)
}

/// The last read of attempt `attempt` of `delegation_id` before it times out, when its timer is
/// due (see the module docs): the attempt pushed to an agent, taken, its deadline passed. A task
/// the agent says ended by the deadline ends the attempt as that end says; true then. Anything
/// else (the task still working, no time or a later one given, no answer within
/// [`TIMER_CALL_BUDGET`]) is left to the timeout.
pub(super) async fn last_read(p: &Pusher, delegation_id: Uuid, attempt: i32) -> Result<bool, HandlerError> {
    let Some(read) = p.delegations.pushed_attempt(delegation_id, attempt).await.map_err(HandlerError::new)? else {
        return Ok(false);
    };
    let a = &read.attempt;
    if !read.is_live() || a.status != Status::Accepted || a.deadline > Utc::now() {
        return Ok(false);
    }
    let Some(remote) = &read.remote_task_id else { return Ok(false) };
    let Some(endpoint) = p.endpoint(a.target_agent_id).await? else { return Ok(false) };
    let get = call::get(endpoint.dialect, remote);
    let Ok(Ok(result)) = tokio::time::timeout(TIMER_CALL_BUDGET, p.call(&endpoint, &get, "get")).await else {
        return Ok(false);
    };
    match call::read_task(endpoint.dialect, &result) {
        Ok(task) if !task.state.is_running() && task.at.is_some_and(|at| at <= a.deadline) => {
            finish(p, &read, &task).await
        }
        _ => Ok(false),
    }
}

/// After attempt `attempt` of `delegation_id` ended without its agent (timed out, cancelled):
/// the agent's task, if it still works, is cancelled now, within [`TIMER_CALL_BUDGET`] (a
/// failure is left to the attempt's own step, which was brought forward by the end and tries
/// again).
pub(super) async fn cancel_ended(p: &Pusher, delegation_id: Uuid, attempt: i32) -> Result<(), HandlerError> {
    let Some(read) = p.delegations.pushed_attempt(delegation_id, attempt).await.map_err(HandlerError::new)? else {
        return Ok(());
    };
    if !matches!(read.attempt.status, Status::Canceled | Status::Timeout) {
        return Ok(());
    }
    let Some(endpoint) = p.endpoint(read.attempt.target_agent_id).await? else { return Ok(()) };
    match tokio::time::timeout(TIMER_CALL_BUDGET, cancel_left(p, &endpoint, &read)).await {
        Ok(done) => done.map(drop),
        Err(_) => Ok(()),
    }
}

/// Cancels the agent's task of an attempt that it will not finish: the task Parley knows, else
/// the one its message started if its send began (the answer may have been lost) and it still
/// works. Why a call failed, when one did.
async fn cancel_left(
    p: &Pusher,
    endpoint: &Endpoint,
    read: &PushedAttempt,
) -> Result<Result<(), CallError>, HandlerError> {
    let remote = match &read.remote_task_id {
        Some(remote) => remote.clone(),
        None => match p.begun_task(endpoint, read.attempt.task_id).await? {
            Ok(Some(RemoteTask { id: Some(id), state, .. })) if state.is_running() => id,
            Ok(_) | Err(SendFailure::Unreadable(_)) => return Ok(Ok(())),
            Err(SendFailure::Call(e)) => return Ok(Err(e)),
        },
    };
    Ok(p.cancel_remote(endpoint, &remote).await)
}

/// The sooner of the attempt's accept deadline and its deadline: when it must be taken by.
fn accept_by(read: &PushedAttempt) -> DateTime<Utc> {
    read.attempt.accept_deadline.min(read.attempt.deadline)
}

/// What the agent's ended task means for the attempt; true when it ended the attempt (it may
/// have moved on meanwhile). A completion counts as of when the agent says it completed (never
/// later than now): one read after the deadline still completes an attempt whose work was done
/// by then.
async fn finish(p: &Pusher, read: &PushedAttempt, task: &RemoteTask) -> Result<bool, HandlerError> {
    let said = |fallback: &str| task.message.clone().unwrap_or_else(|| fallback.to_owned());
    match (task.state, &task.output) {
        (RemoteState::Completed, Some(output)) => {
            let (delegation_id, attempt) = (read.delegation.delegation_id, read.attempt.attempt);
            let done_at = task.at.map_or_else(Utc::now, |at| at.min(Utc::now()));
            p.delegations.pushed_output(delegation_id, attempt, output, done_at).await.map_err(HandlerError::new)
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

/// Ends the attempt by `event` with `why`, unless it has moved on; true when it ended it.
async fn end(p: &Pusher, read: &PushedAttempt, event: Event, why: &str) -> Result<bool, HandlerError> {
    p.delegations
        .pushed_ended(read.delegation.delegation_id, read.attempt.attempt, event, why)
        .await
        .map_err(HandlerError::new)
}

/// The same step again after a failure that may pass, no later than a second after `until`
/// (by then the attempt's timer has ended the attempt, and the step only cancels).
async fn retry(p: &Pusher, job: &A2aCall, until: DateTime<Utc>) -> Result<(), HandlerError> {
    let at = after(retry_delay(job.failures)).min(until + chrono::Duration::seconds(1));
    p.arm(&A2aCall { failures: job.failures + 1, ..job.clone() }, at).await
}
