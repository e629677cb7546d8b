//! Insights: what happened to negotiations, decisions and personal agents over a time range,
//! per UTC day and in total, computed in SQL (`GET /api/insights`).
//!
//! Every query takes the range `[from, to)` and an optional user. Without a user it covers
//! everyone (the platform's view). With a user it covers only what that user is part of, and
//! reads the other side of a negotiation only where that user may see it anyway:
//!
//! - **Negotiations** are those that *ended* in the range (the task's `completed_at`), bucketed
//!   by the UTC day they ended, with the user as source or candidate. Outcome and reason come from
//!   the outcome artifact: accepted, rejected, or stalled by `turn_cap`, `timeout` or `canceled`.
//!   *Turns* is the outcome's turn count; *time to outcome* is `completed_at - created_at` of the
//!   task (its median by `percentile_cont`).
//! - **Answer latency** covers the turns that personal agents answered in those negotiations
//!   (for a user: only on the user's own side). A turn becomes an agent's to take when the turn
//!   before it is stored (the engine parks it in that same step; turn 0 when the negotiation is
//!   created), and it ends when the agent's answer is stored. Parley keeps the stored time of
//!   every turn but not the park and pickup times of past turns (a task holds only its current
//!   turn's), so the latency is measured as *the stored time of the answer minus the stored time
//!   of the turn before it* (or the negotiation's creation for turn 0): the wait for a pickup
//!   and the agent's own time together. Stored times are transaction times.
//! - **Fallbacks** are turns the system negotiator took on a seat a personal agent plays (the
//!   park timeout ran out), counted on the same turns as the latency.
//! - **Claim expiries** are the claims of personal agents (for a user: the user's agents) that
//!   lapsed, from the agents' daily record; they are counted per UTC day, so a day that the range
//!   only partly covers counts whole, and an agent's record goes when the agent is deleted.
//! - **Decisions** are the human decisions made in the range (for a user: the user's own), by
//!   `decided_at`, and the opportunities that expired undecided (by the time they expired).
//! - **Objections** are the terms named missing (`missing: a, b`, as the system negotiator
//!   phrases its reasoning, up to a `;`, a line's end or a sentence's end; `none` and a
//!   trailing `(+N more)` are dropped, terms are compared in lower case, and a hyphenated term
//!   such as `part-time` stays one term) in the reasoning of `counter` and `reject` turns. For a
//!   user only the user's *own side's* turns count, never the other side's private reasoning (an
//!   outcome's reasoning is the final turn's, so it adds nothing of the user's own, and the
//!   other side's is not theirs to read). The ten most named terms, per day and in total.
//!
//! Means and medians are rounded to two decimals: they are read by people, and more digits
//! than that carry no meaning.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use sqlx::PgConnection;

/// The range and whose data a query covers.
#[derive(Debug, Clone)]
pub struct Scope<'a> {
    /// Start of the range (inclusive).
    pub from: DateTime<Utc>,
    /// End of the range (exclusive).
    pub to: DateTime<Utc>,
    /// Only this user's negotiations, decisions and agents; everyone when `None`.
    pub user_id: Option<&'a str>,
}

/// Negotiations that ended, by outcome.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutcomeCounts {
    /// All that ended.
    pub total: i64,
    /// Both agents agreed (the opportunity went to the people).
    pub accepted: i64,
    /// An agent rejected.
    pub rejected: i64,
    /// Ended without agreement, by reason.
    pub stalled: StalledCounts,
}

/// Stalled negotiations by reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StalledCounts {
    /// The turn cap was reached.
    pub turn_cap: i64,
    /// The personal-vs-personal deadline passed.
    pub timeout: i64,
    /// The platform canceled it.
    pub canceled: i64,
}

/// Human decisions on opportunities.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionCounts {
    /// Decisions to accept.
    pub accepted: i64,
    /// Decisions to decline.
    pub declined: i64,
    /// Opportunities that expired before everyone decided.
    pub expired: i64,
}

/// How long personal agents took to answer their turns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnswerLatency {
    /// Turns answered by personal agents.
    pub turns: i64,
    /// Mean seconds from the turn before being stored to the answer being stored (two decimals).
    pub mean_seconds: Option<f64>,
    /// Median of the same (two decimals).
    pub p50_seconds: Option<f64>,
}

/// How many negotiations took a number of turns.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnsCount {
    /// Turns taken, the opening propose included.
    pub turns: i64,
    /// Negotiations that ended after that many.
    pub negotiations: i64,
}

/// A term named missing, and how often.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Objection {
    /// The term, lower case.
    pub term: String,
    /// How many counter or reject reasonings named it.
    pub count: i64,
}

/// The figures of one day or of the whole range.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    /// Negotiations that ended, by outcome and reason.
    pub negotiations: OutcomeCounts,
    /// Mean turns of those negotiations (two decimals); null without any.
    pub mean_turns: Option<f64>,
    /// Median seconds from start to outcome (two decimals); null without any.
    pub time_to_outcome_p50_seconds: Option<f64>,
    /// Negotiations by the number of turns they took, fewest first.
    pub turns_to_outcome: Vec<TurnsCount>,
    /// Human decisions and expired opportunities.
    pub decisions: DecisionCounts,
    /// Personal agents' answer latency.
    pub answer_latency: AnswerLatency,
    /// Claims of personal agents that lapsed.
    pub claim_expiries: i64,
    /// Turns the system negotiator took for a personal agent that did not answer in time.
    pub fallbacks: i64,
    /// The ten terms most often named missing, most named first.
    pub top_objections: Vec<Objection>,
}

/// Figures per UTC day (days with no activity are left out) and for the whole range.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Insights {
    /// By day, oldest first.
    pub days: BTreeMap<NaiveDate, Figures>,
    /// The whole range.
    pub total: Figures,
}

impl Insights {
    /// The figures of `day`, or of the total when `day` is `None` (a grouping set's total row).
    fn at(&mut self, day: Option<NaiveDate>) -> &mut Figures {
        match day {
            Some(d) => self.days.entry(d).or_default(),
            None => &mut self.total,
        }
    }

    /// Whether anything happened on `day` (the total row of an empty range is all zeros).
    fn has(&self, day: Option<NaiveDate>) -> bool {
        day.is_none_or(|d| self.days.contains_key(&d))
    }
}

/// The negotiations in scope that ended in the range, with their outcome, and the side the
/// user sat on (`own_side`, null for everyone). One branch per kind of scope, each on its own
/// index; only one of them yields rows.
macro_rules! outcomes_cte {
    () => {
        "ended AS (
            SELECT t.task_id, t.source_kind, t.candidate_kind, t.created_at, t.completed_at,
                   NULL::text AS own_side
              FROM tasks t
             WHERE $3::text IS NULL AND t.completed_at >= $1 AND t.completed_at < $2
            UNION ALL
            SELECT t.task_id, t.source_kind, t.candidate_kind, t.created_at, t.completed_at, 'source'
              FROM tasks t
             WHERE t.source_user_id = $3 AND t.completed_at >= $1 AND t.completed_at < $2
            UNION ALL
            SELECT t.task_id, t.source_kind, t.candidate_kind, t.created_at, t.completed_at, 'candidate'
              FROM tasks t
             WHERE t.candidate_user_id = $3 AND t.completed_at >= $1 AND t.completed_at < $2
        ), outcomes AS (
            SELECT e.*, (e.completed_at AT TIME ZONE 'UTC')::date AS day,
                   (a.parts -> 0 -> 'data' ->> 'hasOpportunity')::boolean AS accepted,
                   a.parts -> 0 -> 'data' ->> 'reason' AS reason,
                   (a.parts -> 0 -> 'data' ->> 'turnCount')::int AS turn_count
              FROM ended e
              JOIN artifacts a ON a.task_id = e.task_id AND a.name = 'negotiation-outcome'
        ), turns AS (
            SELECT o.day, o.task_id, o.own_side, m.turn_number, m.side, m.action, m.played_by,
                   CASE m.side WHEN 'source' THEN o.source_kind ELSE o.candidate_kind END AS seat_kind,
                   m.parts -> 0 -> 'data' -> 'assessment' ->> 'reasoning' AS reasoning,
                   extract(epoch FROM m.created_at - coalesce(
                       lag(m.created_at) OVER (PARTITION BY m.task_id ORDER BY m.turn_number),
                       o.created_at))::float8 AS wait
              FROM outcomes o
              JOIN messages m ON m.task_id = o.task_id
        )"
    };
}

const NEGOTIATIONS: &str = concat!(
    "WITH ",
    outcomes_cte!(),
    "
    SELECT day,
           count(*) AS total,
           count(*) FILTER (WHERE accepted) AS accepted,
           count(*) FILTER (WHERE NOT accepted AND reason IS NULL) AS rejected,
           count(*) FILTER (WHERE reason = 'turn_cap') AS turn_cap,
           count(*) FILTER (WHERE reason = 'timeout') AS timeout,
           count(*) FILTER (WHERE reason = 'canceled') AS canceled,
           avg(turn_count)::float8 AS mean_turns,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM completed_at - created_at)::float8) AS p50
      FROM outcomes
     GROUP BY GROUPING SETS ((day), ())"
);

const TURNS_TO_OUTCOME: &str = concat!(
    "WITH ",
    outcomes_cte!(),
    "
    SELECT day, turn_count::bigint, count(*)
      FROM outcomes
     GROUP BY GROUPING SETS ((day, turn_count), (turn_count))
     ORDER BY day NULLS FIRST, turn_count"
);

/// A row of [`AGENT_TURNS`]: day (null for the total), answered turns, mean and median answer
/// seconds, fallbacks.
type AgentTurnsRow = (Option<NaiveDate>, i64, Option<f64>, Option<f64>, i64);

const AGENT_TURNS: &str = concat!(
    "WITH ",
    outcomes_cte!(),
    "
    SELECT day,
           count(*) FILTER (WHERE played_by = 'personal') AS answered,
           avg(wait) FILTER (WHERE played_by = 'personal') AS mean_wait,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY wait) FILTER (WHERE played_by = 'personal') AS p50_wait,
           count(*) FILTER (WHERE played_by = 'system' AND seat_kind = 'personal') AS fallbacks
      FROM turns
     WHERE own_side IS NULL OR side = own_side
     GROUP BY GROUPING SETS ((day), ())"
);

const OBJECTIONS: &str = concat!(
    "WITH ",
    outcomes_cte!(),
    ", texts AS (
        SELECT day, reasoning
          FROM turns
         WHERE action IN ('counter', 'reject') AND (own_side IS NULL OR side = own_side)
    ), terms AS (
        SELECT x.day, lower(btrim(rtrim(btrim(term), '.'))) AS term
          FROM texts x
         CROSS JOIN LATERAL regexp_matches(x.reasoning, 'missing: ((?:[^;.\\n]|\\.(?=\\S))*)', 'g') AS found(g)
         CROSS JOIN LATERAL unnest(string_to_array(
                   regexp_replace(found.g[1], '\\s*\\(\\+\\d+ more\\)', '', 'g'), ',')) AS term
    ), counted AS (
        SELECT day, term, count(*) AS n
          FROM terms
         WHERE term <> '' AND term <> 'none'
         GROUP BY GROUPING SETS ((day, term), (term))
    ), ranked AS (
        SELECT day, term, n, row_number() OVER (PARTITION BY day ORDER BY n DESC, term) AS rank
          FROM counted
    )
    SELECT day, term, n FROM ranked WHERE rank <= 10 ORDER BY day NULLS FIRST, rank"
);

const DECISIONS: &str = "
    SELECT d.day,
           count(*) FILTER (WHERE d.decision = 'accept') AS accepted,
           count(*) FILTER (WHERE d.decision = 'decline') AS declined
      FROM (SELECT (decided_at AT TIME ZONE 'UTC')::date AS day, decision FROM opportunity_decisions
             WHERE $3::text IS NULL AND decided_at >= $1 AND decided_at < $2
            UNION ALL
            SELECT (decided_at AT TIME ZONE 'UTC')::date, decision FROM opportunity_decisions
             WHERE user_id = $3 AND decided_at >= $1 AND decided_at < $2) d
     GROUP BY GROUPING SETS ((d.day), ())";

const EXPIRED: &str = "
    SELECT (o.updated_at AT TIME ZONE 'UTC')::date AS day, count(*)
      FROM (SELECT updated_at FROM opportunities
             WHERE status = 'expired' AND $3::text IS NULL AND updated_at >= $1 AND updated_at < $2
            UNION ALL
            SELECT updated_at FROM opportunities
             WHERE status = 'expired' AND source_user_id = $3 AND updated_at >= $1 AND updated_at < $2
            UNION ALL
            SELECT updated_at FROM opportunities
             WHERE status = 'expired' AND candidate_user_id = $3 AND updated_at >= $1 AND updated_at < $2) o
     GROUP BY GROUPING SETS (((o.updated_at AT TIME ZONE 'UTC')::date), ())";

/// `$1` and `$2` are the first and last UTC day the range touches.
const CLAIM_EXPIRIES: &str = "
    SELECT d.day, sum(d.claims_expired)::bigint
      FROM (SELECT day, claims_expired FROM agent_trust_days
             WHERE $3::text IS NULL AND day >= $1 AND day <= $2
            UNION ALL
            SELECT t.day, t.claims_expired
              FROM agents a JOIN agent_trust_days t ON t.agent_id = a.agent_id
             WHERE a.owner_user_id = $3 AND t.day >= $1 AND t.day <= $2) d
     GROUP BY GROUPING SETS ((d.day), ())";

/// `x` rounded to two decimals.
fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Computes the insights of `scope`.
pub async fn compute(conn: &mut PgConnection, scope: &Scope<'_>) -> anyhow::Result<Insights> {
    let mut out = Insights::default();
    let (from, to, user) = (scope.from, scope.to, scope.user_id);

    type NegotiationRow = (Option<NaiveDate>, i64, i64, i64, i64, i64, i64, Option<f64>, Option<f64>);
    let rows: Vec<NegotiationRow> =
        sqlx::query_as(NEGOTIATIONS).bind(from).bind(to).bind(user).fetch_all(&mut *conn).await?;
    for (day, total, accepted, rejected, turn_cap, timeout, canceled, mean_turns, p50) in rows {
        let f = out.at(day);
        f.negotiations = OutcomeCounts { total, accepted, rejected, stalled: StalledCounts { turn_cap, timeout, canceled } };
        f.mean_turns = mean_turns.map(round2);
        f.time_to_outcome_p50_seconds = p50.map(round2);
    }

    let rows: Vec<(Option<NaiveDate>, i64, i64)> =
        sqlx::query_as(TURNS_TO_OUTCOME).bind(from).bind(to).bind(user).fetch_all(&mut *conn).await?;
    for (day, turns, negotiations) in rows {
        out.at(day).turns_to_outcome.push(TurnsCount { turns, negotiations });
    }

    let rows: Vec<AgentTurnsRow> =
        sqlx::query_as(AGENT_TURNS).bind(from).bind(to).bind(user).fetch_all(&mut *conn).await?;
    for (day, turns, mean_seconds, p50_seconds, fallbacks) in rows {
        let f = out.at(day);
        f.answer_latency =
            AnswerLatency { turns, mean_seconds: mean_seconds.map(round2), p50_seconds: p50_seconds.map(round2) };
        f.fallbacks = fallbacks;
    }

    let rows: Vec<(Option<NaiveDate>, String, i64)> =
        sqlx::query_as(OBJECTIONS).bind(from).bind(to).bind(user).fetch_all(&mut *conn).await?;
    for (day, term, count) in rows {
        out.at(day).top_objections.push(Objection { term, count });
    }

    let rows: Vec<(Option<NaiveDate>, i64, i64)> =
        sqlx::query_as(DECISIONS).bind(from).bind(to).bind(user).fetch_all(&mut *conn).await?;
    for (day, accepted, declined) in rows {
        let d = &mut out.at(day).decisions;
        d.accepted = accepted;
        d.declined = declined;
    }

    let rows: Vec<(Option<NaiveDate>, i64)> =
        sqlx::query_as(EXPIRED).bind(from).bind(to).bind(user).fetch_all(&mut *conn).await?;
    for (day, expired) in rows {
        out.at(day).decisions.expired = expired;
    }

    // Whole days: the first and the last day the range touches (`to` itself is excluded).
    let first_day = from.date_naive();
    let last_day = (to - chrono::Duration::microseconds(1)).date_naive();
    let rows: Vec<(Option<NaiveDate>, Option<i64>)> =
        sqlx::query_as(CLAIM_EXPIRIES).bind(first_day).bind(last_day).bind(user).fetch_all(&mut *conn).await?;
    for (day, expiries) in rows {
        let expiries = expiries.unwrap_or(0);
        // A day whose only record is claims answered or released has nothing to show.
        if expiries > 0 || out.has(day) {
            out.at(day).claim_expiries = expiries;
        }
    }
    Ok(out)
}
