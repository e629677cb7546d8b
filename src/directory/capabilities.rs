//! Capabilities: what an agent offers, one per kind of work (`taskType`, and `customType` for
//! `custom`), with its permissions. Registering the same kind again replaces it in place (same
//! id, same permissions).
//!
//! [`NewCapability::parse`] is the one place a capability's fields are checked: the numbers must
//! be non-negative (and `estimatedLatencyMs` at most the longest delegation timeout), a given
//! skill must decode as an assessment skill. Both schemas must then compile as JSON Schema
//! within the bounds of [`super::schema`] ([`compile_schemas`], on the schema pool; external
//! references are never fetched). A refused capability names the field at fault and nothing is
//! stored.

use crate::error_code::ErrorCode;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::schema::{CheckError, Checker, Refused};
use crate::scoring::Skill;

/// The kinds of work a capability can be for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskType {
    /// `code-review`.
    CodeReview,
    /// `code-generation`.
    CodeGeneration,
    /// `testing`.
    Testing,
    /// `documentation`.
    Documentation,
    /// `analysis`.
    Analysis,
    /// `summarization`.
    Summarization,
    /// `translation`.
    Translation,
    /// `data-extraction`.
    DataExtraction,
    /// `classification`.
    Classification,
    /// `generation`.
    Generation,
    /// `transformation`.
    Transformation,
    /// `custom`, named further by a `customType`.
    Custom,
}

impl TaskType {
    /// Every task type, in the order the API documents them: the older list first, then the
    /// four that AgentLens's current clients use, then `custom`.
    pub const ALL: [TaskType; 12] = [
        TaskType::CodeReview,
        TaskType::CodeGeneration,
        TaskType::Testing,
        TaskType::Documentation,
        TaskType::Analysis,
        TaskType::Summarization,
        TaskType::Translation,
        TaskType::DataExtraction,
        TaskType::Classification,
        TaskType::Generation,
        TaskType::Transformation,
        TaskType::Custom,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskType::CodeReview => "code-review",
            TaskType::CodeGeneration => "code-generation",
            TaskType::Testing => "testing",
            TaskType::Documentation => "documentation",
            TaskType::Analysis => "analysis",
            TaskType::Summarization => "summarization",
            TaskType::Translation => "translation",
            TaskType::DataExtraction => "data-extraction",
            TaskType::Classification => "classification",
            TaskType::Generation => "generation",
            TaskType::Transformation => "transformation",
            TaskType::Custom => "custom",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<TaskType> {
        TaskType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The names, for error messages.
    pub fn names() -> String {
        TaskType::ALL.map(TaskType::as_str).join(", ")
    }

    /// The names as a sentence lists them ("code-review, ..., transformation or custom"), for
    /// the MCP tools' argument schemas, so that they never list fewer than there are.
    pub fn names_or() -> String {
        let names = TaskType::ALL.map(TaskType::as_str);
        let (last, rest) = names.split_last().expect("there are task types");
        format!("{} or {last}", rest.join(", "))
    }
}

/// A field of a capability (or of a query about capabilities) that cannot be accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct CapabilityError {
    /// The field, as the API names it (`inputSchema`, `estimatedCostUsd`, ...).
    pub field: &'static str,
    /// What is wrong.
    pub message: String,
    /// The API's error code: `invalid_body`, or `schema_too_complex` for a schema past the
    /// bounds of [`super::schema`].
    pub code: ErrorCode,
}

impl CapabilityError {
    /// A field at fault (`invalid_body`).
    pub fn invalid(field: &'static str, message: impl Into<String>) -> CapabilityError {
        CapabilityError { field, message: message.into(), code: ErrorCode::InvalidBody }
    }
}

fn refuse(field: &'static str, message: impl Into<String>) -> CapabilityError {
    CapabilityError::invalid(field, message)
}

/// Longest `customType`.
pub const MAX_CUSTOM_TYPE: usize = 100;
/// Longest description.
pub const MAX_DESCRIPTION: usize = 2000;
/// Most tags, and the longest tag.
pub const MAX_TAGS: usize = 50;
/// Longest tag.
pub const MAX_TAG: usize = 100;

/// The `customType` of a kind of work: required for `custom`, refused otherwise.
pub fn custom_type_for(task_type: TaskType, custom_type: Option<&str>) -> Result<Option<String>, CapabilityError> {
    match (task_type, custom_type.map(str::trim)) {
        (TaskType::Custom, None | Some("")) => Err(refuse("customType", "is required when taskType is custom")),
        (TaskType::Custom, Some(c)) if c.chars().count() > MAX_CUSTOM_TYPE => {
            Err(refuse("customType", format!("must be at most {MAX_CUSTOM_TYPE} characters")))
        }
        (TaskType::Custom, Some(c)) => Ok(Some(c.to_owned())),
        (_, None) => Ok(None),
        (_, Some(_)) => Err(refuse("customType", "is only for taskType custom")),
    }
}

/// The 400 for a schema refused at registration.
fn refused_schema(field: &'static str, refused: Refused) -> CapabilityError {
    match refused {
        Refused::Invalid(message) => refuse(field, message),
        Refused::TooComplex(message) => CapabilityError { field, message, code: ErrorCode::SchemaTooComplex },
    }
}

/// Why a registration's schemas were not accepted.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaRefusal {
    /// A schema is refused (400).
    Refused(CapabilityError),
    /// The schema pool did not compile it (the agent's checking time, or an overload).
    Unchecked(CheckError),
}

/// Compiles both schemas of `c` on the schema pool, on behalf of the agent's `owner` (and keeps
/// them compiled for the checks that follow); the first one refused is named.
pub async fn compile_schemas(checker: &Checker, owner: &str, c: &NewCapability) -> Result<(), SchemaRefusal> {
    let compiled = checker
        .compile(owner, vec![c.input_schema.clone(), c.output_schema.clone()])
        .await
        .map_err(SchemaRefusal::Unchecked)?;
    for (field, answer) in ["inputSchema", "outputSchema"].into_iter().zip(compiled) {
        answer.map_err(|refused| SchemaRefusal::Refused(refused_schema(field, refused)))?;
    }
    Ok(())
}

/// The longest `estimatedLatencyMs`, 24 hours: the longest `timeoutMs` a delegation may ask for
/// (a test pins the two together), so that a requester can always give a target the time it
/// says it needs.
pub const MAX_LATENCY_MS: i64 = 24 * 3600 * 1000;

/// A whole, non-negative number of milliseconds, at most `max`, or none. A number past that
/// range is refused, never clamped.
fn milliseconds(field: &'static str, value: Option<&Value>, max: i64) -> Result<Option<i64>, CapabilityError> {
    let whole = |f: f64| f.is_finite() && f >= 0.0 && f.fract() == 0.0;
    let ms = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(ms), _, _) if ms >= 0 => ms,
            (None, Some(_), _) => i64::MAX,
            (None, None, Some(f)) if whole(f) && f < 9.0e18 => f as i64,
            (None, None, Some(f)) if whole(f) => i64::MAX,
            _ => return Err(refuse(field, "must be a whole, non-negative number of milliseconds")),
        },
        Some(_) => return Err(refuse(field, "must be a whole, non-negative number of milliseconds")),
    };
    if ms > max {
        return Err(refuse(field, format!("must be at most {max} milliseconds")));
    }
    Ok(Some(ms))
}

/// A non-negative number, or none.
fn non_negative(field: &'static str, value: Option<&Value>) -> Result<Option<f64>, CapabilityError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
            _ => Err(refuse(field, "must be a non-negative number")),
        },
        Some(_) => Err(refuse(field, "must be a non-negative number")),
    }
}

/// A capability as registered, checked.
#[derive(Debug, Clone)]
pub struct NewCapability {
    /// The kind of work.
    pub task_type: TaskType,
    /// Set exactly for `custom`.
    pub custom_type: Option<String>,
    /// What the capability takes.
    pub input_schema: Value,
    /// What it gives back.
    pub output_schema: Value,
    /// The agent's estimate, in milliseconds.
    pub estimated_latency_ms: Option<i64>,
    /// The agent's estimate, in US dollars.
    pub estimated_cost_usd: Option<f64>,
    /// Free text.
    pub description: Option<String>,
    /// Keywords.
    pub tags: Vec<String>,
    /// An assessment skill, as given.
    pub skill: Option<Value>,
}

/// The fields of a registration as they arrived (numbers and the skill still raw, so that a
/// wrong one can be named).
#[derive(Debug, Clone, Default)]
pub struct RawCapability<'a> {
    /// `taskType`.
    pub task_type: &'a str,
    /// `customType`.
    pub custom_type: Option<&'a str>,
    /// `inputSchema`.
    pub input_schema: &'a Value,
    /// `outputSchema`.
    pub output_schema: &'a Value,
    /// `estimatedLatencyMs`.
    pub estimated_latency_ms: Option<&'a Value>,
    /// `estimatedCostUsd`.
    pub estimated_cost_usd: Option<&'a Value>,
    /// `description`.
    pub description: Option<&'a str>,
    /// `tags`.
    pub tags: &'a [String],
    /// `skill`.
    pub skill: Option<&'a Value>,
}

impl NewCapability {
    /// Checks every field but the schemas' compilation ([`compile_schemas`] comes next); the
    /// first one at fault is named.
    pub fn parse(raw: &RawCapability<'_>) -> Result<NewCapability, CapabilityError> {
        let task_type = TaskType::parse(raw.task_type)
            .ok_or_else(|| refuse("taskType", format!("must be one of {}", TaskType::names())))?;
        let custom_type = custom_type_for(task_type, raw.custom_type)?;
        for (field, schema) in [("inputSchema", raw.input_schema), ("outputSchema", raw.output_schema)] {
            if !(schema.is_object() || schema.is_boolean()) {
                return Err(refuse(field, "must be a JSON Schema (an object or a boolean)"));
            }
            super::schema::bounds::bound_size(schema).map_err(|e| refused_schema(field, Refused::TooComplex(e.0)))?;
        }
        let estimated_latency_ms = milliseconds("estimatedLatencyMs", raw.estimated_latency_ms, MAX_LATENCY_MS)?;
        let estimated_cost_usd = non_negative("estimatedCostUsd", raw.estimated_cost_usd)?;
        if raw.description.is_some_and(|d| d.chars().count() > MAX_DESCRIPTION) {
            return Err(refuse("description", format!("must be at most {MAX_DESCRIPTION} characters")));
        }
        if raw.tags.len() > MAX_TAGS {
            return Err(refuse("tags", format!("at most {MAX_TAGS} tags")));
        }
        if raw.tags.iter().any(|t| t.trim().is_empty() || t.chars().count() > MAX_TAG) {
            return Err(refuse("tags", format!("each tag must be 1 to {MAX_TAG} characters")));
        }
        let skill = match raw.skill {
            None | Some(Value::Null) => None,
            Some(v) => {
                Skill::from_value(v, "skill").map_err(|e| refuse("skill", format!("{}: {}", e.field, e.message)))?;
                Some(v.clone())
            }
        };
        Ok(NewCapability {
            task_type,
            custom_type,
            input_schema: raw.input_schema.clone(),
            output_schema: raw.output_schema.clone(),
            estimated_latency_ms,
            estimated_cost_usd,
            description: raw.description.map(str::to_owned),
            tags: raw.tags.iter().map(|t| t.trim().to_owned()).collect(),
            skill,
        })
    }
}

/// A stored capability with its permissions.
#[derive(Debug, Clone)]
pub struct Capability {
    /// Its id.
    pub capability_id: Uuid,
    /// The kind of work (a [`TaskType`] name).
    pub task_type: String,
    /// Set exactly for `custom`.
    pub custom_type: Option<String>,
    /// Input JSON Schema.
    pub input_schema: Value,
    /// Output JSON Schema.
    pub output_schema: Value,
    /// Estimate, milliseconds.
    pub estimated_latency_ms: Option<i64>,
    /// Estimate, US dollars.
    pub estimated_cost_usd: Option<f64>,
    /// Free text.
    pub description: Option<String>,
    /// Keywords (a JSON array of strings).
    pub tags: Value,
    /// An assessment skill.
    pub skill: Option<Value>,
    /// Shown by discovery.
    pub enabled: bool,
    /// Takes delegated work.
    pub accept_delegations: bool,
    /// Delegations it takes per minute.
    pub inbound_rate_limit: i32,
    /// Delegations its agent sends per minute.
    pub outbound_rate_limit: i32,
    /// Registered.
    pub created_at: DateTime<Utc>,
    /// Last replaced or changed.
    pub updated_at: DateTime<Utc>,
}

/// Creates the agent's capability for its kind of work, or replaces the existing one (keeping
/// its id and permissions). Returns it and whether it was created.
pub async fn upsert(conn: &mut PgConnection, agent_id: Uuid, c: &NewCapability) -> sqlx::Result<(Capability, bool)> {
    let row = sqlx::query!(
        r#"INSERT INTO capabilities (capability_id, agent_id, task_type, custom_type, input_schema, output_schema,
                                     estimated_latency_ms, estimated_cost_usd, description, tags, skill)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
           ON CONFLICT ON CONSTRAINT capabilities_agent_kind_key DO UPDATE
              SET input_schema = EXCLUDED.input_schema, output_schema = EXCLUDED.output_schema,
                  estimated_latency_ms = EXCLUDED.estimated_latency_ms,
                  estimated_cost_usd = EXCLUDED.estimated_cost_usd, description = EXCLUDED.description,
                  tags = EXCLUDED.tags, skill = EXCLUDED.skill, updated_at = now()
           RETURNING capability_id, (xmax = 0) AS "created!""#,
        Uuid::now_v7(),
        agent_id,
        c.task_type.as_str(),
        c.custom_type.as_deref(),
        &c.input_schema,
        &c.output_schema,
        c.estimated_latency_ms,
        c.estimated_cost_usd,
        c.description.as_deref(),
        serde_json::json!(c.tags),
        c.skill.as_ref(),
    )
    .fetch_one(&mut *conn)
    .await?;
    let capability = get(conn, agent_id, row.capability_id).await?.ok_or(sqlx::Error::RowNotFound)?;
    Ok((capability, row.created))
}

/// How many capabilities `owner`'s agents have in all.
pub async fn count_for_owner(conn: &mut PgConnection, owner: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM capabilities c JOIN agents a ON a.agent_id = c.agent_id
            WHERE a.owner_user_id = $1"#,
        owner
    )
    .fetch_one(conn)
    .await
}

/// Whether the agent has a capability for the kind of work of `c` (registering it replaces it).
pub async fn has_kind(conn: &mut PgConnection, agent_id: Uuid, c: &NewCapability) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM capabilities WHERE agent_id = $1 AND task_type = $2
                                                   AND custom_type IS NOT DISTINCT FROM $3) AS "found!""#,
        agent_id,
        c.task_type.as_str(),
        c.custom_type.as_deref()
    )
    .fetch_one(conn)
    .await
}

/// One of the agent's capabilities.
pub async fn get(conn: &mut PgConnection, agent_id: Uuid, capability_id: Uuid) -> sqlx::Result<Option<Capability>> {
    sqlx::query_as!(
        Capability,
        r#"SELECT capability_id, task_type, custom_type, input_schema, output_schema, estimated_latency_ms,
                  estimated_cost_usd, description, tags, skill, enabled, accept_delegations, inbound_rate_limit,
                  outbound_rate_limit, created_at, updated_at
           FROM capabilities WHERE agent_id = $1 AND capability_id = $2"#,
        agent_id,
        capability_id
    )
    .fetch_optional(conn)
    .await
}

/// The agent's capabilities, oldest first.
pub async fn list(conn: &mut PgConnection, agent_id: Uuid) -> sqlx::Result<Vec<Capability>> {
    sqlx::query_as!(
        Capability,
        r#"SELECT capability_id, task_type, custom_type, input_schema, output_schema, estimated_latency_ms,
                  estimated_cost_usd, description, tags, skill, enabled, accept_delegations, inbound_rate_limit,
                  outbound_rate_limit, created_at, updated_at
           FROM capabilities WHERE agent_id = $1 ORDER BY capability_id"#,
        agent_id
    )
    .fetch_all(conn)
    .await
}

/// Deletes one of the agent's capabilities; `false` when it has no such capability.
pub async fn delete(conn: &mut PgConnection, agent_id: Uuid, capability_id: Uuid) -> sqlx::Result<bool> {
    let r =
        sqlx::query!("DELETE FROM capabilities WHERE agent_id = $1 AND capability_id = $2", agent_id, capability_id)
            .execute(conn)
            .await?;
    Ok(r.rows_affected() == 1)
}

/// Largest rate limit a capability may set (per minute).
pub const MAX_RATE_LIMIT: i32 = 10_000;

/// A change of a capability's permissions; absent fields keep their value.
#[derive(Debug, Clone, Default)]
pub struct PermissionsPatch {
    /// Shown by discovery.
    pub enabled: Option<bool>,
    /// Takes delegated work.
    pub accept_delegations: Option<bool>,
    /// Delegations it takes per minute (0 to the service's inbound limit).
    pub inbound_rate_limit: Option<i32>,
    /// Delegations its agent sends per minute (0 to the service's outbound limit).
    pub outbound_rate_limit: Option<i32>,
}

impl PermissionsPatch {
    /// Checks the rate limits: a capability may only lower the service's own (`inbound_max`,
    /// `PARLEY_INBOUND_RATE`; `outbound_max`, `PARLEY_OUTBOUND_RATE`), never raise them.
    pub fn check(&self, inbound_max: u32, outbound_max: u32) -> Result<(), CapabilityError> {
        for (field, value, max, var) in [
            ("inboundRateLimit", self.inbound_rate_limit, inbound_max, "PARLEY_INBOUND_RATE"),
            ("outboundRateLimit", self.outbound_rate_limit, outbound_max, "PARLEY_OUTBOUND_RATE"),
        ] {
            let max = i32::try_from(max).unwrap_or(MAX_RATE_LIMIT).min(MAX_RATE_LIMIT);
            if value.is_some_and(|v| !(0..=max).contains(&v)) {
                return Err(refuse(
                    field,
                    format!(
                        "must be a whole number from 0 to {max} (the service's own limit, {var}, which a capability may only lower)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Changes a capability's permissions; `None` when the agent has no such capability.
pub async fn set_permissions(
    conn: &mut PgConnection,
    agent_id: Uuid,
    capability_id: Uuid,
    p: &PermissionsPatch,
) -> sqlx::Result<Option<Capability>> {
    let changed = sqlx::query!(
        r#"UPDATE capabilities SET enabled = COALESCE($3, enabled),
                  accept_delegations = COALESCE($4, accept_delegations),
                  inbound_rate_limit = COALESCE($5, inbound_rate_limit),
                  outbound_rate_limit = COALESCE($6, outbound_rate_limit), updated_at = now()
           WHERE agent_id = $1 AND capability_id = $2"#,
        agent_id,
        capability_id,
        p.enabled,
        p.accept_delegations,
        p.inbound_rate_limit,
        p.outbound_rate_limit
    )
    .execute(&mut *conn)
    .await?;
    if changed.rows_affected() == 0 {
        return Ok(None);
    }
    get(conn, agent_id, capability_id).await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn raw<'a>(task_type: &'a str, schema: &'a Value) -> RawCapability<'a> {
        RawCapability { task_type, input_schema: schema, output_schema: schema, ..RawCapability::default() }
    }

    #[test]
    fn every_task_type_round_trips_and_unknown_ones_are_refused() {
        for t in TaskType::ALL {
            assert_eq!(TaskType::parse(t.as_str()), Some(t));
        }
        let schema = json!({"type": "object"});
        assert_eq!(NewCapability::parse(&raw("cooking", &schema)).unwrap_err().field, "taskType");
    }

    #[test]
    fn custom_needs_a_custom_type_and_only_custom_takes_one() {
        let schema = json!({"type": "object"});
        assert_eq!(NewCapability::parse(&raw("custom", &schema)).unwrap_err().field, "customType");
        let with = RawCapability { custom_type: Some("legal"), ..raw("testing", &schema) };
        assert_eq!(NewCapability::parse(&with).unwrap_err().field, "customType");
        let ok = RawCapability { custom_type: Some(" legal "), ..raw("custom", &schema) };
        assert_eq!(NewCapability::parse(&ok).unwrap().custom_type.as_deref(), Some("legal"));
    }

    #[tokio::test]
    async fn schemas_must_compile() {
        let checker = Checker::new(crate::directory::schema::CheckerConfig {
            threads: 1,
            timeout: std::time::Duration::from_secs(5),
            budget: std::time::Duration::from_secs(60),
            cache_bytes: 1 << 20,
        });
        let good = json!({"type": "object"});
        let bad = json!({"type": "no-such-type"});
        let agent = "owner-a";
        let compiled = |r: RawCapability<'_>| {
            let new = NewCapability::parse(&r).unwrap();
            let checker = checker.clone();
            async move {
                match compile_schemas(&checker, agent, &new).await {
                    Err(SchemaRefusal::Refused(e)) => Some(e.field),
                    _ => None,
                }
            }
        };
        assert_eq!(compiled(RawCapability { input_schema: &bad, ..raw("testing", &good) }).await, Some("inputSchema"));
        assert_eq!(
            compiled(RawCapability { output_schema: &bad, ..raw("testing", &good) }).await,
            Some("outputSchema")
        );
        assert_eq!(compiled(raw("testing", &good)).await, None);
        let text = json!("a schema");
        let r = RawCapability { input_schema: &text, ..raw("testing", &good) };
        assert_eq!(NewCapability::parse(&r).unwrap_err().field, "inputSchema");
    }

    #[test]
    fn estimates_must_be_non_negative() {
        let schema = json!(true);
        let minus = json!(-1);
        let half = json!(2.5);
        let past_i64: Value = serde_json::from_str("9223372036854775808").unwrap();
        let r = RawCapability { estimated_latency_ms: Some(&past_i64), ..raw("testing", &schema) };
        assert_eq!(NewCapability::parse(&r).unwrap_err().field, "estimatedLatencyMs", "past i64: refused, not clamped");
        // No estimate longer than the longest timeout a requester may give.
        assert_eq!(MAX_LATENCY_MS, crate::directory::delegation::MAX_TIMEOUT_MS);
        let longest = json!(MAX_LATENCY_MS);
        let r = RawCapability { estimated_latency_ms: Some(&longest), ..raw("testing", &schema) };
        assert_eq!(NewCapability::parse(&r).unwrap().estimated_latency_ms, Some(MAX_LATENCY_MS));
        let past = json!(MAX_LATENCY_MS + 1);
        let r = RawCapability { estimated_latency_ms: Some(&past), ..raw("testing", &schema) };
        assert_eq!(NewCapability::parse(&r).unwrap_err().field, "estimatedLatencyMs");
        let whole_float = json!(1500.0);
        let r = RawCapability { estimated_latency_ms: Some(&whole_float), ..raw("testing", &schema) };
        assert_eq!(NewCapability::parse(&r).unwrap().estimated_latency_ms, Some(1500));
        let r = RawCapability { estimated_cost_usd: Some(&minus), ..raw("testing", &schema) };
        assert_eq!(NewCapability::parse(&r).unwrap_err().field, "estimatedCostUsd");
        let r = RawCapability { estimated_latency_ms: Some(&minus), ..raw("testing", &schema) };
        assert_eq!(NewCapability::parse(&r).unwrap_err().field, "estimatedLatencyMs");
        let r = RawCapability { estimated_latency_ms: Some(&half), ..raw("testing", &schema) };
        assert_eq!(NewCapability::parse(&r).unwrap_err().field, "estimatedLatencyMs");
        let r = RawCapability { estimated_cost_usd: Some(&half), ..raw("testing", &schema) };
        assert_eq!(NewCapability::parse(&r).unwrap().estimated_cost_usd, Some(2.5));
    }
}
