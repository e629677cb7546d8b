//! The regular expressions of a schema (`pattern`, and the keys of `patternProperties`): which
//! are accepted, and what they weigh once compiled.
//!
//! Patterns run on the `regex` crate's engine, which matches in time linear in the text and
//! never backtracks. It has no backreferences and no look-around: a pattern that uses either is
//! refused at registration by name (`400 invalid_body`), rather than left to a backtracking
//! engine whose time a crafted text can make exponential. Each pattern is compiled with small
//! size limits ([`PATTERN_LIMIT`] for its automaton, [`DFA_CACHE`] for each lazy DFA cache), and
//! the patterns of one schema may weigh at most [`SCHEMA_PATTERN_BYTES`] compiled, and be at most
//! [`MAX_PATTERNS`]: past either, the schema is refused (`schema_too_complex`). A Unicode class
//! repeated a hundred times (`\p{L}{100}`) compiles to megabytes and is refused; the patterns
//! schemas ordinarily hold (`^[a-z0-9-]+$`, `^\p{L}+$`, dates, codes) weigh a few kilobytes.
//!
//! The weight of a pattern is measured, not guessed: it is compiled once more with the same
//! engine and limits (`regex_automata`'s meta engine, which the `regex` crate wraps) and its
//! `memory_usage` read. That is what a compiled validator holds per pattern; the caches a
//! pattern grows while it matches are bounded by the limits above, per thread that matches it.

use std::collections::BTreeSet;

use jsonschema::PatternOptions;
use regex_automata::{meta, util::syntax};
use serde_json::Value;

use super::bounds::DATA_KEYWORDS;
use crate::quote::quote;

/// The largest automaton one pattern may compile to (the `regex` crate's `size_limit`).
pub const PATTERN_LIMIT: usize = 1 << 20;
/// The capacity of each lazy DFA cache of a pattern (the `regex` crate's `dfa_size_limit`);
/// a pattern whose DFA needs more runs on the slower, still linear, NFA simulation.
pub const DFA_CACHE: usize = 32 * 1024;
/// The most compiled bytes the patterns of one schema may weigh in all.
pub const SCHEMA_PATTERN_BYTES: usize = 2 << 20;
/// The most distinct patterns one schema may hold.
pub const MAX_PATTERNS: usize = 128;

/// The pattern engine and limits every validator is built with.
pub fn options() -> PatternOptions<jsonschema::Regex> {
    PatternOptions::regex().size_limit(PATTERN_LIMIT).dfa_size_limit(DFA_CACHE)
}

/// Why a schema's patterns are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternRefused {
    /// Not a regular expression, or one the engine does not run (backreferences, look-around).
    Invalid(String),
    /// Past a size bound.
    TooLarge(String),
}

/// What a schema's patterns weigh.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Weighed {
    /// Distinct patterns.
    pub count: usize,
    /// Their compiled size, bytes.
    pub bytes: usize,
}

/// Keywords whose value maps names to subschemas (its keys are names, never keywords).
const NAMED_SCHEMAS: [&str; 5] = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];

/// Every distinct pattern of `schema`, in a stable order.
pub fn collect(schema: &Value) -> BTreeSet<&str> {
    fn walk<'a>(v: &'a Value, out: &mut BTreeSet<&'a str>) {
        match v {
            Value::Object(map) => {
                for (key, child) in map {
                    match (key.as_str(), child) {
                        (k, _) if DATA_KEYWORDS.contains(&k) => {}
                        ("pattern", Value::String(p)) => {
                            out.insert(p);
                        }
                        (k, Value::Object(named)) if NAMED_SCHEMAS.contains(&k) => {
                            if k == "patternProperties" {
                                out.extend(named.keys().map(String::as_str));
                            }
                            named.values().for_each(|s| walk(s, out));
                        }
                        (_, child) => walk(child, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(schema, &mut out);
    out
}

/// Checks every pattern of `schema` and weighs them (see the module docs); the first pattern at
/// fault is named by a short prefix.
pub fn weigh(schema: &Value) -> Result<Weighed, PatternRefused> {
    let patterns = collect(schema);
    // What the engine cannot run is named first, whatever else is wrong: parsing is cheap.
    let translated = patterns.iter().map(|p| translate(p)).collect::<Result<Vec<_>, _>>()?;
    if patterns.len() > MAX_PATTERNS {
        return Err(PatternRefused::TooLarge(format!(
            "holds {} distinct patterns; at most {MAX_PATTERNS} are accepted",
            patterns.len()
        )));
    }
    let mut weighed = Weighed { count: patterns.len(), bytes: 0 };
    for (pattern, translated) in patterns.into_iter().zip(translated) {
        weighed.bytes += weigh_one(pattern, &translated)?;
        if weighed.bytes > SCHEMA_PATTERN_BYTES {
            return Err(PatternRefused::TooLarge(format!(
                "has patterns that compile to more than {} KiB in all (at {}); at most {} KiB are accepted",
                SCHEMA_PATTERN_BYTES / 1024,
                quote(pattern),
                SCHEMA_PATTERN_BYTES / 1024
            )));
        }
    }
    Ok(weighed)
}

fn invalid(pattern: &str) -> PatternRefused {
    PatternRefused::Invalid(format!("has a pattern {} that is not a valid regular expression", quote(pattern)))
}

/// A pattern in the engine's syntax, or why the engine does not run it.
fn translate(pattern: &str) -> Result<String, PatternRefused> {
    let translated = jsonschema_regex::to_rust_regex(pattern).map_err(|()| invalid(pattern))?;
    if let Err(e) = regex_syntax::ast::parse::Parser::new().parse(&translated) {
        use regex_syntax::ast::ErrorKind;
        let what = match e.kind() {
            ErrorKind::UnsupportedBackreference => "a backreference",
            ErrorKind::UnsupportedLookAround => "look-around (lookahead or lookbehind)",
            _ => return Err(invalid(pattern)),
        };
        return Err(PatternRefused::Invalid(format!(
            "has a pattern {} that uses {what}, which is not supported: patterns run on a linear-time engine \
             without backreferences or look-around",
            quote(pattern)
        )));
    }
    Ok(translated.into_owned())
}

/// One pattern's compiled size, or why it is refused.
fn weigh_one(pattern: &str, translated: &str) -> Result<usize, PatternRefused> {
    let config = meta::Config::new().nfa_size_limit(Some(PATTERN_LIMIT)).hybrid_cache_capacity(DFA_CACHE);
    match meta::Regex::builder().configure(config).syntax(syntax::Config::new()).build(translated) {
        Ok(regex) => Ok(regex.memory_usage()),
        Err(e) if e.size_limit().is_some() => Err(PatternRefused::TooLarge(format!(
            "has a pattern {} that compiles to more than {} KiB; at most {} KiB are accepted per pattern",
            quote(pattern),
            PATTERN_LIMIT / 1024,
            PATTERN_LIMIT / 1024
        ))),
        Err(_) => Err(invalid(pattern)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn patterns_are_found_where_a_schema_holds_them() {
        let schema = json!({
            "properties": {
                "pattern": {"type": "string", "pattern": "^a+$"},
                "patternProperties": {"type": "object"},
                "x": {"patternProperties": {"^k[0-9]$": true}}
            },
            "enum": [{"pattern": "not-a-schema"}],
            "$defs": {"d": {"items": [{"pattern": "^b$"}]}}
        });
        let found: Vec<&str> = collect(&schema).into_iter().collect();
        assert_eq!(found, vec!["^a+$", "^b$", "^k[0-9]$"]);
    }

    #[test]
    fn backreferences_and_look_around_are_refused_by_name() {
        let refused = |p: &str| match weigh(&json!({"pattern": p})) {
            Err(PatternRefused::Invalid(m)) => m,
            other => panic!("{p}: {other:?}"),
        };
        assert!(refused(r"^(.|.)*\1Q$").contains("backreference"));
        assert!(refused(r"^(?=a)a$").contains("look-around"));
        assert!(refused(r"^(?<!a)b$").contains("look-around"));
        assert!(refused("(unclosed").contains("not a valid regular expression"));
    }

    #[test]
    fn heavy_patterns_are_refused_and_ordinary_ones_weigh_little() {
        let ordinary = weigh(&json!({"properties": {
            "slug": {"pattern": "^[a-z0-9-]+$"}, "name": {"pattern": "^\\p{L}+$"},
            "date": {"pattern": "^\\d{4}-\\d{2}-\\d{2}$"}, "code": {"pattern": "^[A-Z]{2}[0-9]{6}$"}}}))
        .unwrap();
        assert_eq!(ordinary.count, 4);
        assert!(ordinary.bytes < 128 * 1024, "{ordinary:?}");
        match weigh(&json!({"pattern": "\\p{L}{100}"})) {
            Err(PatternRefused::TooLarge(m)) => assert!(m.contains("KiB"), "{m}"),
            other => panic!("{other:?}"),
        }
        // Many patterns each under the limit: refused in all.
        let many: serde_json::Map<String, Value> =
            (0..12).map(|i| (format!("p{i}"), json!({"pattern": format!("\\p{{L}}{{8}}x{i}")}))).collect();
        assert!(matches!(weigh(&json!({"properties": many})), Err(PatternRefused::TooLarge(_))));
        let too_many: serde_json::Map<String, Value> =
            (0..=MAX_PATTERNS).map(|i| (format!("p{i}"), json!({"pattern": format!("^a{i}$")}))).collect();
        assert!(matches!(weigh(&json!({"properties": too_many})), Err(PatternRefused::TooLarge(_))));
    }
}
