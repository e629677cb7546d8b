//! A user's profile read as evidence, as far as it is credible.
//!
//! Profiles are written by their users, so the negotiator reads them the way a careful person
//! would:
//!
//! - **What someone is and has** comes from the bio, the skills and any other field the platform
//!   passed on; **what they care about** from the interests, which weigh less.
//! - **A want is a want wherever it stands.** A phrase that states a want ("looking for a
//!   mediator", "Hire a veterinary surgeon") is read as such in the bio, in the skills, in the
//!   headline or in any other field, and a field whose name says it holds wants (`lookingFor`,
//!   `seeking`, `goals`) holds nothing else. A want shows what someone lacks, never what they can
//!   do; it is kept among the user's needs (so that two people who want the same thing are seen
//!   as competitors, wherever each wrote it).
//! - **Stuffing grounds nothing.** Someone whose lists name a handful of roles that have nothing
//!   to do with one another or with their own description (a florist whose skills say ICU nurse,
//!   immigration lawyer, angel investor and tower crane operator) is not all of those people: such
//!   a profile is *stuffed*, and the listed items its description does not bear out are dropped.
//!   Roles are recognised and related through the lexicon's senses ([`super::senses`]).

use super::concepts;
use super::senses::{self, Context};
use super::text::{self, Word};
use crate::domain::user::UserContext;
use crate::lexicon::Lexicon;

/// Listed roles unrelated to the description from which a profile is stuffed.
pub const STUFFED_ROLES: usize = 3;

/// Profile fields that are never evidence: the display name, and the user's own deal-breakers.
const NOT_EVIDENCE: &[&str] = &["dealBreakers", "name"];

/// Parts of field names that say the field holds wants (compared without case or separators).
const WANT_FIELDS: &[&str] = &["goal", "hiring", "lookingfor", "need", "seeking", "want", "wish"];

/// Words that, opening a phrase, make it a want.
const WANT_OPENERS: &[&str] = &[
    "find",
    "hire",
    "hiring",
    "looking",
    "need",
    "needs",
    "raise",
    "raising",
    "recruit",
    "recruiting",
    "require",
    "required",
    "requires",
    "searching",
    "secure",
    "seek",
    "seeking",
    "source",
    "want",
    "wanted",
    "wants",
];

/// Words that, inside a description, open a want (`..., looking for a postdoc`).
const WANT_MARKERS: &[&str] = &[
    "looking for",
    "seeking",
    "searching for",
    "in search of",
    "hiring",
    "recruiting",
    "raising",
    "sourcing",
    " needs ",
    " need ",
    " wants ",
    " want to ",
];

/// A profile, read.
#[derive(Debug, Default, Clone)]
pub struct Profile {
    /// What the user is and has (not negated words included: they are denials).
    pub is: Vec<Word>,
    /// What the user cares about.
    pub interests: Vec<Word>,
    /// The skills as written, each with its words (stuffed items left out).
    pub skills: Vec<(String, Vec<Word>)>,
    /// Wants stated in the profile (not in intents), as phrases a need can be read from.
    pub wants: Vec<String>,
    /// How many listed roles the description does not bear out, when the profile is stuffed.
    pub stuffed: Option<usize>,
}

/// Where a piece of a profile comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Bio,
    Skill,
    Field,
}

/// Whether a phrase states a want (it opens with a word of wanting, after `I am`, `we are`).
pub fn is_want(phrase: &str) -> bool {
    let folded = text::fold(phrase).text;
    folded
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .find(|w| {
            !matches!(
                *w,
                "i" | "im" | "i'm" | "we" | "were" | "we're" | "am" | "are" | "is" | "currently" | "actively" | "also"
            )
        })
        .is_some_and(|w| WANT_OPENERS.contains(&w))
        || super::needs::opens_with_want(phrase)
}

/// Whether a listed item copies a need word for word: every content word of the need, at least
/// three of them and one beyond what it asks for first (`for Saturdays`, `for our equine
/// practice`), with at most one word more. Someone's own skill names what they do, not another
/// person's particulars: "Locum pharmacist for Saturdays" as a shoe-shop assistant's headline
/// repeats the pharmacy's need.
pub fn copies(item: &str, need: &str) -> bool {
    if item.split_whitespace().count() < 3 {
        return false;
    }
    let n = super::needs::need(need);
    let terms: Vec<&str> = n.terms.iter().filter(|t| !t.implicit).map(|t| t.word.key.as_str()).collect();
    if terms.len() < 3 || n.terms.iter().all(|t| t.core || t.implicit) {
        return false;
    }
    let keys: Vec<String> = concepts::read(item).words.into_iter().filter(|w| !w.negated).map(|w| w.key).collect();
    terms.iter().all(|t| keys.iter().any(|k| k == t))
        && keys.iter().filter(|k| !terms.contains(&k.as_str())).count() <= 1
}

/// Whether a field's name says it holds wants.
fn is_want_field(name: &str) -> bool {
    let name: String = name.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase();
    WANT_FIELDS.iter().any(|w| name.contains(w))
}

/// The clauses of a description that state a want (`looking for a postdoc in crystallography`).
fn wants_in(description: &str) -> Vec<String> {
    let mut out = Vec::new();
    for clause in description.split(['.', ';', '\n', '(', ')']) {
        let lower = clause.to_lowercase();
        let at = WANT_MARKERS.iter().filter_map(|m| lower.find(m).map(|i| i + m.len() - m.trim_start().len())).min();
        if let Some(at) = at
            && clause.is_char_boundary(at)
        {
            out.push(clause[at..].trim().to_owned());
        }
    }
    out
}

/// Words of a phrase read as wanted, whatever they are.
fn all_wanted(mut words: Vec<Word>) -> Vec<Word> {
    for w in &mut words {
        w.aspired = !w.negated;
    }
    words
}

/// The strings of a JSON value: itself, or the strings of an array (one level).
pub fn strings(value: &serde_json::Value) -> Vec<&str> {
    match value {
        serde_json::Value::String(s) => vec![s.as_str()],
        serde_json::Value::Array(items) => items.iter().filter_map(|v| v.as_str()).collect(),
        _ => Vec::new(),
    }
}

impl Profile {
    /// Reads `u`'s profile (see the module docs), senses decided by the whole profile and the
    /// user's shared intents.
    pub fn of(lex: &Lexicon, u: &UserContext) -> Profile {
        Profile::facing(lex, u, &[])
    }

    /// Reads `u`'s profile as [`Profile::of`] does, facing someone whose needs are `needs`: a
    /// listed item (a skill, a headline, any field but the bio) that copies one of those needs
    /// with its particulars is that need echoed, a want, not an ability (see [`copies`]).
    pub fn facing(lex: &Lexicon, u: &UserContext, needs: &[&str]) -> Profile {
        let mut p = Profile::default();
        let Some(profile) = &u.profile else { return p };
        let mut pieces: Vec<(Origin, String, Vec<Word>)> = Vec::new();
        if let Some(bio) = &profile.bio {
            pieces.push((Origin::Bio, bio.clone(), concepts::read_description(bio).words));
            p.wants.extend(wants_in(bio));
        }
        let mut listed = |origin: Origin, item: &str, want_field: bool, p: &mut Profile| {
            let copy = needs.iter().any(|n| copies(item, n));
            if want_field || copy || is_want(item) {
                p.wants.push(if (want_field || copy) && !is_want(item) {
                    format!("looking for {item}")
                } else {
                    item.to_owned()
                });
                pieces.push((origin, item.to_owned(), all_wanted(concepts::read(item).words)));
            } else {
                pieces.push((origin, item.to_owned(), concepts::read_description(item).words));
                p.wants.extend(wants_in(item));
            }
        };
        for skill in &profile.skills {
            listed(Origin::Skill, skill, false, &mut p);
        }
        for (key, value) in &profile.extra {
            if NOT_EVIDENCE.contains(&key.as_str()) {
                continue;
            }
            let want_field = is_want_field(key);
            for item in strings(value) {
                listed(Origin::Field, item, want_field, &mut p);
            }
        }
        let mut interests: Vec<Word> = profile.interests.iter().flat_map(|i| concepts::read(i).words).collect();
        let intents: Vec<Word> =
            u.intents.iter().filter(|i| !i.private).flat_map(|i| concepts::read(&i.text).words).collect();
        let ctx = Context::of(lex, pieces.iter().flat_map(|(_, _, w)| w).chain(&interests).chain(&intents));
        for (_, _, words) in &mut pieces {
            senses::annotate(lex, words, &ctx);
        }
        senses::annotate(lex, &mut interests, &ctx);

        // Stuffing: listed roles the description does not bear out, by the handful.
        let described: Vec<Word> = pieces
            .iter()
            .filter(|(o, _, _)| *o == Origin::Bio)
            .flat_map(|(_, _, w)| w.clone())
            .chain(interests.clone())
            .collect();
        // Listed items the description does not bear out; when a handful of them name roles, the
        // profile is stuffed and none of them grounds anything.
        let unrelated: Vec<usize> = pieces
            .iter()
            .enumerate()
            .filter(|(_, (o, _, words))| {
                *o != Origin::Bio
                    && !words.iter().filter(|w| !w.aspired && !w.negated).any(|w| senses::related(lex, w, &described))
            })
            .map(|(i, _)| i)
            .collect();
        let distinct_roles = {
            let mut keys: Vec<&str> = unrelated
                .iter()
                .flat_map(|i| pieces[*i].2.iter().filter(|w| senses::is_role(lex, w)).map(|w| w.key.as_str()).take(1))
                .collect();
            keys.sort_unstable();
            keys.dedup();
            keys.len()
        };
        if distinct_roles >= STUFFED_ROLES {
            p.stuffed = Some(distinct_roles);
        }
        for (i, (origin, item, words)) in pieces.into_iter().enumerate() {
            let dropped = p.stuffed.is_some() && origin != Origin::Bio && unrelated.contains(&i);
            if dropped {
                continue;
            }
            if origin == Origin::Skill {
                p.skills.push((item, words.clone()));
            }
            p.is.extend(words);
        }
        p.interests = interests;
        p
    }

    /// Every word of the profile.
    pub fn all(&self) -> impl Iterator<Item = &Word> {
        self.is.iter().chain(&self.interests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wants_are_recognised_wherever_they_stand() {
        assert!(is_want("Hire a veterinary surgeon for our equine practice"));
        assert!(is_want("Looking for a certified arborist"));
        assert!(is_want("I'm seeking a mentor"));
        assert!(!is_want("Veterinary surgery"));
        assert!(!is_want("Finding aid design"));
        // A verb of wanting the tables do not list, by its class in the lexicon.
        assert!(is_want("Require a locum pharmacist for Saturdays"));
        assert!(is_want("Apply for a head chef post"));
        assert!(!is_want("Requirements analysis"));
        // A need copied with its particulars, without its verb, is still the need.
        assert!(copies("Locum pharmacist for Saturdays", "Hire a locum pharmacist for Saturdays"));
        assert!(!copies("ICU nurse on night shifts", "Hire a night-shift ICU nurse"));
        assert!(!copies("Locum pharmacist", "Hire a locum pharmacist for Saturdays"));
        assert!(is_want_field("lookingFor"));
        assert!(is_want_field("current_goals"));
        assert!(!is_want_field("headline"));
        assert_eq!(
            wants_in("Final-year PhD student in structural biology, looking for a postdoc in crystallography."),
            ["looking for a postdoc in crystallography"]
        );
    }
}
