//! The turn tools: `list_negotiations`, `get_negotiation`, `pickup_negotiation` and
//! `respond_to_negotiation`. Each maps its arguments onto the engine's typed command or the
//! wire's listing (`crate::delivery::RespondCommand`, `crate::wire::agent_views::AgentListing`),
//! calls the engine, and renders the same shapes as the HTTP routes
//! (`crate::wire::pickup::PickupOut`, `crate::delivery::Responded`, the agent's views).

use axum::http::request::Parts;
use rmcp::{
    ErrorData,
    handler::server::{common::Extension, wrapper::Parameters},
    model::CallToolResult,
    schemars, tool, tool_router,
};
use serde::{Deserialize, Serialize};

use super::{ParleyMcp, agent_of, api_error, key_of, parse_id, structured};
use crate::{
    delivery::{PickupQuery, RespondCommand, Responded},
    domain::{Role, SuggestedRoles},
    runtime::AgentKey,
    wire::{
        agent_views::{AgentListing, agent_negotiation, agent_negotiations},
        error::ApiError,
        pickup::PickupOut,
    },
};

/// Arguments of `list_negotiations`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListArgs {
    /// `waiting_for_agent` (the user's turns), `active`, `completed` or `all` (the default).
    pub status: Option<String>,
    /// `true`: only the negotiations in which you answered at least one turn.
    pub answered: Option<bool>,
}

/// Arguments of `get_negotiation`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetArgs {
    /// The negotiation id (from `list_negotiations` or `pickup_negotiation`).
    pub negotiation_id: String,
}

/// Roles from the responding user's point of view.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolesArg {
    /// Your own user's role: `agent` (provides), `patient` (receives) or `peer`.
    pub own_user: String,
    /// The other user's role: `agent`, `patient` or `peer`.
    pub other_user: String,
}

/// Arguments of `respond_to_negotiation`. Index Network's earlier tool took only
/// `{negotiationId, action, message}`; those calls work unchanged: the reasoning is then taken
/// from the message and both roles default to `peer`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RespondArgs {
    /// The `negotiationId` from `pickup_negotiation`.
    pub negotiation_id: String,
    /// `propose` (turn 0 only), `counter`, `question`, `accept` or `reject`; or `ask_person` to
    /// ask your own person first (with `question` and optional `options`).
    pub action: String,
    /// Why you chose this action (at most 10 000 characters); private to your side, the other
    /// side never sees it. May be empty; when omitted, the message is stored as the reasoning.
    pub reasoning: Option<String>,
    /// The roles you suggest; when omitted, both are `peer`.
    pub suggested_roles: Option<RolesArg>,
    /// Text for the other side (at most 10 000 characters); optional for every action, as over
    /// HTTP. The other side weighs only what a message says.
    pub message: Option<String>,
    /// The `claimToken` from `pickup_negotiation`; strongly recommended (a stale claim is refused).
    pub claim_token: Option<String>,
    /// `ask_person` only: what to ask your person (1 to 500 characters); the other side never
    /// reads it.
    pub question: Option<String>,
    /// `ask_person` only: up to 5 short answers offered as buttons; the person may always answer
    /// in their own words.
    pub options: Option<Vec<String>>,
}

/// The pickup answer over MCP: the HTTP route's body with `pickedUp: true`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct PickedUp {
    #[serde(flatten)]
    pickup: PickupOut,
    picked_up: bool,
}

/// The pickup answer over MCP when no turn is waiting (HTTP answers 204).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct NothingWaiting {
    picked_up: bool,
    message: &'static str,
}

#[tool_router(router = turn_tools, vis = "pub(super)")]
impl ParleyMcp {
    /// The agent's user's negotiations, newest first.
    #[tool(description = "List your user's negotiations, newest first, each with isUsersTurn, latestAction, \
turnCount, answeredTurns and status. status: waiting_for_agent (turns waiting for you), active, completed or all \
(default); answered: true for only the negotiations you answered a turn in.")]
    async fn list_negotiations(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<ListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let agent = agent_of(&parts)?;
        let listing = match AgentListing::parse(args.status.as_deref(), args.answered, None, None) {
            Ok(listing) => listing,
            Err(e) => return Ok(api_error(e)),
        };
        Ok(match agent_negotiations(&self.state.engine, &agent, &listing).await {
            Ok(page) => structured(page),
            Err(e) => api_error(e),
        })
    }

    /// One negotiation from the agent's side.
    #[tool(description = "Show one negotiation from your user's side: both sides, every turn so far, \
the outcome once it ended, ownSide, isUsersTurn and latestAction.")]
    async fn get_negotiation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<GetArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let agent = agent_of(&parts)?;
        let id = match parse_id(&args.negotiation_id) {
            Ok(id) => id,
            Err(e) => return Ok(api_error(e)),
        };
        Ok(match agent_negotiation(&self.state.engine, &agent, id).await {
            Ok(view) => structured(view),
            Err(e) => api_error(e),
        })
    }

    /// Claims the next parked turn of the agent's user.
    #[tool(description = "Claim the next turn waiting for your user (or the one you already hold). Returns \
{pickedUp: true, negotiationId, claimToken, opportunity, turn: {number, deadline, counterpartyAction, \
isFinalTurn, maxTurns, history}, context: {ownUser, otherUser, indexContext, seedAssessment, isDiscoverer, \
discoveryQuery, previousRounds}}, or {pickedUp: false} when nothing is waiting. History shows the other side's \
action, message and suggested roles, and reasoning only for your own side's turns. previousRounds lists the \
earlier rounds of a reactivated opportunity ([{negotiationId, turns, outcome}], oldest first, the same privacy; \
[] in a first round). Answer it with respond_to_negotiation.")]
    async fn pickup_negotiation(&self, Extension(parts): Extension<Parts>) -> Result<CallToolResult, ErrorData> {
        let key = key_of(&parts)?;
        let claim = match self.state.engine.pickup(&key, &PickupQuery::default()).await {
            Ok(claim) => claim,
            Err(e) => return Ok(api_error(e.into())),
        };
        let Some(claim) = claim else {
            return Ok(structured(NothingWaiting { picked_up: false, message: "no turn is waiting for your user" }));
        };
        Ok(match PickupOut::of(&claim) {
            Ok(pickup) => structured(PickedUp { pickup, picked_up: true }),
            Err(e) => api_error(e),
        })
    }

    /// Answers the turn the agent holds.
    #[tool(description = "Answer the turn you picked up. action: propose (turn 0 only; turn 0 is propose or \
reject), counter, question, accept or reject. message (for the other side) is optional for every action, \
as over HTTP; say in it what is missing or what you ask. reasoning (private to your side) defaults to the \
message, suggestedRoles to peer/peer. Returns \
{success, negotiationId, turnNumber, status, opportunity, outcome?}: status waiting_for_agent means the \
negotiation goes on, completed that it ended. Unsure what your person wants? action ask_person with a \
question (and up to 5 options) asks them instead (at most 3 times per negotiation): status is then \
waiting_for_person, and your next pickup of this turn carries their answer in context.personAnswers \
(answer null if they did not answer in time).")]
    async fn respond_to_negotiation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<RespondArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = key_of(&parts)?;
        Ok(match self.respond(&key, args).await {
            Ok(responded) => structured(responded),
            Err(e) => api_error(e),
        })
    }
}

impl ParleyMcp {
    /// `respond_to_negotiation`: the tool's arguments as the engine's [`RespondCommand`], checked
    /// by its one rule set, as the HTTP body is.
    async fn respond(&self, key: &AgentKey, args: RespondArgs) -> Result<Responded, ApiError> {
        let id = parse_id(&args.negotiation_id)?;
        let suggested_roles = match &args.suggested_roles {
            None => None,
            Some(roles) => {
                Some(SuggestedRoles { own_user: role(roles, "ownUser")?, other_user: role(roles, "otherUser")? })
            }
        };
        // The tool's flat shape lets `reasoning` be left out, as Index Network's earlier tool had
        // none: the message is then kept as the reasoning. Everything else is the command's.
        let reasoning = args
            .reasoning
            .filter(|r| !r.trim().is_empty())
            .or_else(|| args.message.clone().filter(|m| !m.trim().is_empty()))
            .unwrap_or_default();
        let command = RespondCommand {
            claim_token: args.claim_token,
            action: args.action,
            message: args.message,
            reasoning,
            suggested_roles,
            question: args.question,
            options: args.options,
        };
        let answer = command.check()?;
        Ok(self.state.engine.respond_checked(key, id, &answer).await?)
    }
}

/// One of the suggested roles, named as the tool names it.
fn role(roles: &RolesArg, field: &str) -> Result<Role, ApiError> {
    let value = if field == "ownUser" { &roles.own_user } else { &roles.other_user };
    Role::parse(value).ok_or_else(|| {
        ApiError::invalid(format!(
            "suggestedRoles.{field} must be agent, patient or peer, not {}",
            crate::quote::quote(value)
        ))
    })
}
