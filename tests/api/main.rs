//! Integration tests: the real router over HTTP, against a real PostgreSQL, one database per test.

mod a2a;
mod agents;
mod delivery;
mod assessment;
mod auth;
mod fixtures;
mod helpers;
mod mcp;
mod negotiations;
mod openapi;
mod ui;
