//! Personal agents and their API keys, and which side kind a user's seat gets.
//!
//! Keys are random (192 bits), shown once, stored only as SHA-256; a key is found by its hash.
//!
//! Who decides the key and liveness rules, once for every route:
//! - **Whether a key works** (not revoked, not expired) is SQL's: `parley_key_works`, which
//!   every statement here that needs it calls and which gives each [`ApiKey`] its `works`.
//! - **The key verdict** (unknown, another agent's, an inactive agent's, or good) is SQL's:
//!   `parley_agent_of_key`, called in place by the turn and delegation statements and through
//!   [`key_verdict`] by every other caller. Rust reads the verdict as a
//!   [`KeyCheck`] and words it once (`KeyCheck::identity`).
//! - **Whether an agent is live** is Rust's (`runtime::liveness::is_live`): SQL stores what it
//!   is decided from ([`Presence`]: the status, when the agent was last seen, whether a key of
//!   it works) and decides nothing about it.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::turn_delivery::{KeyAuth, KeyCheck};
use crate::domain::SideKind;

/// `personal` when the user owns an active, negotiation-enabled personal agent with at least one
/// live (not revoked, not expired) API key; otherwise `system`. Decided once per side, when the
/// negotiation starts.
pub async fn side_kind_for(conn: &mut PgConnection, user_id: &str) -> sqlx::Result<SideKind> {
    let personal = sqlx::query_scalar!(
        r#"SELECT EXISTS (
               SELECT 1 FROM agents a JOIN api_keys k ON k.agent_id = a.agent_id
               WHERE a.owner_user_id = $1 AND a.agent_type = 'personal' AND a.status = 'active'
                 AND a.negotiation_mode = 'enabled' AND parley_key_works(k.revoked_at, k.expires_at)
           ) AS "personal!""#,
        user_id
    )
    .fetch_one(conn)
    .await?;
    Ok(if personal { SideKind::Personal } else { SideKind::System })
}

/// Whether an agent may act: only an `active` agent's key is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum AgentStatus {
    /// Its keys work.
    Active,
    /// Its keys are refused (403); deleted agents are inactive too.
    Inactive,
}

/// What kind of agent it is (the table allows `personal` only, for now).
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum AgentType {
    /// A person's own agent.
    Personal,
}

/// Whether an agent plays its user's negotiations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum NegotiationMode {
    /// Its user's seats are personal (see [`side_kind_for`]).
    Enabled,
    /// It only works through the directory.
    Disabled,
}

impl AgentStatus {
    /// Every status.
    pub const ALL: [AgentStatus; 2] = [AgentStatus::Active, AgentStatus::Inactive];

    /// The stored (and wire) name.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStatus::Active => "active",
            AgentStatus::Inactive => "inactive",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<AgentStatus> {
        AgentStatus::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl AgentType {
    /// The stored (and wire) name.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentType::Personal => "personal",
        }
    }
}

impl NegotiationMode {
    /// Every mode.
    pub const ALL: [NegotiationMode; 2] = [NegotiationMode::Enabled, NegotiationMode::Disabled];

    /// The stored (and wire) name.
    pub fn as_str(self) -> &'static str {
        match self {
            NegotiationMode::Enabled => "enabled",
            NegotiationMode::Disabled => "disabled",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<NegotiationMode> {
        NegotiationMode::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// An agent row.
#[derive(Debug, Clone)]
pub struct Agent {
    /// Its id.
    pub agent_id: Uuid,
    /// The user it speaks for.
    pub owner_user_id: String,
    /// Display name.
    pub name: String,
    /// Always `personal` for now.
    pub agent_type: AgentType,
    /// Whether it may act.
    pub status: AgentStatus,
    /// Whether it plays its user's negotiations.
    pub negotiation_mode: NegotiationMode,
    /// Free text.
    pub description: Option<String>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
    /// When the agent was last seen (any authenticated call; written at most every 15 s).
    pub last_seen_at: Option<DateTime<Utc>>,
}

/// An API key's public facts (never the key).
#[derive(Debug, Clone)]
pub struct ApiKey {
    /// Its id.
    pub api_key_id: Uuid,
    /// The agent it authenticates.
    pub agent_id: Uuid,
    /// The first characters of the key.
    pub prefix: String,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// When it stops working, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// Whether it works now (`parley_key_works`).
    pub works: bool,
}

/// Inserts an agent.
pub async fn insert(
    conn: &mut PgConnection,
    id: Uuid,
    owner: &str,
    name: &str,
    description: Option<&str>,
    negotiation_mode: NegotiationMode,
) -> sqlx::Result<Agent> {
    sqlx::query_as!(
        Agent,
        r#"INSERT INTO agents (agent_id, owner_user_id, name, description, negotiation_mode)
           VALUES ($1, $2, $3, $4, $5)
           RETURNING agent_id, owner_user_id, name, agent_type AS "agent_type: AgentType", status AS "status: AgentStatus",
                  negotiation_mode AS "negotiation_mode: NegotiationMode", description, created_at, updated_at, last_seen_at"#,
        id,
        owner,
        name,
        description,
        negotiation_mode.as_str()
    )
    .fetch_one(conn)
    .await
}

/// Loads an agent (never a deleted one).
pub async fn get(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<Option<Agent>> {
    sqlx::query_as!(
        Agent,
        r#"SELECT agent_id, owner_user_id, name, agent_type AS "agent_type: AgentType", status AS "status: AgentStatus",
                  negotiation_mode AS "negotiation_mode: NegotiationMode", description, created_at, updated_at,
                  last_seen_at
           FROM agents WHERE agent_id = $1 AND deleted_at IS NULL"#,
        id
    )
    .fetch_optional(conn)
    .await
}

/// A page of a user's agents (not the deleted ones), oldest first: at most `limit`, after the
/// agent `after` when given.
pub async fn list_for_owner(
    conn: &mut PgConnection,
    owner: &str,
    after: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<Agent>> {
    sqlx::query_as!(
        Agent,
        r#"SELECT agent_id, owner_user_id, name, agent_type AS "agent_type: AgentType", status AS "status: AgentStatus",
                  negotiation_mode AS "negotiation_mode: NegotiationMode", description, created_at, updated_at,
                  last_seen_at
           FROM agents WHERE owner_user_id = $1 AND deleted_at IS NULL AND ($2::uuid IS NULL OR agent_id > $2)
           ORDER BY agent_id LIMIT $3"#,
        owner,
        after,
        limit
    )
    .fetch_all(conn)
    .await
}

/// Every agent a user ever had, the deleted ones too (whose records the user still reads).
pub async fn ids_for_owner(conn: &mut PgConnection, owner: &str) -> sqlx::Result<Vec<Uuid>> {
    sqlx::query_scalar!("SELECT agent_id FROM agents WHERE owner_user_id = $1 ORDER BY agent_id", owner)
        .fetch_all(conn)
        .await
}

/// Changes the given fields of an agent.
pub async fn update(
    conn: &mut PgConnection,
    id: Uuid,
    name: Option<&str>,
    status: Option<AgentStatus>,
    negotiation_mode: Option<NegotiationMode>,
    description: Option<&str>,
) -> sqlx::Result<Option<Agent>> {
    sqlx::query_as!(
        Agent,
        r#"UPDATE agents SET name = COALESCE($2, name), status = COALESCE($3, status),
                  negotiation_mode = COALESCE($4, negotiation_mode), description = COALESCE($5, description),
                  updated_at = now()
           WHERE agent_id = $1
           RETURNING agent_id, owner_user_id, name, agent_type AS "agent_type: AgentType", status AS "status: AgentStatus",
                  negotiation_mode AS "negotiation_mode: NegotiationMode", description, created_at, updated_at, last_seen_at"#,
        id,
        name,
        status.map(AgentStatus::as_str),
        negotiation_mode.map(NegotiationMode::as_str),
        description
    )
    .fetch_optional(conn)
    .await
}

/// Deletes an agent, keeping its row and every record that names it: the row is marked
/// deleted (and inactive), its keys, capabilities and AgentCard go, and it leaves the trust
/// population.
/// `false` when there was no such agent left. In the caller's transaction; claims it holds are
/// released by the caller first, and its open delegation attempts ended after.
pub async fn delete(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<bool> {
    let marked = sqlx::query!(
        "UPDATE agents SET deleted_at = now(), status = 'inactive', updated_at = now()
          WHERE agent_id = $1 AND deleted_at IS NULL",
        id
    )
    .execute(&mut *conn)
    .await?;
    if marked.rows_affected() == 0 {
        return Ok(false);
    }
    sqlx::query!("DELETE FROM api_keys WHERE agent_id = $1", id).execute(&mut *conn).await?;
    // Its AgentCard goes too, with the credential Parley held for it.
    sqlx::query!("DELETE FROM agent_cards WHERE agent_id = $1", id).execute(&mut *conn).await?;
    sqlx::query!("DELETE FROM capabilities WHERE agent_id = $1", id).execute(&mut *conn).await?;
    sqlx::query!("DELETE FROM trust_records WHERE agent_id = $1", id).execute(&mut *conn).await?;
    Ok(true)
}

/// Takes the lock of `owner`'s agents, keys and capabilities for the rest of the caller's
/// transaction, so that the counts below hold until it commits.
pub async fn lock_owner(conn: &mut PgConnection, owner: &str) -> sqlx::Result<()> {
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtextextended('agents-of:' || $1, 0))", owner).execute(conn).await?;
    Ok(())
}

/// How many agents `owner` has (not the deleted ones).
pub async fn count_for_owner(conn: &mut PgConnection, owner: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM agents WHERE owner_user_id = $1 AND deleted_at IS NULL"#, owner)
        .fetch_one(conn)
        .await
}

/// How many live keys (unrevoked, unexpired) `owner`'s agents have in all.
pub async fn count_live_keys(conn: &mut PgConnection, owner: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM api_keys k JOIN agents a ON a.agent_id = k.agent_id
            WHERE a.owner_user_id = $1 AND parley_key_works(k.revoked_at, k.expires_at)"#,
        owner
    )
    .fetch_one(conn)
    .await
}

/// Stores a key's hash.
pub async fn insert_key(
    conn: &mut PgConnection,
    agent_id: Uuid,
    prefix: &str,
    hash: &[u8],
    expires_at: Option<DateTime<Utc>>,
) -> sqlx::Result<ApiKey> {
    sqlx::query_as!(
        ApiKey,
        r#"INSERT INTO api_keys (api_key_id, agent_id, prefix, key_hash, expires_at) VALUES ($1, $2, $3, $4, $5)
           RETURNING api_key_id, agent_id, prefix, created_at, expires_at, revoked_at,
                     parley_key_works(revoked_at, expires_at) AS "works!""#,
        Uuid::now_v7(),
        agent_id,
        prefix,
        hash,
        expires_at
    )
    .fetch_one(conn)
    .await
}

/// The keys of each of `agents`, oldest first.
pub async fn keys_of(conn: &mut PgConnection, agents: &[Uuid]) -> sqlx::Result<Vec<ApiKey>> {
    sqlx::query_as!(
        ApiKey,
        r#"SELECT api_key_id, agent_id, prefix, created_at, expires_at, revoked_at,
                  parley_key_works(revoked_at, expires_at) AS "works!"
           FROM api_keys WHERE agent_id = ANY($1) ORDER BY api_key_id"#,
        agents
    )
    .fetch_all(conn)
    .await
}

/// An agent's keys, oldest first.
pub async fn keys(conn: &mut PgConnection, agent_id: Uuid) -> sqlx::Result<Vec<ApiKey>> {
    sqlx::query_as!(
        ApiKey,
        r#"SELECT api_key_id, agent_id, prefix, created_at, expires_at, revoked_at,
                  parley_key_works(revoked_at, expires_at) AS "works!"
           FROM api_keys WHERE agent_id = $1 ORDER BY api_key_id"#,
        agent_id
    )
    .fetch_all(conn)
    .await
}

/// Revokes a key of an agent; `false` when there is no such key.
pub async fn revoke_key(conn: &mut PgConnection, agent_id: Uuid, key_id: Uuid) -> sqlx::Result<bool> {
    let r = sqlx::query!(
        "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE api_key_id = $1 AND agent_id = $2",
        key_id,
        agent_id
    )
    .execute(conn)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// The key verdict of `parley_agent_of_key` for the key whose hash is `key_hash`, acting as
/// `agent` (`None`: as whichever agent the key is of).
pub async fn key_verdict(conn: &mut PgConnection, key_hash: &[u8], agent: Option<Uuid>) -> sqlx::Result<KeyCheck> {
    let r = sqlx::query!(
        r#"SELECT auth AS "auth!: KeyAuth", agent_id, owner_user_id FROM parley_agent_of_key($1, $2)"#,
        key_hash,
        agent
    )
    .fetch_one(conn)
    .await?;
    KeyCheck::from_parts(r.auth, r.agent_id, r.owner_user_id)
}

/// Marks an agent seen now (the caller throttles: see `runtime::liveness`).
pub async fn mark_seen(conn: &mut PgConnection, agent_id: Uuid) -> sqlx::Result<()> {
    sqlx::query!("UPDATE agents SET last_seen_at = now() WHERE agent_id = $1", agent_id).execute(conn).await?;
    Ok(())
}

/// What an agent's liveness is decided from (by `runtime::liveness::is_live`, not here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Presence {
    /// Whether it may act.
    pub status: AgentStatus,
    /// When it was last seen.
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Whether one of its keys works (`parley_key_works`).
    pub working_key: bool,
}

impl Presence {
    /// An agent's presence, from its row and its keys.
    pub fn of(agent: &Agent, keys: &[ApiKey]) -> Presence {
        Presence {
            status: agent.status,
            last_seen_at: agent.last_seen_at,
            working_key: keys.iter().any(|k| k.agent_id == agent.agent_id && k.works),
        }
    }
}

/// The presence of each of `user_id`'s agents (not the deleted ones).
pub async fn presences(conn: &mut PgConnection, user_id: &str) -> sqlx::Result<Vec<Presence>> {
    sqlx::query_as!(
        Presence,
        r#"SELECT a.status AS "status: AgentStatus", a.last_seen_at,
                  EXISTS (SELECT 1 FROM api_keys k
                           WHERE k.agent_id = a.agent_id AND parley_key_works(k.revoked_at, k.expires_at)) AS "working_key!"
             FROM agents a WHERE a.owner_user_id = $1 AND a.deleted_at IS NULL"#,
        user_id
    )
    .fetch_all(conn)
    .await
}
