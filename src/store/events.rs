//! The event log behind `GET /api/events`, webhooks and A2A push notifications: written in the
//! transaction of the change it describes, and read back in id order by every Parley process
//! (`crate::live::tail_events`), which fans the new rows out to its streams. It is the outbox
//! too: a trigger on it writes, in the same transaction, one delivery per webhook or push
//! configuration that wants the event (`super::outbox`). An event's id is its sequence.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

/// A kind of event: its name, whether a webhook registered without a list of kinds gets it, and
/// what its data holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventKind {
    /// The name, as streamed (`event:`) and as a webhook's `type`.
    pub name: &'static str,
    /// Whether a webhook registered without `events` gets it (`negotiation.turn` is opt-in).
    pub by_default: bool,
    /// Its data, for the API's documentation.
    pub data: &'static str,
}

/// Every kind of event the log holds, in one place: the SSE stream, the webhooks' `events`
/// (what a registration may name) and the API's documentation read it. Adding a kind is one
/// entry here, plus the event table's `events_kind_check`, which a test compares with this
/// list; the outbox fans out any kind without naming it.
pub const KINDS: &[EventKind] = &[
    EventKind {
        name: "opportunity.status",
        by_default: true,
        data: "`{opportunityId, status, previousStatus}`: an opportunity moved",
    },
    EventKind {
        name: "negotiation.turn",
        by_default: false,
        data: "`{negotiationId, opportunityId, turnNumber, action, playedBy}`: a turn was taken (no scores)",
    },
    EventKind {
        name: "negotiation.outcome",
        by_default: true,
        data: "`{negotiationId, opportunityId, hasOpportunity, reason, turnCount}`: a negotiation ended",
    },
    EventKind {
        name: "negotiation.round",
        by_default: true,
        data: "`{negotiationId, opportunityId, round, previousNegotiationId}`: a reactivated opportunity's new negotiation",
    },
    EventKind {
        name: "negotiation.question",
        by_default: true,
        data: "`{negotiationId, opportunityId, questionId, state, question, options, askedAt, expiresAt, answer}`: \
               the person's agent asked them something (`state: asked`), they answered (`answered`), or the \
               answer window ran out (`unanswered`); to the asking person only",
    },
    EventKind {
        name: "delegation.status",
        by_default: true,
        data: "`{requestId, attempt, status, taskId, taskType, requesterAnonymousId, targetAnonymousId}`: a delegation \
               attempt moved (to the owners of the requester and of the target)",
    },
    EventKind {
        name: "a2a.task",
        by_default: false,
        data: "`{requesterAgentId, taskId, contextId, state, route: {agentAnonymousId, skillId}}`: a task a plain A2A \
               message of the person's agent started at another agent was seen in a new state (`state` in A2A 1.0's \
               words); written only while the task has push notification configurations, which it is delivered \
               to; to the requester's person only",
    },
];

/// The kind named `name`.
pub fn kind(name: &str) -> Option<&'static EventKind> {
    KINDS.iter().find(|k| k.name == name)
}

/// An event as streamed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    /// Increasing id (the SSE `id:`).
    pub id: i64,
    /// `opportunity.status`, `negotiation.turn`, `negotiation.outcome`, `negotiation.round`,
    /// `negotiation.question`, `delegation.status` (written by a trigger on delegation attempts)
    /// or `a2a.task`.
    pub kind: String,
    /// The first person who may see it.
    pub source_user_id: String,
    /// The second person who may see it.
    pub candidate_user_id: String,
    /// The event's body.
    pub data: Value,
}

impl Event {
    /// Whether `user_id` takes part (the service sees everything).
    pub fn visible_to(&self, user_id: &str) -> bool {
        self.source_user_id == user_id || self.candidate_user_id == user_id
    }
}

/// Whom an event concerns.
pub struct Audience<'a> {
    /// The opportunity.
    pub opportunity_id: Uuid,
    /// One person.
    pub source_user_id: &'a str,
    /// The other.
    pub candidate_user_id: &'a str,
}

/// Records an event (streamed once its transaction commits and the log's readers look).
pub async fn record(conn: &mut PgConnection, kind: &str, to: &Audience<'_>, data: Value) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"INSERT INTO events (kind, opportunity_id, source_user_id, candidate_user_id, data)
           VALUES ($1, $2, $3, $4, $5) RETURNING event_id"#,
        kind,
        to.opportunity_id,
        to.source_user_id,
        to.candidate_user_id,
        data
    )
    .fetch_one(conn)
    .await
}

/// Events after `after` (exclusive) that `user_id` may see (all when `None`), oldest first,
/// at most `limit`, no older than `since`. A person's are read as source and as candidate apart,
/// each from its own index in id order and limited to `limit`, then merged: one condition over
/// both columns read every newer event of everyone.
pub async fn after(
    conn: &mut PgConnection,
    after: i64,
    user_id: Option<&str>,
    since: DateTime<Utc>,
    limit: i64,
) -> sqlx::Result<Vec<Event>> {
    match user_id {
        None => {
            sqlx::query_as!(
                Event,
                r#"SELECT event_id AS id, kind, source_user_id, candidate_user_id, data FROM events
                    WHERE event_id > $1 AND created_at >= $2
                    ORDER BY event_id LIMIT $3"#,
                after,
                since,
                limit
            )
            .fetch_all(conn)
            .await
        }
        Some(user) => {
            sqlx::query_as!(
                Event,
                r#"(SELECT event_id AS "id!", kind AS "kind!", source_user_id AS "source_user_id!",
                           candidate_user_id AS "candidate_user_id!", data AS "data!" FROM events
                     WHERE source_user_id = $4 AND event_id > $1 AND created_at >= $2
                     ORDER BY event_id LIMIT $3)
                   UNION ALL
                   (SELECT event_id, kind, source_user_id, candidate_user_id, data FROM events
                     WHERE candidate_user_id = $4 AND source_user_id <> $4 AND event_id > $1 AND created_at >= $2
                     ORDER BY event_id LIMIT $3)
                   ORDER BY 1 LIMIT $3"#,
                after,
                since,
                limit,
                user
            )
            .fetch_all(conn)
            .await
        }
    }
}

/// The newest event's id (0 without any).
pub async fn newest_id(conn: &mut PgConnection) -> sqlx::Result<i64> {
    sqlx::query_scalar!(r#"SELECT coalesce(max(event_id), 0)::bigint AS "id!" FROM events"#).fetch_one(conn).await
}

/// Events with an id after `after`, or one of `also` (ids at or before `after` skipped earlier,
/// whose transactions may have committed since), in id order, at most `limit`.
pub async fn tail(conn: &mut PgConnection, after: i64, also: &[i64], limit: i64) -> sqlx::Result<Vec<Event>> {
    // Two range reads of the primary key, never one filter: written as `event_id > $1 OR
    // event_id = ANY($2)`, the plan walked the key from the log's first event on every read
    // whenever the log had no statistics yet (2.7 ms at 50 000 events, growing with the log).
    sqlx::query_as!(
        Event,
        r#"(SELECT event_id AS "id!", kind AS "kind!", source_user_id AS "source_user_id!",
                   candidate_user_id AS "candidate_user_id!", data AS "data!" FROM events
             WHERE event_id > $1 ORDER BY event_id LIMIT $3)
           UNION ALL
           (SELECT event_id, kind, source_user_id, candidate_user_id, data FROM events
             WHERE event_id = ANY($2) AND event_id <= $1)
           ORDER BY 1 LIMIT $3"#,
        after,
        also,
        limit
    )
    .fetch_all(conn)
    .await
}
