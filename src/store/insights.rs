//! Insights: what happened to negotiations, decisions and personal agents per UTC day and over
//! a range of days (`GET /api/insights`), read from the per-day rollups that
//! [`super::insight_rollups`] writes as things happen. A year is at most 366 rows per scope
//! (plus their keyed counts), however long the history is, and nothing here reads the history.
//!
//! A range covers every UTC day it touches, whole. Without a user it covers everyone (the
//! platform's view). With a user it covers only what that user is part of, and the other side
//! of a negotiation only where that user may see it anyway:
//!
//! - **Negotiations** are counted on the UTC day they *ended*, with the user as source or
//!   candidate. Outcome and reason come from the outcome: accepted, rejected, or stalled by
//!   `turn_cap`, `timeout` or `canceled`. *Mean turns* is the mean of the outcomes' turn counts;
//!   *time to outcome* is from the negotiation's start to its end; its median is read from
//!   quarter-octave buckets (within a fifth of the exact median).
//! - **Answer latency** covers the turns that personal agents answered in those negotiations
//!   (for a user: only on the user's own side). Parley keeps the stored time of every turn but
//!   not the park and pickup times of past turns, so a turn's latency is *the stored time of the
//!   answer minus the stored time of the turn before it* (or the negotiation's start for turn
//!   0): the wait for a pickup and the agent's own time together. The mean is exact; the median
//!   is read from the same buckets as the time to outcome.
//! - **Fallbacks** are turns the system negotiator took on a seat a personal agent plays,
//!   counted on the same turns as the latency; **system turns** are the turns it played for a
//!   user who had no personal agent in that negotiation. Together they are every turn Parley
//!   decided for someone, as the turns themselves say (`playedBy` `system_fallback` and `system`).
//! - **Claim expiries** are the claims of personal agents (for a user: the user's agents) that
//!   lapsed, on the day they lapsed.
//! - **Decisions** are the human decisions (for a user: the user's own) on the day they were
//!   made, and the opportunities that expired undecided, on the day they expired (an
//!   opportunity reactivated later still counts as having expired then).
//! - **Objections** are the terms named missing (`missing: a, b`, as the system negotiator
//!   phrases its reasoning, up to a `;`, a line's end or a sentence's end; `none` and a
//!   trailing `(+N more)` are dropped, terms are compared in lower case, and a hyphenated term
//!   such as `part-time` stays one term) in the reasoning of `counter` and `reject` turns: the
//!   first ten terms a turn names, each of at most 64 characters, so that an agent naming
//!   thousands adds ten keys per scope at most. For a user only the user's *own side's* turns
//!   count, never the other side's private reasoning. The ten most named terms, per day and in
//!   total.
//!
//! Means and medians are rounded to two decimals: they are read by people, and more digits
//! than that carry no meaning.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

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

/// Questions personal agents asked their people (`ask_person`), and how they closed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuestionCounts {
    /// Questions asked (for a user: by their own agents, to them).
    pub asked: i64,
    /// Questions the person answered in time.
    pub answered: i64,
    /// Questions whose answer window ran out.
    pub unanswered: i64,
}

/// Counts a question event of the day: `asked`, `answered` or `unanswered`, for everyone and for
/// the asking person, in the shard of its negotiation (in the caller's transaction).
pub async fn count_question(conn: &mut PgConnection, task_id: Uuid, user_id: &str, key: &str) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO insight_counts AS c (scope, day, kind, key, shard, n)
         SELECT scope, (now() AT TIME ZONE 'UTC')::date, 'question', $3, parley_insights_shard($1), 1
           FROM (SELECT '' AS scope UNION SELECT $2) s
          ORDER BY scope
         ON CONFLICT (scope, day, kind, key, shard) DO UPDATE SET n = c.n + 1",
    )
    .bind(task_id)
    .bind(user_id)
    .bind(key)
    .execute(conn)
    .await?;
    Ok(())
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
    /// Turns the system negotiator took for a personal agent that did not answer in time (or
    /// was not running, or handed the turn back): turns played `system_fallback`.
    pub fallbacks: i64,
    /// Turns the system negotiator played for a user who has no personal agent: turns played
    /// `system`.
    pub system_turns: i64,
    /// The ten terms most often named missing, most named first.
    pub top_objections: Vec<Objection>,
    /// Questions personal agents asked their people, answered and unanswered (for a user: their
    /// own agents' questions to them; never the other side's).
    pub person_questions: QuestionCounts,
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

/// `x` rounded to two decimals.
fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The day's figures of a scope, summed over shards, per day and for the whole range.
const DAYS: &str = "
    SELECT day,
           coalesce(sum(negotiations), 0)::bigint, coalesce(sum(accepted), 0)::bigint, coalesce(sum(rejected), 0)::bigint,
           coalesce(sum(turn_cap), 0)::bigint, coalesce(sum(timeout), 0)::bigint, coalesce(sum(canceled), 0)::bigint, coalesce(sum(turns), 0)::bigint,
           coalesce(sum(answered), 0)::bigint, coalesce(sum(answer_seconds), 0)::float8, coalesce(sum(fallbacks), 0)::bigint,
           coalesce(sum(system_turns), 0)::bigint, coalesce(sum(decisions_accepted), 0)::bigint, coalesce(sum(decisions_declined), 0)::bigint, coalesce(sum(expired), 0)::bigint,
           coalesce(sum(claim_expiries), 0)::bigint
      FROM insight_days
     WHERE scope = $1 AND day >= $2 AND day <= $3
     GROUP BY GROUPING SETS ((day), ())";

/// The keyed counts of a scope, summed over shards, per day and for the whole range.
const COUNTS: &str = "
    SELECT day, kind, key, sum(n)::bigint
      FROM insight_counts
     WHERE scope = $1 AND day >= $2 AND day <= $3
     GROUP BY GROUPING SETS ((day, kind, key), (kind, key))";

/// A row of [`DAYS`].
type DayRow = (Option<NaiveDate>, i64, i64, i64, i64, i64, i64, i64, i64, f64, i64, i64, i64, i64, i64, i64);

/// Keyed counts of one day or of the range, as read: turns, buckets and terms.
#[derive(Default)]
struct Keyed {
    questions: QuestionCounts,
    turns: BTreeMap<i64, i64>,
    outcome: BTreeMap<i32, i64>,
    answer: BTreeMap<i32, i64>,
    objections: Vec<(String, i64)>,
}

/// The first and the last UTC day `[from, to)` touches: the rollups count whole days.
pub fn days_of(from: DateTime<Utc>, to: DateTime<Utc>) -> (NaiveDate, NaiveDate) {
    (from.date_naive(), (to - chrono::Duration::microseconds(1)).date_naive())
}

/// Computes the insights of `scope` from the rollups, over every UTC day the range touches.
pub async fn compute(conn: &mut PgConnection, scope: &Scope<'_>) -> anyhow::Result<Insights> {
    let mut out = Insights::default();
    let (first_day, last_day) = days_of(scope.from, scope.to);
    let who = scope.user_id.unwrap_or("");

    let rows: Vec<DayRow> = sqlx::query_as(DAYS).bind(who).bind(first_day).bind(last_day).fetch_all(&mut *conn).await?;
    for row in rows {
        let (day, total, accepted, rejected, turn_cap, timeout, canceled, turns) =
            (row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7);
        let (answered, answer_seconds, fallbacks, system_turns) = (row.8, row.9, row.10, row.11);
        let (decided_accept, decided_decline, expired, claim_expiries) = (row.12, row.13, row.14, row.15);
        let f = out.at(day);
        f.negotiations =
            OutcomeCounts { total, accepted, rejected, stalled: StalledCounts { turn_cap, timeout, canceled } };
        f.mean_turns = (total > 0).then(|| round2(turns as f64 / total as f64));
        f.answer_latency.turns = answered;
        f.answer_latency.mean_seconds = (answered > 0).then(|| round2(answer_seconds / answered as f64));
        f.fallbacks = fallbacks;
        f.system_turns = system_turns;
        f.decisions = DecisionCounts { accepted: decided_accept, declined: decided_decline, expired };
        f.claim_expiries = claim_expiries;
    }

    let rows: Vec<(Option<NaiveDate>, String, String, i64)> =
        sqlx::query_as(COUNTS).bind(who).bind(first_day).bind(last_day).fetch_all(&mut *conn).await?;
    let mut keyed: BTreeMap<Option<NaiveDate>, Keyed> = BTreeMap::new();
    for (day, kind, key, n) in rows {
        let k = keyed.entry(day).or_default();
        match kind.as_str() {
            "turns" => *k.turns.entry(key.parse()?).or_default() += n,
            "outcome" => *k.outcome.entry(key.parse()?).or_default() += n,
            "answer" => *k.answer.entry(key.parse()?).or_default() += n,
            "question" => match key.as_str() {
                "asked" => k.questions.asked += n,
                "answered" => k.questions.answered += n,
                _ => k.questions.unanswered += n,
            },
            _ => k.objections.push((key, n)),
        }
    }
    for (day, mut k) in keyed {
        if !out.has(day) {
            // A day whose only activity was a question has no row of the day's figures.
            if k.questions == QuestionCounts::default() {
                continue;
            }
        }
        let f = out.at(day);
        f.person_questions = std::mem::take(&mut k.questions);
        f.turns_to_outcome =
            k.turns.into_iter().map(|(turns, negotiations)| TurnsCount { turns, negotiations }).collect();
        f.time_to_outcome_p50_seconds = bucket_median(&k.outcome).map(round2);
        f.answer_latency.p50_seconds = bucket_median(&k.answer).map(round2);
        k.objections.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        k.objections.truncate(TOP_OBJECTIONS);
        f.top_objections = k.objections.into_iter().map(|(term, count)| Objection { term, count }).collect();
    }
    Ok(out)
}

/// How many objections a day (and the range) lists.
const TOP_OBJECTIONS: usize = 10;

/// The bounds in seconds of a duration bucket (see `parley_insights_bucket`): bucket 0 holds
/// `[0, 1 ms)`, bucket `b` holds `[2^((b-1)/4), 2^(b/4))` milliseconds.
fn bucket_bounds(bucket: i32) -> (f64, f64) {
    if bucket <= 0 {
        return (0.0, 0.001);
    }
    let at = |quarter: i32| 2f64.powf(f64::from(quarter) / 4.0) / 1000.0;
    (at(bucket - 1), at(bucket))
}

/// The median of a bucketed distribution, interpolated inside the bucket that holds it
/// (geometrically: the buckets grow by a constant ratio); `None` without any value.
fn bucket_median(buckets: &BTreeMap<i32, i64>) -> Option<f64> {
    let n: i64 = buckets.values().sum();
    if n == 0 {
        return None;
    }
    let half = n as f64 / 2.0;
    let mut below = 0.0;
    for (&bucket, &count) in buckets {
        let count = count as f64;
        if below + count >= half {
            let share = ((half - below) / count).clamp(0.0, 1.0);
            let (low, high) = bucket_bounds(bucket);
            return Some(if low == 0.0 { high * share } else { low * (high / low).powf(share) });
        }
        below += count;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_median_read_from_buckets_is_within_a_fifth_of_the_true_one() {
        for seconds in [0.0004, 0.02, 0.7, 3.0, 61.0, 3600.0, 86_400.0] {
            // The bucket `parley_insights_bucket` gives (the same formula).
            let bucket =
                if seconds * 1000.0 < 1.0 { 0 } else { (4.0 * (seconds * 1000.0f64).log2()).floor() as i32 + 1 };
            let (low, high) = bucket_bounds(bucket);
            assert!(low <= seconds && seconds < high, "{seconds} outside [{low}, {high})");
            let median = bucket_median(&BTreeMap::from([(bucket, 3)])).unwrap();
            assert!((median - seconds).abs() <= seconds.max(0.001) * 0.2, "{median} for {seconds}");
        }
        assert_eq!(bucket_median(&BTreeMap::new()), None);
        // Two buckets of one value each: the median sits at the top of the lower one.
        let (_, top) = bucket_bounds(10);
        assert!((bucket_median(&BTreeMap::from([(10, 1), (30, 1)])).unwrap() - top).abs() < 1e-12);
    }
}
