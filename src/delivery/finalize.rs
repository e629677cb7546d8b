//! The one way a negotiation ends.

use sqlx::PgConnection;

use super::{DeliveryError, Engine};
use crate::{
    domain::{EndReason, Outcome, TaskEvent, TaskState, Turn, derive_outcome},
    store::{events, insight_rollups, messages, opportunities, person_questions, tasks::Task},
};

/// Ends a locked, non-terminal task: writes the `negotiation-outcome` artifact, completes the task
/// (or cancels it, for [`EndReason::Canceled`]) and moves the opportunity (accept -> `pending`,
/// reject -> `rejected`, anything else -> `stalled`). `turns` are all turns taken, the last
/// included. Runs inside the caller's transaction; every ending (respond, timers, system turns,
/// cancel) comes through here, and so do the timers an ending cancels or arms, and the question
/// its person was asked and has not answered, which is withdrawn.
pub async fn finalize(
    engine: &Engine,
    conn: &mut PgConnection,
    task: &Task,
    turns: &[Turn],
    reason: Option<EndReason>,
) -> Result<Outcome, DeliveryError> {
    let event = if reason == Some(EndReason::Canceled) { TaskEvent::Cancel } else { TaskEvent::Finish };
    let next = task.state.transition(event)?;
    let outcome = derive_outcome(turns, |side| task.user_id(side).to_owned(), reason);
    messages::insert_outcome(conn, task.id, &outcome).await?;
    crate::store::tasks::set_state(conn, task.id, task.state, next, outcome.turn_count).await?;
    // Only a negotiation that waits for its person has a question pending (at most one).
    if task.state == TaskState::WaitingForPerson {
        person_questions::withdraw_pending(conn, task.id).await?;
    }
    let opportunity = opportunities::lock(conn, task.opportunity_id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("task {} has no opportunity", task.id))?;
    events::record(
        conn,
        "negotiation.outcome",
        &opportunity.audience(),
        serde_json::json!({
            "negotiationId": task.id,
            "opportunityId": task.opportunity_id,
            "hasOpportunity": outcome.has_opportunity,
            "reason": outcome.reason,
            "turnCount": outcome.turn_count,
        }),
    )
    .await?;
    let status = opportunities::apply(conn, &opportunity, outcome.opportunity_event()).await??;
    engine.on_finished(conn, task, status).await?;
    // Last, so that the insights rows it updates are held for as short a time as possible.
    insight_rollups::record_endings(conn, &[task.id]).await?;
    tracing::info!(
        negotiation.id = %task.id,
        outcome.has_opportunity = outcome.has_opportunity,
        outcome.turns = outcome.turn_count,
        outcome.reason = outcome.reason.map_or("none", EndReason::as_str),
        "negotiation ended"
    );
    Ok(outcome)
}
