//! Starting a negotiation: opportunity, conversation and task in one transaction. A round of
//! negotiation is opened in one place, [`Engine::open_round`], for the first round of a new
//! opportunity as for a later round of a reactivated one (`reactivate.rs`).

use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{DeliveryError, Engine};
use crate::{
    domain::{Pairing, SeedAssessment, SideKind, UserContext},
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

impl NewNegotiation {
    /// The SHA-256 of the request's canonical JSON (object keys sorted at every depth, so that
    /// the same request sent with its keys in another order is the same request): what tells a
    /// retry of a create from its `opportunityId` reused for another match.
    fn request_hash(&self) -> Result<Vec<u8>, DeliveryError> {
        let request = serde_json::json!({
            "sourceUser": self.source,
            "candidateUser": self.candidate,
            "indexContext": self.index_context,
            "seedAssessment": self.seed,
            "discoveryQuery": self.discovery_query,
        });
        let bytes = serde_json::to_vec(&canonical(request)).map_err(anyhow::Error::from)?;
        Ok(Sha256::digest(bytes).to_vec())
    }
}

/// `value` with every object's keys in sorted order.
fn canonical(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, canonical(v))).collect())
        }
        serde_json::Value::Array(items) => serde_json::Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// What [`Engine::start`] (or [`Engine::reactivate`]) did.
#[derive(Debug, Clone, Copy)]
pub struct Started {
    /// The negotiation (task).
    pub negotiation_id: Uuid,
    /// False when nothing new was created: the opportunity id was already known, or the round
    /// a repeated reactivation asks for is already running.
    pub created: bool,
}

/// One round of negotiation to open: who negotiates, from what, and what came before.
pub(crate) struct Round<'a> {
    /// The opportunity it decides.
    pub opportunity_id: Uuid,
    /// The A2A context every round of the opportunity shares.
    pub conversation_id: Uuid,
    /// 0 for the first round.
    pub number: u32,
    /// The discovering user's context.
    pub source: &'a UserContext,
    /// The other user's context.
    pub candidate: &'a UserContext,
    /// The evaluator's assessment (as stored).
    pub seed: &'a serde_json::Value,
    /// The platform's index context.
    pub index_context: Option<&'a serde_json::Value>,
    /// What the source user searched for.
    pub discovery_query: Option<&'a str>,
    /// The earlier rounds (`[PreviousRound]`); `None` in a first round.
    pub previous_rounds: Option<&'a serde_json::Value>,
}

/// A round opened in a transaction that has not committed yet.
pub(crate) struct Opened {
    opportunity_id: Uuid,
    task_id: Uuid,
    round: u32,
    source_kind: SideKind,
    candidate_kind: SideKind,
}

impl Opened {
    /// The new negotiation's id.
    pub(crate) fn task_id(&self) -> Uuid {
        self.task_id
    }
}

impl Engine {
    /// The configured turn cap of a pairing (0 = unlimited).
    fn turn_cap(&self, pairing: Pairing) -> u32 {
        let caps = &self.runtime.config.turn_caps;
        match pairing {
            Pairing::System => caps.system,
            Pairing::Mixed => caps.mixed,
            Pairing::Personal => caps.personal,
        }
    }

    /// Creates the opportunity (`negotiating`), the conversation and the task in one transaction,
    /// commits, then runs the negotiation as far as it can go without a personal agent.
    pub async fn start(&self, n: &NewNegotiation) -> Result<Started, DeliveryError> {
        let opportunity_id = n.opportunity_id.unwrap_or_else(Uuid::now_v7);
        let request_hash = n.request_hash()?;
        let mut tx = self.runtime.pool.begin().await?;
        let seed = serde_json::to_value(&n.seed).map_err(anyhow::Error::from)?;
        let inserted = opportunities::insert(
            &mut tx,
            &opportunities::NewOpportunity {
                id: opportunity_id,
                score: n.seed.score,
                source_user_id: &n.source.id,
                candidate_user_id: &n.candidate.id,
                seed_assessment: &seed,
                request_hash: &request_hash,
            },
        )
        .await?;
        if !inserted {
            tx.rollback().await?;
            // A retry of the same request reads the negotiation it started; the id repeated
            // with another request is a mistake the platform must hear about.
            let mut conn = self.runtime.pool.acquire().await?;
            let stored =
                opportunities::request_hash(&mut conn, opportunity_id).await?.ok_or(DeliveryError::NotFound)?;
            if stored.is_some_and(|stored| stored != request_hash) {
                return Err(DeliveryError::OpportunityIdReused);
            }
            let task = tasks::for_opportunity(&mut conn, opportunity_id).await?.ok_or(DeliveryError::NotFound)?;
            return Ok(Started { negotiation_id: task.id, created: false });
        }
        events::record(
            &mut tx,
            "opportunity.status",
            &events::Audience { opportunity_id, source_user_id: &n.source.id, candidate_user_id: &n.candidate.id },
            serde_json::json!({ "opportunityId": opportunity_id, "status": "negotiating", "previousStatus": null }),
        )
        .await?;
        let conversation_id = Uuid::now_v7();
        conversations::insert(&mut tx, conversation_id, opportunity_id, &n.source.id, &n.candidate.id).await?;
        let opened = self
            .open_round(
                &mut tx,
                &Round {
                    opportunity_id,
                    conversation_id,
                    number: 0,
                    source: &n.source,
                    candidate: &n.candidate,
                    seed: &seed,
                    index_context: n.index_context.as_ref(),
                    discovery_query: n.discovery_query.as_deref(),
                    previous_rounds: None,
                },
            )
            .await?;
        tx.commit().await?;
        self.run_opened(opened).await
    }

    /// Opens a round inside the caller's transaction: decides who plays each side (once, for
    /// the whole round) and so the turn cap, inserts the `submitted` task, and arms the
    /// personal-vs-personal deadline. Commit, then call [`Engine::run_opened`].
    pub(crate) async fn open_round(&self, tx: &mut sqlx::PgConnection, r: &Round<'_>) -> Result<Opened, DeliveryError> {
        let source_kind = agents::side_kind_for(tx, &r.source.id).await?;
        let candidate_kind = agents::side_kind_for(tx, &r.candidate.id).await?;
        let task_id = Uuid::now_v7();
        tasks::insert(
            tx,
            &tasks::NewTask {
                id: task_id,
                conversation_id: r.conversation_id,
                opportunity_id: r.opportunity_id,
                source: r.source,
                candidate: r.candidate,
                source_kind,
                candidate_kind,
                seed_assessment: r.seed,
                index_context: r.index_context,
                discovery_query: r.discovery_query,
                max_turns: self.turn_cap(Pairing::of(source_kind, candidate_kind)),
                round: r.number,
                previous_rounds: r.previous_rounds,
            },
        )
        .await?;
        if source_kind == SideKind::Personal && candidate_kind == SideKind::Personal {
            self.arm_deadline(tx, task_id, chrono::Utc::now()).await?;
        }
        Ok(Opened { opportunity_id: r.opportunity_id, task_id, round: r.number, source_kind, candidate_kind })
    }

    /// Once an opened round committed: counts it and runs it as far as it goes without a
    /// personal agent.
    pub(crate) async fn run_opened(&self, opened: Opened) -> Result<Started, DeliveryError> {
        crate::metrics::negotiation_started();
        tracing::info!(negotiation.id = %opened.task_id, opportunity.id = %opened.opportunity_id,
            negotiation.round = opened.round, source.kind = opened.source_kind.as_str(),
            candidate.kind = opened.candidate_kind.as_str(), "negotiation started");
        self.advance(opened.task_id).await?;
        Ok(Started { negotiation_id: opened.task_id, created: true })
    }
}
