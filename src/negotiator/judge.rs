//! The judgment: how well the other user serves one of the own user's needs, on the evidence,
//! and what speaks against the match.
//!
//! For each need of the own user ([`super::needs`]) every term is weighed against the other
//! side's evidence ([`super::evidence`]): grounded strength (0 to 1), what trusted claims add,
//! and whether the other side denies it. A homonym used by the other user in another sense is no
//! evidence. The need the other user serves best is the one judged; a need the other user
//! *shares* (both want the same thing) is never that need.
//!
//! **Fit** = `grounded_weight * (grounded + claim_weight * claimed) + seed_weight * prior`,
//! normalised, where `prior` is the seed score, lowered when the other user turned out to use a
//! homonym of the need in another sense (the evaluator's overlap was then likely the word).
//!
//! **Concerns** are what speaks against the match whatever the fit: the same need on both sides,
//! a deal-breaker of the own user, a discovery query of the other side that the own user does not
//! answer, a need the other side denies, or the two at opposite poles of an axis (seniority,
//! company stage, commitment, place of work). Each rules the match out.

use super::concepts::{self, AXES};
use super::evidence::{self, Denials, Distrust, Evidence, INTENT, INTEREST, Senses};
use super::needs::{self, Frame, Need};
use super::profile::{Profile, strings};
use super::senses::{self, Context};
use super::text::Word;
use super::{NegotiatorConfig, Situation};
use crate::domain::turn::{Action, Role, Side, SuggestedRoles};
use crate::domain::user::UserContext;
use crate::lexicon::Lexicon;

/// One term of the judged need, weighed.
#[derive(Debug, Clone, PartialEq)]
pub struct Weighed {
    /// The term as written in the need.
    pub shown: String,
    /// Its weight in the need.
    pub weight: f64,
    /// Grounded strength, 0 to 1.
    pub grounded: f64,
    /// Strength of the trusted claims, 0 to 1.
    pub claimed: f64,
    /// Whether the other side denies it.
    pub denied: bool,
    /// Whether the claims that cover it came after the own side's last counter.
    pub new: bool,
    /// Whether the profile names another thing of its kind in its place.
    pub another: bool,
}

/// Something that rules the match out.
#[derive(Debug, Clone, PartialEq)]
pub enum Concern {
    /// Both users want the same thing.
    SameNeed,
    /// A deal-breaker of the own user shows (the phrase stays private to the own side).
    DealBreaker(String),
    /// The other side's discovery query asks for nothing the own user offers.
    QueryUnanswered(String),
    /// The other side says its user lacks what the need asks for.
    Denied(Vec<String>),
    /// The other user's profile names another thing of the kind the need asks for (a
    /// Spanish-English interpreter for a Mandarin-English need).
    Another(Vec<String>),
    /// The need and the other user stand at opposite poles of an axis.
    Axis {
        /// The axis.
        axis: &'static str,
        /// The need's pole.
        wanted: &'static str,
        /// The other user's pole.
        found: &'static str,
    },
}

/// What the evidence says about the match, from the own user's side.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// The need judged (none when the own user states no needs).
    pub need: Option<Need>,
    /// Whether that need came from an intent marked private (its words are never shown).
    pub need_private: bool,
    /// Its terms, weighed.
    pub terms: Vec<Weighed>,
    /// Share of the need the grounded evidence shows.
    pub grounded: f64,
    /// Share shown only by trusted claims.
    pub claimed: f64,
    /// Share the other side denies.
    pub denied: f64,
    /// The seed score, 0 to 1.
    pub seed: f64,
    /// The prior the fit uses (the seed, lowered after a homonym in another sense).
    pub prior: f64,
    /// The fit.
    pub fit: f64,
    /// What rules the match out.
    pub concerns: Vec<Concern>,
    /// A homonym of the need the other user uses in another sense: the word and that sense.
    pub other_sense: Option<(String, &'static str)>,
    /// Why the other side's claims do not count, if they do not.
    pub distrust: Option<Distrust>,
    /// The other user's own profile phrases (skills, as written) that show the need.
    pub highlights: Vec<String>,
    /// The other user's need that this user serves in return, when one does.
    pub other_need: Option<String>,
    /// Turn number of the own side's last counter, if it countered.
    pub last_counter: Option<u32>,
    /// Whether the other side said something new about the need since that counter.
    pub news: bool,
}

impl Evaluation {
    /// Terms nothing shows.
    pub fn missing(&self) -> impl Iterator<Item = &Weighed> {
        self.terms.iter().filter(|t| !t.denied && t.grounded.max(t.claimed) == 0.0)
    }
}

/// The other side's messages, read.
struct Said {
    /// Claims before the own side's last counter (all of them without one).
    before: Evidence,
    /// Claims after it.
    after: Evidence,
    /// Denials before and after it.
    denied_before: Denials,
    denied_after: Denials,
    /// Words the messages say are all there is of their kind (`ISO 9001 only`).
    exclusive: Vec<Word>,
    instructions: bool,
    look_alikes: bool,
}

impl Said {
    fn read(lex: &Lexicon, s: &Situation, last_counter: Option<u32>, profile: &Context) -> Said {
        let mut said = Said {
            before: Evidence::default(),
            after: Evidence::default(),
            denied_before: Denials::default(),
            denied_after: Denials::default(),
            exclusive: Vec::new(),
            instructions: false,
            look_alikes: false,
        };
        for t in s.history.iter().filter(|t| t.side == s.own_side.other()) {
            let Some(text) = t.message.as_deref() else { continue };
            let mut message = evidence::read_message(text);
            let mut ctx = Context::of(lex, &message.words);
            ctx.extend(profile);
            senses::annotate(lex, &mut message.words, &ctx);
            said.instructions |= message.instructions;
            said.look_alikes |= message.look_alikes;
            let later = last_counter.is_some_and(|k| t.turn_number > k);
            let (claims, denials) = if later {
                (&mut said.after, &mut said.denied_after)
            } else {
                (&mut said.before, &mut said.denied_before)
            };
            claims.add(&message.words, 1.0);
            denials.add(&message.words);
            said.exclusive.extend(message.words.iter().filter(|w| w.exclusive).cloned());
        }
        said
    }
}

/// One need weighed against the evidence.
struct Judged {
    need: Need,
    private: bool,
    terms: Vec<Weighed>,
    grounded: f64,
    claimed: f64,
    denied: f64,
    /// Share the claims cover, whether or not they count.
    claimed_raw: f64,
    other_sense: Option<(String, &'static str)>,
    same_need: bool,
    contradicted: bool,
    /// Whether a claim covers what the need asks for most and the profile does not bear it out.
    unborne_core: bool,
}

/// Whether two needs of one kind ask for the same thing: what they ask for (their first noun
/// phrases) or most of their words are the same. Two needs for money are the same need unless
/// they share next to nothing (neither side has the money the other wants).
fn same(lex: &Lexicon, a: &Need, b: &Need, cfg: &NegotiatorConfig) -> bool {
    if matches!(a.frame, Frame::Raise | Frame::Invest) {
        return overlap(lex, a, b, false) >= cfg.same_need_overlap / 2.5;
    }
    overlap(lex, a, b, true) >= cfg.same_need_core_overlap || overlap(lex, a, b, false) >= cfg.same_need_overlap
}

/// Whether two people's wants name the same object: a word of what one asks for is a word of
/// what the other asks for, and they share a good part of their words.
fn same_object(lex: &Lexicon, a: &Need, b: &Need) -> bool {
    let core = |n: &Need| -> Vec<Word> {
        n.terms
            .iter()
            .filter(|t| t.core && !t.implicit && !concepts::is_weak(&t.word))
            .map(|t| t.word.clone())
            .collect()
    };
    let (ca, cb) = (core(a), core(b));
    ca.iter().any(|x| cb.iter().any(|y| terms_meet(lex, x, y))) && overlap(lex, a, b, false) >= SAME_OBJECT_OVERLAP
}

/// Share of their words two wants of alike people share to be the same want.
const SAME_OBJECT_OVERLAP: f64 = 0.3;

/// Whether two terms of needs say the same: the same word, a concept of the table in common, or
/// senses one of which is the other or narrower (a lectureship is a post).
fn terms_meet(lex: &Lexicon, a: &Word, b: &Word) -> bool {
    a.key == b.key
        || senses::doer_of(lex, a, b)
        || senses::doer_of(lex, b, a)
        || concepts::concepts_of(a).first().is_some_and(|c| concepts::concepts_of(b).first() == Some(c))
        || a.senses.iter().any(|x| {
            b.senses.iter().any(|y| lex.is_a(*x, *y, senses::IS_A_LEVELS) || lex.is_a(*y, *x, senses::IS_A_LEVELS))
        })
}

/// Share of two needs' terms (only their cores with `core`) they have in common.
fn overlap(lex: &Lexicon, a: &Need, b: &Need, core: bool) -> f64 {
    let terms = |n: &'_ Need| -> Vec<Word> {
        let mut out: Vec<Word> = Vec::new();
        for t in n.terms.iter().filter(|t| !t.implicit && (t.core || !core)) {
            if !out.iter().any(|w| terms_meet(lex, w, &t.word)) {
                out.push(t.word.clone());
            }
        }
        out
    };
    let (ta, tb) = (terms(a), terms(b));
    if ta.is_empty() || tb.is_empty() {
        return 0.0;
    }
    let common = ta.iter().filter(|x| tb.iter().any(|y| terms_meet(lex, x, y))).count().min(tb.len());
    common as f64 / (ta.len() + tb.len() - common) as f64
}

/// Whether two users describe themselves alike: a role in common, or most of their field.
fn alike(lex: &Lexicon, own: &[Word], other: &[Word]) -> bool {
    let roles =
        |ws: &[Word]| -> Vec<String> { ws.iter().filter(|w| senses::is_role(lex, w)).map(|w| w.key.clone()).collect() };
    let (ro, rt) = (roles(own), roles(other));
    if ro.iter().any(|k| rt.contains(k)) {
        return true;
    }
    let field = |ws: &[Word]| -> Vec<String> {
        let mut keys: Vec<String> = ws.iter().filter(|w| !concepts::is_weak(w)).map(|w| w.key.clone()).collect();
        keys.sort();
        keys.dedup();
        keys
    };
    let (fo, ft) = (field(own), field(other));
    let common = fo.iter().filter(|k| ft.contains(k)).count();
    common >= 2 && common * 2 >= fo.len().min(ft.len())
}

/// A need whose words have their senses, decided by `ctx`.
fn with_senses(lex: &Lexicon, mut need: Need, ctx: &Context) -> Need {
    let mut words: Vec<Word> = need.terms.iter().map(|t| t.word.clone()).collect();
    senses::annotate(lex, &mut words, ctx);
    for (t, w) in need.terms.iter_mut().zip(words) {
        t.word = w;
    }
    need
}

/// Evaluates the match for the own user of `s`, with the process's lexicon.
pub fn evaluate(cfg: &NegotiatorConfig, s: &Situation) -> Evaluation {
    evaluate_with(crate::lexicon::get(), cfg, s)
}

/// Evaluates the match for the own user of `s`, with `lex` for word senses.
pub fn evaluate_with(lex: &Lexicon, cfg: &NegotiatorConfig, s: &Situation) -> Evaluation {
    let own_texts: Vec<&str> = s
        .own
        .intents
        .iter()
        .map(|i| i.text.as_str())
        .chain(s.discovery_query.filter(|_| s.own_side == Side::Source))
        .collect();
    let profile = Profile::facing(lex, s.other, &own_texts);
    let profile_ctx = Context::of(lex, profile.all());
    let affirmed = |ws: &mut dyn Iterator<Item = &Word>| -> Vec<Word> {
        ws.filter(|w| !w.negated && !w.aspired).cloned().collect()
    };
    // The other user's needs: the intents the platform shares, and the wants of the profile.
    let mut other_needs: Vec<(Need, Vec<Word>)> = Vec::new();
    for text in s
        .other
        .intents
        .iter()
        .filter(|i| !i.private)
        .map(|i| i.text.as_str())
        .chain(profile.wants.iter().map(String::as_str))
    {
        let mut words = concepts::read(text).words;
        let mut ctx = Context::of(lex, &words);
        ctx.extend(&profile_ctx);
        senses::annotate(lex, &mut words, &ctx);
        other_needs.push((with_senses(lex, needs::need(text), &ctx), words));
    }
    let intent_count = s.other.intents.iter().filter(|i| !i.private).count();
    let bears: Vec<Word> = affirmed(&mut profile.all().chain(other_needs[..intent_count].iter().flat_map(|(_, w)| w)));
    let profile_words: Vec<Word> = affirmed(&mut profile.all());
    let other_senses = Senses::of(profile.all().chain(other_needs.iter().flat_map(|(_, w)| w)));
    let mut profile_denials = Denials::default();
    profile_denials.add(&profile.is);
    profile_denials.add(&profile.interests);
    let last_counter =
        s.history.iter().rev().find(|t| t.side == s.own_side && t.action == Action::Counter).map(|t| t.turn_number);
    let said = Said::read(lex, s, last_counter, &profile_ctx);

    // The own user's needs: every intent, and the discovery query when it is theirs, their
    // senses decided by the own user's profile and intents.
    let own_profile = Profile::of(lex, s.own);
    let own_is = affirmed(&mut own_profile.is.iter());
    let own_intent_words: Vec<Word> = s.own.intents.iter().flat_map(|i| concepts::read(&i.text).words).collect();
    let own_ctx = Context::of(lex, own_profile.all().chain(&own_intent_words));
    let mut own_needs: Vec<(Need, bool)> =
        s.own.intents.iter().map(|i| (with_senses(lex, needs::need(&i.text), &own_ctx), i.private)).collect();
    if s.own_side == Side::Source
        && let Some(q) = s.discovery_query.filter(|q| !q.trim().is_empty())
    {
        own_needs.push((with_senses(lex, needs::need(q), &own_ctx), false));
    }
    let other_is = affirmed(&mut profile.is.iter());
    let a = Against {
        lex,
        profile: &profile,
        bears: &bears,
        profile_words: &profile_words,
        other_needs: &other_needs,
        other_senses: &other_senses,
        profile_denials: &profile_denials,
        said: &said,
        alike: alike(lex, &own_is, &other_is),
        own_is: &own_is,
    };

    let mut distrust = if said.instructions {
        Some(Distrust::Instructions)
    } else if said.look_alikes {
        Some(Distrust::LookAlikes)
    } else {
        None
    };
    let intents = s.own.intents.len();
    let judge_all = |trust_claims: bool| -> Vec<Judged> {
        let mut judged: Vec<Judged> =
            own_needs.iter().map(|(need, private)| judge(need, *private, &a, trust_claims, cfg)).collect();
        // The discovery query restates an intent in keywords: it shares a shared need's fate.
        if judged.len() > intents {
            let query = judged.len() - 1;
            let shared = (0..intents)
                .any(|i| judged[i].same_need && overlap(lex, &judged[i].need, &judged[query].need, false) >= 0.3);
            judged[query].same_need |= shared;
        }
        judged
    };
    let mut judged = judge_all(distrust.is_none());
    let pick = |judged: &[Judged]| -> Option<usize> {
        let score = |j: &Judged| j.grounded + cfg.claim_weight * j.claimed;
        let candidates: Vec<usize> = (0..judged.len()).filter(|i| !judged[*i].same_need).collect();
        let pool = if candidates.is_empty() { (0..judged.len()).collect() } else { candidates };
        pool.into_iter().max_by(|a, b| score(&judged[*a]).total_cmp(&score(&judged[*b])).then(b.cmp(a)))
    };
    let mut best = pick(&judged);
    // Claims the profile does not bear out, or contradicts, stop counting.
    if distrust.is_none()
        && let Some(i) = best
    {
        let j = &judged[i];
        let substantial = profile.is.len() + profile.interests.len() >= 3;
        if j.contradicted {
            distrust = Some(Distrust::Contradicted);
        } else if j.unborne_core
            || (substantial && j.claimed_raw >= cfg.unsupported_claims && j.grounded < cfg.min_grounded)
        {
            distrust = Some(Distrust::Unsupported);
        }
        if distrust.is_some() {
            judged = judge_all(false);
            best = pick(&judged);
        }
    }

    let seed = clamp01(s.seed.score / 100.0);
    let mut concerns = Vec::new();
    for phrase in deal_breakers(s.own) {
        let words: Vec<Word> = concepts::read(phrase).words.into_iter().filter(|w| !w.negated).collect();
        let mut shown = Evidence::default();
        shown.add(&profile.is, 1.0);
        shown.add(&profile.interests, 1.0);
        for (_, words) in &other_needs {
            shown.add(words, 1.0);
        }
        let claims = |w: &Word| distrust.is_none() && said.before.strength(w).max(said.after.strength(w)) >= 0.5;
        if !words.is_empty() && words.iter().all(|w| shown.strength(w) >= 0.5 || claims(w)) {
            concerns.push(Concern::DealBreaker(phrase.to_owned()));
        }
    }
    if s.own_side == Side::Candidate
        && let Some(query) = s.discovery_query.filter(|q| !q.trim().is_empty())
    {
        let wanted = concepts::read(query).words;
        let offered = own_offer(lex, s.own, true);
        if !wanted.is_empty() && wanted.iter().all(|w| offered.strength(w) == 0.0) {
            concerns.push(Concern::QueryUnanswered(query.to_owned()));
        }
    }

    let Some(i) = best else {
        // No needs: the prior alone.
        let prior = seed;
        return Evaluation {
            need: None,
            need_private: false,
            terms: Vec::new(),
            grounded: prior,
            claimed: 0.0,
            denied: 0.0,
            seed,
            prior,
            fit: prior,
            concerns,
            other_sense: None,
            distrust,
            highlights: Vec::new(),
            other_need: None,
            last_counter,
            news: !said.after.is_empty() || !said.denied_after.is_empty(),
        };
    };
    let j = judged.swap_remove(i);
    if j.same_need {
        concerns.push(Concern::SameNeed);
    }
    let denied_terms: Vec<String> = j.terms.iter().filter(|t| t.denied).map(|t| t.shown.clone()).collect();
    let core_denied = j.terms.iter().zip(&j.need.terms).any(|(w, t)| t.core && !t.implicit && w.denied);
    if j.denied >= cfg.denied_share || core_denied {
        concerns.push(Concern::Denied(denied_terms));
    }
    let another: Vec<String> = j
        .terms
        .iter()
        .zip(&j.need.terms)
        .filter(|(w, t)| w.another && t.core && w.claimed == 0.0)
        .map(|(w, _)| w.shown.clone())
        .collect();
    if !another.is_empty() {
        concerns.push(Concern::Another(another));
    }
    if let Some(axis) = axis_conflict(&j.need, s.own, &profile, &other_needs) {
        concerns.push(axis);
    }
    let prior = if j.other_sense.is_some() { seed * cfg.other_sense_prior } else { seed };
    let total = cfg.grounded_weight + cfg.seed_weight;
    let evidence = (j.grounded + cfg.claim_weight * j.claimed).min(1.0);
    let mut fit =
        if total > 0.0 { (cfg.grounded_weight * evidence + cfg.seed_weight * prior) / total } else { evidence };
    if matches!(distrust, Some(Distrust::Unsupported | Distrust::Contradicted)) {
        fit -= cfg.unsupported_penalty;
    }
    let highlights = profile
        .skills
        .iter()
        .filter(|(_, words)| {
            let mut e = Evidence::default();
            e.add(words, 1.0);
            j.need.terms.iter().any(|t| !t.implicit && e.strength(&t.word) > 0.0)
        })
        .map(|(skill, _)| skill.clone())
        .take(3)
        .collect();
    let other_need = served_other_need(s, &j.need, &other_needs);
    let news = j.terms.iter().any(|t| t.new);
    Evaluation {
        need_private: j.private,
        terms: j.terms,
        grounded: j.grounded,
        claimed: j.claimed,
        denied: j.denied,
        seed,
        prior,
        fit: clamp01(fit),
        concerns,
        other_sense: j.other_sense,
        distrust,
        highlights,
        other_need,
        last_counter,
        news,
        need: Some(j.need),
    }
}

/// What a need is weighed against: the other side, read once per evaluation.
struct Against<'a> {
    lex: &'a Lexicon,
    profile: &'a Profile,
    /// The profile's and shared intents' affirmed words: what a claim must be borne out by.
    bears: &'a [Word],
    /// The profile's affirmed words alone: what a want to be someone must be borne out by.
    profile_words: &'a [Word],
    other_needs: &'a [(Need, Vec<Word>)],
    other_senses: &'a Senses,
    profile_denials: &'a Denials,
    said: &'a Said,
    /// Whether the two users describe themselves alike (a role or most of their field in common).
    alike: bool,
    /// The own user's affirmed profile words.
    own_is: &'a [Word],
}

/// Whether someone whose affirmed words are `is` already is what the need asks for (its head).
fn is_what_is_sought(need: &Need, is: &[Word]) -> bool {
    need.terms.iter().filter(|t| t.head && !t.implicit).any(|t| is.iter().any(|w| w.key == t.word.key))
}

/// Whether a missing term is ruled out by what the other side says is all it has of that kind
/// (`ISO 9001 only` rules out ISO 13485; `Spanish only` rules out Mandarin).
fn excluded(lex: &Lexicon, term: &Word, exclusive: &[&Word]) -> bool {
    let letters = |k: &str| k.trim_end_matches(|c: char| c.is_ascii_digit()).to_owned();
    !exclusive.is_empty()
        && exclusive.iter().all(|e| e.key != term.key)
        && exclusive.iter().any(|e| {
            (letters(&e.key) == letters(&term.key) && e.key != letters(&e.key))
                || term.senses.iter().any(|a| e.senses.iter().any(|b| lex.kin(*a, *b, senses::KIN_LEVELS)))
        })
}

fn judge(need: &Need, private: bool, a: &Against, trust_claims: bool, cfg: &NegotiatorConfig) -> Judged {
    let lex = a.lex;
    // A word the other user writes like a word of what the need asks for (its first noun
    // phrase, whose words are nouns) but means in another sense shows nothing.
    let clashes =
        |w: &Word| need.terms.iter().any(|t| t.core && t.word.key == w.key && !senses::compatible(lex, &t.word, w));
    let usable = |words: &[Word]| -> Vec<Word> { words.iter().filter(|w| !clashes(w)).cloned().collect() };
    let mut grounded = Evidence::default();
    grounded.add(&usable(&a.profile.is), 1.0);
    grounded.add(&usable(&a.profile.interests), INTEREST);
    // What the other user is after shows what they would take: a position offered, a client's
    // need, a fundraise.
    // (A position is shown by a want of the other user's profile read as a need to hire,
    // among the other needs below, not by any word they want: "looking for a postdoc" offers
    // no postdoc.)
    if matches!(need.frame, Frame::Offer | Frame::Invest | Frame::Meet) {
        grounded.add_wanted(&usable(&a.profile.is), INTENT);
    }
    // What the other user's complementary needs show; for a person sought, what they want to be
    // shows what is asked for most (the need's core) only as far as their profile bears it out.
    let mut wants = Evidence::default();
    let mut wants_borne = Evidence::default();
    let mut same_need = false;
    let mut complemented = false;
    let wanting = |f: Frame| matches!(f, Frame::Acquire | Frame::Join | Frame::Raise);
    let seeker_alike = a.alike && !is_what_is_sought(need, a.own_is) && !is_what_is_sought(need, &a.profile.is);
    for (other, words) in a.other_needs {
        let same_kind = other.frame == need.frame && need.frame.competes();
        // Two people alike who both want the same role want the same thing, whichever of them
        // wrote it as a person to find and which as a post to take.
        let alike_wants = seeker_alike && wanting(other.frame) && wanting(need.frame) && (!need.sure || !other.sure);
        if (same_kind && same(lex, need, other, cfg)) || (alike_wants && same_object(lex, need, other)) {
            same_need = true;
            continue;
        }
        if need.frame.is_served_by(other.frame) && !same_kind {
            // A want to be what the need seeks ("find a consultant anaesthetist post") is the
            // other user's own word about themselves.
            let words = usable(words);
            let borne: Vec<Word> = words.iter().filter(|w| senses::related(lex, w, a.profile_words)).cloned().collect();
            wants.add(&words, INTENT);
            wants_borne.add(&borne, INTENT);
            complemented |= other.frame != Frame::Meet;
        }
    }
    // Someone who offers work or a service is served by anyone who wants such a thing: the
    // position or the client the need names is then there.
    let head_met = complemented && matches!(need.frame, Frame::Join | Frame::Offer);
    let denials_apply = need.frame != Frame::Offer;
    let need_senses = Senses::of(need.terms.iter().map(|t| &t.word));
    let profile_names_a_role = a.profile_words.iter().any(|w| senses::is_role(lex, w));
    let exclusive: Vec<&Word> = a.profile.is.iter().chain(&a.said.exclusive).filter(|w| w.exclusive).collect();
    let mut other_sense = None;
    let mut contradicted = false;
    let mut unborne_core = false;
    let mut terms = Vec::with_capacity(need.terms.len());
    let (mut total, mut g_sum, mut c_sum, mut d_sum) = (0.0, 0.0, 0.0, 0.0);
    for t in &need.terms {
        let clash = concepts::homonym(&t.word).filter(|h| need_senses.clash(a.other_senses, h));
        if let Some(h) = clash {
            other_sense.get_or_insert((t.word.shown.clone(), h.other_sense));
        }
        // (A profile that names no role at all neither bears out nor contradicts a want to be
        // one: the want then stands as the user's own word.)
        let from_wants = if t.core && senses::claims_describe_the_person(need.frame) && profile_names_a_role {
            &wants_borne
        } else {
            &wants
        };
        let mut g = if clash.is_some() { 0.0 } else { grounded.strength(&t.word).max(from_wants.strength(&t.word)) };
        if g == 0.0
            && other_sense.is_none()
            && a.profile.all().any(|w| w.key == t.word.key && clashes(w))
            && !a.profile.all().any(|w| w.key == t.word.key && !clashes(w))
        {
            other_sense = Some((t.word.shown.clone(), ANOTHER_SENSE));
        }
        if t.head && head_met {
            g = g.max(INTENT);
        }
        let denied_by_messages = a.said.denied_before.denies(&t.word) || a.said.denied_after.denies(&t.word);
        let denied = denials_apply
            && g < 1.0
            && (denied_by_messages
                || a.profile_denials.denies(&t.word)
                || (g == 0.0 && !t.implicit && excluded(lex, &t.word, &exclusive)));
        if denied {
            g = 0.0;
        }
        let (said_before, said_after) = (a.said.before.strength(&t.word), a.said.after.strength(&t.word));
        // A claim of what the profile itself denies.
        if denials_apply && (said_before > 0.0 || said_after > 0.0) && a.profile_denials.denies(&t.word) {
            contradicted = true;
        }
        let (mut before, mut after) = if clash.is_some() || denied { (0.0, 0.0) } else { (said_before, said_after) };
        let claimed_raw = before.max(after);
        // A claim of what the need asks for most (its core: who the person sought is) counts
        // only as far as the profile bears it out: a word of the profile, or one of the same
        // kind nearby in the lexicon (a farmhouse for someone who rewires houses). Details
        // beyond the core (the tools of a trade, a time zone) may elaborate a profile.
        if senses::claims_describe_the_person(need.frame)
            && t.core
            && !t.implicit
            && claimed_raw > g
            && g == 0.0
            && !senses::related(lex, &t.word, a.bears)
        {
            before = 0.0;
            after = 0.0;
            unborne_core = true;
        }
        let claimed = if trust_claims { before.max(after) } else { 0.0 };
        let new = trust_claims && after > before.max(g)
            || a.said.denied_after.denies(&t.word) && !a.said.denied_before.denies(&t.word);
        total += t.weight;
        g_sum += t.weight * g;
        c_sum += t.weight * (claimed_raw - g).max(0.0);
        if denied {
            d_sum += t.weight;
        }
        let another = g == 0.0 && !t.implicit && (grounded.names_another(&t.word) || wants.names_another(&t.word));
        terms.push(Weighed {
            shown: t.word.shown.clone(),
            weight: t.weight,
            grounded: g,
            claimed,
            denied,
            new,
            another,
        });
    }
    // A head whose senses the need's own words cannot tell apart (a keeper for a football team:
    // the lexicon knows keepers only as custodians) is met by its spelling alone only as far as
    // something else of the need is met too: the rest of the need is then what shows its sense.
    if let Some(h) = need.terms.iter().position(|t| t.head && !t.implicit)
        && !need.terms[h].word.decided
        && need.terms[h].word.sense_scores.len() > 1
        && terms[h].grounded > 0.0
    {
        let others: Vec<usize> = (0..need.terms.len())
            .filter(|i| *i != h && !need.terms[*i].implicit && need.terms[*i].weight >= 1.0)
            .collect();
        if !others.is_empty() && others.iter().all(|i| terms[*i].grounded == 0.0) {
            let cut = terms[h].grounded * (1.0 - UNPLACED_HEAD);
            terms[h].grounded -= cut;
            g_sum -= need.terms[h].weight * cut;
        }
    }
    let share = |x: f64| if total > 0.0 { x / total } else { 0.0 };
    let claimed_share = share(c_sum);
    let counted: f64 = terms.iter().map(|t| t.weight * (t.claimed - t.grounded).max(0.0)).sum();
    Judged {
        need: need.clone(),
        private,
        terms,
        grounded: share(g_sum),
        // Claims only count when trusted and borne out; their raw share decides whether they
        // are trusted.
        claimed: if trust_claims { share(counted) } else { 0.0 },
        claimed_raw: claimed_share,
        denied: share(d_sum),
        other_sense,
        same_need,
        contradicted,
        unborne_core,
    }
}

/// What a head the need's words cannot place in a sense counts for when nothing else of the
/// need is shown (see [`judge`]).
const UNPLACED_HEAD: f64 = 0.5;

/// What the words to people say of a word the other user means in another sense, when the
/// lexicon (not the table of technical names) tells the senses apart.
const ANOTHER_SENSE: &str = "another thing by the same name";

/// The first axis on which the need and the other user stand at opposite poles. The need's pole
/// is read from its text, and for company stage and order size also from the own user's
/// description (a pre-seed founder raises a pre-seed round).
fn axis_conflict(
    need: &Need,
    own: &UserContext,
    profile: &Profile,
    other_needs: &[(Need, Vec<Word>)],
) -> Option<Concern> {
    let need_words = concepts::read(&need.text).words;
    let own_words: Vec<Word> =
        own.profile.as_ref().and_then(|p| p.bio.as_deref()).map(|b| concepts::read(b).words).unwrap_or_default();
    let other_words: Vec<&Word> = profile.is.iter().chain(other_needs.iter().flat_map(|(_, w)| w)).collect();
    let shows = |words: &[&Word], markers: &[String]| {
        words.iter().any(|w| {
            !w.negated && !w.aspired && (markers.contains(&w.key) || w.parts.iter().any(|p| markers.contains(p)))
        })
    };
    for (axis, poles) in AXES.iter().zip(concepts::axis_poles()) {
        let own_too = matches!(axis.name, "company stage" | "order size");
        let need_refs: Vec<&Word> = need_words.iter().chain(own_words.iter().filter(|_| own_too)).collect();
        let wants = [shows(&need_refs, &poles[0]), shows(&need_refs, &poles[1])];
        let has = [shows(&other_words, &poles[0]), shows(&other_words, &poles[1])];
        for (p, q) in [(0usize, 1usize), (1, 0)] {
            if p == 1 && !axis.both_ways {
                continue;
            }
            if wants[p] && !wants[q] && has[q] && !has[p] {
                return Some(Concern::Axis { axis: axis.name, wanted: axis.poles[p].0, found: axis.poles[q].0 });
            }
        }
    }
    None
}

/// What the own user offers: profile and (optionally) intents.
fn own_offer(lex: &Lexicon, own: &UserContext, with_intents: bool) -> Evidence {
    let p = Profile::of(lex, own);
    let mut e = Evidence::default();
    e.add(&p.is, 1.0);
    e.add(&p.interests, INTEREST);
    if with_intents {
        for i in &own.intents {
            e.add(&concepts::read(&i.text).words, INTENT);
        }
    }
    e
}

/// The other user's shared need that the own user's profile serves, if any (for words to people).
fn served_other_need(s: &Situation, own_need: &Need, other_needs: &[(Need, Vec<Word>)]) -> Option<String> {
    let offer = own_offer(crate::lexicon::get(), s.own, false);
    other_needs
        .iter()
        .filter(|(n, _)| own_need.frame.is_served_by(n.frame) || n.frame.is_served_by(own_need.frame))
        .map(|(n, _)| (n, coverage(n, &offer)))
        .filter(|(_, c)| *c >= 0.4)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(n, _)| n.text.clone())
}

/// Weighted share of a need's terms the evidence shows.
fn coverage(need: &Need, e: &Evidence) -> f64 {
    let total: f64 = need.terms.iter().map(|t| t.weight).sum();
    if total == 0.0 {
        return 0.0;
    }
    need.terms.iter().map(|t| t.weight * e.strength(&t.word)).sum::<f64>() / total
}

fn deal_breakers(u: &UserContext) -> Vec<&str> {
    u.profile.as_ref().and_then(|p| p.extra.get("dealBreakers")).map(strings).unwrap_or_default()
}

fn clamp01(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

/// Roles from the seed's actors, else its valency role, else from who needs what.
pub fn roles(cfg: &NegotiatorConfig, s: &Situation, eval: &Evaluation) -> SuggestedRoles {
    if let Some(actors) = &s.seed.actors {
        let role_of = |id: &str| actors.iter().find(|a| a.user_id == id).map(|a| a.role);
        match (role_of(&s.own.id), role_of(&s.other.id)) {
            (Some(own), Some(other)) => return SuggestedRoles { own_user: own, other_user: other },
            (Some(own), None) => return SuggestedRoles { own_user: own, other_user: own.complement() },
            (None, Some(other)) => return SuggestedRoles { own_user: other.complement(), other_user: other },
            (None, None) => {}
        }
    }
    if let Some(source_role) = s.seed.valency_role {
        let own = if s.own_side == Side::Source { source_role } else { source_role.complement() };
        return SuggestedRoles { own_user: own, other_user: own.complement() };
    }
    // Who needs what: how well each side's needs are met by the other's profile, measured the
    // same way in both directions, so that two system negotiators suggest mirrored roles.
    let _ = eval;
    let best = |of: &UserContext, by: &UserContext| {
        let offer = own_offer(crate::lexicon::get(), by, false);
        of.intents.iter().filter(|i| !i.private).map(|i| coverage(&needs::need(&i.text), &offer)).fold(0.0, f64::max)
    };
    let forward = best(s.own, s.other);
    let backward = best(s.other, s.own);
    let own = if forward - backward > cfg.role_margin {
        Role::Patient
    } else if backward - forward > cfg.role_margin {
        Role::Agent
    } else {
        Role::Peer
    };
    SuggestedRoles { own_user: own, other_user: own.complement() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(text: &str) -> Need {
        needs::need(text)
    }

    #[test]
    fn the_same_need_overlaps_and_a_complement_does_not() {
        let cfg = NegotiatorConfig::default();
        let a = need("Find a technical co-founder for my cross-border payments startup");
        let b = need("Find a technical co-founder for my remittance startup");
        assert!(same(crate::lexicon::get(), &a, &b, &cfg));
        let r1 = need("Find senior iOS engineers (Swift, SwiftUI) open to fintech roles in London.");
        let r2 = need("Source senior iOS engineers (Swift/SwiftUI) for London banking clients.");
        assert!(same(crate::lexicon::get(), &r1, &r2, &cfg));
        let c = need("Hire a senior backend engineer with Go and PostgreSQL experience for our payments platform");
        let d = need("Join an early-stage fintech as a senior backend engineer");
        assert_ne!(c.frame, d.frame);
        let e = need("Find a technical co-founder");
        let f = need("Find a business co-founder");
        assert!(!same(crate::lexicon::get(), &e, &f, &cfg));
    }
}
