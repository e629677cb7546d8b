//! The turn loop: long-poll pickup, run the worker on the claimed turn while keeping the claim
//! alive, answer it.
//!
//! When the worker fails (or the service refuses its answer) the turn is released at once with
//! the failure as the reason, and the runner holds back from that negotiation for a while,
//! growing with each failure: its pickups skip it meanwhile (`?skip=`), so the user's other turns
//! are still served. At the third failure in a row the turn is handed to the system negotiator
//! (`handBack`), which plays it at once; a personal-vs-personal negotiation has none, so there
//! the turn is released again and keeps waiting for an agent.
//!
//! One turn at a time: the service gives an agent one claim at a time. Answers are fenced by the
//! claim token, so an answer that comes after the claim was lost (expired, the runner was killed
//! and another agent took the turn) is refused by the service, never applied twice.

use std::{sync::Arc, time::Duration};

use serde_json::{Value, json};
use tokio::time::Instant;

use super::{
    Ctx, POLL_WAIT,
    backoff::{Backoff, FailureBook},
    client::CallError,
    instant_of,
    program::Failure,
    report::{Done, took},
};
use crate::http::agent_turns::MAX_SKIP;

/// Failures in a row after which a turn is handed to the system negotiator.
pub const HAND_BACK_AFTER: u32 = 3;
/// The shortest pause between two extends of a claim.
const EXTEND_FLOOR: Duration = Duration::from_millis(50);

/// A claimed turn, as pickup answered it.
struct Claim {
    negotiation: String,
    token: String,
    number: u32,
    is_final: bool,
    /// When the claim lapses unless extended.
    deadline: Instant,
}

impl Claim {
    fn read(pickup: &Value) -> Option<Claim> {
        Some(Claim {
            negotiation: pickup["negotiationId"].as_str()?.to_owned(),
            token: pickup["claimToken"].as_str()?.to_owned(),
            number: u32::try_from(pickup["turn"]["number"].as_u64()?).ok()?,
            is_final: pickup["turn"]["isFinalTurn"].as_bool().unwrap_or(false),
            deadline: instant_of(pickup["turn"]["deadline"].as_str()?.parse().ok()?),
        })
    }
}

/// How the worker's time on a turn ended.
enum Work {
    /// A checked respond body, and the claim's deadline then.
    Answer(Value, Instant),
    /// The worker failed; the claim's deadline then.
    Failed(Failure, Instant),
    /// The claim was lost (expired, taken over, the negotiation ended).
    Lost(String),
    /// The runner is giving its items back.
    GivenUp(Instant),
}

/// Serves turns until the runner stops.
pub(super) async fn serve(ctx: Arc<Ctx>) {
    let mut book = FailureBook::default();
    let mut backoff = Backoff::calls();
    while !ctx.is_stopping() {
        let skip = book.waiting(MAX_SKIP);
        // Wake when the first held-back turn may be tried again: a pickup skipping it would not.
        let wait = book.next_retry().map_or(POLL_WAIT, |at| {
            at.saturating_duration_since(Instant::now()).clamp(Duration::from_secs(1), POLL_WAIT)
        });
        let picked = tokio::select! {
            picked = ctx.client.pickup(ctx.agent, wait, &skip) => picked,
            () = ctx.until_stopping() => break,
        };
        match picked {
            Ok(None) => ctx.answered("pickup", &mut backoff),
            Ok(Some(pickup)) => {
                ctx.answered("pickup", &mut backoff);
                serve_turn(&ctx, &mut book, pickup).await;
            }
            Err(CallError::KeyRefused(message)) => return ctx.fatal(message),
            Err(e) => {
                if ctx.pause_after("pickup", &e, &mut backoff).await {
                    break;
                }
            }
        }
    }
}

async fn serve_turn(ctx: &Ctx, book: &mut FailureBook, mut pickup: Value) {
    let started = Instant::now();
    let Some(claim) = Claim::read(&pickup) else {
        tracing::warn!("a pickup answer without a negotiation, turn, deadline or claim token: left alone");
        ctx.pause(Duration::from_secs(1)).await;
        return;
    };
    if book.is_waiting(&claim.negotiation) {
        // The agent's own live claim came back (the answer to an earlier release was lost).
        give_back(
            ctx,
            &claim,
            claim.deadline,
            "the agent holds back from this turn after its worker failed on it",
            Done::TurnReleased,
            started,
        )
        .await;
        return;
    }
    // The worker gets the turn without the claim token: the runner alone answers.
    if let Some(fields) = pickup.as_object_mut() {
        fields.remove("claimToken");
    }
    match work(ctx, &claim, &pickup).await {
        Work::Answer(body, deadline) => answer(ctx, book, &claim, body, deadline, started).await,
        Work::Failed(failure, deadline) => {
            ctx.tally.count(Done::WorkerFailed);
            fail(ctx, book, &claim, failure.0, deadline, started).await;
        }
        Work::Lost(why) => {
            ctx.tally.count(Done::TurnLost);
            tracing::warn!(negotiation = %claim.negotiation, turn = claim.number, outcome = "lost", took = %took(started.elapsed()),
                "turn lost before it was answered: {why}");
        }
        Work::GivenUp(deadline) => {
            give_back(
                ctx,
                &claim,
                deadline,
                "the agent's runner stopped before its worker answered",
                Done::TurnGivenBack,
                started,
            )
            .await;
        }
    }
}

/// Runs the worker on the turn, extending the claim at half of what is left of it each time.
async fn work(ctx: &Ctx, claim: &Claim, view: &Value) -> Work {
    let worker = ctx.worker.turn(view, claim.number, claim.is_final, Instant::now() + ctx.options.timeout);
    tokio::pin!(worker);
    let mut deadline = claim.deadline;
    loop {
        let now = Instant::now();
        if deadline <= now {
            return Work::Lost("the claim lapsed: it could not be extended in time".into());
        }
        let extend_at = now + ((deadline - now) / 2).max(EXTEND_FLOOR);
        tokio::select! {
            answered = &mut worker => return match answered {
                Ok(body) => Work::Answer(body, deadline),
                Err(failure) => Work::Failed(failure, deadline),
            },
            () = tokio::time::sleep_until(extend_at) => match ctx.client.extend(ctx.agent, &claim.negotiation, &claim.token).await {
                Ok(at) => deadline = instant_of(at),
                Err(CallError::KeyRefused(message)) => {
                    ctx.fatal(message);
                    return Work::Lost("the service refused the agent's key".into());
                }
                Err(e @ CallError::Refused { .. }) => return Work::Lost(format!("the claim could not be extended: {e}")),
                Err(e) => tracing::warn!(negotiation = %claim.negotiation, error = %e, "extending the claim failed; trying again"),
            },
            () = ctx.until_give_up() => return Work::GivenUp(deadline),
        }
    }
}

/// Sends the worker's answer under the claim.
async fn answer(
    ctx: &Ctx,
    book: &mut FailureBook,
    claim: &Claim,
    mut body: Value,
    deadline: Instant,
    started: Instant,
) {
    body["claimToken"] = json!(claim.token);
    let action = body["action"].as_str().unwrap_or_default().to_owned();
    match ctx.persist(deadline, || ctx.client.respond(ctx.agent, &claim.negotiation, &body)).await {
        Ok(answered) => {
            book.forget(&claim.negotiation);
            ctx.tally.count(Done::TurnAnswered);
            tracing::info!(negotiation = %claim.negotiation, turn = claim.number, action = %action, outcome = "answered",
                status = answered["status"].as_str().unwrap_or_default(), took = %took(started.elapsed()), "turn answered");
        }
        Err(CallError::KeyRefused(message)) => ctx.fatal(message),
        Err(CallError::Refused { status: 400, message, .. }) => {
            ctx.tally.count(Done::WorkerFailed);
            fail(ctx, book, claim, format!("the service refused the answer: {message}"), deadline, started).await;
        }
        // A 4th `ask_person`: the worker asked more than it may; the claim is kept, so give it back.
        Err(e @ CallError::Refused { status: 409, .. }) if e.code() == Some("limit_reached") => {
            ctx.tally.count(Done::WorkerFailed);
            fail(ctx, book, claim, format!("the service refused the answer: {e}"), deadline, started).await;
        }
        Err(e) => {
            ctx.tally.count(Done::TurnLost);
            tracing::warn!(negotiation = %claim.negotiation, turn = claim.number, outcome = "lost", took = %took(started.elapsed()),
                "turn not answered: {e}");
        }
    }
}

/// The worker failed on the turn: give it back with the reason (to the system negotiator at the
/// [`HAND_BACK_AFTER`]-th failure in a row) and hold back from it for a while.
async fn fail(ctx: &Ctx, book: &mut FailureBook, claim: &Claim, reason: String, deadline: Instant, started: Instant) {
    let failures = book.failed(&claim.negotiation, claim.number);
    let mut handing_back = failures >= HAND_BACK_AFTER;
    let release = |hand_back: bool| ctx.client.release(ctx.agent, &claim.negotiation, &claim.token, &reason, hand_back);
    let mut released = ctx.persist(deadline, || release(handing_back)).await;
    if handing_back && released.as_ref().err().and_then(CallError::code) == Some("no_system_negotiator") {
        // Personal vs personal: there is no one to hand the turn to; it waits for an agent again.
        handing_back = false;
        released = ctx.persist(deadline, || release(false)).await;
        tracing::warn!(negotiation = %claim.negotiation, turn = claim.number, failures,
            "no one can take this turn over: both sides of this negotiation are personal agents, so there is no \
             system negotiator to hand it to; it waits for an agent of the user until the negotiation's deadline \
             ends it. Fix the worker, or answer the turn with another agent");
    }
    let (outcome, done) =
        if handing_back { ("handed_back", Done::TurnHandedBack) } else { ("released", Done::TurnReleased) };
    match released {
        Ok(_) => {
            if handing_back {
                book.forget(&claim.negotiation);
            }
            ctx.tally.count(done);
            tracing::warn!(negotiation = %claim.negotiation, turn = claim.number, outcome, failures, took = %took(started.elapsed()),
                reason = %reason, "the worker failed on the turn; it was {}",
                if handing_back { "handed to the system negotiator" } else { "given back" });
        }
        Err(CallError::KeyRefused(message)) => ctx.fatal(message),
        Err(e) => {
            ctx.tally.count(Done::TurnLost);
            tracing::warn!(negotiation = %claim.negotiation, turn = claim.number, outcome = "lost", failures, took = %took(started.elapsed()),
                reason = %reason, "the worker failed on the turn, and giving it back failed too: {e}");
        }
    }
}

/// Gives the turn back without the worker having failed on it (the runner is stopping, or holds
/// back from it).
async fn give_back(ctx: &Ctx, claim: &Claim, deadline: Instant, reason: &str, done: Done, started: Instant) {
    match ctx.persist(deadline, || ctx.client.release(ctx.agent, &claim.negotiation, &claim.token, reason, false)).await
    {
        Ok(_) => {
            ctx.tally.count(done);
            tracing::info!(negotiation = %claim.negotiation, turn = claim.number, outcome = "given_back", took = %took(started.elapsed()),
                "turn given back: {reason}");
        }
        Err(CallError::KeyRefused(message)) => ctx.fatal(message),
        Err(e) => {
            ctx.tally.count(Done::TurnLost);
            tracing::warn!(negotiation = %claim.negotiation, turn = claim.number, outcome = "lost",
                "giving the turn back failed ({e}); its claim will lapse");
        }
    }
}
