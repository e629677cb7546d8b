//! The system negotiator: Parley's in-process, deterministic advocate for one
//! user of a negotiation.
//!
//! # How it decides
//!
//! The question is always the same: does the other user genuinely serve *this* user's intents?
//!
//! 1. **Needs.** The own user's intents (plus the discovery query when the own user is the
//!    source, since that query is theirs) are turned into content terms with the scoring
//!    tokenizer, minus stop words, plurals folded (see [`terms`]).
//! 2. **Evidence.** The other user's bio, skills and interests, plus everything the other side
//!    has said so far (reasoning and message of each of its turns), tokenized the same way.
//!    Evidence is re-read on every turn, so an objection can be answered: a term named missing
//!    in a counter counts as soon as the other side's next turn supplies it.
//! 3. **Fit**, in `[0, 1]`: a weighted mean of *coverage* (share of need terms found in the
//!    evidence), the evaluator's *seed* score (0-100, as a prior) and the Bindu *skill match*
//!    of the calculator of [`crate::scoring`] run with the needs as the task and the other user
//!    as the only skill (a Jaccard score that rewards focused evidence). Weights are in
//!    [`NegotiatorConfig`]. Without any need terms, coverage falls back to the seed prior.
//! 4. **Blockers.** An own deal-breaker (optional `dealBreakers: [string]` in the own profile's
//!    extra fields; a phrase matches when all its content terms appear in the evidence), or,
//!    when the own user is the candidate, a discovery query of the other side that none of the
//!    own user's profile or intents answers, rules the match out.
//! 5. **Action.** Turn 0 is always `propose` (the protocol demands it), presenting the case. Later:
//!    a blocker rejects; on the last turn the cap allows (or after `max_counters` own counters
//!    without agreement) only accept (`fit >= final_accept_at`) or reject remain; otherwise
//!    `accept` when `fit >= accept_at`, `reject` when `fit < reject_below`, else `counter`
//!    naming the missing terms. It never asks a `question`.
//!
//! `reasoning` always names the fit, the matched and the missing terms (and the seed's reasoning
//! when proposing). Roles come from the seed's `actors`, else its `valencyRole` (the source
//! user's role; the candidate gets the complement), else from who needs what: if this user's
//! needs are much better covered by the other than the other way round, this user is the
//! `patient` and the other the `agent` (and vice versa); otherwise both are `peer`.
//!
//! The function is pure: same inputs, same decision, in microseconds. A known limit: text of the
//! other side counts as evidence however it is phrased, so a term the other side names as
//! something *it* lacks still counts; the seed prior and the thresholds bound that effect.

pub mod terms;

#[cfg(test)]
mod tests;

use crate::domain::turn::{Action, Role, Side, SuggestedRoles, Turn};
use crate::domain::user::{SeedAssessment, UserContext};
use crate::scoring::{AssessmentRequest, Calculator, Skill, SkillAssessment};
use std::collections::HashSet;
use terms::{Term, term_keys, terms};

/// Thresholds and weights of the system negotiator.
#[derive(Debug, Clone, PartialEq)]
pub struct NegotiatorConfig {
    /// Fit at or above which the negotiator accepts (default 0.6).
    pub accept_at: f64,
    /// Fit below which the negotiator rejects outright (default 0.3).
    pub reject_below: f64,
    /// On a forced final decision, fit at or above which it accepts, else rejects (default 0.5).
    pub final_accept_at: f64,
    /// Weight of need coverage in the fit (default 0.6).
    pub coverage_weight: f64,
    /// Weight of the evaluator's seed score in the fit (default 0.3).
    pub seed_weight: f64,
    /// Weight of the Bindu skill match in the fit (default 0.1).
    pub skill_match_weight: f64,
    /// Coverage difference beyond which roles become agent/patient instead of peer (default 0.25).
    pub role_margin: f64,
    /// Own counters after which the negotiator stops countering and decides (default 3).
    pub max_counters: u32,
    /// Most terms listed per category in reasoning and messages (default 10).
    pub max_listed_terms: usize,
}

impl Default for NegotiatorConfig {
    fn default() -> Self {
        NegotiatorConfig {
            accept_at: 0.6,
            reject_below: 0.3,
            final_accept_at: 0.5,
            coverage_weight: 0.6,
            seed_weight: 0.3,
            skill_match_weight: 0.1,
            role_margin: 0.25,
            max_counters: 3,
            max_listed_terms: 10,
        }
    }
}

/// Everything the negotiator knows when it takes a turn for `own`.
#[derive(Debug, Clone, Copy)]
pub struct Situation<'a> {
    /// The user this negotiator advocates for.
    pub own: &'a UserContext,
    /// The other user.
    pub other: &'a UserContext,
    /// The seat of the own user.
    pub own_side: Side,
    /// The evaluator's assessment that proposed the match.
    pub seed: &'a SeedAssessment,
    /// The source user's discovery query, when there was one.
    pub discovery_query: Option<&'a str>,
    /// The platform's index context (kept for explanations; not scored).
    pub index_context: Option<&'a serde_json::Value>,
    /// Turns already taken, oldest first.
    pub history: &'a [Turn],
    /// Turn cap of the negotiation (0 = unlimited).
    pub max_turns: u32,
}

/// The turn the negotiator takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// What it does (never `question`).
    pub action: Action,
    /// Why, naming matched and missing terms; never empty.
    pub reasoning: String,
    /// Roles from the own user's point of view.
    pub suggested_roles: SuggestedRoles,
    /// Text for the other side.
    pub message: Option<String>,
}

/// What the evidence says about the match, from the own user's side.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Need terms found in the evidence.
    pub matched: Vec<Term>,
    /// Need terms not (yet) found.
    pub missing: Vec<Term>,
    /// `matched / (matched + missing)`, or the seed prior when there are no needs.
    pub coverage: f64,
    /// Bindu skill-match subscore of the other user against the needs.
    pub skill_match: f64,
    /// Seed score scaled to `[0, 1]`.
    pub seed: f64,
    /// The weighted fit.
    pub fit: f64,
    /// What rules the match out, if anything.
    pub blocker: Option<String>,
}

fn display_name(u: &UserContext) -> &str {
    u.name
        .as_deref()
        .filter(|n| !n.trim().is_empty())
        .unwrap_or(&u.id)
}

/// The texts that describe what a user offers: bio, skills, interests.
fn offer_texts(u: &UserContext) -> Vec<&str> {
    let mut texts = Vec::new();
    if let Some(p) = &u.profile {
        texts.extend(p.bio.as_deref());
        texts.extend(p.skills.iter().map(String::as_str));
        texts.extend(p.interests.iter().map(String::as_str));
    }
    texts
}

fn deal_breakers(u: &UserContext) -> Vec<&str> {
    u.profile
        .as_ref()
        .and_then(|p| p.extra.get("dealBreakers"))
        .and_then(|v| v.as_array())
        .map(|items| items.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default()
}

fn clamp01(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

/// Evaluates the match for the own user of `s`.
pub fn evaluate(cfg: &NegotiatorConfig, s: &Situation) -> Evaluation {
    let other_side = s.own_side.other();
    let mut need_texts: Vec<&str> = s.own.intents.iter().map(|i| i.text.as_str()).collect();
    if s.own_side == Side::Source {
        need_texts.extend(s.discovery_query);
    }
    let needs = terms(need_texts);

    let mut evidence_texts = offer_texts(s.other);
    for t in s.history.iter().filter(|t| t.side == other_side) {
        evidence_texts.push(&t.reasoning);
        evidence_texts.extend(t.message.as_deref());
    }
    let evidence_terms = terms(evidence_texts.iter().copied());
    let evidence: HashSet<&str> = evidence_terms.iter().map(|t| t.key.as_str()).collect();

    let (matched, missing): (Vec<Term>, Vec<Term>) = needs
        .iter()
        .cloned()
        .partition(|t| evidence.contains(t.key.as_str()));
    let seed = clamp01(s.seed.score / 100.0);
    let coverage = if needs.is_empty() {
        seed
    } else {
        matched.len() as f64 / needs.len() as f64
    };
    let skill_match = bindu_skill_match(s.other, &needs, &evidence_terms);

    let total = cfg.coverage_weight + cfg.seed_weight + cfg.skill_match_weight;
    let fit = if total > 0.0 {
        clamp01(
            (cfg.coverage_weight * coverage
                + cfg.seed_weight * seed
                + cfg.skill_match_weight * skill_match)
                / total,
        )
    } else {
        coverage
    };
    let blocker = find_blocker(s, &evidence);
    Evaluation {
        matched,
        missing,
        coverage,
        skill_match,
        seed,
        fit,
        blocker,
    }
}

/// Runs the Bindu calculator with the needs as the task and the other user as the only skill.
fn bindu_skill_match(other: &UserContext, needs: &[Term], evidence: &[Term]) -> f64 {
    if needs.is_empty() {
        return 0.0;
    }
    let skill = Skill {
        id: Some(other.id.clone()),
        name: Some(display_name(other).to_owned()),
        assessment: Some(SkillAssessment {
            keywords: evidence.iter().map(|t| t.key.clone()).collect(),
            ..SkillAssessment::default()
        }),
        ..Skill::default()
    };
    let summary = needs
        .iter()
        .map(|t| t.key.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let req = AssessmentRequest::new(crate::scoring::text::truncate_chars(&summary, 10_000));
    Calculator::new(&[skill], None)
        .assess(&req, None, None)
        .subscores
        .map_or(0.0, |s| s.skill_match)
}

fn find_blocker(s: &Situation, evidence: &HashSet<&str>) -> Option<String> {
    for phrase in deal_breakers(s.own) {
        let keys = term_keys([phrase]);
        if !keys.is_empty() && keys.iter().all(|k| evidence.contains(k.as_str())) {
            return Some(format!(
                "deal-breaker \"{phrase}\" appears in what {} shows",
                display_name(s.other)
            ));
        }
    }
    if s.own_side == Side::Candidate
        && let Some(query) = s.discovery_query
    {
        let wanted = term_keys([query]);
        let mut own_texts = offer_texts(s.own);
        own_texts.extend(s.own.intents.iter().map(|i| i.text.as_str()));
        let offered = term_keys(own_texts);
        if !wanted.is_empty() && wanted.iter().all(|k| !offered.contains(k)) {
            return Some(format!(
                "{}'s discovery query \"{query}\" asks for nothing {} offers",
                display_name(s.other),
                display_name(s.own)
            ));
        }
    }
    None
}

/// Roles from the seed's actors, else its valency role, else from who needs what.
fn roles(cfg: &NegotiatorConfig, s: &Situation, eval: &Evaluation) -> SuggestedRoles {
    if let Some(actors) = &s.seed.actors {
        let role_of = |id: &str| actors.iter().find(|a| a.user_id == id).map(|a| a.role);
        match (role_of(&s.own.id), role_of(&s.other.id)) {
            (Some(own), Some(other)) => {
                return SuggestedRoles {
                    own_user: own,
                    other_user: other,
                };
            }
            (Some(own), None) => {
                return SuggestedRoles {
                    own_user: own,
                    other_user: own.complement(),
                };
            }
            (None, Some(other)) => {
                return SuggestedRoles {
                    own_user: other.complement(),
                    other_user: other,
                };
            }
            (None, None) => {}
        }
    }
    if let Some(source_role) = s.seed.valency_role {
        let own = if s.own_side == Side::Source {
            source_role
        } else {
            source_role.complement()
        };
        return SuggestedRoles {
            own_user: own,
            other_user: own.complement(),
        };
    }
    // Who needs what: how well each side's needs are covered by the other's offer.
    let forward = if eval.matched.is_empty() && eval.missing.is_empty() {
        0.0
    } else {
        eval.coverage
    };
    let other_needs = terms(s.other.intents.iter().map(|i| i.text.as_str()));
    let own_offer = term_keys(offer_texts(s.own));
    let backward = if other_needs.is_empty() {
        0.0
    } else {
        other_needs
            .iter()
            .filter(|t| own_offer.contains(&t.key))
            .count() as f64
            / other_needs.len() as f64
    };
    let own = if forward - backward > cfg.role_margin {
        Role::Patient
    } else if backward - forward > cfg.role_margin {
        Role::Agent
    } else {
        Role::Peer
    };
    SuggestedRoles {
        own_user: own,
        other_user: own.complement(),
    }
}

fn list(terms: &[Term], max: usize) -> String {
    if terms.is_empty() {
        return "none".to_owned();
    }
    let mut out = terms
        .iter()
        .take(max)
        .map(|t| t.shown.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if terms.len() > max {
        out.push_str(&format!(" (+{} more)", terms.len() - max));
    }
    out
}

/// Decides the own side's next turn.
pub fn decide(cfg: &NegotiatorConfig, s: &Situation) -> Decision {
    let eval = evaluate(cfg, s);
    let suggested_roles = roles(cfg, s, &eval);
    let turn = s.history.len();
    let own_counters = s
        .history
        .iter()
        .filter(|t| t.side == s.own_side && t.action == Action::Counter)
        .count();
    let last_allowed = s.max_turns > 0 && turn + 1 >= s.max_turns as usize;
    let other_accepted = s
        .history
        .last()
        .is_some_and(|t| t.side != s.own_side && t.action == Action::Accept);
    let forced = last_allowed || own_counters >= cfg.max_counters as usize;

    let action = if turn == 0 {
        Action::Propose
    } else if eval.blocker.is_some() {
        Action::Reject
    } else if other_accepted && eval.fit >= cfg.accept_at {
        Action::Accept
    } else if forced {
        if eval.fit >= cfg.final_accept_at {
            Action::Accept
        } else {
            Action::Reject
        }
    } else if eval.fit >= cfg.accept_at {
        Action::Accept
    } else if eval.fit < cfg.reject_below {
        Action::Reject
    } else {
        Action::Counter
    };

    let own = display_name(s.own);
    let other = display_name(s.other);
    let max = cfg.max_listed_terms;
    let summary = format!(
        "fit {:.2} (coverage {}/{} of {own}'s needs, seed {:.0}, keyword match {:.2}); matched: {}; missing: {}",
        eval.fit,
        eval.matched.len(),
        eval.matched.len() + eval.missing.len(),
        eval.seed * 100.0,
        eval.skill_match,
        list(&eval.matched, max),
        list(&eval.missing, max),
    );
    let (lead, message) = match action {
        Action::Propose => {
            let mut lead = format!(
                "Proposing {other} for {own}: {summary}. Seed reasoning: {}",
                s.seed.reasoning.trim()
            );
            if let Some(b) = &eval.blocker {
                lead.push_str(&format!(". Concern: {b}"));
            }
            (lead, Some(offer_message(s.own)))
        }
        Action::Accept => {
            let why = if forced && eval.fit < cfg.accept_at {
                "final decision, fit is sufficient"
            } else {
                "the fit is convincing"
            };
            (
                format!("Accepting ({why}): {summary}"),
                Some(format!("{own} would like to meet {other}.")),
            )
        }
        Action::Reject => {
            let why = match &eval.blocker {
                Some(b) => b.clone(),
                None if forced => "final decision, fit is too weak".to_owned(),
                None => "the fit is clearly insufficient".to_owned(),
            };
            (
                format!("Rejecting ({why}): {summary}"),
                Some(format!("{own} will pass on this match.")),
            )
        }
        Action::Counter | Action::Question => (
            format!("Countering (not yet convincing): {summary}"),
            Some(format!(
                "To go ahead, {own} needs evidence of: {}. {}",
                list(&eval.missing, max),
                offer_message(s.own)
            )),
        ),
    };
    Decision {
        action,
        reasoning: lead,
        suggested_roles,
        message,
    }
}

/// What the own user brings (skills, else bio), for the other side to weigh as evidence.
///
/// Deliberately silent about the own user's needs: the other side reads this text as evidence
/// of what this user offers.
fn offer_message(own: &UserContext) -> String {
    let name = display_name(own);
    let profile = own.profile.as_ref();
    let skills = profile
        .map(|p| p.skills.join(", "))
        .filter(|s| !s.is_empty());
    let bio = profile
        .and_then(|p| p.bio.as_deref())
        .map(str::trim)
        .filter(|b| !b.is_empty());
    match (skills, bio) {
        (Some(skills), _) => format!("{name} brings: {skills}."),
        (None, Some(bio)) => format!("About {name}: {bio}"),
        (None, None) => format!("{name} has not described a profile yet."),
    }
}
