//! The system negotiator: Parley's in-process, deterministic advocate for one user of a
//! negotiation. It plays every user who has no personal agent, and every user whose agent did
//! not answer in time.
//!
//! Its question is the one a good human assistant asks: does a conversation with this other
//! person genuinely serve *my* user? It judges the match, not the words.
//!
//! # What it reads
//!
//! Everything public in the negotiation and nothing else: its own user's profile and intents
//! (all of them, private ones too: they are its own user's), the other user's profile and the
//! intents the platform shares (an intent marked `private` stays with its own side, and the
//! other user's `dealBreakers` never reach this side), the seed assessment (a prior, not a
//! verdict), the discovery query, and the other side's messages. Never the other side's
//! `reasoning`, which is private to that side.
//!
//! # How it judges
//!
//! 1. **Needs** ([`needs`]): each own intent (and the source's discovery query) is read as a need
//!    of a kind (a person, a position, funding, an investment, clients, peers) with weighted words.
//!    The kind comes from the structure of the phrase: the head of its object decides, not a word
//!    before it (a grant writer is a person); a verb the tables do not name is classed by the
//!    lexicon (`require` wants, `apply for` asks); a degree to find is a place to study and an
//!    activity that is work (weekend teaching) a position.
//! 2. **Concepts, not spellings** ([`text`], [`concepts`], [`senses`]): words are compared by
//!    stem, compounds and phrases whole, look-alike letters folded, negation and "only" read as
//!    such, through a small table of software and startup concepts (a CTO is technical, not the
//!    reverse), and through word senses from the lexicon (WordNet), decided by the rest of the
//!    profile: synonyms meet, a narrower word meets a broader need (a chef is a cook), an agent
//!    noun meets its activity at reduced strength (a picker, grape picking), a word in another
//!    sense meets nothing (a tram conductor is no choir's). Senses are told apart only where the
//!    lexicon and the rest of the need agree: two senses whose definitions share a telling word
//!    are one thing (the grape and its vine), a code's name has no sense (`Class 1`), and a head
//!    the need's own words cannot place counts at half when nothing else of the need is shown.
//! 3. **Grounded beats claimed** ([`profile`], [`evidence`]): the other user's profile, as far as
//!    it is credible (a want is a want in any field, and so is an item copying the own user's
//!    need with its particulars; a stuffed list grounds nothing), and their
//!    complementary intents are grounded; the other side's messages are claims, which can earn a
//!    counter but never an accept on their own, count only as far as the profile bears them out,
//!    and stop counting when the other side manipulates (instructions, fake notices, look-alike
//!    letters) or claims what the need asks for most and the profile does not bear out or
//!    contradicts.
//! 4. **Complementarity** ([`judge`]): two people who seek the same thing are no match (two of
//!    a kind of need, or two alike people wanting one object whatever their verbs); a word the
//!    other user means in another sense (Rust the game) is no evidence; opposite poles of
//!    seniority, company stage, commitment or place of work rule a match out; so does a need the
//!    other side says its user lacks, or one the profile names another member of (a
//!    Spanish-English interpreter for a Mandarin-English need).
//! 5. **The seed prior**: the fit weighs the evidence against the platform's seed score, and a
//!    high seed without contrary evidence is not rejected at the first turn: the negotiator asks.
//!
//! # What it does
//!
//! - Turn 0: `propose` only a match it would accept as it stands, or one the seed protects (a
//!   high seed and nothing against it: it asks before it judges); otherwise `reject` at once,
//!   saying why (a side does not present a match that does not serve its user, and the other
//!   side could accept a proposal at once).
//! - Later: a concern rejects; `fit >= accept_at` with enough grounded evidence accepts;
//!   `fit < reject_below` rejects (unless the seed protects a first turn); a turn that must
//!   decide (nothing new since its last counter, the last turn the cap allows, or `max_counters`
//!   spent) accepts at `final_accept_at` with enough grounded evidence, else rejects; otherwise
//!   it counters, asking for concrete experience in words that hand over no checklist to echo.
//!   It never asks a `question`: that action is for personal agents.
//! - Words for people in `message` ([`words`]); scores and term lists in `reasoning`, which the
//!   other side never sees (`missing: a, b` there feeds the insights' objections).
//!
//! The function is pure: same inputs, same turn, in microseconds.

pub mod concepts;
mod disguise;
pub mod evidence;
pub mod judge;
pub mod needs;
pub mod profile;
pub mod senses;
pub mod text;
mod words;

#[cfg(test)]
mod tests;

use crate::domain::turn::{Action, Side, SuggestedRoles, Turn};
use crate::domain::user::{SeedAssessment, UserContext};
pub use judge::{Concern, Evaluation};

/// Thresholds and weights of the system negotiator.
#[derive(Debug, Clone, PartialEq)]
pub struct NegotiatorConfig {
    /// Fit at or above which it accepts (default 0.65).
    pub accept_at: f64,
    /// Fit below which it rejects outright (default 0.35).
    pub reject_below: f64,
    /// On a turn that must decide, and to propose at turn 0, the fit it needs (default 0.55).
    pub final_accept_at: f64,
    /// Grounded share of the need below which it never accepts or proposes (default 0.3).
    pub min_grounded: f64,
    /// Weight of the evidence in the fit (default 0.55).
    pub grounded_weight: f64,
    /// Weight of the seed prior in the fit (default 0.45).
    pub seed_weight: f64,
    /// What a trusted claim counts for, against grounded evidence (default 0.5).
    pub claim_weight: f64,
    /// Seed score (0-1) from which a first turn without concerns is never a reject (default 0.7).
    pub protected_seed: f64,
    /// Share of their terms two needs of the same kind share to be the same need (default 0.5).
    pub same_need_overlap: f64,
    /// Share of what they ask for (their first noun phrases) two needs of the same kind share
    /// to be the same need (default 0.6).
    pub same_need_core_overlap: f64,
    /// Share of a need denied that rules the match out (default 0.25).
    pub denied_share: f64,
    /// Claimed share that, with grounded below `min_grounded`, makes claims unsupported (0.35).
    pub unsupported_claims: f64,
    /// Fit taken off when claims are unsupported or contradicted (default 0.1).
    pub unsupported_penalty: f64,
    /// Factor on the seed when the other user means a need's word in another sense (0.6).
    pub other_sense_prior: f64,
    /// Coverage difference beyond which roles become agent/patient instead of peer (0.25).
    pub role_margin: f64,
    /// Own counters after which it stops countering and decides (default 3).
    pub max_counters: u32,
    /// Most terms listed per category in reasoning (default 10).
    pub max_listed_terms: usize,
}

impl Default for NegotiatorConfig {
    fn default() -> Self {
        NegotiatorConfig {
            accept_at: 0.65,
            reject_below: 0.35,
            final_accept_at: 0.55,
            min_grounded: 0.3,
            grounded_weight: 0.55,
            seed_weight: 0.45,
            claim_weight: 0.5,
            protected_seed: 0.7,
            same_need_overlap: 0.5,
            same_need_core_overlap: 0.6,
            denied_share: 0.25,
            unsupported_claims: 0.35,
            unsupported_penalty: 0.1,
            other_sense_prior: 0.6,
            role_margin: 0.25,
            max_counters: 3,
            max_listed_terms: 10,
        }
    }
}

/// Everything the negotiator knows when it takes a turn for `own`.
#[derive(Debug, Clone, Copy)]
pub struct Situation<'a> {
    /// The user this negotiator advocates for (their whole context).
    pub own: &'a UserContext,
    /// The other user, as the own side may see them (shared intents, no deal-breakers).
    pub other: &'a UserContext,
    /// The seat of the own user.
    pub own_side: Side,
    /// The evaluator's assessment that proposed the match.
    pub seed: &'a SeedAssessment,
    /// The source user's discovery query, when there was one.
    pub discovery_query: Option<&'a str>,
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
    /// Why, with the fit and the terms; never empty; private to its own side.
    pub reasoning: String,
    /// Roles from the own user's point of view.
    pub suggested_roles: SuggestedRoles,
    /// Words for the other side.
    pub message: Option<String>,
}

/// Evaluates the match for the own user of `s`.
pub fn evaluate(cfg: &NegotiatorConfig, s: &Situation) -> Evaluation {
    judge::evaluate(cfg, s)
}

/// Why a turn must decide rather than counter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum MustDecide {
    /// Nothing new since the own side's counter at this turn.
    NothingNew(u32),
    /// The last turn the cap allows.
    LastTurn,
    /// This many own counters spent.
    Counters(usize),
}

/// Decides the own side's next turn.
pub fn decide(cfg: &NegotiatorConfig, s: &Situation) -> Decision {
    let eval = evaluate(cfg, s);
    let suggested_roles = judge::roles(cfg, s, &eval);
    let turn = s.history.len();
    let own_counters = s.history.iter().filter(|t| t.side == s.own_side && t.action == Action::Counter).count();
    let own_decisions = s.history.iter().filter(|t| t.side == s.own_side && t.turn_number > 0).count();
    let last_allowed = s.max_turns > 0 && turn + 1 >= s.max_turns as usize;
    let must_decide = if let Some(n) = eval.last_counter.filter(|_| !eval.news) {
        Some(MustDecide::NothingNew(n))
    } else if last_allowed {
        Some(MustDecide::LastTurn)
    } else if own_counters >= cfg.max_counters as usize {
        Some(MustDecide::Counters(own_counters))
    } else {
        None
    };
    let grounded_enough = eval.grounded >= cfg.min_grounded;
    let acceptable = eval.concerns.is_empty() && grounded_enough && eval.fit >= cfg.final_accept_at;
    let protected =
        own_decisions == 0 && eval.seed >= cfg.protected_seed && eval.concerns.is_empty() && eval.other_sense.is_none();

    let action = if turn == 0 {
        if acceptable || protected { Action::Propose } else { Action::Reject }
    } else if !eval.concerns.is_empty() {
        Action::Reject
    } else if eval.fit >= cfg.accept_at && grounded_enough {
        Action::Accept
    } else if eval.fit < cfg.reject_below && !protected {
        Action::Reject
    } else if must_decide.is_some() {
        if acceptable { Action::Accept } else { Action::Reject }
    } else {
        Action::Counter
    };
    let (reasoning, message) = words::turn_words(cfg, s, &eval, action, must_decide.as_ref(), own_counters);
    Decision { action, reasoning, suggested_roles, message: Some(message) }
}
