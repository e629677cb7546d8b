//! The delegations service: what one process keeps for delegations, and the handle every
//! delegation call goes through (HTTP, MCP, the timer dispatcher).
//!
//! [`Delegations`] owns its own state: the attempts it accepted and the delegations it ended
//! lately ([`super::recent`]), the schema checker with its threads and its cache, and the
//! limiter of requesters whose inputs keep being refused. What it shares with the turn engine
//! (the pool, the configuration, the long-poll wake-ups, the seen-throttle, the key that claim
//! tokens and capability handles are derived from) is the [`Runtime`] it is built over. Its
//! operations live beside it, one file per concern: [`super::delegate`] (a new delegation),
//! [`super::offer`] (offering an attempt to a target), [`super::accept`] (the target's accept and
//! complete), [`super::flow`] (every other end of an attempt, and what follows it),
//! [`super::reads`] (reads and long-polls); [`super::screen`] and [`super::targets`] choose the
//! targets.

use std::sync::Arc;

use sqlx::PgPool;
use uuid::Uuid;

use super::{recent::RecentDelegations, store};
use crate::{
    config::Config,
    directory::{
        anonymity::AnonymousId,
        schema::{Checker, CheckerConfig},
    },
    failure_limiter::FailureLimiter,
    runtime::Runtime,
};

/// The delegations of one process (see the module docs). Cheap to clone: clones share the state.
#[derive(Clone)]
pub struct Delegations {
    /// What it shares with the turn engine.
    pub(crate) runtime: Runtime,
    /// Attempts accepted and delegations ended lately, for the calls that follow them.
    pub(crate) recent: Arc<RecentDelegations>,
    /// JSON Schema compiles and checks, on a pool of their own.
    pub(crate) schemas: Checker,
    /// Delegations refused for an input the target's schema rejects, per requesting agent.
    pub(crate) input_failures: Arc<FailureLimiter<Uuid>>,
}

impl Delegations {
    /// The delegations over `runtime`, with the schema checker and the limiter its
    /// configuration asks for.
    pub fn new(runtime: Runtime) -> Delegations {
        let config = runtime.config.clone();
        Delegations {
            runtime,
            recent: Arc::default(),
            schemas: Checker::new(CheckerConfig {
                threads: config.schema_check_threads as usize,
                timeout: config.schema_check_timeout,
                budget: config.schema_check_budget,
                cache_bytes: (config.schema_cache_mib as usize) << 20,
            }),
            input_failures: Arc::new(FailureLimiter::new(config.input_failure_burst, config.input_failure_refill)),
        }
    }

    /// The pool the delegations write through.
    pub fn pool(&self) -> &PgPool {
        &self.runtime.pool
    }

    /// The configuration the delegations run with.
    pub fn config(&self) -> &Config {
        &self.runtime.config
    }

    /// Where schemas are compiled and checked (a capability's, at registration, too).
    pub fn schemas(&self) -> &Checker {
        &self.schemas
    }

    /// The handle under which others see capability `capability_id` of the agent now known as
    /// `anonymous_id` (see `crate::runtime::TokenKey::capability_handle`).
    pub fn capability_handle(&self, anonymous_id: AnonymousId, capability_id: Uuid) -> Uuid {
        self.runtime.tokens.capability_handle(anonymous_id.0, capability_id)
    }

    /// After a commit: wakes the waiters of the delegation and the inboxes of `targets` (this
    /// process's at once, the others' through the wake-up sender), and pokes the event log's
    /// reader for the `delegation.status` events.
    pub(super) fn wake_delegation(&self, delegation_id: Uuid, targets: &[Uuid]) {
        self.runtime.wakeups.announce(&store::delegation_key(delegation_id));
        for t in targets {
            self.runtime.wakeups.announce(&store::inbox_key(*t));
        }
        self.runtime.wakeups.events_written();
    }
}
