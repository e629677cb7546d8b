//! The directory index: the discoverable capabilities of each kind of work, held in process so
//! that a discovery or a ranking reads one tiny row instead of ranking in SQL.
//!
//! A snapshot holds, per capability that discovery and ranking may show (enabled, of an active
//! agent), everything they filter and sort on: kind, cost, latency, schemas, its agent's current
//! anonymous id and when it expires, and the agent's trust percentile and whether it is
//! provisional. It is built by one query per key (a `taskType`, or every
//! kind for a ranking without one).
//!
//! Freshness: the database keeps a version (`directory_version`) that moves when any
//! transaction that changed capabilities, agents' status or owner, anonymous ids or what a
//! snapshot reads of a trust record (its raw score, or whether it is provisional) commits; a
//! claim's end that leaves both as they were does not move it, so responds do not contend on
//! the version row for nothing. Every request reads it first (one row) and uses its snapshot only when the
//! snapshot was built at that version, so an answer is exactly as fresh as a query would give:
//! a write is visible to the very next request. The version is read before the snapshot is
//! built, so a write committed in between only costs one more rebuild. A snapshot is also
//! rebuilt when one of its anonymous ids expired (housekeeping replaces expired ids in batches;
//! one that expired since it last ran is replaced first, see [`super::anonymity`]). The trust
//! windows' move at UTC midnight is housekeeping's too ([`super::trust::roll`]): the records it
//! rewrites move the version like any other write. Requests needing the same rebuild wait for
//! the first one (a lock per key). A request inside a transaction that already wrote sees rows nobody else sees yet:
//! it builds its own snapshot and keeps it to itself.
//!
//! Snapshots are kept per database (the version row's random `epoch` and the database's oid, as
//! databases cloned from one template share the epoch), so one process talking to several
//! databases never mixes them.

use std::{
    collections::HashMap,
    sync::{Arc, LazyLock, Mutex, OnceLock, PoisonError},
    time::Duration,
};

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{
    anonymity::{self, AnonymousId},
    capabilities::TaskType,
};
use crate::scoring::Calculator;

/// One discoverable capability, with what its agent's record says.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The agent's current anonymous id.
    pub anonymous_agent_id: AnonymousId,
    /// When that id expires.
    pub anonymous_expires_at: DateTime<Utc>,
    /// The capability.
    pub capability_id: Uuid,
    /// Its version (prepared calculators are kept per version).
    pub updated_at: DateTime<Utc>,
    /// Its kind of work.
    pub task_type: String,
    /// Set for `custom`.
    pub custom_type: Option<String>,
    /// Input JSON Schema.
    pub input_schema: Value,
    /// Output JSON Schema.
    pub output_schema: Value,
    /// Estimate, milliseconds.
    pub estimated_latency_ms: Option<i64>,
    /// Estimate, US dollars.
    pub estimated_cost_usd: Option<f64>,
    /// The agent's trust percentile.
    pub trust_score_percentile: i32,
    /// Whether its trust is still provisional.
    pub provisional: bool,
    /// The agent (never shown).
    pub agent_id: Uuid,
    /// The agent's owner (never shown): a delegation's candidates take at most a few of one
    /// owner's capabilities.
    pub owner_user_id: String,
    /// Whether the capability takes delegations.
    pub accept_delegations: bool,
}

/// The discoverable capabilities of one key, as of one version.
#[derive(Debug)]
pub struct Snapshot {
    /// The database version it was built at.
    version: i64,
    /// The earliest expiry of its anonymous ids.
    first_expiry: Option<DateTime<Utc>>,
    /// Its capabilities, in no particular order.
    pub entries: Vec<Entry>,
    /// Each entry's prepared calculator (same order; `None` for a capability deleted since),
    /// filled by the first ranking that reads this snapshot (see `super::ranking`).
    pub calculators: OnceLock<Vec<Option<Arc<Calculator>>>>,
}

impl Snapshot {
    fn usable(&self, version: i64, now: DateTime<Utc>) -> bool {
        self.version == version && self.first_expiry.is_none_or(|e| e > now)
    }
}

type Slot = Arc<tokio::sync::Mutex<Option<Arc<Snapshot>>>>;

/// The snapshots of one database, per key (`None`: every kind).
type Slots = HashMap<Option<TaskType>, Slot>;

/// At most this many databases are remembered (tests create one each); the oldest go first.
const DATABASES: usize = 64;

static INDEX: LazyLock<Mutex<Vec<(Database, Slots)>>> = LazyLock::new(|| Mutex::new(Vec::new()));

/// A database: its version row's epoch and its oid.
type Database = (Uuid, i64);

fn slot(db: Database, key: Option<TaskType>) -> Slot {
    let mut index = INDEX.lock().unwrap_or_else(PoisonError::into_inner);
    let pos = match index.iter().position(|(d, _)| *d == db) {
        Some(p) => p,
        None => {
            if index.len() >= DATABASES {
                index.remove(0);
            }
            index.push((db, HashMap::new()));
            index.len() - 1
        }
    };
    index[pos].1.entry(key).or_default().clone()
}

struct State {
    /// The database: its version row's epoch and its oid (a database cloned from a template
    /// shares the epoch, not the oid).
    epoch: Uuid,
    db: i64,
    n: i64,
    /// Whether this transaction has written nothing yet (its view is the committed state).
    clean: bool,
}

async fn state(conn: &mut PgConnection) -> sqlx::Result<State> {
    sqlx::query_as!(
        State,
        r#"SELECT v.epoch, d.oid::int8 AS "db!", v.n, pg_current_xact_id_if_assigned() IS NULL AS "clean!"
             FROM directory_version v, pg_database d WHERE d.datname = current_database()"#
    )
    .fetch_one(conn)
    .await
}

async fn clean(conn: &mut PgConnection) -> sqlx::Result<bool> {
    sqlx::query_scalar!(r#"SELECT pg_current_xact_id_if_assigned() IS NULL AS "clean!""#).fetch_one(conn).await
}

/// One query per key. Its cost follows the capabilities of the kind, never the population:
/// each capability's agent, current anonymous id and trust record are read by their keys (the
/// `OFFSET 0` keeps that subquery a lookup per capability: joined freely, the planner would hash
/// whole tables of agents and records for a few thousand capabilities), and the percentiles
/// come from the counts per score (`trust_score_ranks`, at most 10 001 rows), ranked once and
/// matched to the records by score.
async fn build(conn: &mut PgConnection, key: Option<TaskType>, version: i64) -> sqlx::Result<Snapshot> {
    let entries = sqlx::query_as!(
        Entry,
        r#"WITH ranks AS MATERIALIZED (
               SELECT raw, percentile FROM trust_score_ranks
           ), listed AS MATERIALIZED (
               SELECT x.anonymous_id, x.expires_at, c.capability_id, c.updated_at, c.task_type, c.custom_type,
                      c.input_schema, c.output_schema, c.estimated_latency_ms, c.estimated_cost_usd, x.raw,
                      x.provisional, c.agent_id, x.owner_user_id, c.accept_delegations
                 FROM capabilities c
                 CROSS JOIN LATERAL (
                     SELECT ai.anonymous_id, ai.expires_at, a.owner_user_id, t.raw, t.provisional
                       FROM agents a
                       JOIN anonymous_ids ai ON ai.agent_id = a.agent_id AND ai.current
                       JOIN trust_records t ON t.agent_id = a.agent_id
                      WHERE a.agent_id = c.agent_id AND a.status = 'active'
                     OFFSET 0) x
                WHERE c.enabled AND ($1::text IS NULL OR c.task_type = $1)
           )
           SELECT l.anonymous_id AS "anonymous_agent_id!: AnonymousId", l.expires_at AS "anonymous_expires_at!",
                  l.capability_id AS "capability_id!", l.updated_at AS "updated_at!", l.task_type AS "task_type!",
                  l.custom_type, l.input_schema AS "input_schema!", l.output_schema AS "output_schema!",
                  l.estimated_latency_ms, l.estimated_cost_usd,
                  k.percentile AS "trust_score_percentile!", l.provisional AS "provisional!",
                  l.agent_id AS "agent_id!", l.owner_user_id AS "owner_user_id!",
                  l.accept_delegations AS "accept_delegations!"
             FROM listed l JOIN ranks k ON k.raw = l.raw"#,
        key.map(TaskType::as_str)
    )
    .fetch_all(conn)
    .await?;
    let first_expiry = entries.iter().map(|e| e.anonymous_expires_at).min();
    Ok(Snapshot { version, first_expiry, entries, calculators: OnceLock::new() })
}

/// The discoverable capabilities of `key` (every kind when `None`) as the committed state has
/// them now, from the process's snapshot when it is current, else rebuilt (after replacing
/// the anonymous ids that expired since housekeeping last did, as a query would).
pub async fn snapshot(conn: &mut PgConnection, key: Option<TaskType>, ttl: Duration) -> sqlx::Result<Arc<Snapshot>> {
    let st = state(conn).await?;
    if !st.clean {
        return Ok(Arc::new(rebuild(conn, key, st.n, ttl).await?));
    }
    let slot = slot((st.epoch, st.db), key);
    let mut held = slot.lock().await;
    if let Some(s) = held.as_ref().filter(|s| s.usable(st.n, Utc::now())) {
        return Ok(s.clone());
    }
    let fresh = Arc::new(rebuild(conn, key, st.n, ttl).await?);
    // Kept only when it shows the committed state: the refresh above may have written.
    if clean(conn).await? && fresh.usable(st.n, Utc::now()) {
        *held = Some(fresh.clone());
    }
    Ok(fresh)
}

async fn rebuild(
    conn: &mut PgConnection,
    key: Option<TaskType>,
    version: i64,
    ttl: Duration,
) -> sqlx::Result<Snapshot> {
    anonymity::refresh_expired(conn, key.map(TaskType::as_str), None, ttl).await?;
    build(conn, key, version).await
}

/// Each agent's live queue depth, for the agents of `entries` that have any: the delegation
/// attempts addressed to it that are open (offered and not yet accepted, or accepted and not
/// yet ended). Only its directory work: its owner's negotiation turns are not counted, since a
/// depth that moved when a turn was parked for a user would tell whoever saw that turn parked
/// who stands behind an anonymous id.
pub async fn queue_depths(conn: &mut PgConnection, entries: &[Entry]) -> sqlx::Result<HashMap<Uuid, i64>> {
    let mut agents: Vec<Uuid> = entries.iter().map(|e| e.agent_id).collect();
    agents.sort_unstable();
    agents.dedup();
    let rows = sqlx::query!(
        r#"SELECT target_agent_id, count(*) AS "n!" FROM delegation_attempts
            WHERE status IN ('request', 'accepted') AND target_agent_id = ANY($1)
            GROUP BY target_agent_id"#,
        &agents
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.target_agent_id, r.n)).collect())
}
