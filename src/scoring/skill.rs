//! Bindu's skill schema, the hub's built-in skill, and loading skills from JSON or YAML files.
//!
//! A skill is what an agent advertises; the calculator scores tasks against it. Only the fields
//! the calculator reads are typed; anything else in a skill document is ignored. Files are
//! decoded through a `serde_json::Value` with a field path, so a malformed file is reported with
//! its path and the offending field (`tags[1]`, `assessment.specializations[0].domain`), or with
//! the parser's line and column for syntax errors.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};
use std::path::{Path, PathBuf};

/// One advertised skill (Bindu's skill schema, the part the calculator uses).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Skill {
    /// Stable identifier; reported as `"unknown"` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Display name; its tokens are keywords. Reported as `"unknown"` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Free text for humans (and embeddings); not used by keyword scoring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Tags; tokenized into keywords and reported when they match.
    #[serde(default)]
    pub tags: Vec<String>,
    /// MIME types the skill accepts.
    #[serde(default)]
    pub input_modes: Vec<String>,
    /// MIME types the skill produces.
    #[serde(default)]
    pub output_modes: Vec<String>,
    /// Capability name -> details; the keys are tokenized into keywords (order kept).
    #[serde(default)]
    pub capabilities_detail: Map<String, Value>,
    /// Tools the skill may use (checked by the required/forbidden tool gates).
    #[serde(default)]
    pub allowed_tools: Vec<String>,
    /// Performance hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance: Option<Performance>,
    /// Self-assessment hints: exact keywords, boosts and opt-outs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assessment: Option<SkillAssessment>,
}

/// A skill's performance hints.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Performance {
    /// Typical processing time; the latency estimate is the maximum over all skills. Kept as the
    /// JSON number it was declared as, so an integer is reported as an integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_processing_time_ms: Option<Number>,
}

/// A skill's `assessment` block.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SkillAssessment {
    /// Keywords matched verbatim (lowercased, not tokenized): `"machine learning"` only matches
    /// a task token equal to that whole string, which the tokenizer never produces.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// Boosts applied when a domain phrase appears in the task summary.
    #[serde(default)]
    pub specializations: Vec<Specialization>,
    /// Phrases that make the skill bow out when found in the task text.
    #[serde(default)]
    pub anti_patterns: Vec<String>,
}

/// A boost for tasks whose summary mentions `domain`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Specialization {
    /// Phrase looked for (case-insensitively) in the task summary; empty never matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Added to the skill's score (capped at 1.0); 0.0 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence_boost: Option<f64>,
}

/// Why a skill file could not be loaded; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum SkillFileError {
    /// The file could not be read.
    #[error("cannot read skill file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The extension is neither `.json`, `.yaml` nor `.yml`.
    #[error("skill file {path}: unsupported extension (expected .json, .yaml or .yml)")]
    UnsupportedExtension {
        /// The file.
        path: PathBuf,
    },
    /// The file is not valid JSON/YAML (the message carries the parser's line and column).
    #[error("skill file {path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A field has the wrong shape.
    #[error("skill file {path}: field `{field}`: {message}")]
    Field {
        /// The file.
        path: PathBuf,
        /// Path of the field inside the document, e.g. `[1].tags[0]`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// A decoding failure inside a document: the field path and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Path of the field, e.g. `assessment.keywords[2]`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl FieldError {
    fn new(field: &str, message: impl Into<String>) -> Self {
        FieldError { field: field.to_owned(), message: message.into() }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

fn opt_string(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Option<String>, FieldError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(FieldError::new(&join(path, key), format!("expected a string, found {}", kind(other)))),
    }
}

fn string_list(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Vec<String>, FieldError> {
    let field = join(path, key);
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(s.clone()),
                other => {
                    Err(FieldError::new(&format!("{field}[{i}]"), format!("expected a string, found {}", kind(other))))
                }
            })
            .collect(),
        Some(other) => Err(FieldError::new(&field, format!("expected a list of strings, found {}", kind(other)))),
    }
}

fn opt_object<'v>(
    obj: &'v Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<&'v Map<String, Value>>, FieldError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(other) => Err(FieldError::new(&join(path, key), format!("expected an object, found {}", kind(other)))),
    }
}

impl Skill {
    /// Decodes one skill from a JSON value; `path` prefixes field names in errors.
    pub fn from_value(value: &Value, path: &str) -> Result<Skill, FieldError> {
        let obj = match value {
            Value::Object(m) => m,
            other => {
                let at = if path.is_empty() { "(document)" } else { path };
                return Err(FieldError::new(at, format!("expected a skill object, found {}", kind(other))));
            }
        };
        let performance = match opt_object(obj, "performance", path)? {
            None => None,
            Some(p) => Some(decode_performance(p, &join(path, "performance"))?),
        };
        let assessment = match opt_object(obj, "assessment", path)? {
            None => None,
            Some(a) => Some(decode_assessment(a, &join(path, "assessment"))?),
        };
        Ok(Skill {
            id: opt_string(obj, "id", path)?,
            name: opt_string(obj, "name", path)?,
            description: opt_string(obj, "description", path)?,
            tags: string_list(obj, "tags", path)?,
            input_modes: string_list(obj, "input_modes", path)?,
            output_modes: string_list(obj, "output_modes", path)?,
            capabilities_detail: opt_object(obj, "capabilities_detail", path)?.cloned().unwrap_or_default(),
            allowed_tools: string_list(obj, "allowed_tools", path)?,
            performance,
            assessment,
        })
    }

    /// Decodes a document holding one skill (an object) or several (a list of objects).
    pub fn many_from_value(value: &Value) -> Result<Vec<Skill>, FieldError> {
        match value {
            Value::Array(items) => {
                items.iter().enumerate().map(|(i, v)| Skill::from_value(v, &format!("[{i}]"))).collect()
            }
            other => Ok(vec![Skill::from_value(other, "")?]),
        }
    }

    /// The id reported in skill matches.
    pub fn id_or_unknown(&self) -> &str {
        self.id.as_deref().unwrap_or("unknown")
    }

    /// The name reported in skill matches (and tokenized into keywords).
    pub fn name_or_unknown(&self) -> &str {
        self.name.as_deref().unwrap_or("unknown")
    }
}

fn decode_performance(obj: &Map<String, Value>, path: &str) -> Result<Performance, FieldError> {
    let key = "avg_processing_time_ms";
    let avg = match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => {
            if n.as_f64().is_some_and(|f| f < 0.0) {
                return Err(FieldError::new(&join(path, key), "must not be negative"));
            }
            Some(n.clone())
        }
        Some(other) => {
            return Err(FieldError::new(&join(path, key), format!("expected a number, found {}", kind(other))));
        }
    };
    Ok(Performance { avg_processing_time_ms: avg })
}

fn decode_assessment(obj: &Map<String, Value>, path: &str) -> Result<SkillAssessment, FieldError> {
    let spec_path = join(path, "specializations");
    let specializations = match obj.get("specializations") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| decode_specialization(item, &format!("{spec_path}[{i}]")))
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(FieldError::new(&spec_path, format!("expected a list, found {}", kind(other))));
        }
    };
    Ok(SkillAssessment {
        keywords: string_list(obj, "keywords", path)?,
        specializations,
        anti_patterns: string_list(obj, "anti_patterns", path)?,
    })
}

fn decode_specialization(value: &Value, path: &str) -> Result<Specialization, FieldError> {
    let obj = match value {
        Value::Object(m) => m,
        other => {
            return Err(FieldError::new(path, format!("expected an object, found {}", kind(other))));
        }
    };
    let boost = match obj.get("confidence_boost") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(other) => {
            return Err(FieldError::new(
                &join(path, "confidence_boost"),
                format!("expected a number, found {}", kind(other)),
            ));
        }
    };
    Ok(Specialization { domain: opt_string(obj, "domain", path)?, confidence_boost: boost })
}

/// Loads the skills of one file: `.json`, `.yaml` or `.yml`, holding one skill or a list. A
/// skill without an `id` is kept, as Bindu's calculator keeps it, and named `unknown` in
/// assessments; [`skill_file_warnings`] says which ones, for the caller to print.
pub fn load_skill_file(path: &Path) -> Result<Vec<Skill>, SkillFileError> {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let is_json = match ext.as_deref() {
        Some("json") => true,
        Some("yaml" | "yml") => false,
        _ => {
            return Err(SkillFileError::UnsupportedExtension { path: path.to_owned() });
        }
    };
    let text = std::fs::read_to_string(path).map_err(|source| SkillFileError::Io { path: path.to_owned(), source })?;
    let skills = parse_skills(&text, is_json).map_err(|e| match e {
        ParseFailure::Syntax(message) => SkillFileError::Syntax { path: path.to_owned(), message },
        ParseFailure::Field(f) => SkillFileError::Field { path: path.to_owned(), field: f.field, message: f.message },
    })?;
    Ok(skills)
}

/// What to warn about in the skills `path` holds: one line per skill without an `id` (or with a
/// blank one), which assessments can only report as `unknown` (or blank), so that whoever reads
/// an answer cannot tell it from the file's other skills.
pub fn skill_file_warnings(path: &Path, skills: &[Skill]) -> Vec<String> {
    skills
        .iter()
        .enumerate()
        .filter(|(_, s)| s.id.as_deref().is_none_or(|id| id.trim().is_empty()))
        .map(|(i, s)| {
            let which = if skills.len() == 1 { "its skill".to_owned() } else { format!("skill [{i}]") };
            format!(
                "{}: {which} has no `id`; assessments name it `{}` (give it an `id` to tell it apart)",
                path.display(),
                s.id_or_unknown()
            )
        })
        .collect()
}

/// Why a skill document did not decode (before the file path is attached).
#[derive(Debug, Clone, PartialEq)]
pub enum ParseFailure {
    /// Not JSON/YAML at all.
    Syntax(String),
    /// A field has the wrong shape.
    Field(FieldError),
}

/// Parses skill document text (JSON when `is_json`, YAML otherwise).
pub fn parse_skills(text: &str, is_json: bool) -> Result<Vec<Skill>, ParseFailure> {
    let value: Value = if is_json {
        serde_json::from_str(text).map_err(|e| ParseFailure::Syntax(format!("invalid JSON: {e}")))?
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| ParseFailure::Syntax(format!("invalid YAML: {e}")))?
    };
    Skill::many_from_value(&value).map_err(ParseFailure::Field)
}

/// The hub's own skill: the system negotiator, as advertised on `POST /agent/negotiation`.
pub fn default_skill() -> Skill {
    let strings = |xs: &[&str]| xs.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut caps = Map::new();
    caps.insert("match_negotiation".to_owned(), serde_json::json!({"supported": true, "turn_based": true}));
    caps.insert("profile_matching".to_owned(), serde_json::json!({"supported": true}));
    caps.insert("intent_assessment".to_owned(), serde_json::json!({"supported": true}));
    Skill {
        id: Some("parley-negotiator".to_owned()),
        name: Some("Bilateral Match Negotiation".to_owned()),
        description: Some(
            "Argues a proposed match between two people on behalf of one of them, turn by turn: \
             weighs the other person's profile and statements against its own user's intents, \
             proposes, counters with specific objections, and accepts or rejects."
                .to_owned(),
        ),
        tags: strings(&["negotiation", "matching", "match", "people", "introductions", "networking"]),
        input_modes: strings(&["application/json", "text/plain"]),
        output_modes: strings(&["application/json"]),
        capabilities_detail: caps,
        allowed_tools: Vec::new(),
        performance: Some(Performance { avg_processing_time_ms: Some(Number::from(50u64)) }),
        assessment: Some(SkillAssessment {
            keywords: strings(&[
                "negotiate",
                "negotiation",
                "match",
                "matching",
                "introduction",
                "introductions",
                "networking",
                "cofounder",
                "cofounders",
                "hiring",
                "mentor",
                "mentorship",
                "partner",
                "collaboration",
                "profile",
                "intent",
                "people",
            ]),
            specializations: vec![Specialization {
                domain: Some("match negotiation".to_owned()),
                confidence_boost: Some(0.2),
            }],
            anti_patterns: Vec::new(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_yaml_skill_with_every_field() {
        let yaml = r#"
id: pdf-processing-v1
name: PDF Processing
description: Extracts tables
tags: [pdf, tables]
input_modes: [application/pdf]
output_modes: [application/json]
capabilities_detail:
  text_extraction: {supported: true}
  table_extraction: {supported: true}
allowed_tools: [pdf_parser]
performance: {avg_processing_time_ms: 2000}
version: 1.0.0
assessment:
  keywords: [pdf, Invoice]
  specializations:
    - domain: invoice_processing
      confidence_boost: 0.3
  anti_patterns: [pdf editing]
"#;
        let skills = parse_skills(yaml, false).unwrap();
        assert_eq!(skills.len(), 1);
        let s = &skills[0];
        assert_eq!(s.id_or_unknown(), "pdf-processing-v1");
        assert_eq!(s.capabilities_detail.keys().collect::<Vec<_>>(), ["text_extraction", "table_extraction"]);
        assert_eq!(s.performance.as_ref().unwrap().avg_processing_time_ms, Some(Number::from(2000u64)));
        let a = s.assessment.as_ref().unwrap();
        assert_eq!(a.specializations[0].confidence_boost, Some(0.3));
        assert_eq!(a.anti_patterns, ["pdf editing"]);
    }

    #[test]
    fn a_list_of_skills_and_missing_fields() {
        let skills = parse_skills(r#"[{"id": "a"}, {"tags": null}]"#, true).unwrap();
        assert_eq!(skills.len(), 2);
        assert_eq!(skills[1].id_or_unknown(), "unknown");
        assert_eq!(skills[1].name_or_unknown(), "unknown");
        assert!(skills[1].tags.is_empty());
    }

    #[test]
    fn field_errors_name_the_field() {
        let err = parse_skills(r#"[{"id": "a"}, {"tags": ["x", 3]}]"#, true).unwrap_err();
        assert_eq!(err, ParseFailure::Field(FieldError::new("[1].tags[1]", "expected a string, found a number")));
        let err = parse_skills("assessment:\n  specializations:\n    - domain: 5\n", false).unwrap_err();
        assert_eq!(
            err,
            ParseFailure::Field(FieldError::new(
                "assessment.specializations[0].domain",
                "expected a string, found a number"
            ))
        );
        let err = parse_skills(r#"{"performance": {"avg_processing_time_ms": "fast"}}"#, true).unwrap_err();
        assert_eq!(
            err,
            ParseFailure::Field(FieldError::new(
                "performance.avg_processing_time_ms",
                "expected a number, found a string"
            ))
        );
        let err = parse_skills("\"just a string\"", true).unwrap_err();
        assert!(matches!(err, ParseFailure::Field(f) if f.field == "(document)"));
    }

    #[test]
    fn file_errors_name_the_file_and_the_line_or_field() {
        let dir = std::env::temp_dir().join(format!("parley-skill-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.json");
        std::fs::write(&bad, "{\n  \"tags\": [1]\n}").unwrap();
        let msg = load_skill_file(&bad).unwrap_err().to_string();
        assert!(msg.contains("bad.json") && msg.contains("tags[0]"), "{msg}");

        let broken = dir.join("broken.yaml");
        std::fs::write(&broken, "id: [unclosed\n").unwrap();
        let msg = load_skill_file(&broken).unwrap_err().to_string();
        assert!(msg.contains("broken.yaml") && msg.contains("line"), "{msg}");

        let txt = dir.join("skill.txt");
        std::fs::write(&txt, "{}").unwrap();
        assert!(matches!(load_skill_file(&txt), Err(SkillFileError::UnsupportedExtension { .. })));

        let missing = dir.join("missing.yml");
        assert!(load_skill_file(&missing).unwrap_err().to_string().contains("missing.yml"));

        // Bindu's calculator keeps a skill without an id and names it "unknown"; so does this,
        // with a warning for each such skill.
        let unnamed = dir.join("unnamed.yaml");
        std::fs::write(&unnamed, "name: PDF Processing\ntags: [pdf]\n").unwrap();
        let skills = load_skill_file(&unnamed).unwrap();
        assert_eq!(skills[0].id_or_unknown(), "unknown");
        let warnings = skill_file_warnings(&unnamed, &skills);
        assert!(
            warnings.len() == 1 && warnings[0].contains("unnamed.yaml") && warnings[0].contains("`unknown`"),
            "{warnings:?}"
        );
        std::fs::write(&unnamed, "- id: a\n- name: B\n").unwrap();
        let skills = load_skill_file(&unnamed).unwrap();
        let warnings = skill_file_warnings(&unnamed, &skills);
        assert!(warnings.len() == 1 && warnings[0].contains("skill [1]"), "{warnings:?}");

        let good = dir.join("good.yml");
        std::fs::write(&good, "- id: a\n- id: b\n").unwrap();
        let good = load_skill_file(&good).unwrap();
        assert_eq!(good.iter().map(Skill::id_or_unknown).collect::<Vec<_>>(), ["a", "b"]);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn default_skill_describes_the_system_negotiator() {
        let s = default_skill();
        assert_eq!(s.id_or_unknown(), "parley-negotiator");
        assert!(s.tags.iter().any(|t| t == "negotiation"));
        assert!(s.input_modes.iter().any(|m| m == "application/json"));
        // Round-trips through its own serde representation.
        let back: Skill = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }
}
