//! Which targets' input schemas accept a delegation's input, decided before any transaction
//! opens, and which of them a delegation without a named target may go to.
//!
//! A schema check runs code the target wrote (its schema) on data the requester wrote (the
//! input), so it must never hold a transaction, a row lock, a pooled connection or an async
//! worker. Before a delegation's transaction opens (a new delegation, or the end of an attempt
//! that may fall back to another target), [`Delegations::screen`] reads the capabilities the
//! transaction may offer the attempt to, gives its connection back, and checks the input
//! against them on the schema pool ([`crate::directory::schema::Checker`]), on behalf of the
//! requester's owner. The transaction then only looks the verdicts up; a named target whose
//! capability changed in between has none, and the delegation is screened again.
//!
//! The candidates of a delegation without a named target are discovery's order of the whole
//! kind of work, not its first page: every enabled capability that takes delegations, of an
//! active agent above the trust floor, best composite score first (the requester's own agent
//! and the targets already tried left out). They are checked in that order until
//! [`WANTED`] accept the input; at most [`PER_OWNER`] capabilities of any one owner are
//! checked, and at most [`MOST_CHECKED`] in all. So a flood of capabilities that refuse every
//! input, priced at nothing and claiming no latency, costs one owner's few checks and pushes no
//! honest target out of reach; and one owner's agents are at most [`PER_OWNER`] of the targets
//! a delegation can fall back through.

use std::{collections::HashMap, sync::Arc};

use serde_json::Value;
use uuid::Uuid;

use super::{DelegationError, service::Delegations, store};
use crate::directory::{
    capabilities::TaskType,
    discovery::{self, Query},
    index,
    schema::{CheckError, Verdict, units},
};

/// Candidates that accept the input a screen looks for: as many as discovery shows.
pub const WANTED: usize = discovery::MAX_LIMIT as usize;
/// The most capabilities of one owner a screen checks.
pub const PER_OWNER: usize = 3;
/// The most capabilities one screen checks.
pub const MOST_CHECKED: usize = 3 * WANTED;

/// One capability a delegation may go to, and what its input schema said of the input.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The agent.
    pub agent_id: Uuid,
    /// Its current anonymous id.
    pub anonymous_id: Uuid,
    /// The capability.
    pub capability_id: Uuid,
    /// The input schema the input was checked against.
    pub input_schema: Value,
    /// Its verdict.
    pub verdict: Verdict,
}

/// The input checked against the capabilities a delegation may go to, best first.
#[derive(Debug, Default, Clone)]
pub struct Screened {
    checked: Vec<Candidate>,
    /// Why no candidate could be checked at all, when none was.
    unchecked: Option<String>,
}

impl Screened {
    /// Nothing checked (a delegation that cannot fall back, or one already made).
    pub fn none() -> Screened {
        Screened::default()
    }

    /// The verdict of capability `capability_id` with input schema `schema`, if it was checked.
    pub fn find(&self, capability_id: Uuid, schema: &Value) -> Option<&Verdict> {
        self.checked.iter().find(|c| c.capability_id == capability_id && c.input_schema == *schema).map(|c| &c.verdict)
    }

    /// The candidates that accept the input, best first.
    pub fn accepted(&self) -> impl Iterator<Item = &Candidate> {
        self.checked.iter().filter(|c| c.verdict.is_ok())
    }

    /// Why the best candidate refused the input (or why none could be checked), if one did.
    pub fn first_refusal(&self) -> Option<String> {
        self.checked.iter().find_map(|c| c.verdict.clone().err()).or_else(|| self.unchecked.clone())
    }
}

/// What a screen needs to know of a delegation.
#[derive(Debug, Clone, Copy)]
pub struct Work<'a> {
    /// The kind of work.
    pub task_type: &'a str,
    /// For `custom`.
    pub custom_type: Option<&'a str>,
    /// The input.
    pub input: &'a Value,
    /// The named target, if any.
    pub target: Option<Uuid>,
    /// The requesting agent (never its own target).
    pub requester: Uuid,
    /// Its owner, on whose behalf the checks run.
    pub owner: &'a str,
    /// Agents already tried (a fallback's screen leaves them out).
    pub tried: &'a [Uuid],
}

/// A capability listed for a screen, before its check.
struct Listed {
    agent_id: Uuid,
    anonymous_id: Uuid,
    owner: String,
    capability_id: Uuid,
    input_schema: Value,
}

impl Delegations {
    /// Checks `work`'s input against the input schema of the named target's capability, or of
    /// the candidates for its kind of work (see the module docs). `Err` only when the owner's
    /// checking time is used up (or the database fails): a check that could not run is a
    /// refusal saying so.
    pub(crate) async fn screen(&self, work: Work<'_>) -> Result<Screened, DelegationError> {
        let listed = {
            let mut conn = self.runtime.pool.acquire().await?;
            match work.target {
                Some(anonymous_id) => {
                    store::named_capability(&mut conn, anonymous_id, work.task_type, work.custom_type)
                        .await?
                        .into_iter()
                        .map(|(capability_id, input_schema)| Listed {
                            agent_id: Uuid::nil(),
                            anonymous_id,
                            owner: String::new(),
                            capability_id,
                            input_schema,
                        })
                        .collect()
                }
                None => self.candidates(&mut conn, &work).await?,
            }
        };
        if listed.is_empty() {
            return Ok(Screened::none());
        }
        let value = Arc::new(work.input.clone());
        let checked = self
            .schemas
            .run(work.owner, move |batch| {
                let units = units(&value);
                let mut per_owner: HashMap<String, usize> = HashMap::new();
                let (mut checked, mut accepted) = (Vec::new(), 0usize);
                for l in listed {
                    if accepted >= WANTED || checked.len() >= MOST_CHECKED || batch.go_on().is_err() {
                        break;
                    }
                    let seen = per_owner.entry(l.owner).or_default();
                    if *seen >= PER_OWNER {
                        continue;
                    }
                    *seen += 1;
                    let verdict = batch.prepare(&l.input_schema).and_then(|p| p.check_measured(&value, units, "input"));
                    accepted += usize::from(verdict.is_ok());
                    checked.push(Candidate {
                        agent_id: l.agent_id,
                        anonymous_id: l.anonymous_id,
                        capability_id: l.capability_id,
                        input_schema: l.input_schema,
                        verdict,
                    });
                }
                Ok(checked)
            })
            .await;
        match checked {
            Ok(checked) => Ok(Screened { checked, unchecked: None }),
            Err(CheckError::OverBudget(wait)) => Err(DelegationError::CheckBudget(wait)),
            Err(e) => Ok(Screened {
                checked: Vec::new(),
                unchecked: Some(format!("the target's input schema could not be checked: {e}")),
            }),
        }
    }

    /// Every capability a delegation of `work`'s kind without a named target may go to, best
    /// first (see the module docs).
    async fn candidates(&self, conn: &mut sqlx::PgConnection, work: &Work<'_>) -> Result<Vec<Listed>, DelegationError> {
        let task_type =
            TaskType::parse(work.task_type).ok_or_else(|| anyhow::anyhow!("stored task type {}", work.task_type))?;
        let snapshot = index::snapshot(conn, Some(task_type), self.runtime.config.anonymous_id_ttl).await?;
        let q = Query {
            task_type,
            custom_type: work.custom_type.map(str::to_owned),
            min_trust_score: 0.0,
            max_cost_usd: None,
            max_latency_ms: None,
            limit: i64::try_from(snapshot.entries.len()).unwrap_or(i64::MAX),
        };
        Ok(discovery::rank(&snapshot.entries, &q, self.runtime.config.min_trust)
            .results
            .into_iter()
            .map(|f| f.entry)
            .filter(|e| e.accept_delegations && e.agent_id != work.requester && !work.tried.contains(&e.agent_id))
            .map(|e| Listed {
                agent_id: e.agent_id,
                anonymous_id: e.anonymous_agent_id.0,
                owner: e.owner_user_id,
                capability_id: e.capability_id,
                input_schema: e.input_schema,
            })
            .collect())
    }
}
