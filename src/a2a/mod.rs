//! Parley as an A2A server: any A2A client delegates work through the directory.
//!
//! A2A is the protocol agent frameworks speak to one another. Parley serves it beside its own
//! routes, as a third adapter over the same services as HTTP and MCP: the requester's agent key
//! is the bearer credential, a message's data part is the body of a delegation, and the A2A task
//! is the delegation (its state from the delegation's open or last attempt).
//!
//! - `GET /.well-known/agent-card.json` (and the older `/.well-known/agent.json`): the card
//!   ([`card`]), public, with an ETag.
//! - `POST /a2a`: JSON-RPC 2.0 ([`rpc`] reads the envelope and the version, [`methods`] runs
//!   each method). One endpoint serves A2A 1.0 (`SendMessage`, `GetTask`, ...) and 0.3
//!   (`message/send`, `tasks/get`, ...), told apart by the method's name; the answer is written
//!   in the caller's version (`crate::wire::a2a_render`). Streaming sends and subscriptions answer
//!   Server-Sent Events ([`stream`]) fed by the event log's `delegation.status` events: no
//!   polling loop and no database connection per open stream. Push notification
//!   configurations ([`push_config`]) have the outbox POST a task's updates to the requester.
//!
//! - `/a2a/rest/...`: the same methods over the HTTP+JSON binding ([`rest`]).
//! - A send whose message is not a delegate body (plain text, files, data of the client's own
//!   shape) is routed to one agent's skill and forwarded there ([`route`]; the two versions'
//!   shapes rewritten by [`convert`] when requester and target differ).
//!
//! What the adapter owns is the translation: the message into a delegation request
//! ([`send`]), the delegation into an A2A task (`crate::wire::delegation_task`, which
//! `GET /api/tasks/{id}` renders too), Parley's refusals into JSON-RPC
//! errors ([`rpc::RpcError`]). The rules stay in the services: the delegation is made, read and
//! canceled by `crate::directory::delegation::Delegations`, the key judged by
//! `crate::auth::authenticate`. It imports neither the HTTP nor the MCP adapter.

pub mod card;
pub mod convert;
pub mod methods;
pub mod push_config;
pub mod rest;
pub mod route;
pub mod rpc;
pub mod send;
pub mod stream;

use std::sync::Arc;

use axum::{
    Router,
    routing::{get, post},
};

use crate::{
    auth::JwtKeys, delivery::Engine, directory::delegation::Delegations, live::EventHub, wire::streams::StreamLimits,
};

/// Where the JSON-RPC endpoint is mounted.
pub const PATH: &str = "/a2a";
/// Where the agent card is served.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
/// Where A2A 0.3 clients look for the card.
pub const LEGACY_CARD_PATH: &str = "/.well-known/agent.json";

/// What the A2A endpoint works with.
#[derive(Clone)]
pub struct A2aState {
    /// The turn engine: the pool and configuration, and the key checks of `crate::auth`.
    pub engine: Engine,
    /// The delegations: every A2A task is one.
    pub delegations: Delegations,
    /// The keys of the JWTs (the endpoint takes agent keys only; `authenticate` needs them).
    pub jwt: Arc<JwtKeys>,
    /// Committed events: streams follow a delegation's `delegation.status` events.
    pub events: Arc<EventHub>,
    /// The A2A task streams open, per agent, per user and in all.
    pub streams: Arc<StreamLimits>,
    /// Turns true when the process starts shutting down: open streams end then.
    pub stopping: tokio::sync::watch::Receiver<bool>,
    /// The calls that forward routed messages to their targets.
    pub forwarder: route::Forwarder,
}

impl A2aState {
    /// Resolves once shutdown has begun.
    pub fn stopped(&self) -> impl std::future::Future<Output = ()> + Send + use<> {
        let mut rx = self.stopping.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    }
}

/// The card's two paths, the JSON-RPC endpoint (at `/a2a` and `/a2a/`) and the HTTP+JSON
/// binding under `/a2a/rest`, for any outer router.
pub fn router<S: Clone + Send + Sync + 'static>(state: A2aState) -> Router<S> {
    Router::<A2aState>::new()
        .route(CARD_PATH, get(card::get_card))
        .route(LEGACY_CARD_PATH, get(card::get_card_v03))
        .route(PATH, post(methods::handle))
        .route("/a2a/", post(methods::handle))
        .route(&format!("{}/{{*path}}", rest::PATH), get(rest::handle).post(rest::handle).delete(rest::handle))
        .with_state(state)
}
