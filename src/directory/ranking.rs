//! Ranking: every discoverable capability assessed against one task by the capability
//! calculator (`crate::scoring`, the same one `POST /agent/negotiation` answers with), then
//! ordered by
//!
//! ```text
//! rankScore = 0.7 * score + 0.3 * trust/100      (4 decimals)
//! ```
//!
//! with `score` the assessment's score and `trust` the agent's trust percentile.
//!
//! Who is assessed: the enabled capabilities of active agents (of the asked `taskType` and
//! `customType`, when given) whose agent's trust percentile is at least the configured floor,
//! the same population discovery shows. Each is assessed with:
//! - its skill: the one given at registration, or one derived from the capability
//!   ([`derived_skill`]: taskType, description and tags);
//! - its agent's live queue depth: the delegation attempts open at it (offered or accepted),
//!   read live on every ranking (one query); never its user's negotiation turns, which would
//!   tie an anonymous id to whoever saw a turn parked;
//! - its latency: the capability's declared `estimatedLatencyMs` as the skill's
//!   `performance.avg_processing_time_ms` (nothing else is measured yet, so the declaration
//!   stands; without one the skill's own figure, or the calculator's default, applies);
//! - its price: the declared `estimatedCostUsd`, checked against the request's
//!   `max_cost_amount`; a capability without a price is free (cost subscore 1.0).
//!
//! A capability's calculator (its decoded skill, prepared for matching, and its price) is built
//! once per version of the capability (its id and `updated_at`) and kept in process (bounded,
//! least recently used first out), so a ranking reads no JSON and prepares nothing for the
//! capabilities it has seen before. The directory's snapshot of a kind also keeps its entries'
//! calculators once a ranking has looked them up, so the rankings that follow on the same
//! snapshot look up nothing.
//!
//! Every candidate is first scored without its explanation; only the entries shown are then
//! assessed in full (see [`rank`]). The work of preparing calculators and of assessing runs on
//! the blocking pool, at most [`AT_ONCE`] rankings at a time ([`off_the_async_workers`]): a
//! ranking over a large directory never holds an async worker, so the service's other requests
//! (a health probe, a long-poll's answer) are not kept waiting behind it.
//!
//! Assessments are keyword-only (no embeddings). Accepted assessments are candidates, best
//! `rankScore` first, ties by anonymous id and capability id; the others are listed as rejected
//! with their `rejection_reason`, best score first. Every entry carries the calculator's full
//! assessment so that the answer explains itself. Like discovery, nothing here shows an agent's
//! id or owner: rows carry the anonymous id only.

use std::{
    collections::HashMap,
    num::NonZeroUsize,
    sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use chrono::{DateTime, Utc};
use lru::LruCache;
use serde_json::{Map, Number, Value};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{
    anonymity::AnonymousId,
    capabilities::{CapabilityError, TaskType, custom_type_for},
    index,
};
use crate::scoring::{
    Assessment, AssessmentRequest, Calculator, Detail, Performance, PreparedTask, RequestError, Skill, SkillAssessment,
    lowercase, parse_request_value, round4, tokenize,
};

/// The most candidates (and rejected entries) one ranking shows, and the default.
pub const MAX_LIMIT: usize = 20;
/// Weight of the assessment's score in `rankScore`.
pub const SCORE_WEIGHT: f64 = 0.7;
/// Weight of the trust percentile (over 100) in `rankScore`.
pub const TRUST_WEIGHT: f64 = 0.3;
/// The MIME type a capability takes and gives: JSON checked against its schemas.
pub const CAPABILITY_MIME: &str = "application/json";

/// A ranking body that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RankError {
    /// `taskType`, `customType` or `limit`.
    #[error(transparent)]
    Field(#[from] CapabilityError),
    /// The assessment request itself (the calculator's own messages, naming the field).
    #[error(transparent)]
    Request(#[from] RequestError),
}

// A ranking request, checked (from the route's body or the MCP tool's arguments). The OpenAPI
// document describes the route's body from this type: the doc comments are the wire's
// descriptions, and each field is typed as it may be sent.
/// Body of `POST /api/agents/rank`: an assessment request (the fields of `POST
/// /agent/negotiation`, snake_case) plus `taskType`, `customType` and `limit`.
#[derive(Debug, Clone, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = RankIn, example = json!({
    "task_summary": "Review this Rust code for security issues",
    "max_cost_amount": "$1.00",
    "max_latency_ms": 10000,
    "taskType": "code-review",
    "limit": 5
}))]
pub struct RankQuery {
    /// The task, as `POST /agent/negotiation` takes it (`task_summary` required).
    #[serde(flatten)]
    pub request: AssessmentRequest,
    /// Only capabilities of this kind of work.
    #[schema(
        value_type = Option<String>,
        pattern = "^(code-review|code-generation|testing|documentation|analysis|summarization|translation|data-extraction|classification|generation|transformation|custom)$"
    )]
    pub task_type: Option<TaskType>,
    // Every custom one when absent.
    /// With `taskType` `custom`: only this custom type.
    pub custom_type: Option<String>,
    /// Entries in each list, 1 or more; at most 20 are shown (default 20).
    #[schema(value_type = Option<i64>, minimum = 1)]
    pub limit: usize,
}

fn refuse(field: &'static str, message: impl Into<String>) -> CapabilityError {
    CapabilityError::invalid(field, message)
}

fn opt_str<'v>(body: &'v Map<String, Value>, field: &'static str) -> Result<Option<&'v str>, CapabilityError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(refuse(field, "must be a string")),
    }
}

/// A ranking as an adapter received it: the kind of work and the limit typed (a tool's
/// arguments), and the task as the capability calculator reads it (the self-assessment
/// request's JSON object, which [`parse_request_value`] checks with the calculator's own
/// semantics). [`RankQuery::from_request`] checks it; the route's body arrives as one JSON
/// object instead ([`RankQuery::parse`]); both go through the same checks, in the same order.
#[derive(Debug, Clone, Copy)]
pub struct RankRequest<'a> {
    /// `taskType`.
    pub task_type: Option<&'a str>,
    /// `customType`.
    pub custom_type: Option<&'a str>,
    /// `limit`.
    pub limit: Option<i64>,
    /// The assessment request (`task_summary`, ...).
    pub task: &'a Value,
}

fn task_type_of(task_type: Option<&str>) -> Result<Option<TaskType>, CapabilityError> {
    match task_type.map(str::trim) {
        None => Ok(None),
        Some(t) => Ok(Some(
            TaskType::parse(t).ok_or_else(|| refuse("taskType", format!("must be one of {}", TaskType::names())))?,
        )),
    }
}

fn custom_type_of(task_type: Option<TaskType>, custom: Option<&str>) -> Result<Option<String>, CapabilityError> {
    match (task_type, custom) {
        (None, None) | (Some(TaskType::Custom), None) => Ok(None),
        (None, Some(_)) => Err(refuse("customType", "is only for taskType custom")),
        (Some(t), c) => custom_type_for(t, c),
    }
}

fn bad_limit() -> CapabilityError {
    refuse("limit", "must be a whole number of at least 1")
}

fn limit_of(limit: Option<i64>) -> Result<usize, CapabilityError> {
    match limit {
        None => Ok(MAX_LIMIT),
        Some(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(MAX_LIMIT).min(MAX_LIMIT)),
        Some(_) => Err(bad_limit()),
    }
}

impl RankQuery {
    /// Checks a body: an assessment request plus optional `taskType`, `customType` and `limit`
    /// (a `limit` above [`MAX_LIMIT`] shows [`MAX_LIMIT`]). The first field at fault is named.
    pub fn parse(body: &Value) -> Result<RankQuery, RankError> {
        let Value::Object(obj) = body else {
            return Err(refuse("body", "must be a JSON object").into());
        };
        let task_type = task_type_of(opt_str(obj, "taskType")?)?;
        let custom_type = custom_type_of(task_type, opt_str(obj, "customType")?)?;
        let limit = match obj.get("limit") {
            None | Some(Value::Null) => limit_of(None)?,
            Some(v) => limit_of(Some(v.as_u64().map(|n| i64::try_from(n).unwrap_or(i64::MAX)).ok_or_else(bad_limit)?))?,
        };
        let request = parse_request_value(body)?;
        Ok(RankQuery { request, task_type, custom_type, limit })
    }

    /// Checks a typed ranking with the same rules, in the same order, as [`RankQuery::parse`].
    pub fn from_request(r: &RankRequest<'_>) -> Result<RankQuery, RankError> {
        let task_type = task_type_of(r.task_type)?;
        let custom_type = custom_type_of(task_type, r.custom_type)?;
        let limit = limit_of(r.limit)?;
        let request = parse_request_value(r.task)?;
        Ok(RankQuery { request, task_type, custom_type, limit })
    }
}

/// A capability to assess, with what its agent's record and queue say.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The agent's current anonymous id.
    pub anonymous_agent_id: AnonymousId,
    /// The capability.
    pub capability_id: Uuid,
    /// Its kind of work.
    pub task_type: String,
    /// Set for `custom`.
    pub custom_type: Option<String>,
    /// Declared latency, milliseconds.
    pub estimated_latency_ms: Option<i64>,
    /// Declared cost, US dollars.
    pub estimated_cost_usd: Option<f64>,
    /// The agent's trust percentile.
    pub trust_score_percentile: i32,
    /// Whether its trust is still provisional.
    pub provisional: bool,
    /// Turns parked for the agent's user plus turns it holds under a claim.
    pub queue_depth: i64,
    /// The capability's calculator (its skill and price), prepared once per version of the
    /// capability and shared through an in-process cache (see [`PREPARED_CAPACITY`]).
    pub calculator: Arc<Calculator>,
}

/// What a capability's calculator is prepared from.
#[derive(Debug, Clone)]
pub struct Source {
    /// The capability.
    pub capability_id: Uuid,
    /// Its version: the calculator is kept for this one.
    pub updated_at: DateTime<Utc>,
    /// Its kind of work.
    pub task_type: String,
    /// Set for `custom`.
    pub custom_type: Option<String>,
    /// Declared latency, milliseconds.
    pub estimated_latency_ms: Option<i64>,
    /// Declared cost, US dollars.
    pub estimated_cost_usd: Option<f64>,
    /// Free text.
    pub description: Option<String>,
    /// Keywords (a JSON array of strings).
    pub tags: Value,
    /// The skill given at registration.
    pub skill: Option<Value>,
}

/// Rankings whose work runs at once; more wait for their turn.
pub const AT_ONCE: usize = 2;

static RANKING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(AT_ONCE);

/// Runs `work` (a ranking's preparing or assessing) on the blocking pool, at most [`AT_ONCE`] at
/// a time, and waits for it without holding an async worker.
pub async fn off_the_async_workers<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let _turn = RANKING.acquire().await.expect("the semaphore is never closed");
    tokio::task::spawn_blocking(work).await.expect("a ranking's work does not panic")
}

/// Assesses every candidate and ranks them (see [`rank`]), off the async workers.
pub async fn rank_off_the_async_workers(request: AssessmentRequest, found: Vec<Candidate>, limit: usize) -> Ranking {
    off_the_async_workers(move || rank(&request, found, limit)).await
}

/// How many prepared calculators the process keeps (the least recently used go first): room for
/// every capability of a large directory, a few kilobytes each.
pub const PREPARED_CAPACITY: usize = 16_384;

/// A capability's version: its id and when it last changed (a replacement or a permissions
/// change moves `updated_at`, so a changed capability is prepared again).
type Version = (Uuid, DateTime<Utc>);

static PREPARED: LazyLock<Mutex<LruCache<Version, Arc<Calculator>>>> =
    LazyLock::new(|| Mutex::new(LruCache::new(NonZeroUsize::new(PREPARED_CAPACITY).expect("a positive capacity"))));

fn prepared() -> MutexGuard<'static, LruCache<Version, Arc<Calculator>>> {
    // A panic while holding the lock cannot leave the cache inconsistent (entries are whole).
    PREPARED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every capability a ranking assesses, from the directory's snapshot of the asked kind (see
/// [`super::index`]; expired anonymous ids are replaced before it is rebuilt), with its agent's
/// live queue depth (one query over the open attempts) and its prepared calculator (see
/// [`calculators`]). `floor` is the configured lowest trust percentile.
pub async fn candidates(
    conn: &mut PgConnection,
    q: &RankQuery,
    floor: u32,
    ttl: Duration,
) -> sqlx::Result<Vec<Candidate>> {
    let snapshot = index::snapshot(conn, q.task_type, ttl).await?;
    let floor = i32::try_from(floor).unwrap_or(i32::MAX);
    let depths = index::queue_depths(conn, &snapshot.entries).await?;
    let calculators = calculators(conn, &snapshot).await?;
    // A capability deleted between the two reads has no calculator: it is no longer offered.
    Ok(snapshot
        .entries
        .iter()
        .zip(calculators)
        .filter(|(e, _)| q.custom_type.as_deref().is_none_or(|c| e.custom_type.as_deref() == Some(c)))
        .filter(|(e, _)| e.trust_score_percentile >= floor)
        .filter_map(|(e, calculator)| {
            Some(Candidate {
                anonymous_agent_id: e.anonymous_agent_id,
                capability_id: e.capability_id,
                task_type: e.task_type.clone(),
                custom_type: e.custom_type.clone(),
                estimated_latency_ms: e.estimated_latency_ms,
                estimated_cost_usd: e.estimated_cost_usd,
                trust_score_percentile: e.trust_score_percentile,
                provisional: e.provisional,
                queue_depth: depths.get(&e.agent_id).copied().unwrap_or(0),
                calculator: calculator.clone()?,
            })
        })
        .collect())
}

/// The prepared calculator of each of a snapshot's entries, in its order. The first ranking to
/// read a snapshot fills them in: from the process's cache of calculators per capability
/// version, or prepared now for the capabilities not seen before (one query, for those only);
/// every later ranking on that snapshot reads them as they are.
async fn calculators<'s>(
    conn: &mut PgConnection,
    snapshot: &'s index::Snapshot,
) -> sqlx::Result<&'s [Option<Arc<Calculator>>]> {
    if let Some(done) = snapshot.calculators.get() {
        return Ok(done);
    }
    let entries = &snapshot.entries;
    let mut found: Vec<Option<Arc<Calculator>>> = {
        let mut cache = prepared();
        entries.iter().map(|e| cache.get(&(e.capability_id, e.updated_at)).cloned()).collect()
    };
    let missing: Vec<Uuid> =
        entries.iter().zip(&found).filter(|(_, c)| c.is_none()).map(|(e, _)| e.capability_id).collect();
    if !missing.is_empty() {
        let sources = sqlx::query_as!(
            Source,
            r#"SELECT capability_id, updated_at, task_type, custom_type, estimated_latency_ms, estimated_cost_usd,
                      description, tags, skill
                 FROM capabilities WHERE capability_id = ANY($1)"#,
            &missing
        )
        .fetch_all(conn)
        .await?;
        let fresh: HashMap<Uuid, (DateTime<Utc>, Arc<Calculator>)> = off_the_async_workers(move || {
            sources.iter().map(|s| (s.capability_id, (s.updated_at, Arc::new(calculator_of(s))))).collect()
        })
        .await;
        let mut cache = prepared();
        for (id, (updated_at, calculator)) in &fresh {
            cache.put((*id, *updated_at), calculator.clone());
        }
        for (e, c) in entries.iter().zip(found.iter_mut()) {
            if c.is_none() {
                *c = fresh.get(&e.capability_id).map(|(_, calculator)| calculator.clone());
            }
        }
    }
    // Two rankings may fill it at once; both computed the same calculators.
    Ok(snapshot.calculators.get_or_init(|| found))
}

/// The skill of a capability registered without one: id and name from its kind of work (the
/// `customType` for `custom`), its tags, its description's words as keywords (the calculator
/// does not read descriptions), and JSON in and out.
pub fn derived_skill(task_type: &str, custom_type: Option<&str>, description: Option<&str>, tags: &[String]) -> Skill {
    let kind = custom_type.unwrap_or(task_type);
    let mut keywords: Vec<String> = Vec::new();
    if let Some(d) = description {
        for word in tokenize(&lowercase(d)) {
            if !keywords.iter().any(|k| k == word) {
                keywords.push(word.to_owned());
            }
        }
    }
    Skill {
        id: Some(kind.to_owned()),
        name: Some(kind.to_owned()),
        description: description.map(str::to_owned),
        tags: tags.to_vec(),
        input_modes: vec![CAPABILITY_MIME.to_owned()],
        output_modes: vec![CAPABILITY_MIME.to_owned()],
        assessment: (!keywords.is_empty()).then(|| SkillAssessment { keywords, ..SkillAssessment::default() }),
        ..Skill::default()
    }
}

/// The skill a capability is assessed with: its own or a derived one, with the declared latency.
pub fn skill_of(c: &Source) -> Skill {
    let tags: Vec<String> =
        c.tags.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect()).unwrap_or_default();
    let derive = || derived_skill(&c.task_type, c.custom_type.as_deref(), c.description.as_deref(), &tags);
    // A stored skill was checked at registration; should it no longer decode, derive one.
    let mut skill = match &c.skill {
        Some(v) => Skill::from_value(v, "skill").unwrap_or_else(|_| derive()),
        None => derive(),
    };
    if let Some(ms) = c.estimated_latency_ms {
        skill.performance = Some(Performance { avg_processing_time_ms: Some(Number::from(ms)) });
    }
    skill
}

/// A capability's calculator: its skill, and its declared price.
pub fn calculator_of(c: &Source) -> Calculator {
    Calculator::new([skill_of(c)], c.estimated_cost_usd.map(|c| c.to_string()))
}

/// One assessed capability.
#[derive(Debug, Clone)]
pub struct Ranked {
    /// What was assessed.
    pub candidate: Candidate,
    /// The calculator's verdict.
    pub assessment: Assessment,
    /// `0.7 * score + 0.3 * trust/100`, 4 decimals (accepted ones only).
    pub rank_score: Option<f64>,
}

/// A ranking's outcome.
#[derive(Debug, Clone, Default)]
pub struct Ranking {
    /// Accepted, best `rankScore` first.
    pub candidates: Vec<Ranked>,
    /// Not accepted, best score first.
    pub rejected: Vec<Ranked>,
}

/// `0.7 * score + 0.3 * percentile/100`, 4 decimals.
pub fn rank_score(score: f64, percentile: i32) -> f64 {
    round4(SCORE_WEIGHT * score + TRUST_WEIGHT * f64::from(percentile) / 100.0)
}

/// Assesses every candidate and ranks them; pure and synchronous.
///
/// The task is prepared once for all candidates. Every candidate is first scored without its
/// explanation ([`Detail::Score`]: the verdict and score only, the same numbers a full
/// assessment gives); only the ones shown (the best `limit` accepted by `rankScore` and the best
/// `limit` rejected by score) are then assessed in full, so a ranking over a large directory
/// builds at most `2 * limit` explanations.
pub fn rank(request: &AssessmentRequest, found: Vec<Candidate>, limit: usize) -> Ranking {
    let task = PreparedTask::new(request);
    let key = |c: &Candidate| (c.anonymous_agent_id, c.capability_id);
    // (index into `found`, what it is ordered by: rankScore when accepted, score when not)
    let mut accepted: Vec<(usize, f64)> = Vec::new();
    let mut rejected: Vec<(usize, f64)> = Vec::new();
    for (i, candidate) in found.iter().enumerate() {
        let a = candidate.calculator.assess_prepared(&task, Some(candidate.queue_depth), None, Detail::Score);
        if a.accepted {
            accepted.push((i, rank_score(a.score, candidate.trust_score_percentile)));
        } else {
            rejected.push((i, a.score));
        }
    }
    let best_first = |list: &mut Vec<(usize, f64)>| {
        let order = |a: &(usize, f64), b: &(usize, f64)| {
            b.1.total_cmp(&a.1).then_with(|| key(&found[a.0]).cmp(&key(&found[b.0])))
        };
        if list.len() > limit {
            list.select_nth_unstable_by(limit, order);
            list.truncate(limit);
        }
        list.sort_by(order);
    };
    best_first(&mut accepted);
    best_first(&mut rejected);
    let full = |&(i, _): &(usize, f64)| {
        let candidate = &found[i];
        let assessment = candidate.calculator.assess_prepared(&task, Some(candidate.queue_depth), None, Detail::Full);
        let rank_score = assessment.accepted.then(|| rank_score(assessment.score, candidate.trust_score_percentile));
        Ranked { candidate: candidate.clone(), assessment, rank_score }
    };
    Ranking { candidates: accepted.iter().map(full).collect(), rejected: rejected.iter().map(full).collect() }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(body: Value) -> Result<RankQuery, RankError> {
        RankQuery::parse(&body)
    }

    fn field(e: RankError) -> String {
        match e {
            RankError::Field(f) => f.field.to_owned(),
            RankError::Request(r) => r.message,
        }
    }

    #[test]
    fn the_body_is_an_assessment_request_with_an_optional_kind_and_limit() {
        let q = parse(json!({"task_summary": "review my rust code"})).unwrap();
        assert_eq!((q.task_type, q.custom_type, q.limit), (None, None, MAX_LIMIT));
        let q = parse(json!({"task_summary": "x", "taskType": "custom", "customType": "legal", "limit": 500})).unwrap();
        assert_eq!(
            (q.task_type, q.custom_type.as_deref(), q.limit),
            (Some(TaskType::Custom), Some("legal"), MAX_LIMIT)
        );
        assert_eq!(field(parse(json!({"task_summary": "x", "taskType": "cooking"})).unwrap_err()), "taskType");
        assert_eq!(field(parse(json!({"task_summary": "x", "taskType": 3})).unwrap_err()), "taskType");
        assert_eq!(field(parse(json!({"task_summary": "x", "customType": "legal"})).unwrap_err()), "customType");
        assert_eq!(field(parse(json!({"task_summary": "x", "limit": 0})).unwrap_err()), "limit");
        assert_eq!(field(parse(json!({"task_summary": "x", "limit": 2.5})).unwrap_err()), "limit");
        assert_eq!(field(parse(json!({"taskType": "testing"})).unwrap_err()), "'task_summary' is required");
        assert_eq!(
            field(parse(json!({"task_summary": "x", "min_score": "high"})).unwrap_err()),
            "'min_score' must be a number"
        );
        assert_eq!(field(parse(json!([])).unwrap_err()), "body");
    }

    #[test]
    fn a_derived_skill_reads_kind_tags_and_description() {
        let s = derived_skill("code-review", None, Some("Reviews Rust, and rust tests."), &["security".into()]);
        assert_eq!((s.id.as_deref(), s.name.as_deref()), (Some("code-review"), Some("code-review")));
        assert_eq!(s.tags, ["security"]);
        assert_eq!(s.assessment.unwrap().keywords, ["reviews", "rust", "and", "tests"]);
        assert_eq!(s.input_modes, [CAPABILITY_MIME]);
        let s = derived_skill("custom", Some("legal-review"), None, &[]);
        assert_eq!(s.id.as_deref(), Some("legal-review"));
        assert!(s.assessment.is_none());
    }

    /// What `rank` promises, computed the slow way: every candidate assessed in full, sorted,
    /// cut at `limit`.
    fn rank_by_full_assessment(
        request: &AssessmentRequest,
        found: &[Candidate],
        limit: usize,
    ) -> Vec<(Uuid, Option<f64>, Assessment)> {
        let mut all: Vec<(Candidate, Assessment)> =
            found.iter().map(|c| (c.clone(), c.calculator.assess(request, Some(c.queue_depth), None))).collect();
        let key = |c: &Candidate| (c.anonymous_agent_id, c.capability_id);
        let (mut acc, mut rej): (Vec<_>, Vec<_>) = all.drain(..).partition(|(_, a)| a.accepted);
        let rs = |(c, a): &(Candidate, Assessment)| rank_score(a.score, c.trust_score_percentile);
        acc.sort_by(|a, b| rs(b).total_cmp(&rs(a)).then_with(|| key(&a.0).cmp(&key(&b.0))));
        rej.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then_with(|| key(&a.0).cmp(&key(&b.0))));
        acc.truncate(limit);
        rej.truncate(limit);
        acc.iter()
            .map(|e| (e.0.capability_id, Some(rs(e)), e.1.clone()))
            .chain(rej.into_iter().map(|(c, a)| (c.capability_id, None, a)))
            .collect()
    }

    #[test]
    fn ranking_shows_what_assessing_every_candidate_in_full_would_show() {
        const WORDS: [&str; 8] = ["rust", "review", "security", "python", "tests", "docs", "api", "legal"];
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let found: Vec<Candidate> = (0..300u32)
            .map(|i| {
                let tags: Vec<Value> = (0..1 + next(3)).map(|_| Value::from(WORDS[next(8) as usize])).collect();
                let description = format!("{} {}", WORDS[next(8) as usize], WORDS[next(8) as usize]);
                let source = Source {
                    capability_id: Uuid::from_u128(u128::from(i) + 1),
                    updated_at: Utc::now(),
                    task_type: "code-review".into(),
                    custom_type: None,
                    estimated_latency_ms: (next(4) > 0).then(|| 500 * (1 + next(40) as i64)),
                    estimated_cost_usd: (next(3) > 0).then(|| next(100) as f64 / 10.0),
                    description: Some(description),
                    tags: Value::Array(tags),
                    skill: None,
                };
                Candidate {
                    // Some agents offer several capabilities: equal rank scores are common.
                    anonymous_agent_id: AnonymousId(Uuid::from_u128(u128::from(i % 97) + 1)),
                    capability_id: source.capability_id,
                    task_type: source.task_type.clone(),
                    custom_type: None,
                    estimated_latency_ms: source.estimated_latency_ms,
                    estimated_cost_usd: source.estimated_cost_usd,
                    trust_score_percentile: [0, 50, 100][next(3) as usize],
                    provisional: true,
                    queue_depth: next(5) as i64,
                    calculator: Arc::new(calculator_of(&source)),
                }
            })
            .collect();
        let mut requests = Vec::new();
        for (summary, budget, latency, min) in [
            ("review my rust code for security", Some("5"), Some(4000.0), 0.5),
            ("python tests", None, None, 0.0),
            ("legal docs api", Some("0.5"), Some(20000.0), 0.3),
            ("", None, None, 0.5),
        ] {
            let mut r = AssessmentRequest::new(summary);
            r.max_cost_amount = budget.map(str::to_owned);
            r.max_latency_ms = latency;
            r.min_score = min;
            requests.push(r);
        }
        for request in &requests {
            for limit in [1, 3, 7, MAX_LIMIT] {
                let ranking = rank(request, found.clone(), limit);
                let shown: Vec<(Uuid, Option<f64>, Assessment)> = ranking
                    .candidates
                    .iter()
                    .chain(&ranking.rejected)
                    .map(|r| (r.candidate.capability_id, r.rank_score, r.assessment.clone()))
                    .collect();
                assert_eq!(
                    shown,
                    rank_by_full_assessment(request, &found, limit),
                    "{:?} limit {limit}",
                    request.task_summary
                );
            }
        }
        // The inputs reach every outcome this test means to cover.
        let full = rank(&requests[0], found.clone(), 300);
        assert!(
            full.candidates.len() > 20 && full.rejected.len() > 20,
            "{} / {}",
            full.candidates.len(),
            full.rejected.len()
        );
    }

    #[test]
    fn rank_score_weighs_score_and_trust() {
        assert_eq!(rank_score(0.5, 100), 0.65);
        assert_eq!(rank_score(0.7386, 40), 0.637);
    }
}
