//! Trust: an agent's record as the one doing the work.
//!
//! - `healthComponent`: the mean, over the last 30 days that had any, of each day's share of
//!   the turns the agent claimed that it answered before the claim expired, times 100; 50 with
//!   none. A claim it gave back (release) counts neither way.
//! - `delegationComponent`: the share of finished delegations addressed to it that it
//!   completed; 50 until it has any.
//! - `rawScore` = 0.6 * health + 0.4 * delegation, to 2 decimals.
//! - `percentile`: round(100 * agents with a strictly lower rawScore / (N - 1)) over the N
//!   agents with a capability or a record in the last 90 days (and the agent asked about); 100
//!   when N <= 1.
//! - `provisional` while the agent has fewer than [`PROVISIONAL_BELOW`] events (claims answered
//!   or expired in the last 90 days).
//!
//! The numbers come from the per-agent daily counters (`agent_trust_days`) in one SQL function,
//! `parley_trust_scores`, which discovery joins too.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// Fewer events than this and a score is provisional.
pub const PROVISIONAL_BELOW: i64 = 10;

/// An agent's trust.
#[derive(Debug, Clone, PartialEq)]
pub struct Trust {
    /// The agent.
    pub agent_id: Uuid,
    /// 0-100, 2 decimals.
    pub health_component: f64,
    /// 0-100, 2 decimals.
    pub delegation_component: f64,
    /// 0.6 * health + 0.4 * delegation, 2 decimals.
    pub raw_score: f64,
    /// 0-100 among all agents.
    pub percentile: i32,
    /// Claims answered or expired in the last 90 days.
    pub events: i64,
    /// Delegations addressed to it that finished.
    pub total_delegations: i64,
    /// Of those, completed.
    pub successful_delegations: i64,
    /// When its record last changed, if ever.
    pub updated_at: Option<DateTime<Utc>>,
}

impl Trust {
    /// Whether the score rests on too few events to mean much.
    pub fn provisional(&self) -> bool {
        self.events < PROVISIONAL_BELOW
    }
}

/// The trust of one agent (ranked among all agents).
pub async fn of(conn: &mut PgConnection, agent_id: Uuid) -> sqlx::Result<Trust> {
    sqlx::query_as!(
        Trust,
        r#"SELECT agent_id AS "agent_id!", health::float8 AS "health_component!",
                  delegation::float8 AS "delegation_component!", raw::float8 AS "raw_score!",
                  percentile AS "percentile!", events AS "events!", 0::bigint AS "total_delegations!",
                  0::bigint AS "successful_delegations!", updated_at
           FROM parley_trust_scores($1) WHERE agent_id = $1"#,
        agent_id
    )
    .fetch_one(conn)
    .await
}
