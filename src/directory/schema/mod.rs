//! The JSON Schemas of capabilities: bounded when registered, compiled once, and checked on a
//! pool of their own.
//!
//! A schema comes from an agent and is run against input another agent sends, so both sides of
//! a check are untrusted. The defences, each for a way a check could cost without bound:
//!
//! - [`bounds`], at registration: the schema's size, its nesting, and the subschemas a
//!   validation may visit at any one place of the input.
//! - [`patterns`], at registration: its regular expressions run on a linear-time engine (no
//!   backreferences, no look-around: refused by name), each compiled within small size limits,
//!   and all of them within a budget per schema.
//! - [`Prepared::check`]: a check's work is known before it runs, at most the schema's visits
//!   per place times the input's values and bytes; an input past [`MAX_CHECK_WORK`] is refused
//!   without being checked, so no single check runs long.
//! - [`cache`]: compiled validators are kept by what they weigh, within a byte budget.
//! - [`checker`]: every compile and check of a delegation runs on a small pool of threads of
//!   its own, served in turn by who asked for it, each agent within a budget of checking time,
//!   with nothing of the database held; a batch that outruns its time stops before its next
//!   schema.
//!
//! Refusals name the keyword and the place in the input at fault, never the input itself: the
//! validator's messages are rendered with the value masked, places are cut to 40 characters,
//! and at most five are given.

pub mod bounds;
pub mod cache;
pub mod checker;
pub mod patterns;

use std::sync::Arc;

pub use bounds::{Bounded, MAX_BYTES, bound};
pub use checker::{CheckError, Checker, CheckerConfig};
use serde_json::Value;

/// Messages given for a refused value.
const MAX_MESSAGES: usize = 5;
/// Characters of a place in the input shown in a message.
const MAX_PLACE: usize = 40;
/// The most work one check may take: the schema's subschema visits per place times the values
/// and the bytes (of strings and keys) of the input. An input past it is refused unchecked.
pub const MAX_CHECK_WORK: u64 = 8_000_000;
/// Bytes of validator counted per byte of the schema's text (its compiled tree).
const BYTES_PER_SCHEMA_BYTE: usize = 16;

/// Why a schema given at registration is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Not a JSON Schema, or a pattern the engine does not run (400 `invalid_body`).
    Invalid(String),
    /// Past a bound (400 `schema_too_complex`).
    TooComplex(String),
}

/// The verdict of one schema on one value.
pub type Verdict = Result<(), String>;

/// A schema compiled, ready to check values.
pub struct Prepared {
    validator: jsonschema::Validator,
    /// The most subschema visits at one place of the input.
    visits: u64,
    /// Its text's length.
    schema_bytes: usize,
    /// Its patterns.
    patterns: patterns::Weighed,
}

impl Prepared {
    /// Compiles a schema given at registration (external references are never fetched: they
    /// fail) after checking it against the bounds: size and nesting first (cheap), then its
    /// patterns, then whether it compiles, then the visits.
    pub fn compile(schema: &Value) -> Result<Prepared, Refused> {
        if !(schema.is_object() || schema.is_boolean()) {
            return Err(Refused::Invalid("must be a JSON Schema (an object or a boolean)".into()));
        }
        bounds::bound_size(schema).map_err(|e| Refused::TooComplex(e.0))?;
        let weighed = patterns::weigh(schema).map_err(|e| match e {
            patterns::PatternRefused::Invalid(m) => Refused::Invalid(m),
            patterns::PatternRefused::TooLarge(m) => Refused::TooComplex(m),
        })?;
        let validator = jsonschema::options().with_pattern_options(patterns::options()).build(schema).map_err(|e| {
            Refused::Invalid(format!("is not a valid JSON Schema: {}", crate::quote::shorten_quoted(&e.to_string())))
        })?;
        let Bounded { visits } = bound(schema).map_err(|e| Refused::TooComplex(e.0))?;
        let schema_bytes = serde_json::to_vec(schema).map_or(MAX_BYTES, |v| v.len());
        Ok(Prepared { validator, visits, schema_bytes, patterns: weighed })
    }

    /// An estimate from above of the memory this validator holds and may grow when `threads`
    /// threads check with it: its patterns compiled, once for itself and once more per thread
    /// (the matching caches, each also holding up to two lazy DFAs), and its tree.
    pub fn weight(&self, threads: usize) -> usize {
        let per_thread = self.patterns.bytes + self.patterns.count * 2 * patterns::DFA_CACHE;
        BYTES_PER_SCHEMA_BYTE * self.schema_bytes + self.patterns.bytes + threads * per_thread
    }

    /// The work of checking `value` with this schema (see [`MAX_CHECK_WORK`]).
    pub fn work(&self, units: u64) -> u64 {
        self.visits.max(1).saturating_mul(units)
    }

    /// Checks `value`: `Err` with at most five messages, each naming the place in `what` at fault
    /// and the keyword, with the value itself masked. A value whose check would take more than
    /// [`MAX_CHECK_WORK`] is refused without being checked.
    pub fn check(&self, value: &Value, what: &str) -> Verdict {
        self.check_measured(value, units(value), what)
    }

    /// [`Prepared::check`] for a value of `units` (see [`units`]).
    pub fn check_measured(&self, value: &Value, units: u64, what: &str) -> Verdict {
        let work = self.work(units);
        if work > MAX_CHECK_WORK {
            return Err(format!(
                "the {what} is too large to check against this schema: {units} values and bytes, each looked at by up \
                 to {} subschemas, is more than the {MAX_CHECK_WORK} steps a check may take",
                self.visits
            ));
        }
        let messages: Vec<String> = self
            .validator
            .iter_errors(value)
            .take(MAX_MESSAGES)
            .map(|e| {
                let place = e.instance_path().to_string();
                let place = if place.chars().count() > MAX_PLACE {
                    format!("{}…", place.chars().take(MAX_PLACE).collect::<String>())
                } else {
                    place
                };
                format!("{what}{place}: {} ({})", e.masked(), e.kind().keyword())
            })
            .collect();
        if messages.is_empty() { Ok(()) } else { Err(messages.join("; ")) }
    }
}

/// What checking `value` costs per subschema visit: one per value, plus the bytes of its
/// strings and object keys (patterns scan them).
pub fn units(value: &Value) -> u64 {
    match value {
        Value::String(s) => 1 + s.len() as u64,
        Value::Array(items) => 1 + items.iter().map(units).sum::<u64>(),
        Value::Object(map) => 1 + map.iter().map(|(k, v)| k.len() as u64 + units(v)).sum::<u64>(),
        _ => 1,
    }
}

/// The compiled form of `schema`, or an `Err` naming why it cannot be (for the agent runner,
/// which checks its own answers; not kept).
pub fn prepare(schema: &Value) -> Result<Arc<Prepared>, String> {
    Prepared::compile(schema).map(Arc::new).map_err(|e| match e {
        Refused::Invalid(m) | Refused::TooComplex(m) => format!("the schema {m}"),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn refusals_name_place_and_keyword_but_never_echo_the_input() {
        let schema = json!({"type": "object", "properties": {"code": {"type": "string", "maxLength": 3}}});
        let p = prepare(&schema).unwrap();
        assert!(p.check(&json!({"code": "ok"}), "input").is_ok());
        let secret = "s3cr3t-value-that-must-not-come-back";
        let e = p.check(&json!({"code": secret}), "input").unwrap_err();
        assert!(e.starts_with("input/code:"), "{e}");
        assert!(e.contains("maxLength"), "{e}");
        assert!(!e.contains(secret), "{e}");
        let long_key = "k".repeat(500);
        let keyed = json!({"type": "object", "additionalProperties": {"type": "integer"}});
        let e = prepare(&keyed).unwrap().check(&json!({long_key.clone(): "x"}), "input").unwrap_err();
        assert!(e.len() < 200, "{e}");
        // Patterns match as JSON Schema says, on the linear engine.
        let coded = prepare(&json!({"type": "string", "pattern": "^[A-Z]{2}\\d{3}$"})).unwrap();
        assert!(coded.check(&json!("AB123"), "input").is_ok());
        assert!(coded.check(&json!("ab123"), "input").unwrap_err().contains("pattern"));
    }

    #[test]
    fn a_check_past_its_work_is_refused_before_it_runs() {
        // 1 000 visits per place (the most a schema may ask for): 8 KB of input is too much.
        let mut branches = Vec::new();
        for i in 0..999 {
            branches.push(json!({"const": format!("x{i}")}));
        }
        let heavy = Prepared::compile(&json!({"anyOf": branches})).unwrap();
        assert!(heavy.visits >= 999);
        let text = json!("y".repeat(9_000));
        let e = heavy.check(&text, "input").unwrap_err();
        assert!(e.contains("too large to check"), "{e}");
        assert!(heavy.check(&json!("x12"), "input").is_ok());
        assert!(heavy.check(&json!("x1000"), "input").is_err());
        // An ordinary schema checks the largest body the service takes.
        let light = Prepared::compile(&json!({"type": "object", "properties": {"text": {"type": "string"}}})).unwrap();
        assert!(light.check(&json!({"text": "z".repeat(250_000)}), "input").is_ok());
    }

    #[test]
    fn registration_refuses_what_the_engine_does_not_run() {
        assert!(
            matches!(Prepared::compile(&json!({"pattern": "^(a)\\1$"})), Err(Refused::Invalid(m)) if m.contains("backreference"))
        );
        assert!(matches!(Prepared::compile(&json!({"type": "no-such-type"})), Err(Refused::Invalid(_))));
        assert!(matches!(Prepared::compile(&json!("a schema")), Err(Refused::Invalid(_))));
        assert!(matches!(Prepared::compile(&json!({"pattern": "\\p{L}{150}"})), Err(Refused::TooComplex(_))));
    }
}
