//! OpenAPI pieces that many operations share: the id parameters of paths under an agent, and the
//! refusals each kind of credential gives.
//!
//! A handler's `#[utoipa::path]` names these unit types (`params(AgentPath)`, `responses(..,
//! OwnAgentKey)`, declared by the `uuid_path_params!` and `refusals!` macros) instead of restating
//! them, so that a refusal reads the same on every operation that gives it and a wording is
//! changed in one place. What is particular to one operation (its 400, 404 and 409 cases) stays
//! in its own annotation.

use utoipa::{
    IntoParams,
    openapi::{
        Required,
        path::{Parameter, ParameterBuilder, ParameterIn},
        schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type},
    },
};

/// A UUID path parameter.
fn uuid_in_path(name: &str, description: &str) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .description(Some(description))
        .required(Required::True)
        .schema(Some(
            ObjectBuilder::new().schema_type(Type::String).format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid))),
        ))
        .build()
}

/// Declares unit types whose [`IntoParams`] are the named UUID path parameters, in order.
macro_rules! uuid_path_params {
    ($($(#[$doc:meta])* $name:ident { $($param:literal: $description:literal),+ $(,)? })*) => {$(
        $(#[$doc])*
        pub struct $name;

        impl IntoParams for $name {
            fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
                vec![$(uuid_in_path($param, $description)),+]
            }
        }
    )*};
}

uuid_path_params! {
    /// `/api/agents/{id}`.
    AgentPath { "id": "The agent id" }
    /// `/api/agents/{id}/delegations/{requestId}`.
    AgentDelegationPath { "id": "The agent id", "requestId": "The delegation's request id" }
    /// `/api/agents/{id}/negotiations/{negotiationId}`.
    AgentNegotiationPath { "id": "The agent id", "negotiationId": "The negotiation id" }
    /// `/api/agents/{id}/capabilities/{capabilityId}`.
    AgentCapabilityPath { "id": "The agent id", "capabilityId": "The capability id" }
    /// `/api/agents/{id}/keys/{keyId}`.
    AgentKeyPath { "id": "The agent id", "keyId": "The key id" }
    /// `/api/opportunities/{id}`.
    OpportunityPath { "id": "The opportunity id" }
    /// `/api/negotiations/{id}`.
    NegotiationPath { "id": "The negotiation id" }
    /// `/api/negotiations/{id}/questions/{questionId}/...`.
    QuestionPath { "id": "The negotiation id", "questionId": "The question id (`pendingQuestion.id`)" }
    /// `/api/webhooks/{id}`.
    WebhookPath { "id": "The webhook id" }
}

/// Declares unit types whose [`utoipa::IntoResponses`] are the named refusals: a status and its
/// description each, without a body (the error body is the document's shared one).
macro_rules! refusals {
    ($($(#[$doc:meta])* $vis:vis $name:ident { $($status:literal: $description:literal),+ $(,)? })*) => {$(
        $(#[$doc])*
        $vis struct $name;

        impl utoipa::IntoResponses for $name {
            fn responses() -> std::collections::BTreeMap<
                String,
                utoipa::openapi::RefOr<utoipa::openapi::response::Response>,
            > {
                [$(($status.to_string(), utoipa::openapi::ResponseBuilder::new().description($description).build().into())),+]
                    .into_iter()
                    .collect()
            }
        }
    )*};
}
pub(crate) use refusals;

refusals! {
    /// Refusals of a route only the agent in its path may call, with its own API key.
    pub OwnAgentKey {
        401: "Missing, unknown, revoked or expired API key",
        403: "Another agent's key, or the agent is inactive",
    }
    /// The refusal of a route the agent in its path reads with its own key, or its owner with a
    /// user token (another user's agent is a 404, as an unknown one is).
    pub AgentOrItsOwner { 403: "Another agent's key, or the agent is inactive" }
    /// The refusal of a route that changes an agent's directory entries: its own key or its
    /// owner's user token (another user's agent is a 404, as an unknown one is).
    pub AgentManagers {
        403: "Another agent's key, the agent is inactive, or the platform's token (it may not manage agents)",
    }
    /// The refusals of a route on an agent's outbound settings: its owner's user token or the
    /// platform's (another user's agent is a 404, as an unknown one is).
    pub OwnerOrPlatform { 401: "Missing or bad token; an agent's API key is not taken here" }
    /// The refusal of a route for users only.
    pub UsersOnly { 403: "Not a user token" }
    /// Refusals of a route on one of the calling user's agents.
    pub UsersOwnAgent {
        403: "Not a user token",
        404: "Unknown agent, or not the caller's",
    }
    /// The refusal of a route for the platform only.
    pub PlatformOnly { 403: "Not a service token" }
}
