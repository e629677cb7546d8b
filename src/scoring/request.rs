//! The Bindu assessment request (`POST /agent/negotiation` body) and its validation.
//!
//! Parsing is strict about types but lenient about absence: every optional field may be missing
//! or `null`, unknown fields are ignored, and a wrong type is a 400 with a message naming the
//! field (Bindu itself would answer 500 there). The three `error` strings Bindu defines are
//! reproduced verbatim. Python's falsy values are honoured downstream: an empty list, an empty
//! string and a `max_latency_ms` of 0 all mean "not given".

use super::text::char_len;
use crate::error_code::ErrorCode;
use serde_json::{Map, Value};

/// Longest accepted `task_summary`, in characters.
pub const MAX_TASK_SUMMARY_LEN: usize = 10_000;

/// A request that cannot be assessed; `Display` is the message for the `error` field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    /// Human message (Bindu's verbatim where Bindu defines one).
    pub message: String,
    /// Machine code for the shared error body.
    pub code: ErrorCode,
}

impl RequestError {
    fn invalid(message: impl Into<String>) -> Self {
        RequestError { message: message.into(), code: ErrorCode::InvalidBody }
    }
}

// Relative weights of the five subscores; non-negative, normalised before use. The doc comment
// is the OpenAPI document's description of a request's `weights`, where each is optional.
/// Subscore weights of an assessment request.
#[derive(Debug, Clone, Copy, PartialEq, utoipa::ToSchema)]
#[schema(as = AssessmentWeights)]
pub struct Weights {
    /// Weight of the best skill match.
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub skill_match: f64,
    /// Weight of MIME type compatibility.
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub io_compatibility: f64,
    /// Weight of the latency fit.
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub performance: f64,
    /// Weight of the queue depth.
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub load: f64,
    /// Weight of the price fit.
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub cost: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights { skill_match: 0.55, io_compatibility: 0.20, performance: 0.15, load: 0.05, cost: 0.05 }
    }
}

impl Weights {
    /// Names in Bindu's validation order.
    pub const NAMES: [&'static str; 5] = ["skill_match", "io_compatibility", "performance", "load", "cost"];

    fn get(&self, name: &str) -> f64 {
        match name {
            "skill_match" => self.skill_match,
            "io_compatibility" => self.io_compatibility,
            "performance" => self.performance,
            "load" => self.load,
            _ => self.cost,
        }
    }

    fn set(&mut self, name: &str, v: f64) {
        match name {
            "skill_match" => self.skill_match = v,
            "io_compatibility" => self.io_compatibility = v,
            "performance" => self.performance = v,
            "load" => self.load = v,
            _ => self.cost = v,
        }
    }

    /// Checks every weight is non-negative, in Bindu's order; the error is Bindu's message.
    pub fn validate(&self) -> Result<(), RequestError> {
        for name in Self::NAMES {
            if self.get(name) < 0.0 {
                return Err(RequestError::invalid(format!("Invalid weights: Weight '{name}' must be non-negative")));
            }
        }
        Ok(())
    }

    /// Each weight divided by their sum (summed left to right in [`Weights::NAMES`] order);
    /// all 0.2 when the sum is 0.
    pub fn normalized(&self) -> Weights {
        let total = self.skill_match + self.io_compatibility + self.performance + self.load + self.cost;
        if total == 0.0 {
            return Weights { skill_match: 0.2, io_compatibility: 0.2, performance: 0.2, load: 0.2, cost: 0.2 };
        }
        Weights {
            skill_match: self.skill_match / total,
            io_compatibility: self.io_compatibility / total,
            performance: self.performance / total,
            load: self.load / total,
            cost: self.cost / total,
        }
    }
}

// A request as `parse_request` validated it. The OpenAPI document describes the body from this
// type: the doc comments are the wire's descriptions, and each field is typed as it may be sent.
/// Bindu's self-assessment request (snake_case, Bindu's wire format). Only `task_summary` is
/// required; unknown fields are ignored; absent, `null` and empty values mean "not given".
#[derive(Debug, Clone, PartialEq, utoipa::ToSchema)]
#[schema(example = json!({
    "task_summary": "Extract tables from PDF invoices",
    "input_mime_types": ["application/pdf"],
    "max_latency_ms": 5000
}))]
pub struct AssessmentRequest {
    /// What the task is (1 to 10 000 characters).
    #[schema(min_length = 1, max_length = 10000)]
    pub task_summary: String,
    // Folded into the keywords and the anti-pattern check.
    /// Longer description.
    pub task_details: Option<String>,
    // Empty: no constraint (the same for the lists below).
    /// Input MIME types the caller will send.
    #[schema(value_type = Option<Vec<String>>)]
    pub input_mime_types: Vec<String>,
    /// Output MIME types the caller wants.
    #[schema(value_type = Option<Vec<String>>)]
    pub output_mime_types: Vec<String>,
    /// Latency budget in milliseconds (0: none).
    #[schema(minimum = 0)]
    pub max_latency_ms: Option<f64>,
    // `None` or empty: no budget.
    /// Budget as a price string such as `"$0.01"`.
    pub max_cost_amount: Option<String>,
    /// Tools the skills must offer between them.
    #[schema(value_type = Option<Vec<String>>)]
    pub required_tools: Vec<String>,
    /// Tools no skill may allow.
    #[schema(value_type = Option<Vec<String>>)]
    pub forbidden_tools: Vec<String>,
    // Compared with the unrounded score.
    /// Acceptance threshold on the score (default 0).
    #[schema(value_type = Option<f64>)]
    pub min_score: f64,
    // Validated, not yet normalised.
    /// Subscore weight overrides (non-negative; missing keys keep their defaults).
    #[schema(value_type = Option<Weights>)]
    pub weights: Weights,
}

impl AssessmentRequest {
    /// A request with only a summary; everything else at its default.
    pub fn new(task_summary: impl Into<String>) -> Self {
        AssessmentRequest {
            task_summary: task_summary.into(),
            task_details: None,
            input_mime_types: Vec::new(),
            output_mime_types: Vec::new(),
            max_latency_ms: None,
            max_cost_amount: None,
            required_tools: Vec::new(),
            forbidden_tools: Vec::new(),
            min_score: 0.0,
            weights: Weights::default(),
        }
    }

    /// The latency budget when it constrains anything (non-zero).
    pub fn latency_limit(&self) -> Option<f64> {
        self.max_latency_ms.filter(|m| *m != 0.0)
    }
}

fn present<'v>(obj: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn opt_string(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, RequestError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(RequestError::invalid(format!("'{key}' must be a string"))),
    }
}

fn string_list(obj: &Map<String, Value>, key: &str) -> Result<Vec<String>, RequestError> {
    let err = || RequestError::invalid(format!("'{key}' must be a list of strings"));
    match present(obj, key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(|v| v.as_str().map(str::to_owned).ok_or_else(err)).collect(),
        Some(_) => Err(err()),
    }
}

fn opt_number(obj: &Map<String, Value>, key: &str) -> Result<Option<f64>, RequestError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::Number(n)) => {
            n.as_f64().map(Some).ok_or_else(|| RequestError::invalid(format!("'{key}' must be a number")))
        }
        Some(_) => Err(RequestError::invalid(format!("'{key}' must be a number"))),
    }
}

fn parse_weights(obj: &Map<String, Value>) -> Result<Weights, RequestError> {
    let mut weights = Weights::default();
    let Some(value) = present(obj, "weights") else {
        return Ok(weights);
    };
    let Value::Object(w) = value else {
        return Err(RequestError::invalid("'weights' must be an object"));
    };
    for name in Weights::NAMES {
        match w.get(name) {
            None => {}
            Some(Value::Number(n)) => {
                let v =
                    n.as_f64().ok_or_else(|| RequestError::invalid(format!("'weights.{name}' must be a number")))?;
                weights.set(name, v);
            }
            Some(_) => {
                return Err(RequestError::invalid(format!("'weights.{name}' must be a number")));
            }
        }
    }
    weights.validate()?;
    Ok(weights)
}

/// Parses and validates a raw request body.
///
/// Errors: `Invalid JSON payload`; `Request body must be a JSON object`; `'task_summary' is
/// required` (missing, null or empty); `'task_summary' must be a string`; `task_summary exceeds
/// maximum length of 10000 characters`; `'<field>' must be ...` for wrong types;
/// `'max_latency_ms' must be a non-negative number`; Bindu's `Invalid weights: ...`.
pub fn parse_request(body: &[u8]) -> Result<AssessmentRequest, RequestError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| RequestError::invalid("Invalid JSON payload"))?;
    parse_request_value(&value)
}

/// [`parse_request`] over a body already decoded as JSON (the same checks and messages after
/// decoding), for routes whose body carries a request among other fields.
pub fn parse_request_value(value: &Value) -> Result<AssessmentRequest, RequestError> {
    let Value::Object(obj) = value else {
        return Err(RequestError::invalid("Request body must be a JSON object"));
    };
    let task_summary = match present(obj, "task_summary") {
        None => return Err(RequestError::invalid("'task_summary' is required")),
        Some(Value::String(s)) if s.is_empty() => {
            return Err(RequestError::invalid("'task_summary' is required"));
        }
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(RequestError::invalid("'task_summary' must be a string")),
    };
    if char_len(&task_summary) > MAX_TASK_SUMMARY_LEN {
        return Err(RequestError::invalid(format!(
            "task_summary exceeds maximum length of {MAX_TASK_SUMMARY_LEN} characters"
        )));
    }
    let max_latency_ms = opt_number(obj, "max_latency_ms")?;
    if max_latency_ms.is_some_and(|m| m < 0.0) {
        return Err(RequestError::invalid("'max_latency_ms' must be a non-negative number"));
    }
    Ok(AssessmentRequest {
        task_summary,
        task_details: opt_string(obj, "task_details")?,
        input_mime_types: string_list(obj, "input_mime_types")?,
        output_mime_types: string_list(obj, "output_mime_types")?,
        max_latency_ms,
        max_cost_amount: opt_string(obj, "max_cost_amount")?,
        required_tools: string_list(obj, "required_tools")?,
        forbidden_tools: string_list(obj, "forbidden_tools")?,
        min_score: opt_number(obj, "min_score")?.unwrap_or(0.0),
        weights: parse_weights(obj)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> String {
        parse_request(body.as_bytes()).unwrap_err().message
    }

    #[test]
    fn bindu_messages_verbatim() {
        assert_eq!(err("{not json"), "Invalid JSON payload");
        assert_eq!(err(""), "Invalid JSON payload");
        assert_eq!(err("{}"), "'task_summary' is required");
        assert_eq!(err(r#"{"task_summary": ""}"#), "'task_summary' is required");
        assert_eq!(err(r#"{"task_summary": null}"#), "'task_summary' is required");
        let long = "é".repeat(10_001);
        assert_eq!(
            err(&format!(r#"{{"task_summary": "{long}"}}"#)),
            "task_summary exceeds maximum length of 10000 characters"
        );
        let exact = "é".repeat(10_000);
        assert!(parse_request(format!(r#"{{"task_summary": "{exact}"}}"#).as_bytes()).is_ok());
        assert_eq!(
            err(r#"{"task_summary": "x", "weights": {"cost": 1, "load": -1, "performance": -2}}"#),
            "Invalid weights: Weight 'performance' must be non-negative"
        );
        assert_eq!(parse_request(b"{}").unwrap_err().code, crate::error_code::ErrorCode::InvalidBody);
    }

    #[test]
    fn wrong_types_name_the_field() {
        let cases = [
            ("[1]", "Request body must be a JSON object"),
            ("\"text\"", "Request body must be a JSON object"),
            (r#"{"task_summary": 5}"#, "'task_summary' must be a string"),
            (r#"{"task_summary": "x", "max_latency_ms": "5000"}"#, "'max_latency_ms' must be a number"),
            (r#"{"task_summary": "x", "max_latency_ms": -1}"#, "'max_latency_ms' must be a non-negative number"),
            (r#"{"task_summary": "x", "weights": [1]}"#, "'weights' must be an object"),
            (r#"{"task_summary": "x", "weights": {"load": "1"}}"#, "'weights.load' must be a number"),
            (
                r#"{"task_summary": "x", "input_mime_types": "text/plain"}"#,
                "'input_mime_types' must be a list of strings",
            ),
            (r#"{"task_summary": "x", "output_mime_types": [1]}"#, "'output_mime_types' must be a list of strings"),
            (r#"{"task_summary": "x", "min_score": "0.5"}"#, "'min_score' must be a number"),
            (r#"{"task_summary": "x", "max_cost_amount": 5}"#, "'max_cost_amount' must be a string"),
            (r#"{"task_summary": "x", "task_details": {}}"#, "'task_details' must be a string"),
            (r#"{"task_summary": "x", "required_tools": {}}"#, "'required_tools' must be a list of strings"),
        ];
        for (body, message) in cases {
            assert_eq!(err(body), message, "{body}");
        }
    }

    #[test]
    fn full_request_parses_and_unknown_fields_are_ignored() {
        let r = parse_request(
            br#"{"task_summary": "Extract tables", "task_details": "d", "input_mime_types": ["application/pdf"],
                "output_mime_types": null, "max_latency_ms": 5000, "max_cost_amount": "0.001",
                "required_tools": ["pdf_parser"], "forbidden_tools": [], "min_score": 0.7,
                "weights": {"skill_match": 1}, "debug": true, "extra": {"x": 1}}"#,
        )
        .unwrap();
        assert_eq!(r.task_summary, "Extract tables");
        assert_eq!(r.max_latency_ms, Some(5000.0));
        assert_eq!(r.latency_limit(), Some(5000.0));
        assert!(r.output_mime_types.is_empty());
        assert_eq!(r.min_score, 0.7);
        assert_eq!(r.weights, Weights { skill_match: 1.0, ..Weights::default() });
        let zero = parse_request(br#"{"task_summary": "x", "max_latency_ms": 0}"#).unwrap();
        assert_eq!(zero.latency_limit(), None);
        let nulls = parse_request(br#"{"task_summary": "x", "weights": null, "min_score": null}"#).unwrap();
        assert_eq!(nulls.weights, Weights::default());
        assert_eq!(nulls.min_score, 0.0);
    }

    #[test]
    fn weights_normalise_and_zero_sum_falls_back_to_equal() {
        let n = Weights::default().normalized();
        assert_eq!(n.skill_match, 0.55 / (0.55 + 0.20 + 0.15 + 0.05 + 0.05));
        let z = Weights { skill_match: 0.0, io_compatibility: 0.0, performance: 0.0, load: 0.0, cost: 0.0 };
        assert_eq!(
            z.normalized(),
            Weights { skill_match: 0.2, io_compatibility: 0.2, performance: 0.2, load: 0.2, cost: 0.2 }
        );
        let r = parse_request(br#"{"task_summary": "x", "weights": {"skill_match": 0, "io_compatibility": 0, "performance": 0, "load": 0, "cost": 0}}"#).unwrap();
        assert_eq!(r.weights.normalized().cost, 0.2);
    }
}
