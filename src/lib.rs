//! Parley: bilateral agent negotiation with polling turn delivery.
//!
//! A matching platform hands Parley a proposed match between two people; two agents, one per
//! person, argue it out turn by turn; the result decides whether the match becomes a visible
//! opportunity. See `README.md` for running it, `ARCHITECTURE.md` for how the code is laid out
//! and why, and each module's docs for the details.

pub mod a2a;
pub mod a2a_client;
pub mod agent;
pub mod app;
pub mod auth;
pub mod cli;
pub mod config;
pub mod db;
pub mod delivery;
pub mod directory;
pub mod domain;
pub mod embeddings;
pub mod error_code;
pub mod failure_limiter;
pub mod http;
pub mod live;
pub mod llm;
pub mod mcp;
pub mod metrics;
pub mod negotiator;
pub mod openapi;
pub mod quote;
pub mod runtime;
pub mod scoring;
pub mod services;
pub mod store;
pub mod telemetry;
pub mod wire;
