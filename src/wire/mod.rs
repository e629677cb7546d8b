//! What both adapters (HTTP and MCP) speak: the one error type and body, the NUL-text check,
//! the body limit and body reading, a listing's page, and the shapes both render (negotiation
//! views, the views an agent reads of its turns, the pickup answer, discovery and ranking answers,
//! delegation answers, the A2A task and context).
//!
//! It sits beneath the HTTP and MCP modules and imports neither, so that each adapter
//! parses its own input into the services' typed commands, calls the service, and renders with
//! these shapes, without building on the other. The services (`crate::delivery`,
//! `crate::directory`) do not import it: their errors convert into [`error::ApiError`] here.

pub mod a2a;
pub mod a2a_render;
pub mod agent_views;
pub mod body;
pub mod body_deadline;
pub mod delegation_task;
pub mod delegations;
pub mod directory;
pub mod error;
pub mod input;
pub mod page;
pub mod pickup;
pub mod streams;
pub mod views;
