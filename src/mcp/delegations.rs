//! The delegation tools: the requester's (`delegate_task`, `get_delegation`,
//! `cancel_delegation`) act for the key's agent; the target's (`list_delegation_inbox`,
//! `accept_delegation`, `complete_delegation`, `reject_delegation`, `fail_delegation`) for the
//! agent the attempt is addressed to. They call delegation's flow and render the same answers
//! as the HTTP routes (`crate::wire::delegations`); each side sees the other only by anonymous
//! id.

use axum::http::request::Parts;
use rmcp::{
    ErrorData,
    handler::server::{common::Extension, wrapper::Parameters},
    model::CallToolResult,
    schemars, tool, tool_router,
};
use serde::Deserialize;
use serde_json::Value;

use super::{ParleyMcp, agent_of, api_error, key_of, parse_uuid, structured};
use crate::{
    directory::{
        capabilities::TaskType,
        delegation::{self, Event, RawRequest},
    },
    runtime::{AgentIdentity, AgentKey},
    wire::{
        delegations::{AcceptedOut, CompletedOut, EndedOut, InboxOut, answer, inbound_out},
        error::ApiError,
    },
};

/// Arguments of `delegate_task` (the body of `POST /api/agents/delegate`; `agentId` is always
/// the key's own agent).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegateArgs {
    /// Your id for this delegation (a UUID): the same id and arguments again return the same
    /// delegation. Issued when absent.
    pub request_id: Option<String>,
    /// The target's anonymous id (from discover_agents); without it, the top discovery result.
    pub target_anonymous_id: Option<String>,
    /// The kind of work: one of [`TaskType`]'s names (the schema lists them all).
    #[schemars(description = format!("The kind of work: {}.", TaskType::names_or()))]
    pub task_type: String,
    /// Required for custom.
    pub custom_type: Option<String>,
    /// The work; must match the target capability's inputSchema.
    pub input: Value,
    /// Per attempt, from its start (1 to 86 400 000; default 30 000).
    #[serde(default, deserialize_with = "delegation::numbers::whole_timeout_ms")]
    pub timeout_ms: Option<i64>,
    /// Whether a rejected, timed-out or failed attempt goes to the next target (default true).
    pub fallback_enabled: Option<bool>,
    /// Attempts after the first (0 to 10; default 3).
    #[serde(default, deserialize_with = "delegation::numbers::whole_max_retries")]
    pub max_retries: Option<i64>,
}

/// Arguments naming one delegation by its request id.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestIdArgs {
    /// The delegation's requestId.
    pub request_id: String,
}

/// Arguments of `get_delegation`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetDelegationArgs {
    /// The delegation's requestId.
    pub request_id: String,
    /// Seconds to wait for it to end (from 1; more than the server's long-poll maximum, 30 by
    /// default, is capped); without it, the answer is immediate.
    pub wait: Option<i64>,
}

/// Arguments of `list_delegation_inbox`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InboxArgs {
    /// Seconds to wait for a request when none is waiting (from 1; more than the server's
    /// long-poll maximum, 30 by default, is capped); without it, the answer is immediate.
    pub wait: Option<i64>,
}

/// Arguments of `complete_delegation`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompleteArgs {
    /// The delegation's requestId.
    pub request_id: String,
    /// The result; must match your capability's outputSchema.
    pub output: Value,
    /// The claimToken from accept_delegation (optional; when sent it must be this attempt's).
    pub claim_token: Option<String>,
}

/// Arguments of `reject_delegation`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RejectArgs {
    /// The delegation's requestId.
    pub request_id: String,
    /// Why (at most 2 000 characters).
    pub reason: Option<String>,
}

/// Arguments of `fail_delegation`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailArgs {
    /// The delegation's requestId.
    pub request_id: String,
    /// What went wrong (at most 2 000 characters).
    pub error: String,
    /// The claimToken from accept_delegation (optional; when sent it must be this attempt's).
    pub claim_token: Option<String>,
}

#[tool_router(router = delegation_tools, vis = "pub(super)")]
impl ParleyMcp {
    /// Delegation, as `POST /api/agents/delegate`.
    #[tool(description = "Delegate a piece of work to another agent (yours is the requester). Without \
targetAnonymousId the top discover_agents result for taskType takes it; input must match its inputSchema. \
Returns {delegation: {requestId, status, attempts: [{attempt, taskId, targetAnonymousId, status, reason?}], \
...}} at once; follow it with get_delegation (with wait to hold until it ends). A rejected, failed or timed-out attempt moves to the next target while \
retries are left (fallbackEnabled, maxRetries).")]
    async fn delegate_task(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<DelegateArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let (agent, key) = (agent_of(&parts)?, key_of(&parts)?);
        Ok(match self.delegate(&agent, &key, args).await {
            Ok(value) => value,
            Err(e) => api_error(e),
        })
    }

    /// One of the agent's delegations, as `GET /api/delegations/:requestId` (with its `wait`).
    #[tool(description = "Show one of your delegations by requestId: {result?: {requestId, status, output?, \
executionTimeMs, retriesUsed} once it ended, delegation}. status: request, accepted, completed, rejected, \
timeout, error or canceled. With wait (seconds), holds until it ends or the time passes; no result means it has not \
ended yet.")]
    async fn get_delegation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<GetDelegationArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let agent = agent_of(&parts)?;
        let read = async {
            let id = parse_uuid(&args.request_id, "requestId")?;
            let wait = self.wait_of(args.wait)?;
            let requesters = [agent.agent_id];
            let record = self.state.delegations.read_delegation(id, Some(&requesters[..])).await?;
            if wait.is_none() {
                return Ok::<_, ApiError>(answer(record));
            }
            let record = self.state.delegations.await_delegation(record.delegation.delegation_id, wait).await?;
            Ok(answer(record))
        };
        Ok(match read.await {
            Ok(found) => structured(found),
            Err(e) => api_error(e),
        })
    }

    /// The requester's cancel, as `POST /api/delegations/:requestId/cancel`.
    #[tool(description = "Cancel one of your delegations by requestId while it has not ended: it ends canceled \
with its live attempt, no other target is tried, and the target can no longer accept or complete it. Returns \
{result: {requestId, status: canceled, executionTimeMs, retriesUsed}, delegation} as get_delegation does. A \
delegation that has ended already is refused with delegation_ended.")]
    async fn cancel_delegation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<RequestIdArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = key_of(&parts)?;
        let cancel = async {
            let id = parse_uuid(&args.request_id, "requestId")?;
            let record = self.state.delegations.cancel(&key, id).await?;
            Ok::<_, ApiError>(answer(record))
        };
        Ok(match cancel.await {
            Ok(canceled) => structured(canceled),
            Err(e) => api_error(e),
        })
    }

    /// The agent's inbox, as `GET /api/agents/:id/delegations/inbox` (with its `wait`).
    #[tool(description = "List the delegation requests waiting for you, oldest first: {requests: [{requestId, \
attempt, taskId, requesterAnonymousId, taskType, customType?, input, timeoutMs, status, createdAt, deadline}], \
total}. With wait (seconds), holds until one arrives or the time passes. Take one with accept_delegation, then \
complete_delegation or fail_delegation; or reject_delegation.")]
    async fn list_delegation_inbox(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<InboxArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = key_of(&parts)?;
        let list = async {
            let wait = self.wait_of(args.wait)?;
            let (items, total) = self.state.delegations.delegation_inbox(&key, wait).await?;
            Ok::<_, ApiError>(InboxOut { requests: items.into_iter().map(inbound_out).collect(), total })
        };
        Ok(match list.await {
            Ok(inbox) => structured(inbox),
            Err(e) => api_error(e),
        })
    }

    /// Accept, as `POST /api/agents/:id/delegations/:requestId/accept`.
    #[tool(description = "Take a request addressed to you (from list_delegation_inbox). Returns {accepted: true, \
claimToken, deadline}: finish before the deadline with complete_delegation or fail_delegation.")]
    async fn accept_delegation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<RequestIdArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = key_of(&parts)?;
        let accept = async {
            let id = parse_uuid(&args.request_id, "requestId")?;
            let accepted = self.state.delegations.accept_delegation(&key, id).await?;
            Ok::<_, ApiError>(AcceptedOut {
                accepted: true,
                claim_token: accepted.claim_token,
                deadline: accepted.deadline,
            })
        };
        Ok(match accept.await {
            Ok(accepted) => structured(accepted),
            Err(e) => api_error(e),
        })
    }

    /// Complete, as `POST /api/agents/:id/delegations/:requestId/complete`.
    #[tool(description = "Hand back the result of a request you accepted: output must match your capability's \
outputSchema (otherwise output_invalid, and the request stays yours to fix). Returns {completed: true}.")]
    async fn complete_delegation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<CompleteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = key_of(&parts)?;
        let complete = async {
            let id = parse_uuid(&args.request_id, "requestId")?;
            self.state.delegations.complete_delegation(&key, id, &args.output, args.claim_token.as_deref()).await?;
            Ok::<_, ApiError>(CompletedOut { completed: true })
        };
        Ok(match complete.await {
            Ok(done) => structured(done),
            Err(e) => api_error(e),
        })
    }

    /// Reject, as `POST /api/agents/:id/delegations/:requestId/reject`.
    #[tool(description = "Decline a request addressed to you (waiting or accepted), with an optional reason; the \
next target gets it when retries are left. Returns {ended: true}.")]
    async fn reject_delegation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<RejectArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let agent = agent_of(&parts)?;
        Ok(match self.refuse(&agent, &args.request_id, Event::Reject, args.reason.as_deref(), None).await {
            Ok(ended) => structured(ended),
            Err(e) => api_error(e),
        })
    }

    /// Fail, as `POST /api/agents/:id/delegations/:requestId/fail`.
    #[tool(description = "Report that a request you accepted failed (error says what went wrong); the next \
target gets it when retries are left. Returns {ended: true}.")]
    async fn fail_delegation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<FailArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let agent = agent_of(&parts)?;
        Ok(
            match self
                .refuse(&agent, &args.request_id, Event::Fail, Some(&args.error), args.claim_token.as_deref())
                .await
            {
                Ok(ended) => structured(ended),
                Err(e) => api_error(e),
            },
        )
    }
}

impl ParleyMcp {
    /// `delegate_task`: the HTTP route's parsing and flow, for the key's agent.
    async fn delegate(
        &self,
        agent: &AgentIdentity,
        key: &AgentKey,
        args: DelegateArgs,
    ) -> Result<CallToolResult, ApiError> {
        let request_id = args.request_id.as_deref().map(|r| parse_uuid(r, "requestId")).transpose()?;
        let target = args.target_anonymous_id.as_deref().map(|t| parse_uuid(t, "targetAnonymousId")).transpose()?;
        let min_timeout_ms =
            i64::try_from(self.state.engine.config().delegation_min_timeout.as_millis()).unwrap_or(i64::MAX);
        let request = delegation::Request::parse(
            &RawRequest {
                request_id,
                agent_id: Some(agent.agent_id),
                target_anonymous_id: target,
                task_type: &args.task_type,
                custom_type: args.custom_type.as_deref(),
                input: &args.input,
                timeout_ms: args.timeout_ms,
                fallback_enabled: args.fallback_enabled,
                max_retries: args.max_retries,
            },
            min_timeout_ms,
        )?;
        let record = self.state.delegations.delegate(key, &request, None).await?;
        Ok(structured(answer(record)))
    }

    /// `reject_delegation` and `fail_delegation`.
    async fn refuse(
        &self,
        agent: &AgentIdentity,
        request_id: &str,
        event: Event,
        reason: Option<&str>,
        claim_token: Option<&str>,
    ) -> Result<EndedOut, ApiError> {
        let id = parse_uuid(request_id, "requestId")?;
        self.state.delegations.refuse_delegation(agent, id, event, reason, claim_token).await?;
        Ok(EndedOut { ended: true })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `timeoutMs` and `maxRetries` are read by the delegate body's own rules (an integral
    /// double is an integer), and the tool's schema still tells clients they are integers.
    #[test]
    fn delegate_task_takes_integral_doubles_and_its_schema_says_integers() {
        let args: DelegateArgs = serde_json::from_value(serde_json::json!({
            "taskType": "code-review", "input": {}, "timeoutMs": 20000.0, "maxRetries": 3.0
        }))
        .unwrap();
        assert_eq!((args.timeout_ms, args.max_retries), (Some(20000), Some(3)));
        let fraction = serde_json::from_value::<DelegateArgs>(serde_json::json!({
            "taskType": "code-review", "input": {}, "timeoutMs": 20000.5
        }))
        .unwrap_err();
        assert!(fraction.to_string().contains("timeoutMs must be a whole number"), "{fraction}");
        let schema = serde_json::to_value(schemars::schema_for!(DelegateArgs)).unwrap();
        for field in ["timeoutMs", "maxRetries"] {
            let kind = &schema["properties"][field]["type"];
            assert!(kind.to_string().contains("integer"), "{field}: {schema}");
        }
        assert!(!schema["required"].to_string().contains("timeoutMs"), "{schema}");
    }

    /// The tools' schemas list every task type the service takes (they once listed 8 of 12).
    #[test]
    fn the_task_type_arguments_list_every_task_type() {
        for schema in [schemars::schema_for!(DelegateArgs), schemars::schema_for!(crate::mcp::directory::DiscoverArgs)]
        {
            let schema = serde_json::to_value(schema).unwrap();
            let described = schema["properties"]["taskType"]["description"].as_str().unwrap_or_default().to_owned();
            for t in TaskType::ALL {
                assert!(described.contains(t.as_str()), "{} missing from {described:?}", t.as_str());
            }
        }
    }
}
