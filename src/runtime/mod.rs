//! What the turn engine ([`crate::delivery`]) and the delegations
//! ([`crate::directory::delegation`]) share in one process, below both so that neither imports
//! the other: the pool and the configuration, the long-poll wake-ups ([`wakeups`]), the
//! throttled record of when each agent was last seen ([`liveness`]), who an API key speaks for
//! ([`identity`]), and the one secret that claim tokens and capability handles are derived from
//! ([`tokens`]).
//!
//! A [`Runtime`] is built once per process (`Application::build_services`) and cloned into each
//! service; its clones share the same wake-ups, throttle and key. It holds no rules of either
//! service: a turn's and a delegation's state changes stay in their own modules.

pub mod identity;
pub mod liveness;
pub mod tokens;
pub mod wakeups;

use std::sync::Arc;

use sqlx::PgPool;

pub use identity::{AgentIdentity, AgentKey, KeyRefused, hash_secret};
pub use tokens::{ClaimProof, TokenKey};
pub use wakeups::Wakeups;

use crate::config::Config;

/// The pieces the services of one process share (see the module docs).
#[derive(Clone)]
pub struct Runtime {
    pub(crate) pool: PgPool,
    pub(crate) config: Arc<Config>,
    /// Secret that claim tokens and capability handles are derived from.
    pub(crate) tokens: Arc<TokenKey>,
    /// Long-polls waiting in this process.
    pub(crate) wakeups: Arc<Wakeups>,
    /// When this process last wrote each agent's `last_seen_at`.
    pub(crate) seen_throttle: Arc<liveness::SeenThrottle>,
}

impl Runtime {
    /// A runtime over `pool`.
    ///
    /// `token_secret` is the secret claim tokens and capability handles are derived from; keep
    /// it stable across restarts (it is derived from the JWT secret) so that a retried pickup
    /// returns the same token and a capability keeps its handle.
    pub fn new(pool: PgPool, config: Arc<Config>, token_secret: &[u8]) -> Runtime {
        Runtime {
            pool,
            config,
            tokens: Arc::new(TokenKey::new(token_secret)),
            wakeups: Arc::new(Wakeups::default()),
            seen_throttle: Arc::default(),
        }
    }

    /// The pool the services write through.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The configuration the services run with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The registry of waiting long-polls (its listener is started by the application).
    pub fn wakeups(&self) -> &Arc<Wakeups> {
        &self.wakeups
    }

    /// The hash of the API key Parley holds for agent `agent_id`, an agent it calls over A2A
    /// (see [`TokenKey::push_key`]): stored with the agent's keys when its card is, and what
    /// Parley takes its turns with.
    pub fn push_key_hash(&self, agent_id: uuid::Uuid) -> Vec<u8> {
        identity::hash_secret(&self.tokens.push_key(agent_id))
    }
}
