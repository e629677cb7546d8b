//! Integration tests: the real router over HTTP, against a real PostgreSQL, one database per test.

mod a2a;
mod agents;
mod authz;
mod claims;
mod cli;
mod delegation;
mod delivery;
mod directory;
mod assessment;
mod auth;
mod fixtures;
mod hardening;
mod helpers;
mod index_compat;
mod insights;
mod liveness;
mod mcp;
mod metrics;
mod negotiations;
mod nul;
mod openapi;
mod privacy;
mod rank;
mod schema;
mod timers;
mod ui;
