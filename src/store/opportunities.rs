//! Opportunities: the match as people see it, with its status.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::CorruptRow;
use crate::domain::{OpportunityEvent, OpportunityStatus, TransitionError};

/// `sqlx::query_as!` of opportunity [`Row`]s: every column of `opportunities` (as `o`) and the
/// task of its latest round, then `$rest` (conditions, order, lock).
macro_rules! opportunities_where {
    ($rest:literal $(+ $more:literal)*, $($arg:expr),+ $(,)?) => {
        sqlx::query_as!(
            Row,
            r#"SELECT o.opportunity_id, o.status AS "status: OpportunityStatus", o.score, o.source_user_id, o.candidate_user_id, o.seed_assessment,
                      t.task_id AS "task_id?", t.round AS "round?", o.created_at, o.updated_at
               FROM opportunities o
               LEFT JOIN LATERAL (SELECT task_id, round FROM tasks WHERE tasks.opportunity_id = o.opportunity_id
                                  ORDER BY round DESC LIMIT 1) t ON true
               "# + $rest $(+ $more)*,
            $($arg),+
        )
    };
}

/// An opportunity row.
#[derive(Debug, Clone)]
pub struct Opportunity {
    /// Its id.
    pub id: Uuid,
    /// Where it is.
    pub status: OpportunityStatus,
    /// The evaluator's seed score (0-100).
    pub score: f64,
    /// The discovering user.
    pub source_user_id: String,
    /// The other user.
    pub candidate_user_id: String,
    /// The evaluator's assessment as given.
    pub seed_assessment: serde_json::Value,
    /// The negotiation (task) deciding it: its latest round's.
    pub negotiation_id: Option<Uuid>,
    /// That round's number: 0 for the first, 1 once reactivated, and so on.
    pub round: u32,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When its status last changed.
    pub updated_at: DateTime<Utc>,
}

impl Opportunity {
    /// Who may see events about it.
    pub fn audience(&self) -> super::events::Audience<'_> {
        super::events::Audience {
            opportunity_id: self.id,
            source_user_id: &self.source_user_id,
            candidate_user_id: &self.candidate_user_id,
        }
    }

    /// Whether `user_id` is one of its two people.
    pub fn has_participant(&self, user_id: &str) -> bool {
        self.source_user_id == user_id || self.candidate_user_id == user_id
    }
}

struct Row {
    opportunity_id: Uuid,
    status: OpportunityStatus,
    score: f64,
    source_user_id: String,
    candidate_user_id: String,
    seed_assessment: serde_json::Value,
    task_id: Option<Uuid>,
    round: Option<i32>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<Row> for Opportunity {
    type Error = CorruptRow;
    fn try_from(r: Row) -> Result<Self, CorruptRow> {
        Ok(Opportunity {
            id: r.opportunity_id,
            status: r.status,
            score: r.score,
            source_user_id: r.source_user_id,
            candidate_user_id: r.candidate_user_id,
            seed_assessment: r.seed_assessment,
            negotiation_id: r.task_id,
            round: r.round.and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

/// Fields of a new opportunity.
pub struct NewOpportunity<'a> {
    /// Its id.
    pub id: Uuid,
    /// Seed score.
    pub score: f64,
    /// Discovering user.
    pub source_user_id: &'a str,
    /// Other user.
    pub candidate_user_id: &'a str,
    /// Evaluator's assessment.
    pub seed_assessment: &'a serde_json::Value,
    /// The SHA-256 of the create request that made it (see `delivery::start`).
    pub request_hash: &'a [u8],
}

/// Inserts a `negotiating` opportunity; `false` when one with this id already exists.
pub async fn insert(conn: &mut PgConnection, o: &NewOpportunity<'_>) -> sqlx::Result<bool> {
    let r = sqlx::query!(
        r#"INSERT INTO opportunities (opportunity_id, status, score, source_user_id, candidate_user_id, seed_assessment,
                                      request_hash)
           VALUES ($1, 'negotiating', $2, $3, $4, $5, $6)
           ON CONFLICT (opportunity_id) DO NOTHING"#,
        o.id,
        o.score,
        o.source_user_id,
        o.candidate_user_id,
        o.seed_assessment,
        o.request_hash,
    )
    .execute(conn)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// The hash of the create request that made opportunity `id`: `None` when there is no such
/// opportunity, `Some(None)` when it was made before requests were kept.
pub async fn request_hash(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<Option<Option<Vec<u8>>>> {
    sqlx::query_scalar!(r#"SELECT request_hash FROM opportunities WHERE opportunity_id = $1"#, id)
        .fetch_optional(conn)
        .await
}

/// Loads one opportunity.
pub async fn get(conn: &mut PgConnection, id: Uuid) -> anyhow::Result<Option<Opportunity>> {
    let row = opportunities_where!(r#"WHERE o.opportunity_id = $1"#, id).fetch_optional(conn).await?;
    Ok(row.map(Opportunity::try_from).transpose()?)
}

/// Loads one opportunity and locks it for the rest of the transaction.
pub async fn lock(conn: &mut PgConnection, id: Uuid) -> anyhow::Result<Option<Opportunity>> {
    let row = opportunities_where!(r#"WHERE o.opportunity_id = $1 FOR UPDATE OF o"#, id).fetch_optional(conn).await?;
    Ok(row.map(Opportunity::try_from).transpose()?)
}

/// A page of opportunities, newest first.
#[derive(Debug, Default)]
pub struct ListFilter<'a> {
    /// Only those this user takes part in.
    pub user_id: Option<&'a str>,
    /// Only this status.
    pub status: Option<OpportunityStatus>,
    /// Only those older than this id (the previous page's last id).
    pub before: Option<Uuid>,
    /// Page size.
    pub limit: i64,
}

/// `opportunities_where!` of the opportunities whose ids the rest of the statement gives (an
/// `ARRAY(...)` and its closing), newest first.
macro_rules! listed_opportunities {
    ($ids:literal, $($arg:expr),+ $(,)?) => {
        opportunities_where!(
            r#"WHERE o.opportunity_id = ANY(ARRAY("# + $ids + r#")) ORDER BY o.opportunity_id DESC"#,
            $($arg),+
        )
    };
}

/// Lists opportunities by the filter, newest first (ids are UUIDv7, so id order is time order).
///
/// Each shape of filter has its own statement, so that each plan (custom or generic) reads one
/// index in id order and stops at the page: all of them (the primary key), by status (its
/// index), and a person's (their rows as source and as candidate read apart, each from its own
/// index and limited to the page, then merged; for `negotiating` and `pending`, from the
/// partial indexes of those states). One statement with optional conditions could only be
/// planned generically as a walk of the primary key: 170 ms for a person with three
/// opportunities among a million.
pub async fn list(conn: &mut PgConnection, f: &ListFilter<'_>) -> anyhow::Result<Vec<Opportunity>> {
    // A bound every index can seek to, even in a generic plan (no id is greater).
    let before = f.before.unwrap_or(Uuid::max());
    let status = f.status.map(|s| s.as_str());
    let open = matches!(f.status, Some(OpportunityStatus::Negotiating | OpportunityStatus::Pending));
    let rows = match (f.user_id, status) {
        (None, None) => {
            listed_opportunities!(
                "SELECT opportunity_id FROM opportunities WHERE opportunity_id < $1
                  ORDER BY opportunity_id DESC LIMIT $2",
                before,
                f.limit,
            )
            .fetch_all(conn)
            .await?
        }
        (None, Some(status)) => {
            listed_opportunities!(
                "SELECT opportunity_id FROM opportunities WHERE status = $3 AND opportunity_id < $1
                  ORDER BY opportunity_id DESC LIMIT $2",
                before,
                f.limit,
                status,
            )
            .fetch_all(conn)
            .await?
        }
        (Some(user), None) => {
            listed_opportunities!(
                "(SELECT opportunity_id FROM opportunities WHERE source_user_id = $3 AND opportunity_id < $1
                   ORDER BY opportunity_id DESC LIMIT $2)
                 UNION ALL
                 (SELECT opportunity_id FROM opportunities WHERE candidate_user_id = $3 AND opportunity_id < $1
                   ORDER BY opportunity_id DESC LIMIT $2)
                 ORDER BY 1 DESC LIMIT $2",
                before,
                f.limit,
                user,
            )
            .fetch_all(conn)
            .await?
        }
        (Some(user), Some(status)) if open => {
            listed_opportunities!(
                "(SELECT opportunity_id FROM opportunities
                   WHERE source_user_id = $3 AND status = $4 AND status IN ('negotiating', 'pending')
                     AND opportunity_id < $1
                   ORDER BY opportunity_id DESC LIMIT $2)
                 UNION ALL
                 (SELECT opportunity_id FROM opportunities
                   WHERE candidate_user_id = $3 AND status = $4 AND status IN ('negotiating', 'pending')
                     AND opportunity_id < $1
                   ORDER BY opportunity_id DESC LIMIT $2)
                 ORDER BY 1 DESC LIMIT $2",
                before,
                f.limit,
                user,
                status,
            )
            .fetch_all(conn)
            .await?
        }
        (Some(user), Some(status)) => {
            listed_opportunities!(
                "(SELECT opportunity_id FROM opportunities WHERE source_user_id = $3 AND status = $4 AND opportunity_id < $1
                   ORDER BY opportunity_id DESC LIMIT $2)
                 UNION ALL
                 (SELECT opportunity_id FROM opportunities WHERE candidate_user_id = $3 AND status = $4 AND opportunity_id < $1
                   ORDER BY opportunity_id DESC LIMIT $2)
                 ORDER BY 1 DESC LIMIT $2",
                before,
                f.limit,
                user,
                status,
            )
            .fetch_all(conn)
            .await?
        }
    };
    Ok(rows.into_iter().map(Opportunity::try_from).collect::<Result<_, _>>()?)
}

/// Applies `event` to a locked opportunity through the transition table and stores the result.
pub async fn apply(
    conn: &mut PgConnection,
    opportunity: &Opportunity,
    event: OpportunityEvent,
) -> anyhow::Result<Result<OpportunityStatus, TransitionError>> {
    let next = match opportunity.status.transition(event) {
        Ok(next) => next,
        Err(e) => return Ok(Err(e)),
    };
    let updated = sqlx::query!(
        "UPDATE opportunities SET status = $2, updated_at = now() WHERE opportunity_id = $1 AND status = $3",
        opportunity.id,
        next.as_str(),
        opportunity.status.as_str(),
    )
    .execute(&mut *conn)
    .await?;
    anyhow::ensure!(updated.rows_affected() == 1, "opportunity {} changed under its lock", opportunity.id);
    super::events::record(
        conn,
        "opportunity.status",
        &opportunity.audience(),
        serde_json::json!({ "opportunityId": opportunity.id, "status": next, "previousStatus": opportunity.status }),
    )
    .await?;
    Ok(Ok(next))
}
