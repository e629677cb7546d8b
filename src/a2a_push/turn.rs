//! A negotiation turn pushed to an agent Parley calls: the steps of its `parley_jobs::A2aCall`
//! job (subject `turn`), armed in the transaction that parks the turn for a user one of whose
//! active agents was registered by its AgentCard.
//!
//! Parley takes the turn as that agent would by polling, through the same pickup and respond
//! (their rules, fencing and timers unchanged), with a key it holds for the agent: derived from
//! the service's secret, never stored, only its hash kept with the agent's keys when its card is
//! stored (so its owner sees it, and revoking it stops Parley taking the agent's turns for good:
//! a step never makes it again).
//!
//! - **Send**: the turn is claimed (a pickup) and sent as a data part holding the pickup answer
//!   without its claim token, with a line of text giving the rules and `metadata.parley`
//!   (negotiationId, turnNumber, deadline, allowedActions). Its message id is derived from the
//!   turn and the claim's generation, so a send repeated after a crash is the same message. If
//!   the agent's one claim is on another of its user's turns, that turn's step is brought
//!   forward and this one waits.
//! - **Follow**: the agent's task is read as a delegation's is (1 s, backing off to 5 s). The
//!   claim is not extended: the agent has one claim's time (`PARLEY_CLAIM_TIMEOUT` from the
//!   send) to answer, and the last read comes two seconds before the claim ends.
//! - **Answer**: the output (the first data part of the task's last artifact, else its JSON
//!   text, or a message's) is a respond body (`action`, `message`, `assessment`), applied under
//!   respond's rules with the claim's token.
//! - **Failure**: an answer refused, a task that failed, an agent that cannot be reached, or a
//!   task still working at the last read of its claim (it is cancelled; one found working after
//!   its claim lapsed while Parley was away is too, and the turn is claimed again only to be
//!   given back with why): the turn is released with the reason, and sent again after a
//!   backoff; at the third failure it is handed back to the system negotiator (in a
//!   personal-vs-personal negotiation, which has none, it is left parked for its deadline), as
//!   `parley agent` does.
//!
//! So a pushed turn is held by a task that never ends for at most [`HAND_BACK_AFTER`] claim
//! generations: three claim timeouts, with a few seconds of reads and backoff between them; then
//! it is the system negotiator's (or, personal against personal, it waits for the negotiation's
//! deadline, which bounds every such negotiation).

use parley_jobs::{A2aCall, A2aSubject, HandlerError};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::{Pusher, after, poll_delay, retry_delay};
use crate::{
    a2a_client::{
        call::{self, Outgoing, RemoteState, RemoteTask},
        outbound::Endpoint,
    },
    delivery::{DeliveryError, RespondCommand},
    domain::{Action, SideKind, SuggestedRoles, TaskState, action_allowed},
    quote::{logged, shorten_quoted},
    runtime::{AgentIdentity, AgentKey},
    store::{agent_cards, tasks},
    wire::pickup::PickupOut,
};

/// Failed answers after which the turn is handed back to the system negotiator.
pub const HAND_BACK_AFTER: u32 = 3;

/// The respond body an agent answers with (the claim token is Parley's to add).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    action: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    assessment: Option<Assessment>,
    #[serde(default)]
    question: Option<String>,
    #[serde(default)]
    options: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Assessment {
    #[serde(default)]
    reasoning: String,
    #[serde(default)]
    suggested_roles: Option<SuggestedRoles>,
}

/// What a step works with: the agent, its endpoint and the key Parley holds for it.
struct Agent {
    endpoint: Endpoint,
    key: AgentKey,
}

/// One step of pushing turn `turn_number` of negotiation `task_id` (see the module docs).
pub(super) async fn step(p: &Pusher, job: &A2aCall, task_id: Uuid, turn_number: u32) -> Result<(), HandlerError> {
    let task = {
        let mut conn = p.engine.pool().acquire().await?;
        tasks::get(&mut conn, task_id).await.map_err(HandlerError::new)?
    };
    let Some(task) = task else { return Ok(()) };
    let Some(agent) = agent_for(p, job, &task).await? else { return Ok(()) };
    let ours = task.claim_agent_id == Some(agent.endpoint.agent_id);
    let stale = task.state.is_terminal() || task.turn_count != turn_number;
    let sent_under = job.generation.filter(|_| job.remote_task_id.is_some());
    if stale || (task.state == TaskState::Claimed && !ours) {
        // Answered, ended, or taken by the user's other agent: the agent's task is not wanted.
        if let Some(remote) = &job.remote_task_id {
            let _ = p.cancel_remote(&agent.endpoint, remote).await;
        }
        return Ok(());
    }
    let lapsed = task.claim_expires_at.is_none_or(|e| e <= chrono::Utc::now());
    match (task.state, sent_under) {
        (TaskState::Claimed, Some(generation)) if generation == task.claim_generation && !lapsed => {
            follow(p, job, &agent, &task).await
        }
        _ => {
            // Not sent yet; or sent, and the agent's task outlived its claim while no step ran
            // (Parley was away): that task is cancelled, and counts as a failed answer.
            let Some(remote) = &job.remote_task_id else { return send(p, job, &agent, task_id, turn_number).await };
            let _ = p.cancel_remote(&agent.endpoint, remote).await;
            let failures = job.failures + 1;
            let reason = outlived(p);
            tracing::info!(negotiation.id = %task_id, agent.id = %agent.endpoint.agent_id, failures, %reason,
                "a pushed turn failed");
            let counted = A2aCall { failures, generation: None, remote_task_id: None, polls: 0, ..job.clone() };
            send(p, &counted, &agent, task_id, turn_number).await
        }
    }
}

/// The agent the turn goes to (the job's, once chosen; else the user's newest active agent
/// with a card), with the key Parley holds for it.
async fn agent_for(p: &Pusher, job: &A2aCall, task: &tasks::Task) -> Result<Option<Agent>, HandlerError> {
    let agent_id = match job.agent_id {
        Some(id) => id,
        None => {
            let Some(user) = &task.awaiting_user_id else { return Ok(None) };
            let mut conn = p.engine.pool().acquire().await?;
            match agent_cards::called_agent_of(&mut conn, user).await? {
                Some(id) => id,
                None => return Ok(None),
            }
        }
    };
    let Some(endpoint) = p.endpoint(agent_id).await? else { return Ok(None) };
    let key = AgentKey { key_hash: p.engine.runtime().push_key_hash(agent_id), agent_id: Some(agent_id) };
    Ok(Some(Agent { endpoint, key }))
}

/// The actions allowed to a personal agent at `turn_number`.
fn allowed(turn_number: u32) -> Vec<&'static str> {
    Action::ALL
        .into_iter()
        .filter(|a| action_allowed(*a, turn_number, SideKind::Personal))
        .map(Action::as_str)
        .collect()
}

/// The claim and the send of the turn; when the agent has failed it [`HAND_BACK_AFTER`] times
/// already (the last failure found its claim lapsed), the claim only to hand it back.
async fn send(p: &Pusher, job: &A2aCall, agent: &Agent, task_id: Uuid, turn_number: u32) -> Result<(), HandlerError> {
    let (identity, claim) = match p.engine.try_pickup(&agent.key, &[]).await {
        Ok(found) => found,
        Err(DeliveryError::Unauthorized | DeliveryError::Forbidden(_)) => {
            tracing::info!(agent.id = %agent.endpoint.agent_id, "Parley's key for the agent is revoked, or the agent inactive: its turns wait");
            return Ok(());
        }
        Err(e) => return Err(HandlerError::new(e)),
    };
    let Some(claim) = claim else { return Ok(()) };
    if claim.task.id != task_id {
        // The agent's one claim is another turn of its user: that turn's step goes first.
        let other = A2aSubject::Turn { task_id: claim.task.id, turn_number: claim.task.turn_count };
        let hurried = {
            let mut conn = p.engine.pool().acquire().await?;
            parley_jobs::hurry_a2a_call(&mut conn, &other).await?
        };
        if !hurried {
            p.arm(&A2aCall::first(other), chrono::Utc::now()).await?;
        }
        return p.arm(job, after(retry_delay(1))).await;
    }
    let generation = claim.task.claim_generation;
    let mut data = serde_json::to_value(PickupOut::of(&claim).map_err(|e| HandlerError::msg(format!("{e:?}")))?)?;
    if let Some(object) = data.as_object_mut() {
        object.remove("claimToken");
    }
    let actions = allowed(turn_number);
    let text = format!(
        "Parley asks you to take turn {turn_number} of a negotiation for your user: the data part is the turn. \
         Answer with a data part {{\"action\", \"message\", \"assessment\": {{\"reasoning\", \"suggestedRoles\"}}}}; \
         allowed actions: {}. The message is for the other side; the reasoning stays private.",
        actions.join(", ")
    );
    let message = Outgoing {
        message_id: Uuid::new_v5(&task_id, format!("turn:{turn_number}:{generation}").as_bytes()),
        data: &data,
        text: &text,
        parley: json!({
            "negotiationId": task_id,
            "turnNumber": turn_number,
            "deadline": claim.expires_at,
            "allowedActions": actions,
        }),
    };
    let sent = A2aCall {
        agent_id: Some(agent.endpoint.agent_id),
        generation: Some(generation),
        remote_task_id: None,
        polls: 0,
        ..job.clone()
    };
    let held = Held { task_id, token: claim.token.clone() };
    if job.failures >= HAND_BACK_AFTER {
        let why = format!("the agent failed the turn {} times", job.failures);
        return give_back(p, &identity, &held, &why, true).await.map(drop);
    }
    let task = match p.send_once(&agent.endpoint, &message, None).await? {
        Ok(task) => task,
        Err(e) => {
            return failed(p, &sent, &identity, &held, &format!("the agent could not be sent the turn: {e}")).await;
        }
    };
    if task.state.is_running() {
        let remote = task.id.clone().or_else(|| Some(message.message_id.to_string()));
        return p.arm(&A2aCall { remote_task_id: remote, ..sent }, after(poll_delay(0))).await;
    }
    answered(p, &sent, agent, &identity, &held, &task).await
}

/// A read of the agent's task for a claimed turn.
async fn follow(p: &Pusher, job: &A2aCall, agent: &Agent, task: &tasks::Task) -> Result<(), HandlerError> {
    let Some(remote) = &job.remote_task_id else { return Ok(()) };
    let identity = AgentIdentity {
        agent_id: agent.endpoint.agent_id,
        owner_user_id: task.awaiting_user_id.clone().unwrap_or_default(),
    };
    let token = p.engine.runtime().tokens.claim_token(task.id, task.claim_generation);
    let read = p.call(&agent.endpoint, &call::get(agent.endpoint.dialect, remote), "get").await;
    let remote_task = match read.map(|result| call::read_task(agent.endpoint.dialect, &result)) {
        Ok(Ok(t)) => t,
        Ok(Err(unreadable)) => {
            let held = Held { task_id: task.id, token };
            return failed(p, job, &identity, &held, &format!("the agent's task could not be read: {unreadable}"))
                .await;
        }
        Err(e) if e.is_transient() && job.failures < HAND_BACK_AFTER => {
            let again = A2aCall { failures: job.failures + 1, ..job.clone() };
            return p.arm(&again, after(retry_delay(job.failures))).await;
        }
        Err(e) => {
            let held = Held { task_id: task.id, token };
            return failed(p, job, &identity, &held, &format!("the agent's task could not be read: {e}")).await;
        }
    };
    let held = Held { task_id: task.id, token };
    if remote_task.state.is_running() {
        // The agent has until its claim ends: the last read comes a second before that, and a
        // task still working then has outlived its claim.
        let last_read = task.claim_expires_at.unwrap_or_else(chrono::Utc::now) - LAST_READ_BEFORE;
        if chrono::Utc::now() >= last_read {
            let _ = p.cancel_remote(&agent.endpoint, remote).await;
            return failed(p, job, &identity, &held, &outlived(p)).await;
        }
        let next = A2aCall { polls: job.polls + 1, ..job.clone() };
        return p.arm(&next, after(poll_delay(job.polls)).min(last_read)).await;
    }
    answered(p, job, agent, &identity, &held, &remote_task).await
}

/// How long before its claim ends a pushed turn's task is read for the last time: a step runs
/// up to a second after the time it was armed for (timers are kept in whole seconds), and the
/// turn is given back before its claim lapses.
const LAST_READ_BEFORE: chrono::Duration = chrono::Duration::seconds(2);

/// Why a turn whose task outlived its claim failed.
fn outlived(p: &Pusher) -> String {
    format!(
        "the agent's task did not end within the claim's {} s (PARLEY_CLAIM_TIMEOUT)",
        p.engine.config().claim_timeout.as_secs()
    )
}

/// The claim a step holds: the turn's negotiation and the claim's token.
struct Held {
    task_id: Uuid,
    token: String,
}

/// The agent's ended task: its answer applied under respond's rules, or a failure.
async fn answered(
    p: &Pusher,
    job: &A2aCall,
    agent: &Agent,
    identity: &AgentIdentity,
    held: &Held,
    task: &RemoteTask,
) -> Result<(), HandlerError> {
    let output = match (task.state, &task.output) {
        (RemoteState::Completed, Some(output)) => output,
        (RemoteState::Completed, None) => {
            return failed(p, job, identity, held, "the agent answered no respond body").await;
        }
        (state, _) => {
            let said = task.message.clone().unwrap_or_else(|| "no reason given".to_owned());
            return failed(p, job, identity, held, &format!("the agent's task ended {state:?}: {said}")).await;
        }
    };
    let command = match serde_json::from_value::<Answer>(output.clone()) {
        Ok(a) => RespondCommand {
            claim_token: Some(held.token.clone()),
            action: a.action,
            message: a.message,
            reasoning: a.assessment.as_ref().map(|s| s.reasoning.clone()).unwrap_or_default(),
            suggested_roles: a.assessment.and_then(|s| s.suggested_roles),
            question: a.question,
            options: a.options,
        },
        Err(e) => {
            let why = format!("the agent's answer is not a respond body: {}", shorten_quoted(&e.to_string()));
            return failed(p, job, identity, held, &why).await;
        }
    };
    let applied = match command.check() {
        Ok(answer) => p.engine.respond_checked(&agent.key, held.task_id, &answer).await,
        Err(refused) => Err(refused),
    };
    match applied {
        Ok(_) => Ok(()),
        Err(e @ (DeliveryError::Invalid(_) | DeliveryError::ActionNotAllowed(_))) => {
            failed(p, job, identity, held, &format!("the agent's answer was refused: {e}")).await
        }
        // The claim moved on meanwhile (it lapsed, the turn was taken): nothing to give back.
        Err(e) => {
            let error = logged(&e.to_string());
            tracing::info!(negotiation.id = %held.task_id, %error, "a pushed turn's answer was not applied");
            Ok(())
        }
    }
}

/// A failed answer: the turn released with why, and sent again after a backoff; at the
/// [`HAND_BACK_AFTER`]th, handed back to the system negotiator instead (a negotiation without
/// one leaves the turn parked for its deadline). A claim that lapsed meanwhile gives nothing
/// back, but the failure counts all the same: the next step claims the turn again to send it,
/// or, when this was the last failure, to hand it back.
async fn failed(
    p: &Pusher,
    job: &A2aCall,
    identity: &AgentIdentity,
    held: &Held,
    why: &str,
) -> Result<(), HandlerError> {
    let failures = job.failures + 1;
    let task_id = held.task_id;
    let reason = logged(why);
    tracing::info!(negotiation.id = %task_id, agent.id = %identity.agent_id, failures, %reason, "a pushed turn failed");
    match give_back(p, identity, held, why, failures >= HAND_BACK_AFTER).await? {
        GivenBack::ForGood => Ok(()),
        GivenBack::ToSendAgain => {
            let again = A2aCall { failures, generation: None, remote_task_id: None, polls: 0, ..job.clone() };
            p.arm(&again, after(retry_delay(failures))).await
        }
    }
}

/// What became of a turn given back.
enum GivenBack {
    /// Handed to the system negotiator, left parked for the deadline, or taken meanwhile: the
    /// push ends.
    ForGood,
    /// Released (or its claim lapsed already): it is to be sent again.
    ToSendAgain,
}

/// Gives the held turn back with `why`: handed to the system negotiator with `hand_back` (in a
/// negotiation without one, released and left parked for its deadline), else released.
async fn give_back(
    p: &Pusher,
    identity: &AgentIdentity,
    held: &Held,
    why: &str,
    hand_back: bool,
) -> Result<GivenBack, HandlerError> {
    let task_id = held.task_id;
    match p.engine.release(identity, task_id, Some(&held.token), Some(why), hand_back).await {
        Ok(_) if hand_back => Ok(GivenBack::ForGood),
        Ok(_) | Err(DeliveryError::ClaimStale) => Ok(GivenBack::ToSendAgain),
        Err(DeliveryError::NoSystemNegotiator) => {
            p.engine
                .release(identity, task_id, Some(&held.token), Some(why), false)
                .await
                .map_err(HandlerError::new)?;
            Ok(GivenBack::ForGood)
        }
        Err(e) => {
            let error = logged(&e.to_string());
            tracing::info!(negotiation.id = %task_id, %error, "a pushed turn could not be released");
            Ok(GivenBack::ForGood)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_turn_proposes_or_rejects_and_later_ones_never_propose() {
        assert_eq!(allowed(0), ["propose", "reject"]);
        assert!(!allowed(3).contains(&"propose") && allowed(3).contains(&"accept"));
    }

    #[test]
    fn an_answer_reads_the_respond_body_and_ignores_what_it_does_not_know() {
        let a: Answer =
            serde_json::from_value(json!({"action": "accept", "assessment": {"reasoning": "fits"}, "x": 1})).unwrap();
        assert_eq!((a.action.as_str(), a.assessment.unwrap().reasoning.as_str()), ("accept", "fits"));
        assert!(serde_json::from_value::<Answer>(json!({"message": "no action"})).is_err());
    }
}
