//! Which targets' input schemas accept a delegation's input, decided before any transaction
//! opens.
//!
//! A schema check runs code the target wrote (its schema) on data the requester wrote (the
//! input), so it must never hold a transaction, a row lock or an async worker. Before a
//! delegation's transaction opens (a new delegation, or the end of an attempt that may fall back
//! to another target), [`Engine::screen`] reads the capabilities the transaction may offer the
//! attempt to (the named target's, or discovery's candidates for the kind of work) and checks
//! the input against each on the blocking pool, within `PARLEY_SCHEMA_CHECK_TIMEOUT` (see
//! [`crate::directory::schema::Checker`]). The transaction then only looks the verdicts up. A
//! capability registered or changed in between has no verdict: the transaction checks it there
//! and then, the same way (rare; still off the async workers and within the time cap).

use std::sync::Arc;

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{DelegationError, store};
use crate::{
    delivery::Engine,
    directory::{
        capabilities::TaskType,
        discovery::{self, Query},
        schema::Verdict,
    },
};

/// The input checked against the capabilities a delegation may go to, by capability.
#[derive(Debug, Default, Clone)]
pub struct Screened {
    /// (capability, the input schema it was checked against, the verdict).
    verdicts: Vec<(Uuid, Value, Verdict)>,
}

impl Screened {
    /// Nothing checked (a delegation that cannot fall back).
    pub fn none() -> Screened {
        Screened::default()
    }

    fn find(&self, capability_id: Uuid, schema: &Value) -> Option<&Verdict> {
        self.verdicts.iter().find(|(c, s, _)| *c == capability_id && s == schema).map(|(_, _, v)| v)
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
}

impl Engine {
    /// Checks `work`'s input against the input schema of the named target's capability, or of
    /// every candidate discovery offers for its kind of work (see the module docs).
    pub(crate) async fn screen(&self, conn: &mut PgConnection, work: Work<'_>) -> Result<Screened, DelegationError> {
        let capabilities: Vec<(Uuid, Value)> = match work.target {
            Some(anonymous_id) => store::named_capability(conn, anonymous_id, work.task_type, work.custom_type)
                .await?
                .into_iter()
                .collect(),
            None => self
                .discover_for(conn, work.task_type, work.custom_type)
                .await?
                .into_iter()
                .map(|f| (f.entry.capability_id, f.entry.input_schema))
                .collect(),
        };
        let schemas = capabilities.iter().map(|(_, s)| s.clone()).collect();
        let verdicts = match self.schemas.check_all(schemas, Arc::new(work.input.clone()), "input").await {
            Ok(verdicts) => verdicts,
            Err(slow) => vec![Err(format!("the target's input schema could not be checked: {slow}")); capabilities.len()],
        };
        Ok(Screened {
            verdicts: capabilities.into_iter().zip(verdicts).map(|((c, s), v)| (c, s, v)).collect(),
        })
    }

    /// The verdict on `input` of capability `capability_id` with input schema `schema`: as
    /// screened, or checked now when it was not (a capability changed since).
    pub(crate) async fn verdict(
        &self,
        screened: &Screened,
        capability_id: Uuid,
        schema: &Value,
        input: &Value,
    ) -> Verdict {
        if let Some(v) = screened.find(capability_id, schema) {
            return v.clone();
        }
        match self.schemas.check(schema, input, "input").await {
            Ok(verdict) => verdict,
            Err(slow) => Err(format!("the target's input schema could not be checked: {slow}")),
        }
    }

    /// The directory's discovery for a kind of work, best first: the candidates of a delegation
    /// without a named target.
    pub(crate) async fn discover_for(
        &self,
        conn: &mut PgConnection,
        task_type: &str,
        custom_type: Option<&str>,
    ) -> Result<Vec<discovery::Found>, DelegationError> {
        let task_type = TaskType::parse(task_type).ok_or_else(|| anyhow::anyhow!("stored task type {task_type}"))?;
        let q = Query {
            task_type,
            custom_type: custom_type.map(str::to_owned),
            min_trust_score: 0.0,
            max_cost_usd: None,
            max_latency_ms: None,
            limit: discovery::MAX_LIMIT,
        };
        Ok(discovery::discover(conn, &q, self.config.min_trust, self.config.anonymous_id_ttl).await?.results)
    }
}
