//! The assessment result and its exact wire form.
//!
//! Field order is the wire order; optional parts are omitted when there is nothing to say, as
//! Bindu's endpoint does (`skill_matches` etc. only when non-empty, `latency_estimate_ms` and
//! `queue_depth` only when known, `subscores` only on non-gate outcomes).

use super::pyfloat::to_python_json;
use serde::Serialize;
use serde_json::Number;

/// Why an assessment was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RejectionReason {
    /// The calculator has no skills at all.
    NoSkillsAdvertised,
    /// No skill accepts any requested input type.
    InputMimeUnsupported,
    /// No skill produces any requested output type.
    OutputMimeUnsupported,
    /// A required tool is allowed by no skill.
    RequiredToolMissing,
    /// Some skill allows a forbidden tool.
    ForbiddenToolPresent,
    /// The agent's price exceeds the caller's budget.
    CostExceedsBudget,
    /// The latency estimate exceeds twice the caller's budget.
    LatencyExceedsConstraint,
    /// The weighted score is under `min_score`, or no skill matched.
    ScoreBelowThreshold,
}

impl RejectionReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectionReason::NoSkillsAdvertised => "no_skills_advertised",
            RejectionReason::InputMimeUnsupported => "input_mime_unsupported",
            RejectionReason::OutputMimeUnsupported => "output_mime_unsupported",
            RejectionReason::RequiredToolMissing => "required_tool_missing",
            RejectionReason::ForbiddenToolPresent => "forbidden_tool_present",
            RejectionReason::CostExceedsBudget => "cost_exceeds_budget",
            RejectionReason::LatencyExceedsConstraint => "latency_exceeds_constraint",
            RejectionReason::ScoreBelowThreshold => "score_below_threshold",
        }
    }
}

/// How well one skill matched the task.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SkillMatch {
    /// The skill's id (`"unknown"` when it has none).
    pub skill_id: String,
    /// The skill's name (`"unknown"` when it has none).
    pub skill_name: String,
    /// Match score rounded to 4 dp (always > 0).
    pub score: f64,
    /// `"semantic similarity: 0.95"`, `"tags: a, b"`, `"capabilities: x, y"`, in that order.
    pub reasons: Vec<String>,
}

/// The five subscores, in wire order.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Subscores {
    /// Best rounded skill match score (0 when none).
    pub skill_match: f64,
    /// MIME compatibility (1.0 when unconstrained).
    pub io_compatibility: f64,
    /// `round(1/(1+q), 4)`, 0.5 when the queue depth is unknown.
    pub load: f64,
    /// Price fit, 1.0 when the agent charges nothing.
    pub cost: f64,
    /// Latency fit, 1.0 when unconstrained (not rounded).
    pub performance: f64,
}

/// The outcome of one assessment.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Assessment {
    /// Whether the agent takes the task.
    pub accepted: bool,
    /// Weighted score, 4 dp (0.0 on a hard rejection).
    pub score: f64,
    /// How much data the verdict rests on, 4 dp.
    pub confidence: f64,
    /// Why not accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejection_reason: Option<RejectionReason>,
    /// Matching skills, best first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skill_matches: Vec<SkillMatch>,
    /// Tags that matched, over all skills, in first-seen order (Bindu's order is a set's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub matched_tags: Vec<String>,
    /// Capability keys that matched, over all skills, in first-seen order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub matched_capabilities: Vec<String>,
    /// Estimated latency, as declared by the slowest skill (or 5000).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<f64>)]
    pub latency_estimate_ms: Option<Number>,
    /// Queue depth the load subscore used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<i64>,
    /// The subscores (only when the task got past every hard gate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscores: Option<Subscores>,
}

impl Assessment {
    /// A hard rejection: score 0.0 with the given confidence and nothing else.
    pub fn rejected(reason: RejectionReason, confidence: f64) -> Self {
        Assessment {
            accepted: false,
            score: 0.0,
            confidence,
            rejection_reason: Some(reason),
            skill_matches: Vec::new(),
            matched_tags: Vec::new(),
            matched_capabilities: Vec::new(),
            latency_estimate_ms: None,
            queue_depth: None,
            subscores: None,
        }
    }
}

/// The exact wire JSON of an assessment (compact, Python float layout).
pub fn assessment_json(a: &Assessment) -> String {
    // Serializing these plain structs cannot fail (no maps with non-string keys, no IO).
    to_python_json(a).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}
