//! Who a call speaks for: the API key an agent presents ([`AgentKey`], stored and compared only
//! as its SHA-256, [`hash_secret`]) and the agent it was found to be ([`AgentIdentity`]), or why
//! it may not call ([`KeyRefused`]). The verdict is SQL's, `parley_agent_of_key` (see
//! `store::agents`): the turn and delegation statements ask it in place, every other caller
//! through `store::agents::key_verdict`, and all read its answer (`KeyCheck`) here, so a key is
//! refused in the same words whichever route it called.

use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::store::turn_delivery::KeyCheck;

/// The agent making a call, as its API key identified it.
#[derive(Debug, Clone)]
pub struct AgentIdentity {
    /// The agent.
    pub agent_id: Uuid,
    /// The user it speaks for.
    pub owner_user_id: String,
}

/// What an agent presents on a call: its API key, and the agent it must be.
#[derive(Debug, Clone)]
pub struct AgentKey {
    /// SHA-256 of the API key.
    pub key_hash: Vec<u8>,
    /// The agent of the path; `None` for whichever agent the key is of (MCP).
    pub agent_id: Option<Uuid>,
}

impl AgentKey {
    /// The key as presented, for the agent of the path (if any).
    pub fn new(key: &str, agent_id: Option<Uuid>) -> AgentKey {
        AgentKey { key_hash: hash_secret(key), agent_id }
    }
}

/// SHA-256 of a secret (API key or claim token): what the database stores.
pub fn hash_secret(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// Why a key may not make a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyRefused {
    /// The key is unknown, revoked or expired (401).
    #[error("the API key is unknown, revoked or expired")]
    Unauthorized,
    /// The key is valid but may not do this: another agent's path, an inactive agent (403).
    #[error("{0}")]
    Forbidden(&'static str),
}

impl KeyCheck {
    /// The agent the key speaks for, or why it may not.
    pub(crate) fn identity(self) -> Result<AgentIdentity, KeyRefused> {
        match self {
            KeyCheck::Ok { agent_id, owner_user_id } => Ok(AgentIdentity { agent_id, owner_user_id }),
            KeyCheck::UnknownKey => Err(KeyRefused::Unauthorized),
            KeyCheck::OtherAgent => Err(KeyRefused::Forbidden("this API key belongs to another agent")),
            KeyCheck::Inactive => Err(KeyRefused::Forbidden("the agent is inactive")),
        }
    }
}
