//! The AgentCards of agents Parley calls instead of waiting for them to poll: one row per such
//! agent (`agent_cards`), with the interface chosen on the card, its dialect and the credential
//! Parley presents there. An agent without a row polls.

use chrono::{DateTime, Utc};
use secrecy::ExposeSecret;
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{CorruptRow, parse_enum};
use crate::a2a_client::{
    card::{Dialect, SkillSummary},
    credential::{A2aAuth, AuthScheme},
};

/// A stored card, as a later call to the agent reads it.
#[derive(Debug, Clone)]
pub struct AgentCard {
    /// The agent.
    pub agent_id: Uuid,
    /// Where the card was fetched from.
    pub card_url: String,
    /// The JSON-RPC endpoint Parley calls.
    pub interface_url: String,
    /// The protocol version the card gives for it.
    pub protocol_version: String,
    /// How Parley speaks there.
    pub dialect: Dialect,
    /// The agent's name on the card.
    pub name: String,
    /// Its description on the card.
    pub description: String,
    /// Its skills, in brief.
    pub skills: Vec<SkillSummary>,
    /// Whether the card says it streams.
    pub streaming: bool,
    /// What Parley presents to the endpoint, if anything (never shown by a read).
    pub auth: Option<A2aAuth>,
    /// When the card was (last) fetched.
    pub fetched_at: DateTime<Utc>,
}

/// What a fetch gives, to store.
#[derive(Debug, Clone)]
pub struct NewAgentCard<'a> {
    /// Where the card was fetched from.
    pub card_url: &'a str,
    /// The chosen endpoint.
    pub interface_url: &'a str,
    /// Its protocol version.
    pub protocol_version: &'a str,
    /// The dialect.
    pub dialect: Dialect,
    /// The card's name.
    pub name: &'a str,
    /// The card's description.
    pub description: &'a str,
    /// Its skills, in brief.
    pub skills: &'a [SkillSummary],
    /// Whether it streams.
    pub streaming: bool,
    /// The card.
    pub card: &'a Value,
}

/// What happens to the stored credential when a card is stored again.
#[derive(Debug, Clone)]
pub enum AuthChange<'a> {
    /// It stays as it was (none for a new row).
    Keep,
    /// It is replaced.
    Set(&'a A2aAuth),
    /// It is removed.
    Clear,
}

struct Row {
    agent_id: Uuid,
    card_url: String,
    interface_url: String,
    protocol_version: String,
    dialect: String,
    name: String,
    description: String,
    skills: Value,
    streaming: bool,
    auth_scheme: Option<String>,
    auth_credential: Option<String>,
    fetched_at: DateTime<Utc>,
}

impl TryFrom<Row> for AgentCard {
    type Error = CorruptRow;

    fn try_from(r: Row) -> Result<AgentCard, CorruptRow> {
        let auth = match (r.auth_scheme, r.auth_credential) {
            (Some(scheme), Some(credential)) => Some(A2aAuth {
                scheme: parse_enum("agent_cards.auth_scheme", &scheme, AuthScheme::parse)?,
                credential: credential.into(),
            }),
            _ => None,
        };
        let skills = serde_json::from_value(r.skills.clone())
            .map_err(|_| CorruptRow { what: "agent_cards.skills", value: r.skills.to_string() })?;
        Ok(AgentCard {
            agent_id: r.agent_id,
            card_url: r.card_url,
            interface_url: r.interface_url,
            protocol_version: r.protocol_version,
            dialect: parse_enum("agent_cards.dialect", &r.dialect, Dialect::parse)?,
            name: r.name,
            description: r.description,
            skills,
            streaming: r.streaming,
            auth,
            fetched_at: r.fetched_at,
        })
    }
}

/// Stores (or replaces) an agent's card, fetched now; the credential as `auth` says.
pub async fn put(
    conn: &mut PgConnection,
    agent_id: Uuid,
    new: &NewAgentCard<'_>,
    auth: AuthChange<'_>,
) -> anyhow::Result<AgentCard> {
    let (keep, scheme, credential) = match &auth {
        AuthChange::Keep => (true, None, None),
        AuthChange::Set(a) => (false, Some(a.scheme.as_str()), Some(a.credential.expose_secret())),
        AuthChange::Clear => (false, None, None),
    };
    let skills = serde_json::to_value(new.skills)?;
    let row = sqlx::query_as!(
        Row,
        r#"INSERT INTO agent_cards AS c (agent_id, card_url, interface_url, protocol_version, dialect, name,
                                         description, skills, streaming, card, auth_scheme, auth_credential)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
           ON CONFLICT (agent_id) DO UPDATE SET
               card_url = EXCLUDED.card_url, interface_url = EXCLUDED.interface_url,
               protocol_version = EXCLUDED.protocol_version, dialect = EXCLUDED.dialect, name = EXCLUDED.name,
               description = EXCLUDED.description, skills = EXCLUDED.skills, streaming = EXCLUDED.streaming,
               card = EXCLUDED.card, fetched_at = now(),
               auth_scheme = CASE WHEN $13 THEN c.auth_scheme ELSE EXCLUDED.auth_scheme END,
               auth_credential = CASE WHEN $13 THEN c.auth_credential ELSE EXCLUDED.auth_credential END
           RETURNING agent_id, card_url, interface_url, protocol_version, dialect, name, description, skills,
                     streaming, auth_scheme, auth_credential, fetched_at"#,
        agent_id,
        new.card_url,
        new.interface_url,
        new.protocol_version,
        new.dialect.as_str(),
        new.name,
        new.description,
        skills,
        new.streaming,
        new.card,
        scheme,
        credential,
        keep
    )
    .fetch_one(conn)
    .await?;
    Ok(AgentCard::try_from(row)?)
}

/// Locks the row of agent `agent_id` for the caller's transaction, if it is not deleted (a
/// deletion then waits, and removes the card stored meanwhile); `false` when it is gone.
pub async fn lock_live_agent(conn: &mut PgConnection, agent_id: Uuid) -> sqlx::Result<bool> {
    let found = sqlx::query_scalar!(
        "SELECT 1 AS one FROM agents WHERE agent_id = $1 AND deleted_at IS NULL FOR UPDATE",
        agent_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(found.is_some())
}

/// An agent's card, if it has one.
pub async fn get(conn: &mut PgConnection, agent_id: Uuid) -> anyhow::Result<Option<AgentCard>> {
    let row = sqlx::query_as!(
        Row,
        r#"SELECT agent_id, card_url, interface_url, protocol_version, dialect, name, description, skills,
                  streaming, auth_scheme, auth_credential, fetched_at
           FROM agent_cards WHERE agent_id = $1"#,
        agent_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(AgentCard::try_from).transpose()?)
}

/// Removes an agent's card (the agent polls from now on); `false` when it had none.
pub async fn delete(conn: &mut PgConnection, agent_id: Uuid) -> sqlx::Result<bool> {
    let r = sqlx::query!("DELETE FROM agent_cards WHERE agent_id = $1", agent_id).execute(conn).await?;
    Ok(r.rows_affected() == 1)
}

/// How an agent Parley calls is reached, in brief: its card URL and its last call.
#[derive(Debug, Clone)]
pub struct Called {
    /// The agent.
    pub agent_id: Uuid,
    /// Where its card was fetched from.
    pub card_url: String,
    /// When Parley last called it, if it has.
    pub last_call_at: Option<DateTime<Utc>>,
    /// How that call ended (`send: ok`, or what failed).
    pub last_call_outcome: Option<String>,
}

/// The card URL and last call of each of `agents` that has a card.
pub async fn called(conn: &mut PgConnection, agents: &[Uuid]) -> sqlx::Result<Vec<Called>> {
    sqlx::query_as!(
        Called,
        "SELECT agent_id, card_url, last_call_at, last_call_outcome FROM agent_cards WHERE agent_id = ANY($1)",
        agents
    )
    .fetch_all(conn)
    .await
}

/// Records a call Parley made to the agent now: how it ended (`ok`, or what failed, at most
/// 300 characters) and, when it succeeded, that it did (what liveness reads).
pub async fn record_call(conn: &mut PgConnection, agent_id: Uuid, outcome: &str, ok: bool) -> sqlx::Result<()> {
    let outcome: String = outcome.chars().take(300).collect();
    sqlx::query!(
        "UPDATE agent_cards SET last_call_at = now(), last_call_outcome = $2,
                                last_success_at = CASE WHEN $3 THEN now() ELSE last_success_at END
          WHERE agent_id = $1",
        agent_id,
        outcome,
        ok
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The prefix shown for the key Parley holds for an agent it calls (see [`ensure_push_key`]).
pub const PUSH_KEY_PREFIX: &str = "pk_a2a_held_by_parley";

/// Makes sure the key Parley holds for agent `agent_id` (whose hash is `key_hash`) exists:
/// stored once, like any key, under [`PUSH_KEY_PREFIX`], when the agent's card is stored. A key
/// its owner revoked stays revoked (Parley then no longer takes the agent's turns); storing the
/// card again (`PUT .../agent-card`) makes it anew only once the revoked row is gone.
pub async fn ensure_push_key(conn: &mut PgConnection, agent_id: Uuid, key_hash: &[u8]) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO api_keys (api_key_id, agent_id, prefix, key_hash) VALUES ($1, $2, $3, $4)
         ON CONFLICT (key_hash) DO NOTHING",
        Uuid::now_v7(),
        agent_id,
        PUSH_KEY_PREFIX,
        key_hash
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The active agent of `user_id` that negotiates and that Parley calls (the newest, if there are
/// several).
pub async fn called_agent_of(conn: &mut PgConnection, user_id: &str) -> sqlx::Result<Option<Uuid>> {
    sqlx::query_scalar!(
        "SELECT a.agent_id FROM agents a JOIN agent_cards c ON c.agent_id = a.agent_id
          WHERE a.owner_user_id = $1 AND a.status = 'active' AND a.negotiation_mode = 'enabled'
          ORDER BY a.agent_id DESC LIMIT 1",
        user_id
    )
    .fetch_optional(conn)
    .await
}

/// Records that Parley begins to send message `message_id` to agent `agent_id`; false when it
/// had begun before (this send repeats one that a crash interrupted).
pub async fn begin_send(conn: &mut PgConnection, agent_id: Uuid, message_id: Uuid) -> sqlx::Result<bool> {
    let r = sqlx::query!(
        "INSERT INTO a2a_sends (message_id, agent_id) VALUES ($1, $2) ON CONFLICT (message_id) DO NOTHING",
        message_id,
        agent_id
    )
    .execute(conn)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Whether Parley began to send message `message_id`.
pub async fn send_begun(conn: &mut PgConnection, message_id: Uuid) -> sqlx::Result<bool> {
    let found = sqlx::query_scalar!("SELECT 1 AS one FROM a2a_sends WHERE message_id = $1", message_id)
        .fetch_optional(conn)
        .await?;
    Ok(found.is_some())
}
