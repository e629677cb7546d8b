//! Placeholder until the requester's cancel lands (deleted at merge).

use uuid::Uuid;

use super::{DelegationError, Record, service::Delegations};
use crate::runtime::AgentKey;

impl Delegations {
    /// The requester's cancel.
    pub async fn cancel(&self, _key: &AgentKey, _request_id: Uuid) -> Result<Record, DelegationError> {
        Err(DelegationError::Unexpected(anyhow::anyhow!("cancel is not built yet")))
    }
}
