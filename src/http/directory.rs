//! The agent directory's routes: an agent's capabilities and their permissions (the agent's own
//! key or its owner's token), discovery and ranking (any authenticated caller) and trust (the
//! agent, its owner or the service). The rules live in `crate::directory`; these handlers parse
//! the input into its checked queries, call it and shape the answer (discovery's and ranking's
//! answers are the wire's, `crate::wire::directory`, which the MCP tools render too).
//! Discovery and ranking answers never carry an agent's id or owner.

use crate::error_code::ErrorCode;
use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    routing::{delete, get, post, put},
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::{
    AppState,
    agent_auth::{AgentManager, AgentReader, AnyCaller},
    api_docs::{AgentCapabilityPath, AgentManagers, AgentOrItsOwner, AgentPath},
    error::{ApiError, ApiResult},
    extract::{ApiJson, ApiQuery, Ids},
};
use crate::directory::{
    CapabilityError, PermissionsPatch,
    anonymity::{self, AgentId, AnonymousId},
    capabilities::{self, Capability, NewCapability, RawCapability, SchemaRefusal},
    discovery::{self, RawQuery},
    ranking::RankQuery,
    schema::CheckError,
    trust,
};
use crate::wire::directory::{DiscoverOut, RankOut, discover, rank};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/agents/{id}/capabilities", put(put_capability).get(list_capabilities))
        .route("/api/agents/{id}/capabilities/{capabilityId}", delete(delete_capability))
        .route("/api/agents/{id}/capabilities/{capabilityId}/permissions", put(put_permissions))
        .route("/api/agents/discover", get(discover_agents))
        .route("/api/discovery", get(discover_agents_alias))
        .route("/api/agents/rank", post(rank_agents))
        .route("/api/trust/{agentId}", get(get_trust))
}

/// Body of `PUT /api/agents/{id}/capabilities`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({
    "taskType": "code-review",
    "inputSchema": {"type": "object", "properties": {"code": {"type": "string"}}},
    "outputSchema": {"type": "object", "properties": {"feedback": {"type": "string"}}},
    "estimatedLatencyMs": 5000,
    "estimatedCostUsd": 0.05
}))]
pub struct CapabilityIn {
    /// `code-review`, `code-generation`, `testing`, `documentation`, `analysis`,
    /// `summarization`, `translation`, `data-extraction`, `classification`, `generation`,
    /// `transformation` or `custom`.
    #[schema(
        pattern = "^(code-review|code-generation|testing|documentation|analysis|summarization|translation|data-extraction|classification|generation|transformation|custom)$"
    )]
    pub task_type: String,
    /// Required for `custom` (1-100 characters), refused otherwise.
    pub custom_type: Option<String>,
    /// A JSON Schema (object or boolean) of the input the capability takes.
    pub input_schema: Value,
    /// A JSON Schema (object or boolean) of the output it gives back.
    pub output_schema: Value,
    /// Estimated latency in milliseconds (a whole number, at least 0).
    #[schema(value_type = Option<i64>, minimum = 0)]
    pub estimated_latency_ms: Option<Value>,
    /// Estimated cost per task in US dollars (at least 0).
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub estimated_cost_usd: Option<Value>,
    /// Free text (at most 2 000 characters).
    pub description: Option<String>,
    /// Keywords (at most 50, each 1-100 characters).
    #[serde(default)]
    pub tags: Vec<String>,
    /// A skill in the self-assessment's schema, used when the capability is assessed.
    #[schema(value_type = Option<Object>)]
    pub skill: Option<Value>,
}

/// What a capability lets others do with it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionsOut {
    /// Shown by discovery.
    pub enabled: bool,
    /// Takes delegated work.
    pub accept_delegations: bool,
    /// Delegations it takes per minute.
    pub inbound_rate_limit: i32,
    /// Delegations its agent sends per minute.
    pub outbound_rate_limit: i32,
}

/// A capability as its agent and owner see it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityOut {
    /// Its id.
    pub id: Uuid,
    /// The kind of work.
    pub task_type: String,
    /// Set for `custom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_type: Option<String>,
    /// Input JSON Schema.
    pub input_schema: Value,
    /// Output JSON Schema.
    pub output_schema: Value,
    /// Estimated latency, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_latency_ms: Option<i64>,
    /// Estimated cost, US dollars.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_cost_usd: Option<f64>,
    /// Free text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Keywords.
    #[schema(value_type = Vec<String>)]
    pub tags: Value,
    /// The skill given at registration.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub skill: Option<Value>,
    /// Its permissions.
    pub permissions: PermissionsOut,
    /// Registered.
    pub created_at: DateTime<Utc>,
    /// Last replaced or changed.
    pub updated_at: DateTime<Utc>,
}

impl From<Capability> for CapabilityOut {
    fn from(c: Capability) -> Self {
        CapabilityOut {
            id: c.capability_id,
            task_type: c.task_type,
            custom_type: c.custom_type,
            input_schema: c.input_schema,
            output_schema: c.output_schema,
            estimated_latency_ms: c.estimated_latency_ms,
            estimated_cost_usd: c.estimated_cost_usd,
            description: c.description,
            tags: c.tags,
            skill: c.skill,
            permissions: PermissionsOut {
                enabled: c.enabled,
                accept_delegations: c.accept_delegations,
                inbound_rate_limit: c.inbound_rate_limit,
                outbound_rate_limit: c.outbound_rate_limit,
            },
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

/// One capability and the agent's current anonymous id.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityAnswer {
    /// The capability.
    pub capability: CapabilityOut,
    /// The id others see the agent under (valid for 24 hours, then replaced).
    #[schema(value_type = Uuid)]
    pub anonymous_agent_id: AnonymousId,
}

/// The agent's capabilities and its current anonymous id.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityListOut {
    /// Oldest first.
    pub capabilities: Vec<CapabilityOut>,
    /// The id others see the agent under.
    #[schema(value_type = Uuid)]
    pub anonymous_agent_id: AnonymousId,
}

/// A deletion's answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeletedOut {
    /// Always true.
    pub deleted: bool,
}

/// Registers a capability: creates the agent's capability for its `taskType` (and
/// `customType`), or replaces it, keeping its id and permissions.
#[utoipa::path(put, path = "/api/agents/{id}/capabilities", tag = "directory", operation_id = "putCapability",
    security(("bearerJwt" = []), ("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentPath),
    request_body = CapabilityIn,
    responses(
        (status = 200, description = "Replaced", body = CapabilityAnswer),
        (status = 201, description = "Created", body = CapabilityAnswer),
        (status = 400, description = "Invalid body, naming the field (`invalid_body`), or a schema past its bounds (`schema_too_complex`)"),
        (status = 404, description = "Unknown agent, or another user's"),
        (status = 409, description = "The owner's agents have as many capabilities as they may (`limit_reached`)"),
        (status = 429, description = "The owner's schema-checking time is used up for now (`rate_limited`)"),
        AgentManagers,
    ))]
pub async fn put_capability(
    State(state): State<AppState>,
    AgentManager(agent): AgentManager,
    ApiJson(body): ApiJson<CapabilityIn>,
) -> ApiResult<(StatusCode, Json<CapabilityAnswer>)> {
    let new = NewCapability::parse(&RawCapability {
        task_type: &body.task_type,
        custom_type: body.custom_type.as_deref(),
        input_schema: &body.input_schema,
        output_schema: &body.output_schema,
        estimated_latency_ms: body.estimated_latency_ms.as_ref(),
        estimated_cost_usd: body.estimated_cost_usd.as_ref(),
        description: body.description.as_deref(),
        tags: &body.tags,
        skill: body.skill.as_ref(),
    })?;
    capabilities::compile_schemas(state.delegations.schemas(), &agent.owner_user_id, &new).await.map_err(
        |e| match e {
            SchemaRefusal::Refused(refused) => refused.into(),
            SchemaRefusal::Unchecked(CheckError::OverBudget(wait)) => {
                ApiError::TooMany(CheckError::OverBudget(wait).to_string(), wait)
            }
            SchemaRefusal::Unchecked(CheckError::TooSlow(t)) => ApiError::BadRequest {
                code: ErrorCode::SchemaTooComplex,
                message: format!("the schemas could not be compiled within {t:?}"),
            },
            SchemaRefusal::Unchecked(busy) => ApiError::Unavailable(busy.to_string()),
        },
    )?;
    let max = state.engine.config().max_capabilities_per_user;
    let mut tx = state.pool().begin().await?;
    crate::store::agents::lock_owner(&mut tx, &agent.owner_user_id).await?;
    if !capabilities::has_kind(&mut tx, agent.agent_id, &new).await?
        && capabilities::count_for_owner(&mut tx, &agent.owner_user_id).await? >= i64::from(max)
    {
        return Err(ApiError::LimitReached {
            message: format!(
                "a user's agents may have at most {max} capabilities in all (PARLEY_MAX_CAPABILITIES_PER_USER); delete one first"
            ),
            limit: max,
        });
    }
    // The id first: a first capability then finds it and needs no placeholder.
    let anonymous_agent_id =
        anonymity::current(&mut tx, AgentId(agent.agent_id), state.engine.config().anonymous_id_ttl).await?;
    let (capability, created) = capabilities::upsert(&mut tx, agent.agent_id, &new).await?;
    tx.commit().await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(CapabilityAnswer { capability: capability.into(), anonymous_agent_id })))
}

/// The agent's capabilities.
#[utoipa::path(get, path = "/api/agents/{id}/capabilities", tag = "directory", operation_id = "listCapabilities",
    security(("bearerJwt" = []), ("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentPath),
    responses(
        (status = 200, description = "Its capabilities", body = CapabilityListOut),
        (status = 404, description = "Unknown agent, or another user's"),
        AgentManagers,
    ))]
pub async fn list_capabilities(
    State(state): State<AppState>,
    AgentManager(agent): AgentManager,
) -> ApiResult<Json<CapabilityListOut>> {
    let mut tx = state.pool().begin().await?;
    let list = capabilities::list(&mut tx, agent.agent_id).await?;
    let anonymous_agent_id =
        anonymity::current(&mut tx, AgentId(agent.agent_id), state.engine.config().anonymous_id_ttl).await?;
    tx.commit().await?;
    Ok(Json(CapabilityListOut { capabilities: list.into_iter().map(Into::into).collect(), anonymous_agent_id }))
}

/// Deletes one of the agent's capabilities.
#[utoipa::path(delete, path = "/api/agents/{id}/capabilities/{capabilityId}", tag = "directory", operation_id = "deleteCapability",
    security(("bearerJwt" = []), ("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentCapabilityPath),
    responses(
        (status = 200, description = "Deleted", body = DeletedOut),
        (status = 404, description = "Unknown agent (or another user's) or capability"),
        AgentManagers,
    ))]
pub async fn delete_capability(
    State(state): State<AppState>,
    AgentManager(agent): AgentManager,
    Ids((_, capability_id)): Ids<(Uuid, Uuid)>,
) -> ApiResult<Json<DeletedOut>> {
    let mut conn = state.pool().acquire().await?;
    if !capabilities::delete(&mut conn, agent.agent_id, capability_id).await? {
        return Err(ApiError::NotFound("capability"));
    }
    Ok(Json(DeletedOut { deleted: true }))
}

/// Body of `PUT .../capabilities/{capabilityId}/permissions`; absent fields keep their value.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"enabled": true, "acceptDelegations": true, "inboundRateLimit": 10, "outboundRateLimit": 20}))]
pub struct PermissionsIn {
    /// Shown by discovery (default true).
    pub enabled: Option<bool>,
    /// Takes delegated work (default true).
    pub accept_delegations: Option<bool>,
    /// Delegation attempts it takes per minute: 0 up to the service's limit
    /// (`PARLEY_INBOUND_RATE`, 10 by default), which a capability may only lower. One requesting
    /// owner may use at most half of it.
    #[schema(value_type = Option<i32>, minimum = 0, maximum = 10000)]
    pub inbound_rate_limit: Option<Value>,
    /// Delegations its agent sends per minute: 0 up to the service's limit
    /// (`PARLEY_OUTBOUND_RATE`, 20 by default), which a capability may only lower.
    #[schema(value_type = Option<i32>, minimum = 0, maximum = 10000)]
    pub outbound_rate_limit: Option<Value>,
}

fn rate_limit(field: &'static str, value: Option<&Value>) -> Result<Option<i32>, CapabilityError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| CapabilityError::invalid(field, "must be a whole number from 0 to 10000")),
    }
}

/// Changes a capability's permissions.
#[utoipa::path(put, path = "/api/agents/{id}/capabilities/{capabilityId}/permissions", tag = "directory",
    operation_id = "putCapabilityPermissions",
    security(("bearerJwt" = []), ("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentCapabilityPath),
    request_body = PermissionsIn,
    responses(
        (status = 200, description = "The capability as it now is", body = CapabilityAnswer),
        (status = 400, description = "Invalid body, naming the field (`invalid_body`)"),
        (status = 404, description = "Unknown agent (or another user's) or capability"),
        AgentManagers,
    ))]
pub async fn put_permissions(
    State(state): State<AppState>,
    AgentManager(agent): AgentManager,
    Ids((_, capability_id)): Ids<(Uuid, Uuid)>,
    ApiJson(body): ApiJson<PermissionsIn>,
) -> ApiResult<Json<CapabilityAnswer>> {
    let patch = PermissionsPatch {
        enabled: body.enabled,
        accept_delegations: body.accept_delegations,
        inbound_rate_limit: rate_limit("inboundRateLimit", body.inbound_rate_limit.as_ref())?,
        outbound_rate_limit: rate_limit("outboundRateLimit", body.outbound_rate_limit.as_ref())?,
    };
    let config = state.engine.config();
    patch.check(config.inbound_rate, config.outbound_rate)?;
    let mut tx = state.pool().begin().await?;
    let capability = capabilities::set_permissions(&mut tx, agent.agent_id, capability_id, &patch)
        .await?
        .ok_or(ApiError::NotFound("capability"))?;
    let anonymous_agent_id =
        anonymity::current(&mut tx, AgentId(agent.agent_id), state.engine.config().anonymous_id_ttl).await?;
    tx.commit().await?;
    Ok(Json(CapabilityAnswer { capability: capability.into(), anonymous_agent_id }))
}

/// Query of `GET /api/agents/discover` (numbers are checked by the handler, naming the one at
/// fault). A parameter not listed here is refused (400, naming it): a filter silently ignored
/// would return wrong results. Each filter has two spellings, the seed's and AgentLens's
/// server's (`minTrustScore`/`minTrust`, `maxCostUsd`/`maxCost`, `maxLatencyMs`/`maxLatency`);
/// both with different values are refused.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DiscoverParams {
    /// The kind of work.
    // Required, and documented so; optional in the type so that its absence gets the API's own
    // error body, naming the field.
    #[param(required = true, value_type = String,
        pattern = "^(code-review|code-generation|testing|documentation|analysis|summarization|translation|data-extraction|classification|generation|transformation|custom)$")]
    pub task_type: Option<String>,
    /// With `taskType=custom` only (refused otherwise): only this custom type. Without it, a
    /// custom discovery shows every custom capability.
    #[param(max_length = 100)]
    pub custom_type: Option<String>,
    /// Lowest trust percentile, 0-100 (the service's own floor applies too).
    #[param(value_type = Option<f64>, minimum = 0, maximum = 100)]
    pub min_trust_score: Option<String>,
    /// Cost cap in US dollars (> 0; also the cost that scores 0; default 100).
    #[param(value_type = Option<f64>, exclusive_minimum = 0)]
    pub max_cost_usd: Option<String>,
    /// Latency cap in milliseconds (> 0; also the latency that scores 0; default 30 000).
    #[param(value_type = Option<f64>, exclusive_minimum = 0)]
    pub max_latency_ms: Option<String>,
    /// Results, 1 or more; at most 20 are shown (default 20).
    #[param(value_type = Option<i64>, minimum = 1)]
    pub limit: Option<String>,
    /// `minTrustScore` as AgentLens's server names it.
    #[param(value_type = Option<f64>, minimum = 0, maximum = 100)]
    pub min_trust: Option<String>,
    /// `maxCostUsd` as AgentLens's server names it.
    #[param(value_type = Option<f64>, exclusive_minimum = 0)]
    pub max_cost: Option<String>,
    /// `maxLatencyMs` as AgentLens's server names it.
    #[param(value_type = Option<f64>, exclusive_minimum = 0)]
    pub max_latency: Option<String>,
    /// `internal` or `all` (the same here: every agent of this service is of one directory).
    #[param(pattern = "^(internal|all)$")]
    pub scope: Option<String>,
}

/// Finds the enabled capabilities of a kind of work, ranked by
/// `0.5 * trust/100 + 0.3 * (1 - min(cost/maxCost, 1)) + 0.2 * (1 - min(latency/maxLatency, 1))`
/// (unknown cost or latency count 0.5), ties by anonymous id.
#[utoipa::path(get, path = "/api/agents/discover", tag = "directory", operation_id = "discoverAgents",
    security(("bearerJwt" = []), ("agentKeyBearer" = []), ("agentKey" = [])),
    params(DiscoverParams),
    responses(
        (status = 200, description = "Ranked results", body = DiscoverOut),
        (status = 400, description = "No or unknown `taskType`, a bad number, two spellings of one filter that differ, or an unknown parameter (`invalid_body`)"),
        (status = 403, description = "An inactive agent's key"),
    ))]
pub async fn discover_agents(
    State(state): State<AppState>,
    _caller: AnyCaller,
    ApiQuery(params): ApiQuery<DiscoverParams>,
) -> ApiResult<Json<DiscoverOut>> {
    let raw = RawQuery {
        task_type: params.task_type.as_deref(),
        custom_type: params.custom_type.as_deref(),
        min_trust_score: params.min_trust_score.as_deref(),
        max_cost_usd: params.max_cost_usd.as_deref(),
        max_latency_ms: params.max_latency_ms.as_deref(),
        limit: params.limit.as_deref(),
        min_trust: params.min_trust.as_deref(),
        max_cost: params.max_cost.as_deref(),
        max_latency: params.max_latency.as_deref(),
        scope: params.scope.as_deref(),
    };
    Ok(Json(discover(&state.delegations, &discovery::Query::parse(&raw)?).await?))
}

/// `GET /api/agents/discover` at the path AgentLens's MCP tool `agentlens_discover` calls: the
/// same operation, query and answer.
#[utoipa::path(get, path = "/api/discovery", tag = "directory", operation_id = "discoverAgentsAlias",
    description = "An alias of `GET /api/agents/discover` (same query, same answer), at the path AgentLens's MCP tool calls.",
    security(("bearerJwt" = []), ("agentKeyBearer" = []), ("agentKey" = [])),
    params(DiscoverParams),
    responses(
        (status = 200, description = "Ranked results", body = DiscoverOut),
        (status = 400, description = "No or unknown `taskType`, a bad number, two spellings of one filter that differ, or an unknown parameter (`invalid_body`)"),
        (status = 403, description = "An inactive agent's key"),
    ))]
pub async fn discover_agents_alias(
    state: State<AppState>,
    caller: AnyCaller,
    params: ApiQuery<DiscoverParams>,
) -> ApiResult<Json<DiscoverOut>> {
    discover_agents(state, caller, params).await
}

/// Ranks the discoverable capabilities for a task: each is assessed by the capability
/// calculator against its skill (given or derived from taskType, description and tags), with
/// its agent's live queue depth, its declared latency and its declared cost; accepted ones are
/// ranked by `rankScore = 0.7 * score + 0.3 * trust/100`.
#[utoipa::path(post, path = "/api/agents/rank", tag = "directory", operation_id = "rankAgents",
    security(("bearerJwt" = []), ("agentKeyBearer" = []), ("agentKey" = [])),
    request_body = RankQuery,
    responses(
        (status = 200, description = "Candidates ranked, and the rejected with their reasons", body = RankOut),
        (status = 400, description = "Invalid body, naming the field (`invalid_body`)"),
        (status = 403, description = "An inactive agent's key"),
    ))]
pub async fn rank_agents(
    State(state): State<AppState>,
    _caller: AnyCaller,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Json<RankOut>> {
    Ok(Json(rank(&state.delegations, RankQuery::parse(&body)?).await?))
}

/// An agent's trust, as the one doing the work.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrustOut {
    /// The agent.
    pub agent_id: Uuid,
    /// 0.6 * health + 0.4 * delegation, 2 decimals.
    pub raw_score: f64,
    /// Mean daily share of claimed turns answered before the claim expired and accepted delegation attempts completed in time (last 30 days), times 100; 50 with none.
    pub health_component: f64,
    /// Share of finished delegations addressed to it that it completed (last 90 days), times 100; 50 with none.
    pub delegation_component: f64,
    /// Share of the other agents (those with a capability or a record in the last 90 days) with
    /// a strictly lower raw score, 0-100; 100 when there is no other agent.
    pub percentile: i32,
    /// How many other agents the percentile compares it with; 0 when it is the only one, so that
    /// its 100 means "alone", not "better than everyone".
    pub other_agents: i64,
    /// Fewer than 10 events (claims answered or expired, finished delegations) so far.
    pub provisional: bool,
    /// Finished delegation attempts addressed to it (last 90 days).
    pub total_delegations: i64,
    /// Of those, completed.
    pub successful_delegations: i64,
    /// When its record last changed; null before it has one.
    pub updated_at: Option<DateTime<Utc>>,
}

/// An agent's trust.
#[utoipa::path(get, path = "/api/trust/{agentId}", tag = "directory", operation_id = "getTrust",
    security(("bearerJwt" = []), ("agentKeyBearer" = []), ("agentKey" = [])),
    params(("agentId" = Uuid, Path, description = "The agent id")),
    responses(
        (status = 200, description = "Its trust", body = TrustOut),
        (status = 404, description = "Unknown agent, or another user's"),
        AgentOrItsOwner,
    ))]
pub async fn get_trust(State(state): State<AppState>, AgentReader(agent): AgentReader) -> ApiResult<Json<TrustOut>> {
    let mut conn = state.pool().acquire().await?;
    let t = trust::of(&mut conn, agent.agent_id).await?;
    Ok(Json(TrustOut {
        agent_id: t.agent_id,
        raw_score: t.raw_score,
        health_component: t.health_component,
        delegation_component: t.delegation_component,
        percentile: t.percentile,
        other_agents: t.other_agents,
        provisional: t.provisional,
        total_delegations: t.total_delegations,
        successful_delegations: t.successful_delegations,
        updated_at: t.updated_at,
    }))
}
