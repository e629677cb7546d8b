//! The directory tools: `discover_agents` and `rank_agents`. Each maps its arguments onto the
//! directory's typed query (`DiscoverQuery`, numbers as numbers; `RankRequest`), and renders the
//! same answers as the HTTP routes (`crate::wire::directory`). Any agent may find others;
//! answers show them only by anonymous id.

use rmcp::{ErrorData, handler::server::wrapper::Parameters, model::CallToolResult, schemars, tool, tool_router};
use serde::Deserialize;
use serde_json::Value;

use super::{ParleyMcp, api_error, structured};
use crate::{
    directory::{
        capabilities::TaskType,
        discovery::{DiscoverQuery, Query},
        ranking::{RankQuery, RankRequest},
    },
    wire::{
        directory::{discover, rank},
        error::ApiError,
    },
};

/// Arguments of `discover_agents` (the query of `GET /api/agents/discover`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverArgs {
    /// Required: one of [`TaskType`]'s names (the schema lists them all).
    #[schemars(description = format!("Required: {}.", TaskType::names_or()))]
    pub task_type: String,
    /// With taskType custom: only this custom type.
    pub custom_type: Option<String>,
    /// Lowest trust percentile, 0-100.
    pub min_trust_score: Option<f64>,
    /// Cost cap in US dollars (> 0).
    pub max_cost_usd: Option<f64>,
    /// Latency cap in milliseconds (> 0).
    pub max_latency_ms: Option<f64>,
    /// Results, 1 to 20 (default 20).
    pub limit: Option<i64>,
}

/// Arguments of `rank_agents`: the body of `POST /api/agents/rank` (the self-assessment
/// request's snake_case fields plus taskType, customType and limit).
#[derive(Debug, Deserialize, serde::Serialize, schemars::JsonSchema)]
pub struct RankArgs {
    /// What the task is (1 to 10 000 characters).
    pub task_summary: String,
    /// Longer description.
    pub task_details: Option<String>,
    /// Input MIME types you will send (capabilities take application/json).
    pub input_mime_types: Option<Vec<String>>,
    /// Output MIME types you want.
    pub output_mime_types: Option<Vec<String>>,
    /// Latency budget in milliseconds.
    pub max_latency_ms: Option<f64>,
    /// Budget as a price string such as "$0.50".
    pub max_cost_amount: Option<String>,
    /// Tools the skill must offer.
    pub required_tools: Option<Vec<String>>,
    /// Tools the skill may not allow.
    pub forbidden_tools: Option<Vec<String>>,
    /// Acceptance threshold on the score (default 0).
    pub min_score: Option<f64>,
    /// Subscore weights: skill_match, io_compatibility, performance, load, cost.
    pub weights: Option<std::collections::BTreeMap<String, f64>>,
    /// Only capabilities of this kind of work.
    #[serde(rename = "taskType")]
    pub task_type: Option<String>,
    /// With taskType custom: only this custom type.
    #[serde(rename = "customType")]
    pub custom_type: Option<String>,
    /// Entries in each list, 1 to 20 (default 20).
    pub limit: Option<i64>,
}

#[tool_router(router = directory_tools, vis = "pub(super)")]
impl ParleyMcp {
    /// Discovery, as `GET /api/agents/discover`.
    #[tool(description = "Find agents offering a kind of work (taskType: code-review, code-generation, testing, \
documentation, analysis, summarization, translation, data-extraction, classification, generation, transformation \
or custom with customType), ranked by \
0.5*trust/100 + 0.3*(1 - min(cost/maxCostUsd, 1)) + 0.2*(1 - min(latency/maxLatencyMs, 1)). Returns {results: \
[{anonymousAgentId, capabilityId, taskType, inputSchema, outputSchema, trustScorePercentile, provisional, \
estimatedLatencyMs?, estimatedCostUsd?, compositeScore, qualityMetrics}], total}. Agents are shown only by anonymous id.")]
    async fn discover_agents(&self, Parameters(args): Parameters<DiscoverArgs>) -> Result<CallToolResult, ErrorData> {
        let query = DiscoverQuery {
            task_type: Some(&args.task_type),
            custom_type: args.custom_type.as_deref(),
            min_trust_score: args.min_trust_score,
            max_cost_usd: args.max_cost_usd,
            max_latency_ms: args.max_latency_ms,
            limit: args.limit,
            scope: None,
        };
        let found = match Query::from_typed(&query) {
            Ok(query) => discover(&self.state.delegations, &query).await,
            Err(e) => Err(e.into()),
        };
        Ok(match found {
            Ok(found) => structured(found),
            Err(e) => api_error(e),
        })
    }

    /// Ranking, as `POST /api/agents/rank`.
    #[tool(description = "Rank the agents that could do a task: each discoverable capability (of taskType, when \
given) is assessed against your task_summary by the capability calculator (skill match, io compatibility, \
its agent's queue, cost against max_cost_amount, latency against max_latency_ms) and ranked by \
rankScore = 0.7*score + 0.3*trust/100. Returns {candidates: [{anonymousAgentId, capabilityId, taskType, \
assessment, trustScorePercentile, provisional, rankScore}], rejected: [{anonymousAgentId, capabilityId, \
taskType, assessment}]}; each assessment explains its score (subscores, skill_matches, rejection_reason).")]
    async fn rank_agents(&self, Parameters(args): Parameters<RankArgs>) -> Result<CallToolResult, ErrorData> {
        let task = match task_of(&args) {
            Ok(task) => task,
            Err(e) => return Ok(api_error(e)),
        };
        let request = RankRequest {
            task_type: args.task_type.as_deref(),
            custom_type: args.custom_type.as_deref(),
            limit: args.limit,
            task: &task,
        };
        let ranked = match RankQuery::from_request(&request) {
            Ok(query) => rank(&self.state.delegations, query).await,
            Err(e) => Err(e.into()),
        };
        Ok(match ranked {
            Ok(ranked) => structured(ranked),
            Err(e) => api_error(e),
        })
    }
}

/// The task of a ranking as the capability calculator reads it: the self-assessment request's
/// fields given (an argument left out is left out, as a caller of the route would), without
/// the ranking's own `taskType`, `customType` and `limit`.
fn task_of(args: &RankArgs) -> Result<Value, ApiError> {
    let mut task = serde_json::to_value(args).map_err(|e| ApiError::Internal(e.into()))?;
    if let Value::Object(fields) = &mut task {
        fields.retain(|name, v| !v.is_null() && !matches!(name.as_str(), "taskType" | "customType" | "limit"));
    }
    Ok(task)
}
