//! The directory's upkeep, run by housekeeping and never by a request: the trust records of an
//! earlier UTC day recomputed for the windows of today ([`super::trust::roll`]), and the expired
//! anonymous ids of the agents others may discover replaced
//! ([`super::anonymity::refresh_all_expired`]), each in batches of a few hundred agents (one
//! transaction each), so that discovery and delegation never do this work on a request's time.

use std::time::Duration;

use sqlx::PgPool;

use super::{anonymity, trust};

/// Agents per transaction in the directory's upkeep.
const UPKEEP_BATCH: i64 = 500;

/// What one [`run`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Upkeep {
    /// Trust records recomputed because they were computed on an earlier UTC day.
    pub trust_rolled: u64,
    /// Expired anonymous ids replaced.
    pub anonymous_ids_replaced: u64,
}

/// Runs the directory's upkeep once; `anonymous_id_ttl` is how long a new anonymous id is valid
/// (`PARLEY_ANONYMOUS_ID_TTL`).
pub async fn run(pool: &PgPool, anonymous_id_ttl: Duration) -> sqlx::Result<Upkeep> {
    let trust_rolled = trust::roll(pool, UPKEEP_BATCH).await?;
    let anonymous_ids_replaced = anonymity::refresh_all_expired(pool, anonymous_id_ttl, UPKEEP_BATCH).await?;
    if trust_rolled > 0 || anonymous_ids_replaced > 0 {
        tracing::info!(
            trust.rolled = trust_rolled,
            anonymous_ids.replaced = anonymous_ids_replaced,
            "directory upkeep"
        );
    }
    Ok(Upkeep { trust_rolled, anonymous_ids_replaced })
}
