//! The system negotiator: Parley's in-process, deterministic advocate for one
//! user of a negotiation.
//!
//! # How it decides
//!
//! The question is always the same: does the other user genuinely serve *this* user's intents?
//!
//! 1. **Needs.** The own user's intents (plus the discovery query when the own user is the
//!    source, since that query is theirs) are turned into content terms (see [`terms`]):
//!    compounds such as `part-time` or `ci/cd` stay whole, stop words go, plurals are folded.
//! 2. **Evidence** is only what the other side shows: the other user's profile (bio, skills,
//!    interests) and the `message` of each of the other side's turns: what the other side may
//!    show. Never the other side's `reasoning`, which is private to that side: the negotiator
//!    is one user's advocate, not the service, and weighs only what the other side said. A
//!    message line that asks for evidence (`... needs evidence of: ...`, as this negotiator
//!    writes its own asks) names what its writer wants, not what it offers, and is skipped.
//!    Evidence is re-read on every turn, so an objection can be answered: a term named missing
//!    in a counter counts as soon as the other side's next message supplies it.
//! 3. **Fit**, in `[0, 1]`: a weighted mean of *coverage* (share of need terms found in the
//!    evidence), the evaluator's *seed* score (0-100, as a prior) and the Bindu *skill match*
//!    of the calculator of [`crate::scoring`] run with the needs as the task and the evidence's
//!    terms as the only skill (a Jaccard score that rewards focused evidence). Weights are in
//!    [`NegotiatorConfig`]. Without any need terms, coverage falls back to the seed prior.
//! 4. **Blockers.** An own deal-breaker (optional `dealBreakers: [string]` in the own profile's
//!    extra fields; a phrase matches when all its content terms appear in the evidence), or,
//!    when the own user is the candidate, a discovery query of the other side that none of the
//!    own user's profile or intents answers, rules the match out.
//! 5. **Progress.** What the other side's messages covered since this side's last counter is
//!    *new*. A side counters only when something is: when nothing new arrived since its last
//!    counter, it decides at once (accept when the fit reaches `final_accept_at`, else reject)
//!    and says so ("nothing new since turn 2"). So no side repeats a counter word for word, a
//!    stalemate between two system negotiators ends by turn 3, and a later counter names what
//!    changed ("now covered: rust") and what is still missing.
//! 6. **Action.** Turn 0 is always `propose` (the protocol demands it), presenting the case.
//!    Later, in this order: a blocker rejects; `fit >= accept_at` accepts; `fit < reject_below`
//!    rejects; a final decision (nothing new since the last counter, the last turn the cap
//!    allows, or `max_counters` own counters spent) accepts when `fit >= final_accept_at` and
//!    rejects otherwise; else `counter`, naming the missing terms. It never asks a `question`:
//!    that action is for personal agents.
//!
//! `reasoning` always names the fit, the matched and the missing terms (`matched: a, b; missing:
//! c, d`, terms whole: the insights endpoint reads the `missing:` list), plus the seed's reasoning
//! when proposing. The `message`, for the other side, says what this user offers and, in a
//! counter, which terms it still needs evidence of. Roles come from the seed's `actors`, else
//! its `valencyRole` (the source user's role; the candidate gets the complement), else from who
//! needs what: if this user's needs are much better covered by the other's evidence than the
//! other user's intents by this user's profile, this user is the `patient` and the other the
//! `agent` (and vice versa); otherwise both are `peer`. That is the one place the other user's
//! intents are read: roles never change the decision and show none of their terms.
//!
//! The function is pure: same inputs, same decision, in microseconds. A known limit: apart
//! from asking lines, text of the other side counts as evidence however it is phrased, so a term
//! the other side names as something *it* lacks still counts; the seed prior and the thresholds
//! bound that effect.

pub mod terms;

#[cfg(test)]
mod tests;

use crate::domain::turn::{Action, Role, Side, SuggestedRoles, Turn};
use crate::domain::user::{SeedAssessment, UserContext};
use crate::scoring::{AssessmentRequest, Calculator, Skill, SkillAssessment};
use terms::{Evidence, Term, terms};

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
    /// Turn number of the own side's last counter, if it countered.
    pub last_counter: Option<u32>,
    /// Need terms the other side's messages covered since that counter (all of them are also in
    /// `matched`); empty without a counter.
    pub newly_covered: Vec<Term>,
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
    let mut need_texts: Vec<&str> = s.own.intents.iter().map(|i| i.text.as_str()).collect();
    if s.own_side == Side::Source {
        need_texts.extend(s.discovery_query);
    }
    let needs = terms(need_texts);
    let shown = Shown::read(s);

    let mut matched = Vec::new();
    let mut missing = Vec::new();
    let mut newly_covered = Vec::new();
    for need in needs.iter() {
        if shown.earlier.covers(need) {
            matched.push(need.clone());
        } else if shown.later.covers(need) {
            matched.push(need.clone());
            newly_covered.push(need.clone());
        } else {
            missing.push(need.clone());
        }
    }
    let seed = clamp01(s.seed.score / 100.0);
    let coverage = if needs.is_empty() {
        seed
    } else {
        matched.len() as f64 / needs.len() as f64
    };
    let skill_match = bindu_skill_match(s.other, &needs, &shown);

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
    let blocker = find_blocker(s, &shown);
    Evaluation {
        matched,
        missing,
        coverage,
        skill_match,
        seed,
        fit,
        blocker,
        last_counter: shown.last_counter,
        newly_covered,
    }
}

/// The phrase with which a message line asks for evidence. The negotiator writes its asks this
/// way, and a line with it names what its writer wants, so it is no evidence of an offer.
const ASKS_FOR_EVIDENCE: &str = "needs evidence of";

/// Whether `line` asks for evidence (ASCII case-insensitive).
fn asks_for_evidence(line: &str) -> bool {
    let (hay, needle) = (line.as_bytes(), ASKS_FOR_EVIDENCE.as_bytes());
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// What the other side has shown, split at this side's last counter: `earlier` is the other
/// user's profile and the messages before it, `later` the messages after it (what is new).
/// Without a counter of this side everything is `earlier`.
struct Shown<'a> {
    earlier: Evidence<'a>,
    later: Evidence<'a>,
    /// Turn number of this side's last counter.
    last_counter: Option<u32>,
}

impl<'a> Shown<'a> {
    fn read(s: &Situation<'a>) -> Shown<'a> {
        let other_side = s.own_side.other();
        let last_counter = s
            .history
            .iter()
            .rev()
            .find(|t| t.side == s.own_side && t.action == Action::Counter)
            .map(|t| t.turn_number);
        let mut shown = Shown {
            earlier: Evidence::of(offer_texts(s.other)),
            later: Evidence::new(),
            last_counter,
        };
        for t in s.history.iter().filter(|t| t.side == other_side) {
            let Some(message) = t.message.as_deref() else {
                continue;
            };
            let into = if last_counter.is_some_and(|k| t.turn_number > k) {
                &mut shown.later
            } else {
                &mut shown.earlier
            };
            for line in message.lines().filter(|l| !asks_for_evidence(l)) {
                into.add(line);
            }
        }
        shown
    }

    fn covers(&self, t: &Term) -> bool {
        self.earlier.covers(t) || self.later.covers(t)
    }
}

/// Runs the Bindu calculator with the needs as the task and the other side's evidence as the
/// only skill.
fn bindu_skill_match(other: &UserContext, needs: &[Term], shown: &Shown) -> f64 {
    if needs.is_empty() {
        return 0.0;
    }
    // The calculator makes a set of them: a key in both parts counts once.
    let keywords = shown
        .earlier
        .keys()
        .iter()
        .chain(shown.later.keys())
        .cloned()
        .collect();
    let skill = Skill {
        id: Some(other.id.clone()),
        name: Some(display_name(other).to_owned()),
        assessment: Some(SkillAssessment {
            keywords,
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

fn find_blocker(s: &Situation, shown: &Shown) -> Option<String> {
    for phrase in deal_breakers(s.own) {
        let phrase_terms = terms([phrase]);
        if !phrase_terms.is_empty() && phrase_terms.iter().all(|t| shown.covers(t)) {
            return Some(format!(
                "deal-breaker \"{phrase}\" appears in what {} shows",
                display_name(s.other)
            ));
        }
    }
    if s.own_side == Side::Candidate
        && let Some(query) = s.discovery_query
    {
        let wanted = terms([query]);
        let mut own_texts = offer_texts(s.own);
        own_texts.extend(s.own.intents.iter().map(|i| i.text.as_str()));
        let offered = Evidence::of(own_texts);
        if !wanted.is_empty() && wanted.iter().all(|t| !offered.covers(t)) {
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
    // The other user's intents are read here, and only here: the service holds them, and the
    // roles say who provides and who receives without changing the decision or showing a term.
    let other_needs = terms(s.other.intents.iter().map(|i| i.text.as_str()));
    let own_offer = Evidence::of(offer_texts(s.own));
    let backward = if other_needs.is_empty() {
        0.0
    } else {
        other_needs.iter().filter(|t| own_offer.covers(t)).count() as f64 / other_needs.len() as f64
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
    // Why this turn must decide rather than counter, if it must.
    let nothing_new = eval
        .last_counter
        .filter(|_| eval.newly_covered.is_empty())
        .map(|n| format!("nothing new since turn {n}"));
    let must_decide = nothing_new.clone().or_else(|| {
        if last_allowed {
            Some("the last turn the cap allows".to_owned())
        } else if own_counters >= cfg.max_counters as usize {
            let plural = if own_counters == 1 { "" } else { "s" };
            Some(format!("no agreement after {own_counters} counter{plural}"))
        } else {
            None
        }
    });

    let action = if turn == 0 {
        Action::Propose
    } else if eval.blocker.is_some() {
        Action::Reject
    } else if eval.fit >= cfg.accept_at {
        Action::Accept
    } else if eval.fit < cfg.reject_below {
        Action::Reject
    } else if must_decide.is_some() {
        if eval.fit >= cfg.final_accept_at {
            Action::Accept
        } else {
            Action::Reject
        }
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
    let now_covered = (!eval.newly_covered.is_empty())
        .then(|| format!("now covered: {}", list(&eval.newly_covered, max)));
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
            let mut why = match &must_decide {
                Some(w) if eval.fit < cfg.accept_at => {
                    format!("final decision: {w}; the fit is sufficient")
                }
                _ => "the fit is convincing".to_owned(),
            };
            if let Some(c) = &now_covered {
                why = format!("{why}; {c}");
            }
            (
                format!("Accepting ({why}): {summary}"),
                Some(format!("{own} would like to meet {other}.")),
            )
        }
        Action::Reject => {
            let why = match (&eval.blocker, &must_decide) {
                (Some(b), _) => b.clone(),
                (None, Some(w)) if eval.fit >= cfg.reject_below => {
                    format!("final decision: {w}; the fit is too weak")
                }
                _ => "the fit is clearly insufficient".to_owned(),
            };
            let message = match &nothing_new {
                Some(n) => format!("{own} will pass on this match: {n}."),
                None => format!("{own} will pass on this match."),
            };
            (format!("Rejecting ({why}): {summary}"), Some(message))
        }
        Action::Counter | Action::Question => {
            let missing = list(&eval.missing, max);
            let (why, ask) = match &now_covered {
                Some(c) => (
                    format!("{c} since turn {}", eval.last_counter.unwrap_or_default()),
                    format!(
                        "Now covered: {}; to go ahead, {own} still {ASKS_FOR_EVIDENCE}: {missing}.",
                        list(&eval.newly_covered, max)
                    ),
                ),
                None => (
                    "not yet convincing".to_owned(),
                    format!("To go ahead, {own} {ASKS_FOR_EVIDENCE}: {missing}."),
                ),
            };
            (
                format!("Countering ({why}): {summary}"),
                Some(format!("{ask}\n{}", offer_message(s.own))),
            )
        }
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
/// of what this user offers. A counter states the needs on a line of its own that asks for
/// evidence, which readers skip.
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
