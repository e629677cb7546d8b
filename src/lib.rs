//! Parley: bilateral agent negotiation with polling turn delivery.
//!
//! A matching platform hands Parley a proposed match between two people; two agents, one per
//! person, argue it out turn by turn; the result decides whether the match becomes a visible
//! opportunity. See `README.md` for running it, `ARCHITECTURE.md` for how the code is laid out
//! and why, and each module's docs for the details.
//!
//! # The public surface
//!
//! The library is crate-private by default: every module below is private, so that the compiler
//! reports what nothing uses. What the binaries (`parley`, `parley-bench`) and the integration
//! tests (`tests/`) use is re-exported at the end of this file, and only that: the service as
//! `parley serve` builds and runs it, its configuration and credentials, the database's creation,
//! the OpenAPI document, and a few parts below the HTTP API that a test or a measurement drives
//! directly (each facade module says why). A facade module is named after the module whose items
//! it re-exports and holds nothing but `pub use` lines; `tests/module_graph.rs`
//! (`the_library_is_private_but_for_its_facade`) keeps it so.

mod a2a;
mod a2a_client;
mod a2a_push;
mod agent;
mod app;
mod auth;
mod bounded_body;
mod cli;
mod config;
mod db;
mod delivery;
mod directory;
mod domain;
mod embeddings;
mod error_code;
mod failure_limiter;
mod http;
mod lexicon;
mod live;
mod llm;
mod mcp;
mod metrics;
mod negotiator;
mod openapi;
mod outbox;
mod quote;
mod runtime;
mod scoring;
mod services;
mod store;
mod telemetry;
mod wire;

// The service: the `parley` binary's command line, the service as `parley serve` builds and runs
// it (the tests and the benchmark start it the same way), its configuration, the state its
// handlers share, and the credentials callers present.
pub use app::{Application, hub_skills, router};
pub use auth::{CallerRole, Claims, JwtKeys, MISSING_KEY};
pub use cli::{Cli, run};
pub use config::{Config, EmbeddingsConfig, LogFormat, NegotiatorModelConfig, WebhookConfig};
pub use http::{AppState, extract::BODY_LIMIT, serve::ConnectionLimits, serve::serve};
pub use metrics::install as install_metrics;
pub use openapi::{spec as openapi_spec, spec_text as openapi_spec_text};
pub use runtime::hash_secret;
pub use telemetry::init as init_logging;

/// Where the database comes from, its creation and migration: the tests and the benchmark start
/// and migrate their own databases, as `parley migrate` does.
pub mod database {
    pub use crate::db::{EmbeddedPostgres, MIGRATOR, create_database_if_missing, migrate, pool};

    /// The SQL functions' files, which tests compare with what a migrated database holds.
    pub mod definitions {
        pub use crate::db::definitions::{DEFINITIONS, apply};
    }
}

/// The wake-ups' channel and payload, which the benchmark listens to, and the recheck interval a
/// lost wake-up costs at most, which a test measures.
pub mod wakeups {
    pub use crate::runtime::wakeups::{RECHECK, WAKE_CHANNEL, WakePayload};
}

/// The capability calculator, measured in process by the benchmark; the default skill, which a
/// test hands `parley assess`.
pub mod assessment {
    pub use crate::scoring::{Calculator, assessment_json, default_skill, parse_request};
}

/// Ranking's steps one by one, measured in process by the benchmark.
pub mod ranking {
    pub use crate::directory::ranking::{RankQuery, candidates, rank};
}

/// The schema checker, whose memory a test measures.
pub mod schema {
    pub use crate::directory::schema::{Checker, CheckerConfig, Prepared};
}

/// Anonymous ids and their resolution, which a test checks across a rotation.
pub mod anonymity {
    pub use crate::directory::anonymity::{AnonymousId, resolve};
}

/// The kinds of work, whose list a test compares with the OpenAPI document's.
pub mod capabilities {
    pub use crate::directory::capabilities::TaskType;
}

/// An attempt's statuses, which a test reads back from the database.
pub mod delegation {
    pub use crate::directory::delegation::Status;
}

/// The event log's pages, which a test reads directly; its kinds, which a test compares with
/// the event table's.
pub mod events {
    pub use crate::store::events::{EventKind, KINDS, after};
}

/// The directory's upkeep, one of housekeeping's passes, run by a test before its schedule.
pub mod upkeep {
    pub use crate::directory::upkeep::{Upkeep, run};
}

/// The insights rollups' fold and backfill, run by a test before their schedule.
pub mod insight_rollups {
    pub use crate::store::insight_rollups::{Backfill, backfill_step, fold};
}

/// The retention pruning, run by tests and the benchmark before its schedule.
pub mod retention {
    pub use crate::store::retention::prune;
}
