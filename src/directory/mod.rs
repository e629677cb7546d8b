//! The agent directory: what agents offer to do for others, how others find them, and how far
//! they can be trusted.
//!
//! - [`capabilities`]: an agent's capabilities (a kind of work, the JSON Schemas of its input
//!   and output, estimates) and their permissions, validated here once, at registration;
//! - [`anonymity`]: the anonymous ids under which other parties see an agent, random, valid for
//!   a configured time (24 h by default) and replaced lazily on first use after that; every id
//!   ever issued still resolves, so old records keep pointing at their agent;
//! - [`trust`]: an agent's trust as the one doing the work, read from per-agent daily counters
//!   that the transactions ending its claims write (a database trigger on the task row), so
//!   that scoring every agent is one query over small rows, never a replay of history;
//! - [`discovery`]: the ranked search over enabled capabilities of a kind;
//! - [`index`]: those capabilities held in process per kind, with a database version that
//!   tells, in one tiny read, whether what the process holds is still current;
//! - [`delegation`]: handing work to another agent through the directory: attempts, the
//!   target's inbox, timeouts and fallback (it owns its transactions, see its docs);
//! - [`schema`]: the capabilities' JSON Schemas: bounded at registration, compiled once,
//!   checked off the async workers with a time cap;
//! - [`ranking`]: every discoverable capability assessed against one task by the capability
//!   calculator, with its agent's live queue depth, ranked by score and trust;
//! - [`upkeep`]: housekeeping's share of the directory (the trust windows' daily move, expired
//!   anonymous ids replaced), in batches, never on a request's time.
//!
//! Like `store`, every function takes a `&mut PgConnection` and never commits, so callers
//! compose them in one transaction (but for the delegations' service, which owns its
//! transactions, and the batched upkeep). The directory knows nothing of the turn engine
//! (`crate::delivery`): what the two share is `crate::runtime`. Nothing here shows an agent's
//! id or owner to anyone but the agent and its owner: the discovery rows carry only the
//! anonymous id.

pub mod anonymity;
pub mod capabilities;
pub mod delegation;
pub mod discovery;
pub mod index;
pub mod ranking;
pub mod schema;
pub mod trust;
pub mod upkeep;

pub use capabilities::{CapabilityError, PermissionsPatch};
