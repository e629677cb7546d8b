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
use super::text::Word;
use super::{NegotiatorConfig, Situation};
use crate::domain::turn::{Action, Role, Side, SuggestedRoles};
use crate::domain::user::UserContext;

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

/// The other user's profile, read: what they are and have, and what they care about.
struct Profile {
    is: Vec<Word>,
    interests: Vec<Word>,
    /// The skills as written, each with its words.
    skills: Vec<(String, Vec<Word>)>,
}

/// Profile fields that are never evidence: the display name, and the user's own deal-breakers.
const NOT_EVIDENCE: &[&str] = &["dealBreakers", "name"];

impl Profile {
    fn of(u: &UserContext) -> Profile {
        let mut p = Profile { is: Vec::new(), interests: Vec::new(), skills: Vec::new() };
        let Some(profile) = &u.profile else { return p };
        if let Some(bio) = &profile.bio {
            p.is.extend(concepts::read_description(bio).words);
        }
        for skill in &profile.skills {
            let words = concepts::read(skill).words;
            p.is.extend(words.iter().cloned());
            p.skills.push((skill.clone(), words));
        }
        for interest in &profile.interests {
            p.interests.extend(concepts::read(interest).words);
        }
        for (key, value) in &profile.extra {
            if NOT_EVIDENCE.contains(&key.as_str()) {
                continue;
            }
            for text in strings(value) {
                p.is.extend(concepts::read(text).words);
            }
        }
        p
    }

    fn all(&self) -> impl Iterator<Item = &Word> {
        self.is.iter().chain(&self.interests)
    }
}

/// The strings of a JSON value: itself, or the strings of an array (one level).
fn strings(value: &serde_json::Value) -> Vec<&str> {
    match value {
        serde_json::Value::String(s) => vec![s.as_str()],
        serde_json::Value::Array(items) => items.iter().filter_map(|v| v.as_str()).collect(),
        _ => Vec::new(),
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
    instructions: bool,
    look_alikes: bool,
}

impl Said {
    fn read(s: &Situation, last_counter: Option<u32>) -> Said {
        let mut said = Said {
            before: Evidence::default(),
            after: Evidence::default(),
            denied_before: Denials::default(),
            denied_after: Denials::default(),
            instructions: false,
            look_alikes: false,
        };
        for t in s.history.iter().filter(|t| t.side == s.own_side.other()) {
            let Some(text) = t.message.as_deref() else { continue };
            let message = evidence::read_message(text);
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
    other_sense: Option<(String, &'static str)>,
    same_need: bool,
    contradicted: bool,
}

/// Whether two needs of one kind ask for the same thing: what they ask for (their first noun
/// phrases) or most of their words are the same. Two needs for money are the same need unless
/// they share next to nothing (neither side has the money the other wants).
fn same(a: &Need, b: &Need, cfg: &NegotiatorConfig) -> bool {
    if matches!(a.frame, Frame::Raise | Frame::Invest) {
        return overlap(a, b, false) >= cfg.same_need_overlap / 2.5;
    }
    overlap(a, b, true) >= cfg.same_need_core_overlap || overlap(a, b, false) >= cfg.same_need_overlap
}

/// Share of two needs' terms (only their cores with `core`) they have in common, by concept
/// where one is known.
fn overlap(a: &Need, b: &Need, core: bool) -> f64 {
    let signature = |n: &Need| -> Vec<String> {
        let mut sig: Vec<String> = n
            .terms
            .iter()
            .filter(|t| !t.implicit && (t.core || !core))
            .map(|t| concepts::concepts_of(&t.word).first().map_or_else(|| t.word.key.clone(), |c| (*c).to_owned()))
            .collect();
        sig.sort();
        sig.dedup();
        sig
    };
    let (sa, sb) = (signature(a), signature(b));
    if sa.is_empty() || sb.is_empty() {
        return 0.0;
    }
    let common = sa.iter().filter(|k| sb.contains(k)).count();
    common as f64 / (sa.len() + sb.len() - common) as f64
}

/// Evaluates the match for the own user of `s`.
pub fn evaluate(cfg: &NegotiatorConfig, s: &Situation) -> Evaluation {
    let profile = Profile::of(s.other);
    let other_needs: Vec<(Need, Vec<Word>)> = s
        .other
        .intents
        .iter()
        .filter(|i| !i.private)
        .map(|i| (needs::need(&i.text), concepts::read(&i.text).words))
        .collect();
    let other_senses = Senses::of(profile.all().chain(other_needs.iter().flat_map(|(_, w)| w)));
    let mut profile_denials = Denials::default();
    profile_denials.add(&profile.is);
    profile_denials.add(&profile.interests);
    let last_counter =
        s.history.iter().rev().find(|t| t.side == s.own_side && t.action == Action::Counter).map(|t| t.turn_number);
    let said = Said::read(s, last_counter);

    // The own user's needs: every intent, and the discovery query when it is theirs.
    let mut own_needs: Vec<(Need, bool)> = s.own.intents.iter().map(|i| (needs::need(&i.text), i.private)).collect();
    if s.own_side == Side::Source
        && let Some(q) = s.discovery_query.filter(|q| !q.trim().is_empty())
    {
        own_needs.push((needs::need(q), false));
    }

    let mut distrust = if said.instructions {
        Some(Distrust::Instructions)
    } else if said.look_alikes {
        Some(Distrust::LookAlikes)
    } else {
        None
    };
    let intents = s.own.intents.len();
    let judge_all = |trust_claims: bool| -> Vec<Judged> {
        let mut judged: Vec<Judged> = own_needs
            .iter()
            .map(|(need, private)| {
                judge(need, *private, &profile, &other_needs, &other_senses, &profile_denials, &said, trust_claims, cfg)
            })
            .collect();
        // The discovery query restates an intent in keywords: it shares a shared need's fate.
        if judged.len() > intents {
            let query = judged.len() - 1;
            let shared = (0..intents)
                .any(|i| judged[i].same_need && overlap(&judged[i].need, &judged[query].need, false) >= 0.3);
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
        } else if substantial && j.claimed >= cfg.unsupported_claims && j.grounded < cfg.min_grounded {
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
        let offered = own_offer(s.own, true);
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

#[allow(clippy::too_many_arguments)]
fn judge(
    need: &Need,
    private: bool,
    profile: &Profile,
    other_needs: &[(Need, Vec<Word>)],
    other_senses: &Senses,
    profile_denials: &Denials,
    said: &Said,
    trust_claims: bool,
    cfg: &NegotiatorConfig,
) -> Judged {
    let mut grounded = Evidence::default();
    grounded.add(&profile.is, 1.0);
    grounded.add(&profile.interests, INTEREST);
    // What the other user is after shows what they would take: a position offered, a client's
    // need, a fundraise.
    if matches!(need.frame, Frame::Join | Frame::Offer | Frame::Invest | Frame::Meet) {
        grounded.add_wanted(&profile.is, INTENT);
    }
    let mut same_need = false;
    let mut complemented = false;
    for (other, words) in other_needs {
        if need.frame.is_served_by(other.frame) && !(other.frame == need.frame && need.frame.competes()) {
            grounded.add(words, INTENT);
            complemented |= other.frame != Frame::Meet;
        }
        if other.frame == need.frame && need.frame.competes() && same(need, other, cfg) {
            same_need = true;
        }
    }
    // Someone who offers work or a service is served by anyone who wants such a thing: the
    // position or the client the need names is then there.
    let head_met = complemented && matches!(need.frame, Frame::Join | Frame::Offer);
    let denials_apply = need.frame != Frame::Offer;
    let need_senses = Senses::of(need.terms.iter().map(|t| &t.word));
    let mut other_sense = None;
    let mut contradicted = false;
    let mut terms = Vec::with_capacity(need.terms.len());
    let (mut total, mut g_sum, mut c_sum, mut d_sum) = (0.0, 0.0, 0.0, 0.0);
    for t in &need.terms {
        let clash = concepts::homonym(&t.word).filter(|h| need_senses.clash(other_senses, h));
        if let Some(h) = clash {
            other_sense.get_or_insert((t.word.shown.clone(), h.other_sense));
        }
        let mut g = if clash.is_some() { 0.0 } else { grounded.strength(&t.word) };
        if t.head && head_met {
            g = g.max(INTENT);
        }
        let denied_by_messages = said.denied_before.denies(&t.word) || said.denied_after.denies(&t.word);
        let denied = denials_apply && g < 1.0 && (denied_by_messages || profile_denials.denies(&t.word));
        if denied {
            g = 0.0;
        }
        let (said_before, said_after) = (said.before.strength(&t.word), said.after.strength(&t.word));
        // A claim of what the profile itself denies.
        if denials_apply && (said_before > 0.0 || said_after > 0.0) && profile_denials.denies(&t.word) {
            contradicted = true;
        }
        let (before, after) = if clash.is_some() || denied { (0.0, 0.0) } else { (said_before, said_after) };
        let claimed_raw = before.max(after);
        let claimed = if trust_claims { claimed_raw } else { 0.0 };
        let new = trust_claims && after > before.max(g)
            || said.denied_after.denies(&t.word) && !said.denied_before.denies(&t.word);
        total += t.weight;
        g_sum += t.weight * g;
        c_sum += t.weight * (claimed_raw - g).max(0.0);
        if denied {
            d_sum += t.weight;
        }
        terms.push(Weighed { shown: t.word.shown.clone(), weight: t.weight, grounded: g, claimed, denied, new });
    }
    let share = |x: f64| if total > 0.0 { x / total } else { 0.0 };
    let claimed_share = share(c_sum);
    Judged {
        need: need.clone(),
        private,
        terms,
        grounded: share(g_sum),
        // Claims only count when trusted; their raw share decides whether they are.
        claimed: if trust_claims { claimed_share } else { 0.0 },
        denied: share(d_sum),
        other_sense,
        same_need,
        contradicted,
    }
}

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
fn own_offer(own: &UserContext, with_intents: bool) -> Evidence {
    let p = Profile::of(own);
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
    let offer = own_offer(s.own, false);
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
        let offer = own_offer(by, false);
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
        assert!(same(&a, &b, &cfg));
        let r1 = need("Find senior iOS engineers (Swift, SwiftUI) open to fintech roles in London.");
        let r2 = need("Source senior iOS engineers (Swift/SwiftUI) for London banking clients.");
        assert!(same(&r1, &r2, &cfg));
        let c = need("Hire a senior backend engineer with Go and PostgreSQL experience for our payments platform");
        let d = need("Join an early-stage fintech as a senior backend engineer");
        assert_ne!(c.frame, d.frame);
        let e = need("Find a technical co-founder");
        let f = need("Find a business co-founder");
        assert!(!same(&e, &f, &cfg));
    }
}
