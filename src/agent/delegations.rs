//! The delegation loop: long-poll the inbox, accept a request, run the worker on it with its
//! capability's output schema, and complete, reject or fail it from the answer.
//!
//! Up to `concurrency` requests are worked on at once. The worker gets the request as the inbox
//! shows it plus `outputSchema` (read from the agent's own capability of that kind), never the
//! acceptance's token. It must answer before the attempt's deadline: the runner stops it a little
//! before, so that the failure can still be reported; a failed attempt goes to the requester's
//! next target. A request the runner could not accept (the network) is held back for a while.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::Value;
use tokio::{sync::Semaphore, task::JoinSet, time::Instant};

use super::{
    Ctx, POLL_WAIT,
    answer::DelegationAnswer,
    backoff::{Backoff, FailureBook},
    client::CallError,
    instant_of,
    report::{Done, took},
};

/// How long accepting a request may keep trying through network errors.
const ACCEPT_PATIENCE: Duration = Duration::from_secs(10);
/// The most a worker's time is cut short of the attempt's deadline, to report in time.
const REPORT_MARGIN: Duration = Duration::from_secs(2);

/// Serves the inbox until the runner stops, then waits for the requests in hand.
pub(super) async fn serve(ctx: Arc<Ctx>) {
    let permits = Arc::new(Semaphore::new(ctx.options.concurrency));
    let book = Arc::new(Mutex::new(FailureBook::default()));
    let mut in_hand: HashSet<String> = HashSet::new();
    let mut running: JoinSet<String> = JoinSet::new();
    let mut backoff = Backoff::calls();
    while !ctx.is_stopping() {
        while let Some(done) = running.try_join_next() {
            reap(done, &mut in_hand);
        }
        // Room for one more request first: the inbox is read only when one can be taken.
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            Some(done) = running.join_next() => {
                reap(done, &mut in_hand);
                continue;
            }
            () = ctx.until_stopping() => break,
        };
        let inbox = tokio::select! {
            inbox = ctx.client.inbox(ctx.agent, POLL_WAIT) => inbox,
            () = ctx.until_stopping() => break,
        };
        let requests = match inbox {
            Ok(requests) => {
                ctx.answered("reading the inbox", &mut backoff);
                requests
            }
            Err(CallError::KeyRefused(message)) => {
                ctx.fatal(message);
                break;
            }
            Err(e) => {
                if ctx.pause_after("reading the inbox", &e, &mut backoff).await {
                    break;
                }
                continue;
            }
        };
        let fresh: Vec<Value> = {
            let book = book.lock().expect("not poisoned");
            requests
                .iter()
                .filter(|r| r["status"] == "request")
                .filter(|r| r["requestId"].as_str().is_some_and(|id| !in_hand.contains(id) && !book.is_waiting(id)))
                .cloned()
                .collect()
        };
        if fresh.is_empty() {
            if !requests.is_empty() {
                // Everything waiting is in hand or held back: the inbox would answer at once.
                let next = book.lock().expect("not poisoned").next_retry();
                let wait = next.map_or(Duration::from_secs(1), |at| at.saturating_duration_since(Instant::now()));
                tokio::select! {
                    () = tokio::time::sleep(wait.clamp(Duration::from_millis(200), Duration::from_secs(5))) => {}
                    Some(done) = running.join_next() => reap(done, &mut in_hand),
                    () = ctx.until_stopping() => break,
                }
            }
            continue;
        }
        let mut permit = Some(permit);
        for request in fresh {
            let Some(permit) = permit.take().or_else(|| permits.clone().try_acquire_owned().ok()) else { break };
            let id = request["requestId"].as_str().unwrap_or_default().to_owned();
            in_hand.insert(id);
            let (ctx, book) = (ctx.clone(), book.clone());
            running.spawn(async move {
                let id = serve_request(&ctx, &book, &request).await;
                drop(permit);
                id
            });
        }
    }
    // Taking nothing new: the requests in hand finish, or are given back when the grace ends.
    while let Some(done) = running.join_next().await {
        reap(done, &mut in_hand);
    }
}

fn reap(done: Result<String, tokio::task::JoinError>, in_hand: &mut HashSet<String>) {
    match done {
        Ok(id) => {
            in_hand.remove(&id);
        }
        Err(e) => tracing::error!(error = %e, "serving a delegation failed"),
    }
}

/// How the worker's time on a request ended.
enum Work {
    Answer(DelegationAnswer),
    Failed(String),
    GivenUp,
}

/// Takes one request and answers it; returns its id.
async fn serve_request(ctx: &Ctx, book: &Mutex<FailureBook>, request: &Value) -> String {
    let started = Instant::now();
    let id = request["requestId"].as_str().unwrap_or_default().to_owned();
    let task_type = request["taskType"].as_str().unwrap_or_default().to_owned();
    let accepted = match ctx.persist(started + ACCEPT_PATIENCE, || ctx.client.accept(ctx.agent, &id)).await {
        Ok(accepted) => accepted,
        Err(CallError::KeyRefused(message)) => {
            ctx.fatal(message);
            return id;
        }
        Err(e @ CallError::Refused { .. }) => {
            // Taken, timed out or moved on to another target meanwhile: nothing to do.
            tracing::debug!(request = %id, error = %e, "request not taken");
            return id;
        }
        Err(e) => {
            let failures = book.lock().expect("not poisoned").failed(&id, 0);
            tracing::warn!(request = %id, failures, error = %e, "accepting the request failed; it is held back for a while");
            return id;
        }
    };
    let deadline = instant_of(accepted.deadline);
    let token = accepted.claim_token;
    let work = match output_schema(ctx, request, deadline).await {
        Ok(Some(schema)) => {
            let mut view = request.clone();
            view["outputSchema"] = schema.clone();
            let left = deadline.saturating_duration_since(Instant::now());
            let stop_at = deadline - (left / 10).min(REPORT_MARGIN);
            let worker = ctx.worker.delegation(&view, &schema, stop_at.min(Instant::now() + ctx.options.timeout));
            tokio::select! {
                answered = worker => match answered {
                    Ok(answer) => Work::Answer(answer),
                    Err(failure) => {
                        ctx.tally.count(Done::WorkerFailed);
                        Work::Failed(failure.0)
                    }
                },
                () = ctx.until_give_up() => Work::GivenUp,
            }
        }
        Ok(None) => Work::Failed(format!("the agent no longer offers a capability for {task_type}")),
        Err(CallError::KeyRefused(message)) => {
            ctx.fatal(message);
            return id;
        }
        Err(e) => Work::Failed(format!("the capability's output schema could not be read: {e}")),
    };
    let (outcome, done, sent) = match &work {
        Work::Answer(DelegationAnswer::Output(output)) => {
            match ctx.persist(deadline, || ctx.client.complete(ctx.agent, &id, output, &token)).await {
                Err(CallError::Refused { status: 400, message, .. }) => {
                    // The service found the output wanting after all (its schema changed?).
                    ctx.tally.count(Done::WorkerFailed);
                    let reason = format!("the service refused the output: {message}");
                    let sent = ctx.persist(deadline, || ctx.client.fail(ctx.agent, &id, &reason, &token)).await;
                    ("failed", Done::DelegationFailed, sent.map(|()| Some(reason)))
                }
                sent => ("completed", Done::DelegationCompleted, sent.map(|()| None)),
            }
        }
        Work::Answer(DelegationAnswer::Reject(reason)) => {
            let sent = ctx.persist(deadline, || ctx.client.reject(ctx.agent, &id, reason.as_deref())).await;
            ("rejected", Done::DelegationRejected, sent.map(|()| reason.clone()))
        }
        Work::Answer(DelegationAnswer::Error(message)) => {
            let sent = ctx.persist(deadline, || ctx.client.fail(ctx.agent, &id, message, &token)).await;
            ("failed", Done::DelegationFailed, sent.map(|()| Some(message.clone())))
        }
        Work::Failed(reason) => {
            let sent = ctx.persist(deadline, || ctx.client.fail(ctx.agent, &id, reason, &token)).await;
            ("failed", Done::DelegationFailed, sent.map(|()| Some(reason.clone())))
        }
        Work::GivenUp => {
            let reason = "the agent's runner stopped before its worker answered";
            let sent = ctx.persist(deadline, || ctx.client.reject(ctx.agent, &id, Some(reason))).await;
            ("given_back", Done::DelegationGivenBack, sent.map(|()| Some(reason.to_owned())))
        }
    };
    let took = took(started.elapsed());
    match sent {
        Ok(reason) => {
            ctx.tally.count(done);
            // A reason only when there is one (a completed delegation has none).
            let reason = reason.as_deref();
            if matches!(work, Work::Failed(_)) {
                tracing::warn!(request = %id, task_type = %task_type, outcome, took = %took, reason,
                    "the worker failed on the delegation");
            } else {
                tracing::info!(request = %id, task_type = %task_type, outcome, took = %took, reason, "delegation {outcome}");
            }
        }
        Err(CallError::KeyRefused(message)) => ctx.fatal(message),
        Err(e) => {
            ctx.tally.count(Done::DelegationLost);
            tracing::warn!(request = %id, task_type = %task_type, outcome = "lost", took = %took,
                "the delegation's answer was not taken: {e}");
        }
    }
    id
}

/// The output schema of the agent's capability for the request's kind of work, read fresh (the
/// agent may have registered it again since).
async fn output_schema(ctx: &Ctx, request: &Value, deadline: Instant) -> Result<Option<Value>, CallError> {
    let capabilities = ctx.persist(deadline, || ctx.client.capabilities(ctx.agent)).await?;
    Ok(capabilities
        .into_iter()
        .find(|c| c["taskType"] == request["taskType"] && c["customType"].as_str() == request["customType"].as_str())
        .map(|c| c["outputSchema"].clone()))
}
