//! The directory's answers both adapters give: discovery (`GET /api/agents/discover`, the MCP
//! tool `discover_agents`) and ranking (`POST /api/agents/rank`, `rank_agents`). Each adapter
//! parses its input into a checked query (`crate::directory::discovery::Query`,
//! `crate::directory::ranking::RankQuery`), and these run it and shape the answer. Answers
//! never carry an agent's id or owner, and show a capability by a handle that rotates with
//! the anonymous id.

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::error::ApiResult;
use crate::{
    directory::{
        anonymity::AnonymousId,
        delegation::Delegations,
        discovery::{self, Found},
        ranking::{self, RankQuery},
    },
    scoring,
};

/// What the agent's record says so far.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QualityMetricsOut {
    /// Share of finished delegations it completed, once it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_rate: Option<f64>,
    /// Delegations it completed.
    pub completed_tasks: i64,
}

/// One discovered capability: never the agent's id or owner.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveredOut {
    /// The agent's current anonymous id.
    #[schema(value_type = Uuid)]
    pub anonymous_agent_id: AnonymousId,
    /// The capability, by a handle that changes with the anonymous id (never its stored id).
    pub capability_id: Uuid,
    /// Its kind of work.
    pub task_type: String,
    /// Set for `custom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_type: Option<String>,
    /// Input JSON Schema.
    pub input_schema: Value,
    /// Output JSON Schema.
    pub output_schema: Value,
    /// The agent's trust percentile (0-100).
    pub trust_score_percentile: i32,
    /// Whether that trust rests on fewer than 10 events.
    pub provisional: bool,
    /// Estimated latency, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_latency_ms: Option<i64>,
    /// Estimated cost, US dollars.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_cost_usd: Option<f64>,
    /// The ranking score, 4 decimals.
    pub composite_score: f64,
    /// The agent's record.
    pub quality_metrics: QualityMetricsOut,
}

/// Discovery's answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DiscoverOut {
    /// Best first.
    pub results: Vec<DiscoveredOut>,
    /// How many capabilities passed the filters (`results` shows at most `limit` of them).
    pub total: usize,
}

/// A discovery, checked: the ranked results as both adapters show them.
pub async fn discover(delegations: &Delegations, query: &discovery::Query) -> ApiResult<DiscoverOut> {
    let config = delegations.config();
    let mut tx = delegations.pool().begin().await?;
    let found = discovery::discover(&mut tx, query, config.min_trust, config.anonymous_id_ttl).await?;
    tx.commit().await?;
    let total = found.total;
    let results = found
        .results
        .into_iter()
        .map(|Found { entry: e, composite_score }| DiscoveredOut {
            anonymous_agent_id: e.anonymous_agent_id,
            capability_id: delegations.capability_handle(e.anonymous_agent_id, e.capability_id),
            task_type: e.task_type,
            custom_type: e.custom_type,
            input_schema: e.input_schema,
            output_schema: e.output_schema,
            trust_score_percentile: e.trust_score_percentile,
            provisional: e.provisional,
            estimated_latency_ms: e.estimated_latency_ms,
            estimated_cost_usd: e.estimated_cost_usd,
            composite_score,
            quality_metrics: QualityMetricsOut { success_rate: None, completed_tasks: 0 },
        })
        .collect();
    Ok(DiscoverOut { results, total })
}

/// An accepted capability, ranked: never the agent's id or owner.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RankedOut {
    /// The agent's current anonymous id.
    #[schema(value_type = Uuid)]
    pub anonymous_agent_id: AnonymousId,
    /// The capability, by a handle that changes with the anonymous id (never its stored id).
    pub capability_id: Uuid,
    /// Its kind of work.
    pub task_type: String,
    /// Set for `custom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_type: Option<String>,
    /// The calculator's full assessment of the capability against the task.
    pub assessment: scoring::Assessment,
    /// The agent's trust percentile (0-100).
    pub trust_score_percentile: i32,
    /// Whether that trust rests on fewer than 10 events.
    pub provisional: bool,
    /// `0.7 * assessment.score + 0.3 * trustScorePercentile/100`, 4 decimals.
    pub rank_score: f64,
}

/// A capability whose assessment did not accept the task.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RejectedOut {
    /// The agent's current anonymous id.
    #[schema(value_type = Uuid)]
    pub anonymous_agent_id: AnonymousId,
    /// The capability, by a handle that changes with the anonymous id (never its stored id).
    pub capability_id: Uuid,
    /// Its kind of work.
    pub task_type: String,
    /// Set for `custom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_type: Option<String>,
    /// The assessment, with its `rejection_reason`.
    pub assessment: scoring::Assessment,
}

/// Ranking's answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RankOut {
    /// Accepted, best `rankScore` first (ties by anonymous id).
    pub candidates: Vec<RankedOut>,
    /// Not accepted, best score first.
    pub rejected: Vec<RejectedOut>,
}

/// A ranking, checked: the candidates and the rejected as both adapters show them.
pub async fn rank(delegations: &Delegations, query: RankQuery) -> ApiResult<RankOut> {
    let config = delegations.config();
    let mut tx = delegations.pool().begin().await?;
    let found = ranking::candidates(&mut tx, &query, config.min_trust, config.anonymous_id_ttl).await?;
    tx.commit().await?;
    let ranked = ranking::rank_off_the_async_workers(query.request, found, query.limit).await;
    let candidates = ranked
        .candidates
        .into_iter()
        .map(|r| RankedOut {
            anonymous_agent_id: r.candidate.anonymous_agent_id,
            capability_id: delegations.capability_handle(r.candidate.anonymous_agent_id, r.candidate.capability_id),
            task_type: r.candidate.task_type,
            custom_type: r.candidate.custom_type,
            trust_score_percentile: r.candidate.trust_score_percentile,
            provisional: r.candidate.provisional,
            rank_score: r.rank_score.unwrap_or_default(),
            assessment: r.assessment,
        })
        .collect();
    let rejected = ranked
        .rejected
        .into_iter()
        .map(|r| RejectedOut {
            anonymous_agent_id: r.candidate.anonymous_agent_id,
            capability_id: delegations.capability_handle(r.candidate.anonymous_agent_id, r.candidate.capability_id),
            task_type: r.candidate.task_type,
            custom_type: r.candidate.custom_type,
            assessment: r.assessment,
        })
        .collect();
    Ok(RankOut { candidates, rejected })
}
