//! SQL, one module per aggregate. Every function takes a `&mut PgConnection` so callers compose
//! them inside one transaction; none of them commits. Fixed statements are checked at compile time
//! against the schema (`.sqlx/` holds the offline data), the SQL functions' calls included; only
//! the insights, rollups and retention statements, assembled from shared SQL text, are not.
//! Stored vocabularies decode as enums, and a word none of theirs fails the read.

pub mod agent_cards;
pub mod agents;
pub mod conversations;
pub mod decisions;
pub mod events;
pub mod insight_rollups;
pub mod insights;
pub mod messages;
pub mod opportunities;
pub mod outbox;
pub mod person_questions;
pub mod push_configs;
pub mod retention;
pub mod skills;
#[cfg(test)]
pub(crate) mod sql_source;
pub mod tasks;
pub(crate) mod text_types;
pub mod turn_delivery;
pub mod webhooks;

use thiserror::Error;

/// A stored value that does not parse into its domain type: the database holds something the
/// schema's CHECKs should have refused. Reported as an internal error.
#[derive(Debug, Error)]
#[error("corrupt {what} in the database: {value:?}")]
pub struct CorruptRow {
    /// Which column.
    pub what: &'static str,
    /// What it held.
    pub value: String,
}

/// A duration as a PostgreSQL interval.
pub(crate) fn interval(d: std::time::Duration) -> anyhow::Result<sqlx::postgres::types::PgInterval> {
    sqlx::postgres::types::PgInterval::try_from(d).map_err(|e| anyhow::anyhow!("interval {d:?}: {e}"))
}

/// Parses a stored enum value with `parse`, or reports a [`CorruptRow`].
pub(crate) fn parse_enum<T>(
    what: &'static str,
    value: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<T, CorruptRow> {
    parse(value).ok_or_else(|| CorruptRow { what, value: value.to_owned() })
}
