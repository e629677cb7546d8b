//! Parley as an A2A client: what it needs to call agents that never poll, on their own
//! endpoints.
//!
//! - [`guard`]: which addresses may be called (the SSRF rule) and the HTTP client that applies it
//!   on every connection and redirect; every outbound call to an agent is made with a client
//!   from [`guard::client_builder`], its URL passed through [`guard::check_url`] first.
//! - [`card`]: an AgentCard fetched within bounds, checked, and the interface chosen on it
//!   (URL, protocol version, [`card::Dialect`]).
//! - [`credential`]: what Parley presents to the agent's endpoint ([`credential::A2aAuth`]).
//! - [`call`]: the three calls Parley makes (send, read, cancel) in each dialect's words, and
//!   what an agent answers read back as one [`call::RemoteTask`].
//! - [`outbound`]: making those calls within bounds (places per agent and in all, a timeout,
//!   an answer's size), the guard applied again at call time.
//!
//! This module knows no storage and no service: it is below the HTTP adapter (which registers
//! agents by card) and below `crate::a2a_push`, which pushes work to those agents.

pub mod call;
pub mod card;
pub mod credential;
pub mod guard;
pub mod outbound;

#[cfg(test)]
mod tests;
