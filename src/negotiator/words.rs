//! The negotiator's words: a `message` for people on the other side, and a `reasoning` for its
//! own side.
//!
//! Messages are sentences a person would write: they say what the own user is looking for (only
//! from an intent the platform shares), what in the other user's profile fits, and why a match
//! is declined, without scores or term lists. A counter asks for concrete experience without
//! listing what is missing: a list would be a script to echo back. Messages never repeat the
//! own user's private intents or deal-breakers.
//!
//! The reasoning, which the other side never sees, names the fit and its parts, the need judged,
//! and the terms matched, claimed, missing and denied (`missing: a, b` is read by the insights).

use super::evidence::Distrust;
use super::judge::{Concern, Evaluation, Weighed};
use super::{MustDecide, NegotiatorConfig, Situation};
use crate::domain::turn::Action;
use crate::domain::user::UserContext;

/// A user's display name (their id when they have none).
pub fn display_name(u: &UserContext) -> &str {
    u.name.as_deref().filter(|n| !n.trim().is_empty()).unwrap_or(&u.id)
}

/// An intent as a phrase after "is looking to": `Hire a Rust engineer for our API` reads
/// `hire a Rust engineer for their API`; a phrase without a verb is looked *for*.
fn looking(text: &str) -> String {
    let mut t = text.trim().trim_end_matches(['.', '!', ';']).to_owned();
    for lead in
        ["I am ", "I'm ", "We are ", "We're ", "I want to ", "We want to ", "I would like to ", "We would like to "]
    {
        if t.len() > lead.len() && t[..lead.len()].eq_ignore_ascii_case(lead) {
            t = t[lead.len()..].to_owned();
        }
    }
    for lead in ["looking for ", "seeking ", "searching for "] {
        if t.len() > lead.len() && t[..lead.len()].eq_ignore_ascii_case(lead) {
            t = format!("find {}", &t[lead.len()..]);
        }
    }
    for (mine, theirs) in [(" my ", " their "), (" our ", " their "), (" me ", " them "), (" us ", " them ")] {
        t = t.replace(mine, theirs);
    }
    let mut chars = t.chars();
    let lowered = match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if !second.is_uppercase() => {
            first.to_lowercase().chain(t.chars().skip(1)).collect()
        }
        _ => t.clone(),
    };
    if super::needs::starts_with_verb(&lowered) { format!("to {lowered}") } else { format!("for {lowered}") }
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn capitalized(word: &str) -> String {
    let mut c = word.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

fn list(terms: &[&Weighed], max: usize) -> String {
    if terms.is_empty() {
        return "none".to_owned();
    }
    let mut out = terms.iter().take(max).map(|t| t.shown.as_str()).collect::<Vec<_>>().join(", ");
    if terms.len() > max {
        out.push_str(&format!(" (+{} more)", terms.len() - max));
    }
    out
}

fn concern_note(c: &Concern, own: &str) -> String {
    match c {
        Concern::SameNeed => "both want the same thing".to_owned(),
        Concern::DealBreaker(p) => format!("deal-breaker “{p}” shows"),
        Concern::QueryUnanswered(q) => format!("the other side's discovery query “{q}” asks for nothing {own} offers"),
        Concern::Denied(terms) => format!("the other side says its user lacks: {}", terms.join(", ")),
        Concern::Another(terms) => format!("the other user's profile names another {}", terms.join(", ")),
        Concern::Axis { axis, wanted, found } => format!("{axis}: {own} needs {wanted}, the other user is {found}"),
    }
}

/// What the fit is made of, and the terms, for the reasoning.
fn summary(cfg: &NegotiatorConfig, s: &Situation, eval: &Evaluation) -> String {
    let own = display_name(s.own);
    let max = cfg.max_listed_terms;
    let mut out = format!("fit {:.2} from grounded {:.2}", eval.fit, eval.grounded);
    if eval.claimed > 0.0 {
        out.push_str(&format!(" + claimed {:.2}", eval.claimed));
    }
    out.push_str(&format!(" and seed {:.0}", eval.seed * 100.0));
    if let Some((word, sense)) = &eval.other_sense {
        out.push_str(&format!(" (taken as {:.0}: {word} there is {sense})", eval.prior * 100.0));
    }
    if let Some(need) = &eval.need {
        out.push_str(&format!("; need “{}” ({})", need.text.trim(), need.frame.as_str()));
        let grounded: Vec<&Weighed> = eval.terms.iter().filter(|t| !t.denied && t.grounded > 0.0).collect();
        let claimed: Vec<&Weighed> =
            eval.terms.iter().filter(|t| !t.denied && t.grounded == 0.0 && t.claimed > 0.0).collect();
        let missing: Vec<&Weighed> = eval.missing().collect();
        let denied: Vec<&Weighed> = eval.terms.iter().filter(|t| t.denied).collect();
        out.push_str(&format!("; matched: {}", list(&grounded, max)));
        if !claimed.is_empty() {
            out.push_str(&format!("; claimed only: {}", list(&claimed, max)));
        }
        out.push_str(&format!("; missing: {}", list(&missing, max)));
        if !denied.is_empty() {
            out.push_str(&format!("; denied: {}", list(&denied, max)));
        }
    } else {
        out.push_str(&format!("; {own} states no needs, so the seed decides"));
    }
    if !eval.concerns.is_empty() {
        let notes: Vec<String> = eval.concerns.iter().map(|c| concern_note(c, own)).collect();
        out.push_str(&format!("; concerns: {}", notes.join("; ")));
    }
    if let Some(d) = eval.distrust {
        out.push_str(&format!("; claims not counted: {}", d.as_str()));
    }
    out
}

fn must_note(m: &MustDecide) -> String {
    match m {
        MustDecide::NothingNew(n) => format!("nothing new since turn {n}"),
        MustDecide::LastTurn => "the last turn the cap allows".to_owned(),
        MustDecide::Counters(n) => format!("no agreement after {n} counter{}", if *n == 1 { "" } else { "s" }),
    }
}

/// What fits, in words: the other user's matching skills as written, else their profile.
fn what_fits(other: &str, eval: &Evaluation) -> String {
    if eval.highlights.is_empty() {
        format!("{other}'s profile")
    } else {
        format!("{other}'s background in {}", and_list(&eval.highlights))
    }
}

/// Why a match is declined, in words for the other side.
fn declined(s: &Situation, eval: &Evaluation, must: Option<&MustDecide>, turn0: bool) -> String {
    let (own, other) = (display_name(s.own), display_name(s.other));
    let pass = format!("{own} will pass");
    let weak = format!("{other}'s profile does not show what {own} is looking for");
    if let Some(concern) = eval.concerns.first() {
        return match concern {
            Concern::SameNeed => {
                format!("{own} and {other} are looking for the same thing, so neither can offer it to the other.")
            }
            Concern::DealBreaker(_) => format!("{pass}: this match runs into something {own} has ruled out."),
            Concern::QueryUnanswered(_) => {
                format!("{own} does not offer what {other} is looking for, so {own} will pass.")
            }
            Concern::Denied(_) => format!(
                "{other}'s side says {other} does not have what {own} needs here, so {own} will pass. Thank you for saying so plainly."
            ),
            Concern::Another(_) => {
                format!("{other}'s profile shows a different specialism from the one {own} needs, so {own} will pass.")
            }
            Concern::Axis { axis, .. } if eval.need_private => {
                format!("The match does not fit {own}'s requirements on {axis}, so {own} will pass.")
            }
            Concern::Axis { axis: "seniority", .. } => {
                format!("{own} needs someone senior, and {other} is at the start of their career, so {own} will pass.")
            }
            Concern::Axis { axis: "commitment", wanted, found } => {
                format!("{own} needs {wanted} and {other} is looking for {found} work, so {own} will pass.")
            }
            Concern::Axis { axis: "place of work", wanted, found } => {
                format!("{own} needs someone {wanted} and {other} wants to work {found}, so {own} will pass.")
            }
            Concern::Axis { axis, wanted, found } => {
                format!("The {axis} does not fit: {own}'s side is {wanted}, {other}'s is {found}, so {own} will pass.")
            }
        };
    }
    let trailer = match eval.distrust {
        Some(Distrust::Instructions) => {
            " Messages are read as information about the people in them; instructions in them are not followed."
        }
        Some(Distrust::LookAlikes) => " Claims written with look-alike letters count for nothing.",
        _ => "",
    };
    let why = if let Some((word, sense)) = &eval.other_sense {
        format!("{other}'s {} is {sense}, not what {own} is looking for, so {own} will pass.", capitalized(word))
    } else if matches!(eval.distrust, Some(Distrust::Unsupported | Distrust::Contradicted)) {
        format!("What {other}'s side says is not borne out by {other}'s profile, so {own} will pass.")
    } else if turn0 {
        format!("{own} will not take this match forward: {weak}.")
    } else {
        match must {
            Some(MustDecide::NothingNew(_)) => {
                format!("{pass}: nothing new has come up since {own}'s last question, and {weak}.")
            }
            Some(MustDecide::LastTurn) => format!("This is the last turn, and {weak}, so {own} will pass."),
            Some(MustDecide::Counters(_)) => {
                format!("After several questions {own} does not see enough of a fit, so {own} will pass.")
            }
            None => format!("{weak}, so {own} will pass."),
        }
    };
    format!("{why}{trailer}")
}

/// The reasoning and the message of a turn.
pub(crate) fn turn_words(
    cfg: &NegotiatorConfig,
    s: &Situation,
    eval: &Evaluation,
    action: Action,
    must: Option<&MustDecide>,
    own_counters: usize,
) -> (String, String) {
    let (own, other) = (display_name(s.own), display_name(s.other));
    let summary = summary(cfg, s, eval);
    let shared_need = eval.need.as_ref().filter(|_| !eval.need_private);
    match action {
        Action::Propose => {
            let reasoning =
                format!("Proposing {other} for {own}: {summary}. Seed reasoning: {}", s.seed.reasoning.trim());
            let mut message = match shared_need {
                Some(need) => format!("{own} is looking {}, and {} fits.", looking(&need.text), what_fits(other, eval)),
                None => format!(
                    "{own} would like to meet {other}: {} fits what {own} is looking for.",
                    what_fits(other, eval)
                ),
            };
            if let Some(theirs) = &eval.other_need {
                message.push_str(&format!(" {other} is looking {}, which {own} can offer.", looking(theirs)));
            }
            (reasoning, message)
        }
        Action::Accept => {
            let why = match must {
                Some(m) if eval.fit < cfg.accept_at => {
                    format!("final decision: {}; the fit is sufficient", must_note(m))
                }
                _ => "the fit is convincing".to_owned(),
            };
            let reasoning = format!("Accepting ({why}): {summary}");
            let message =
                format!("{own} would like to meet {other}: {} is what {own} is looking for.", what_fits(other, eval));
            (reasoning, message)
        }
        Action::Reject => {
            let why = if let Some(c) = eval.concerns.first() {
                concern_note(c, own)
            } else if let Some(m) = must {
                format!("final decision: {}; the fit is too weak", must_note(m))
            } else if s.history.is_empty() {
                "not proposing a match that does not serve its user".to_owned()
            } else {
                "the fit is clearly insufficient".to_owned()
            };
            let reasoning = format!("Rejecting ({why}): {summary}");
            (reasoning, declined(s, eval, must, s.history.is_empty()))
        }
        Action::Counter | Action::Question => {
            let why = match eval.last_counter {
                Some(n) if eval.news => format!("something new since turn {n}"),
                _ => "not yet convincing".to_owned(),
            };
            let reasoning = format!("Countering ({why}): {summary}");
            let message = match own_counters {
                0 => format!(
                    "{own} is interested and would like to hear more before deciding. What has {other} done that shows the fit? Concrete roles, projects and results help most."
                ),
                1 => format!(
                    "Thank you, that helps. Before {own} decides: is there anything else concrete {other} has done that bears on this?"
                ),
                _ => format!(
                    "One last question before {own} decides: what else should {own} know about {other}'s experience here?"
                ),
            };
            (reasoning, message)
        }
    }
}
