//! The Bindu-compatible capability calculator, pure and synchronous.
//!
//! `POST /agent/negotiation` and `parley assess` answer Bindu's self-assessment question with
//! it, and the system negotiator reuses its tokenizer and scores. Numbers and wire format must
//! match Bindu's reference implementation exactly in keyword-only mode, so the modules below
//! reproduce Python's semantics where they matter: `str.lower()`, slicing by code points,
//! falsy empty values, `round(x, 4)` and `json.dumps` float layout.
//!
//! - [`request`]: the request body, its validation messages and the weights;
//! - [`skill`]: Bindu's skill schema, skill files and the hub's default skill;
//! - [`text`]: lowercasing, truncation and the keyword tokenizer;
//! - [`calculator`]: the scoring steps over a prepared skill set;
//! - [`assessment`]: the result and its exact JSON;
//! - [`pyfloat`]: Python rounding and float printing.
//!
//! Two choices where the reference leaves room: `matched_tags` and `matched_capabilities` are
//! listed in first-seen order (Bindu lists a Python set, whose order is arbitrary), and the
//! subscores are added and printed in the order skill_match, io_compatibility, load, cost,
//! performance, with `performance = max(0, 1 - estimate/max_latency_ms)` (Parley's formula where
//! the reference differs).

pub mod assessment;
pub mod calculator;
pub mod pyfloat;
pub mod request;
pub mod skill;
pub mod text;

#[cfg(test)]
mod tests;

pub use assessment::{Assessment, assessment_json};
pub use calculator::{Calculator, Detail, PreparedTask};
pub use pyfloat::round4;
pub use request::{AssessmentRequest, RequestError, parse_request, parse_request_value};
pub use skill::{Performance, Skill, SkillAssessment, default_skill, load_skill_file, skill_file_warnings};
pub use text::{lowercase, tokenize};
