//! Starting a negotiation: opportunity, conversation and task in one transaction.

use uuid::Uuid;

use super::{DeliveryError, Engine};
use crate::{
    domain::{SeedAssessment, SideKind, UserContext, max_turns_for},
    store::{agents, conversations, events, opportunities, tasks},
};

/// A validated request to negotiate a match.
#[derive(Debug, Clone)]
pub struct NewNegotiation {
    /// The platform's id for the opportunity; repeating it returns the existing negotiation.
    pub opportunity_id: Option<Uuid>,
    /// The discovering user.
    pub source: UserContext,
    /// The other user.
    pub candidate: UserContext,
    /// The platform's index context, passed to both sides.
    pub index_context: Option<serde_json::Value>,
    /// The evaluator's assessment.
    pub seed: SeedAssessment,
    /// What the source user searched for.
    pub discovery_query: Option<String>,
}

/// What [`Engine::start`] did.
#[derive(Debug, Clone, Copy)]
pub struct Started {
    /// The opportunity.
    pub opportunity_id: Uuid,
    /// The negotiation (task).
    pub negotiation_id: Uuid,
    /// False when the opportunity id was already known and nothing new was created.
    pub created: bool,
}

impl Engine {
    /// Creates the opportunity (`negotiating`), the conversation and the task in one transaction,
    /// commits, then runs the negotiation as far as it can go without a personal agent.
    pub async fn start(&self, n: &NewNegotiation) -> Result<Started, DeliveryError> {
        let opportunity_id = n.opportunity_id.unwrap_or_else(Uuid::now_v7);
        let mut tx = self.pool.begin().await?;
        let seed = serde_json::to_value(&n.seed).map_err(anyhow::Error::from)?;
        let inserted = opportunities::insert(
            &mut tx,
            &opportunities::NewOpportunity {
                id: opportunity_id,
                score: n.seed.score,
                source_user_id: &n.source.id,
                candidate_user_id: &n.candidate.id,
                seed_assessment: &seed,
            },
        )
        .await?;
        if !inserted {
            tx.rollback().await?;
            let mut conn = self.pool.acquire().await?;
            let task = tasks::for_opportunity(&mut conn, opportunity_id).await?.ok_or(DeliveryError::NotFound)?;
            return Ok(Started { opportunity_id, negotiation_id: task.id, created: false });
        }
        events::record(
            &mut tx,
            "opportunity.status",
            &events::Audience { opportunity_id, source_user_id: &n.source.id, candidate_user_id: &n.candidate.id },
            serde_json::json!({ "opportunityId": opportunity_id, "status": "negotiating", "previousStatus": null }),
        )
        .await?;
        let source_kind = agents::side_kind_for(&mut tx, &n.source.id).await?;
        let candidate_kind = agents::side_kind_for(&mut tx, &n.candidate.id).await?;
        let conversation_id = Uuid::now_v7();
        conversations::insert(&mut tx, conversation_id, opportunity_id, &n.source.id, &n.candidate.id).await?;
        let task_id = Uuid::now_v7();
        tasks::insert(
            &mut tx,
            &tasks::NewTask {
                id: task_id,
                conversation_id,
                opportunity_id,
                source: &n.source,
                candidate: &n.candidate,
                source_kind,
                candidate_kind,
                seed_assessment: &seed,
                index_context: n.index_context.as_ref(),
                discovery_query: n.discovery_query.as_deref(),
                max_turns: max_turns_for(source_kind, candidate_kind, &self.config.turn_caps),
            },
        )
        .await?;
        if source_kind == SideKind::Personal && candidate_kind == SideKind::Personal {
            self.arm_deadline(&mut tx, task_id, chrono::Utc::now()).await?;
        }
        tx.commit().await?;
        crate::metrics::negotiation_started();
        tracing::info!(negotiation.id = %task_id, opportunity.id = %opportunity_id,
            source.kind = source_kind.as_str(), candidate.kind = candidate_kind.as_str(), "negotiation started");
        self.advance(task_id).await?;
        Ok(Started { opportunity_id, negotiation_id: task_id, created: true })
    }
}
