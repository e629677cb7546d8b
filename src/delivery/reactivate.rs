//! Reactivation: a second chance for an opportunity whose negotiation stalled, or that nobody
//! decided on before it expired.
//!
//! The opportunity goes back to `negotiating` (the opportunity table's `Reactivate`) and a new
//! round starts: a new task in the same conversation, opened by the same
//! [`Engine::open_round`] as a first round, so the sides' kinds, the fresh turn cap and the
//! timers are decided the same way and turns are numbered from 0 again. The new round argues
//! from the latest round's contexts unless the platform replaces them (a replaced context that
//! gives no name keeps the earlier one), and carries every
//! earlier round (turns and outcome) as `previous_rounds`, which pickup shows the personal
//! agents. Everything happens in one transaction under the opportunity's row lock, so two
//! concurrent reactivations open one round; a repeat while that round runs returns it.
//!
//! People's decisions stay with the opportunity: someone who accepted it before it expired has
//! accepted it; should the new round end `pending` again, only the others still decide.

use uuid::Uuid;

use super::{DeliveryError, Engine, Started, start::Round};
use crate::{
    domain::{OpportunityEvent, OpportunityStatus, PreviousRound, SeedAssessment, Side, UserContext},
    store::{events, messages, opportunities, tasks},
};

/// What a reactivation may replace; `None` keeps the latest round's.
#[derive(Debug, Clone, Default)]
pub struct Reactivation {
    /// The discovering user's new context (the same user).
    pub source: Option<UserContext>,
    /// The other user's new context (the same user).
    pub candidate: Option<UserContext>,
    /// A new assessment for the agents to argue from (the opportunity keeps its score).
    pub seed: Option<SeedAssessment>,
}

impl Engine {
    /// Starts a new round for a `stalled` or `expired` opportunity (see the module docs);
    /// while a reactivated round is running, returns that round (`created: false`). Any other
    /// status is [`DeliveryError::NotReactivatable`].
    pub async fn reactivate(&self, opportunity_id: Uuid, r: &Reactivation) -> Result<Started, DeliveryError> {
        let mut tx = self.runtime.pool.begin().await?;
        let opportunity =
            opportunities::lock(&mut tx, opportunity_id).await?.ok_or(DeliveryError::OpportunityNotFound)?;
        let (latest_id, latest_round, earlier) =
            tasks::latest_round(&mut tx, opportunity_id).await?.ok_or(DeliveryError::OpportunityNotFound)?;
        match opportunity.status {
            OpportunityStatus::Stalled | OpportunityStatus::Expired => {}
            OpportunityStatus::Negotiating if latest_round > 0 => {
                tx.rollback().await?;
                return Ok(Started { negotiation_id: latest_id, created: false });
            }
            status => return Err(DeliveryError::NotReactivatable(status)),
        }
        let latest = tasks::lock(&mut tx, latest_id).await?.ok_or(DeliveryError::NotFound)?;

        let mut rounds: Vec<PreviousRound> = match earlier {
            Some(value) => serde_json::from_value(value).map_err(anyhow::Error::from)?,
            None => Vec::new(),
        };
        rounds.push(PreviousRound {
            negotiation_id: latest.id,
            turns: messages::turns(&mut tx, latest.id).await?.into_iter().map(|t| t.turn).collect(),
            outcome: messages::outcome(&mut tx, latest.id).await?,
        });
        let previous_rounds = serde_json::to_value(&rounds).map_err(anyhow::Error::from)?;
        // A replaced context keeps the name the platform gave before unless it gives another.
        let source = match &r.source {
            Some(user) => user.clone().keeping_name_of(&latest.context(Side::Source)?),
            None => latest.context(Side::Source)?,
        };
        let candidate = match &r.candidate {
            Some(user) => user.clone().keeping_name_of(&latest.context(Side::Candidate)?),
            None => latest.context(Side::Candidate)?,
        };
        let seed = match &r.seed {
            Some(seed) => serde_json::to_value(seed).map_err(anyhow::Error::from)?,
            None => latest.seed_assessment.clone(),
        };

        opportunities::apply(&mut tx, &opportunity, OpportunityEvent::Reactivate).await??;
        let opened = self
            .open_round(
                &mut tx,
                &Round {
                    opportunity_id,
                    conversation_id: latest.conversation_id,
                    number: latest_round + 1,
                    source: &source,
                    candidate: &candidate,
                    seed: &seed,
                    index_context: latest.index_context.as_ref(),
                    discovery_query: latest.discovery_query.as_deref(),
                    previous_rounds: Some(&previous_rounds),
                },
            )
            .await?;
        events::record(
            &mut tx,
            "negotiation.round",
            &opportunity.audience(),
            serde_json::json!({
                "negotiationId": opened.task_id(),
                "opportunityId": opportunity_id,
                "round": latest_round + 1,
                "previousNegotiationId": latest.id,
            }),
        )
        .await?;
        tx.commit().await?;
        tracing::info!(opportunity.id = %opportunity_id, from = %opportunity.status, "opportunity reactivated");
        self.run_opened(opened).await
    }
}
