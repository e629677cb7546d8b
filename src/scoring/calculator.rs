//! The capability calculator: steps 2-14 below over a fixed skill set (step 1, the weights, is
//! the request's: [`super::request`]).
//!
//! The steps, in Bindu's order (comments and tests refer to them by number):
//! 1. weights: the defaults, overridden per key by the request, normalised to sum 1;
//! 2. no skills: reject `no_skills_advertised`;
//! 3. task keywords: summary (plus details), truncated, lowercased, tokenized, as a set;
//! 4. hard gates, first failure wins: input MIME, output MIME, a required tool missing, a
//!    forbidden tool present;
//! 5. skill keywords: tags, name and capability keys tokenized, assessment keywords verbatim;
//! 6. per skill: anti-patterns skip it, Jaccard (or `0.7 cos + 0.3 jaccard` with embeddings),
//!    specialization boosts, reasons; matches sorted by score, ties in declaration order;
//! 7. `io_compatibility`; 8. `load` from the queue depth; 9. `cost` from price and budget
//!    (over budget rejects);
//! 10. the latency estimate (over twice the limit rejects); 11. `performance`;
//! 12. the weighted score and the acceptance threshold; 13. `confidence`;
//! 14. the answer ([`super::assessment`]).
//!
//! Everything that depends only on the skills (keyword sets, lowercased anti-patterns and
//! domains, the MIME and tool unions, the latency estimate) is computed once in
//! [`Calculator::new`]; everything that depends only on the request (the task's keyword set,
//! the lowercased text anti-patterns and domains are looked for in, the normalised weights, the
//! parsed budget) is computed once in [`PreparedTask::new`], so assessing one task against many
//! calculators (a ranking over a whole directory) does that work once, not once per calculator.
//! [`Calculator::assess_prepared`] with [`Detail::Score`] computes the verdict and the score
//! alone (no reasons, no matched names, no allocation per skill); [`Detail::Full`] also builds the
//! explanation. Both run the same code, so the score and the verdict are the same.
//! The arithmetic mirrors Bindu's reference operation by operation (same order of float
//! additions, same rounding points), so results agree to the last digit.

use super::assessment::{Assessment, RejectionReason, SkillMatch, Subscores};
use super::pyfloat::round4;
use super::request::AssessmentRequest;
use super::skill::Skill;
use super::text::{WordSet, lowercase, split_whitespace_py, task_text_lowered, tokenize};
use serde_json::Number;
use std::sync::OnceLock;

/// Latency assumed when no skill declares `performance.avg_processing_time_ms`.
pub const DEFAULT_LATENCY_MS: u64 = 5000;
/// Weight of the embedding cosine in the hybrid skill score.
pub const EMBEDDING_WEIGHT: f64 = 0.7;
/// Weight of the keyword Jaccard in the hybrid skill score.
pub const KEYWORD_WEIGHT: f64 = 0.3;

/// A tag or capability key with the words that can make it match.
#[derive(Debug, Clone)]
struct Label {
    /// Original spelling, as reported.
    text: String,
    /// Its words (whitespace-split for tags, `_`-split for capabilities), lowercased, kept only
    /// when they are keywords of the skill: a word matches iff it is also a task keyword.
    words: Vec<String>,
}

/// A skill with everything the per-request loop needs precomputed.
#[derive(Debug, Clone)]
struct PreparedSkill {
    id: String,
    name: String,
    /// Its keywords with their [`word_hash`], in hash order (see [`common_words`]).
    keyword_hashes: Vec<(u64, String)>,
    tags: Vec<Label>,
    capabilities: Vec<Label>,
    anti_patterns: Vec<String>,
    specializations: Vec<(String, f64)>,
}

impl PreparedSkill {
    fn new(skill: &Skill) -> Self {
        let mut keywords = WordSet::default();
        if let Some(a) = &skill.assessment {
            keywords.extend(a.keywords.iter().map(|k| lowercase(k).into_owned()));
        }
        let mut add_tokens = |text: &str| keywords.extend(tokenize(&lowercase(text)).map(str::to_owned));
        for tag in &skill.tags {
            add_tokens(tag);
        }
        add_tokens(skill.name_or_unknown());
        for key in skill.capabilities_detail.keys() {
            add_tokens(key);
        }
        let label = |text: &str, words: Vec<String>| Label {
            text: text.to_owned(),
            words: words.into_iter().filter(|w| keywords.contains(w)).collect(),
        };
        let tags = skill
            .tags
            .iter()
            .map(|t| {
                let lowered = lowercase(t);
                label(t, split_whitespace_py(&lowered).map(|w| lowercase(w).into_owned()).collect())
            })
            .collect();
        let capabilities = skill
            .capabilities_detail
            .keys()
            .map(|k| label(k, lowercase(k).split('_').map(str::to_owned).collect()))
            .collect();
        let (anti_patterns, specializations) = match &skill.assessment {
            Some(a) => (
                a.anti_patterns.iter().map(|p| lowercase(p).into_owned()).collect(),
                a.specializations
                    .iter()
                    .filter_map(|s| {
                        let domain = s.domain.as_deref().filter(|d| !d.is_empty())?;
                        Some((lowercase(domain).into_owned(), s.confidence_boost.unwrap_or(0.0)))
                    })
                    .collect(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        PreparedSkill {
            id: skill.id_or_unknown().to_owned(),
            name: skill.name_or_unknown().to_owned(),
            keyword_hashes: hashed(keywords.iter()),
            tags,
            capabilities,
            anti_patterns,
            specializations,
        }
    }
}

/// What the skill-match step produced.
#[derive(Debug, Default)]
struct SkillMatchOutcome {
    /// The best match's score (0.0 without one; 0.5 for an empty task).
    best: f64,
    /// Whether any skill matched.
    any: bool,
    matches: Vec<SkillMatch>,
    tags: Vec<String>,
    capabilities: Vec<String>,
}

/// The cost subscore, or the verdict that the price is over budget.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cost {
    Score(f64),
    OverBudget,
}

/// Bindu's capability calculator over a fixed set of skills and an optional price.
#[derive(Debug, Clone)]
pub struct Calculator {
    skills: Vec<PreparedSkill>,
    input_modes: WordSet,
    output_modes: WordSet,
    tools: WordSet,
    latency_estimate: Number,
    /// The price as Bindu parses it: `None` when the agent charges nothing, `Some(None)` when
    /// the price does not parse.
    price: Option<Option<f64>>,
}

/// How much of an assessment to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// The verdict, the score, the subscores and the confidence; no skill matches, matched tags
    /// or matched capabilities (their lists stay empty).
    Score,
    /// Everything, as the wire answer shows it.
    Full,
}

/// What the calculator needs from a request, computed once for any number of assessments.
#[derive(Debug, Clone)]
pub struct PreparedTask<'r> {
    req: &'r AssessmentRequest,
    weights: super::request::Weights,
    /// Step 3: the task's keywords.
    task: WordSet,
    /// The same with their [`word_hash`], in hash order.
    task_hashes: Vec<(u64, String)>,
    /// The lowercased summary (specialization domains are looked for in it).
    summary_lower: String,
    /// The lowercased summary plus details (anti-patterns are looked for in it).
    anti_text: String,
    /// The budget as Bindu parses it: `None` without one, `Some(None)` when it does not parse.
    budget: Option<Option<f64>>,
}

impl<'r> PreparedTask<'r> {
    /// Prepares `req` for assessment.
    pub fn new(req: &'r AssessmentRequest) -> Self {
        let summary = req.task_summary.as_str();
        let details = req.task_details.as_deref().filter(|d| !d.is_empty());
        let lowered = task_text_lowered(summary, details);
        let summary_lower = lowercase(summary).into_owned();
        let anti_text = match details {
            Some(d) => format!("{summary_lower} {}", lowercase(d)),
            None => summary_lower.clone(),
        };
        let task: WordSet = tokenize(&lowered).map(str::to_owned).collect();
        PreparedTask {
            req,
            weights: req.weights.normalized(),
            task_hashes: hashed(task.iter()),
            task,
            summary_lower,
            anti_text,
            budget: req.max_cost_amount.as_deref().filter(|b| !b.is_empty()).map(parse_amount),
        }
    }
}

/// A 64-bit hash of a word, the same for the whole process (aHash with one key per process:
/// every list compared by [`common_words`] is made in the process that compares it).
fn word_hash(word: &str) -> u64 {
    static KEYS: OnceLock<ahash::RandomState> = OnceLock::new();
    KEYS.get_or_init(ahash::RandomState::new).hash_one(word)
}

/// Words with their [`word_hash`], sorted by hash (then by word).
fn hashed<'w>(words: impl Iterator<Item = &'w String>) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = words.map(|w| (word_hash(w), w.clone())).collect();
    out.sort_unstable();
    out
}

/// How many words two sets (as [`hashed`] lists) share: one merge over the two hash-ordered
/// lists, the words themselves compared only where hashes are equal, so that a ranking over
/// thousands of skills reads two short arrays per skill instead of probing a hash table per
/// word. Exact: words that merely share a hash are told apart by comparing them.
fn common_words(a: &[(u64, String)], b: &[(u64, String)]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                let h = a[i].0;
                let a_end = i + a[i..].iter().take_while(|x| x.0 == h).count();
                let b_end = j + b[j..].iter().take_while(|x| x.0 == h).count();
                n += a[i..a_end].iter().filter(|x| b[j..b_end].iter().any(|y| y.1 == x.1)).count();
                (i, j) = (a_end, b_end);
            }
        }
    }
    n
}

/// Bindu's price parsing: keep ASCII digits and `.`; empty is 0; unparseable is `None`.
pub fn parse_amount(text: &str) -> Option<f64> {
    let cleaned: String = text.chars().filter(|c| c.is_ascii_digit() || *c == '.').collect();
    if cleaned.is_empty() {
        return Some(0.0);
    }
    cleaned.parse::<f64>().ok()
}

fn as_f64(n: &Number) -> f64 {
    n.as_f64().unwrap_or(0.0)
}

/// The MIME-type gate: an empty list asks for nothing; otherwise one of its types must be offered.
fn takes_one_of(wanted: &[String], offered: &WordSet) -> bool {
    wanted.is_empty() || wanted.iter().any(|m| offered.contains(m))
}

fn push_unique(list: &mut Vec<String>, items: &[&str]) {
    for item in items {
        if !list.iter().any(|x| x == item) {
            list.push((*item).to_owned());
        }
    }
}

impl Calculator {
    /// Prepares a calculator for `skills` (in declaration order) and an optional x402 price
    /// (`None`: the agent charges nothing and cost is always 1.0). Takes a `Vec`, a slice or an
    /// array of skills.
    pub fn new(skills: impl AsRef<[Skill]>, price: Option<String>) -> Self {
        let skills = skills.as_ref();
        let mut latency: Option<&Number> = None;
        for s in skills {
            if let Some(n) = s.performance.as_ref().and_then(|p| p.avg_processing_time_ms.as_ref()) {
                // Python's max(): the first of equal maxima wins.
                if latency.is_none_or(|best| as_f64(n) > as_f64(best)) {
                    latency = Some(n);
                }
            }
        }
        Calculator {
            skills: skills.iter().map(PreparedSkill::new).collect(),
            input_modes: skills.iter().flat_map(|s| s.input_modes.iter().cloned()).collect(),
            output_modes: skills.iter().flat_map(|s| s.output_modes.iter().cloned()).collect(),
            tools: skills.iter().flat_map(|s| s.allowed_tools.iter().cloned()).collect(),
            latency_estimate: latency.cloned().unwrap_or_else(|| Number::from(DEFAULT_LATENCY_MS)),
            price: price.as_deref().map(parse_amount),
        }
    }

    /// Number of skills.
    pub fn skill_count(&self) -> usize {
        self.skills.len()
    }

    /// Assesses a task. `queue_depth` is the agent's current backlog (`None`: unknown);
    /// `cosines[i]` is the embedding cosine of skill `i` against this task (`None`: keyword-only).
    pub fn assess(&self, req: &AssessmentRequest, queue_depth: Option<i64>, cosines: Option<&[f64]>) -> Assessment {
        self.assess_prepared(&PreparedTask::new(req), queue_depth, cosines, Detail::Full)
    }

    /// Assesses a prepared task (see [`Calculator::assess`]), building as much as `detail` asks.
    pub fn assess_prepared(
        &self,
        task: &PreparedTask<'_>,
        queue_depth: Option<i64>,
        cosines: Option<&[f64]>,
        detail: Detail,
    ) -> Assessment {
        let req = task.req;
        let weights = &task.weights;
        if self.skills.is_empty() {
            return Assessment::rejected(RejectionReason::NoSkillsAdvertised, 1.0);
        }
        if let Some(reason) = self.hard_gate(req) {
            return Assessment::rejected(reason, 1.0);
        }
        let sm = self.skill_match(task, cosines, detail);
        let io = self.io_compatibility(req);
        let load = match queue_depth {
            None => 0.5,
            Some(q) => round4(1.0 / (1.0 + q.max(0) as f64)),
        };
        let cost = match self.cost(task.budget) {
            Cost::OverBudget => {
                return Assessment::rejected(RejectionReason::CostExceedsBudget, 0.9);
            }
            Cost::Score(c) => c,
        };
        let latency = sm.any.then(|| self.latency_estimate.clone());
        let limit = req.latency_limit();
        if let (Some(max), Some(est)) = (limit, latency.as_ref()) {
            let est_f = as_f64(est);
            if est_f != 0.0 && est_f > max * 2.0 {
                let mut a = Assessment::rejected(RejectionReason::LatencyExceedsConstraint, 0.9);
                a.latency_estimate_ms = latency;
                return a;
            }
        }
        let performance = match (latency.as_ref(), limit) {
            (Some(est), Some(max)) if max > 0.0 => {
                let p = 1.0 - as_f64(est) / max;
                if p > 0.0 { p } else { 0.0 }
            }
            _ => 1.0,
        };
        let subscores = Subscores { skill_match: sm.best, io_compatibility: io, load, cost, performance };
        let mut score = 0.0;
        score += weights.skill_match * subscores.skill_match;
        score += weights.io_compatibility * subscores.io_compatibility;
        score += weights.load * subscores.load;
        score += weights.cost * subscores.cost;
        score += weights.performance * subscores.performance;

        let confidence = self.confidence(sm.any.then_some(sm.best), req, queue_depth.is_some());
        let accepted = score >= req.min_score && sm.best > 0.0;
        Assessment {
            accepted,
            score: round4(score),
            confidence: round4(confidence),
            rejection_reason: (!accepted).then_some(RejectionReason::ScoreBelowThreshold),
            skill_matches: sm.matches,
            matched_tags: sm.tags,
            matched_capabilities: sm.capabilities,
            latency_estimate_ms: latency,
            queue_depth,
            subscores: Some(subscores),
        }
    }

    /// Step 4: the four hard gates, first failure wins.
    fn hard_gate(&self, req: &AssessmentRequest) -> Option<RejectionReason> {
        if !takes_one_of(&req.input_mime_types, &self.input_modes) {
            return Some(RejectionReason::InputMimeUnsupported);
        }
        if !takes_one_of(&req.output_mime_types, &self.output_modes) {
            return Some(RejectionReason::OutputMimeUnsupported);
        }
        if !req.required_tools.iter().all(|t| self.tools.contains(t)) {
            return Some(RejectionReason::RequiredToolMissing);
        }
        if req.forbidden_tools.iter().any(|t| self.tools.contains(t)) {
            return Some(RejectionReason::ForbiddenToolPresent);
        }
        None
    }

    /// Steps 3, 5 and 6: per-skill keyword (or hybrid) scores, boosts, reasons and ordering
    /// (reasons and the matched names only for [`Detail::Full`]).
    fn skill_match(&self, prepared: &PreparedTask<'_>, cosines: Option<&[f64]>, detail: Detail) -> SkillMatchOutcome {
        let summary = prepared.req.task_summary.as_str();
        let task = &prepared.task;
        if task.is_empty() && summary.is_empty() {
            return SkillMatchOutcome { best: 0.5, ..SkillMatchOutcome::default() };
        }
        let summary_lower = prepared.summary_lower.as_str();
        let mut out = SkillMatchOutcome::default();
        let mut tag_hits: Vec<&str> = Vec::new();
        let mut cap_hits: Vec<&str> = Vec::new();
        for (i, skill) in self.skills.iter().enumerate() {
            if !skill.anti_patterns.is_empty()
                && !summary.is_empty()
                && skill.anti_patterns.iter().any(|p| prepared.anti_text.contains(p.as_str()))
            {
                continue;
            }
            let common = common_words(&prepared.task_hashes, &skill.keyword_hashes);
            let union = task.len() + skill.keyword_hashes.len() - common;
            let jaccard = if union == 0 { 0.0 } else { common as f64 / union as f64 };
            let cosine = cosines.and_then(|c| c.get(i)).copied().filter(|c| *c > 0.0);
            let mut score = match cosine {
                Some(c) => EMBEDDING_WEIGHT * c + KEYWORD_WEIGHT * jaccard,
                None => jaccard,
            };
            for (domain, boost) in &skill.specializations {
                if !summary.is_empty() && summary_lower.contains(domain.as_str()) {
                    let boosted = score + boost;
                    score = if boosted < 1.0 { boosted } else { 1.0 };
                }
            }
            if detail == Detail::Score {
                if score > 0.0 {
                    let rounded = round4(score);
                    // The best of the matches, as the sorted list's first would be.
                    if !out.any || rounded > out.best {
                        out.best = rounded;
                    }
                    out.any = true;
                }
                continue;
            }
            let mut reasons = Vec::new();
            if let Some(c) = cosine {
                reasons.push(format!("semantic similarity: {c:.2}"));
            }
            let hit = |l: &&Label| l.words.iter().any(|w| task.contains(w));
            tag_hits.clear();
            tag_hits.extend(skill.tags.iter().filter(hit).map(|l| l.text.as_str()));
            if !tag_hits.is_empty() {
                reasons.push(format!("tags: {}", tag_hits.join(", ")));
                push_unique(&mut out.tags, &tag_hits);
            }
            cap_hits.clear();
            cap_hits.extend(skill.capabilities.iter().filter(hit).map(|l| l.text.as_str()));
            if !cap_hits.is_empty() {
                reasons.push(format!("capabilities: {}", cap_hits.join(", ")));
                push_unique(&mut out.capabilities, &cap_hits);
            }
            if score > 0.0 {
                out.matches.push(SkillMatch {
                    skill_id: skill.id.clone(),
                    skill_name: skill.name.clone(),
                    score: round4(score),
                    reasons,
                });
            }
        }
        if detail == Detail::Full {
            // Stable: equal scores keep declaration order.
            out.matches.sort_by(|a, b| b.score.total_cmp(&a.score));
            out.any = !out.matches.is_empty();
            out.best = out.matches.first().map_or(0.0, |m| m.score);
        }
        out
    }

    /// Step 7.
    fn io_compatibility(&self, req: &AssessmentRequest) -> f64 {
        let wants_in = !req.input_mime_types.is_empty();
        let wants_out = !req.output_mime_types.is_empty();
        let in_ok = wants_in && req.input_mime_types.iter().any(|m| self.input_modes.contains(m));
        let out_ok = wants_out && req.output_mime_types.iter().any(|m| self.output_modes.contains(m));
        match (wants_in, wants_out) {
            (false, false) => 1.0,
            (true, true) if in_ok && out_ok => 1.0,
            (true, true) if in_ok || out_ok => 0.5,
            (true, true) => 0.0,
            (true, false) => f64::from(u8::from(in_ok)),
            (false, true) => f64::from(u8::from(out_ok)),
        }
    }

    /// Step 9, over the parsed price and budget (see [`PreparedTask`]).
    fn cost(&self, budget: Option<Option<f64>>) -> Cost {
        let Some(price) = self.price else {
            return Cost::Score(1.0);
        };
        let Some(budget) = budget else {
            return Cost::Score(0.5);
        };
        let (Some(agent), Some(max)) = (price, budget) else {
            return Cost::Score(0.5);
        };
        if max <= 0.0 {
            return Cost::Score(0.5);
        }
        if agent <= max { Cost::Score(round4(1.0 - (agent / max) * 0.5)) } else { Cost::OverBudget }
    }

    /// Step 13, before rounding.
    fn confidence(&self, best_match: Option<f64>, req: &AssessmentRequest, queue_known: bool) -> f64 {
        let mut c = 0.5;
        match best_match {
            Some(m) if m > 0.3 => c += 0.2,
            Some(_) => c += 0.1,
            None => {}
        }
        if !req.input_mime_types.is_empty() || !req.output_mime_types.is_empty() {
            c += 0.1;
        }
        if req.latency_limit().is_some() {
            c += 0.1;
        }
        if queue_known {
            c += 0.1;
        }
        if c < 1.0 { c } else { 1.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calc() -> Calculator {
        let s = Skill {
            input_modes: vec!["text/plain".into()],
            output_modes: vec!["application/json".into()],
            ..Skill::default()
        };
        Calculator::new(&[s], None)
    }

    #[test]
    fn io_compatibility_per_direction() {
        let c = calc();
        let io = |i: &[&str], o: &[&str]| {
            let mut r = AssessmentRequest::new("x");
            r.input_mime_types = i.iter().map(|s| (*s).to_owned()).collect();
            r.output_mime_types = o.iter().map(|s| (*s).to_owned()).collect();
            c.io_compatibility(&r)
        };
        assert_eq!(io(&[], &[]), 1.0);
        assert_eq!(io(&["text/plain"], &["application/json"]), 1.0);
        assert_eq!(io(&["text/plain"], &["image/png"]), 0.5);
        assert_eq!(io(&["image/png"], &["application/json"]), 0.5);
        assert_eq!(io(&["image/png"], &["image/png"]), 0.0);
        assert_eq!(io(&["text/plain"], &[]), 1.0);
        assert_eq!(io(&["image/png"], &[]), 0.0);
        assert_eq!(io(&[], &["application/json"]), 1.0);
        assert_eq!(io(&[], &["image/png"]), 0.0);
    }

    #[test]
    fn common_words_counts_the_shared_words_even_when_hashes_collide() {
        let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
        let (a, b) = (words(&["rust", "review", "code", "tests"]), words(&["code", "rust", "docs"]));
        assert_eq!(common_words(&hashed(a.iter()), &hashed(b.iter())), 2);
        assert_eq!(common_words(&hashed(a.iter()), &[]), 0);
        // Equal hashes of different words (forced here) are not a shared word.
        let a = vec![(7, "alpha".to_owned()), (7, "beta".to_owned()), (9, "gamma".to_owned())];
        let b = vec![(7, "beta".to_owned()), (7, "delta".to_owned()), (9, "omega".to_owned())];
        assert_eq!(common_words(&a, &b), 1);
    }

    #[test]
    fn cost_outcomes() {
        let priced = Calculator::new(&[Skill::default()], Some("$2".into()));
        assert_eq!(priced.cost(None), Cost::Score(0.5));
        assert_eq!(priced.cost(Some(Some(4.0))), Cost::Score(0.75));
        assert_eq!(priced.cost(Some(Some(1.0))), Cost::OverBudget);
        assert_eq!(priced.cost(Some(None)), Cost::Score(0.5));
        assert_eq!(calc().cost(Some(Some(1.0))), Cost::Score(1.0));
    }
}
