//! What a user is after: each intent (and the source user's discovery query) read as a *need*,
//! with what kind of need it is and which words it is made of.
//!
//! The kind ([`Frame`]) comes from how the intent is phrased: "Hire a senior Rust engineer" wants
//! a person, "Find a senior product manager role" wants a position, "Raise a seed round" wants
//! money, "Invest in seed-stage startups" offers it, "Find clients for our coffee service" and
//! "Advise founders on go-to-market" offer something, and "Meet other founders" wants peers. Two
//! things follow from the kind:
//!
//! - **Who complements whom.** Someone who wants a person is served by someone who wants to be
//!   that person (join, offer, advise); someone who wants a position by someone hiring; someone
//!   raising by someone investing. Of the other user's intents, only those of a complementary kind
//!   are evidence for a need (a founder's "find a technical co-founder" shows what the founder
//!   lacks, not what they are).
//! - **Who competes with whom.** Two people whose needs are of the same kind and ask for much
//!   the same thing (two founders who both seek a technical co-founder, two candidates for the
//!   same role) cannot serve each other with it, however many words they share.
//!
//! The words of a need are its content words without the verb that gave its kind. The *head*
//! (the last word of the first noun phrase: `engineer` in "a senior Rust engineer for our
//! payments backend") weighs most; weak words (`company`, `platform`) weigh least. A need for
//! money also names the investor it needs, and an offer of money the fundraising it looks for,
//! even when the intent leaves them implicit.

use super::concepts;
use super::text::{self, Word};
use crate::lexicon::{Lexicon, Sense};

/// The kind of a need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// Wants a person (hire, find a mentor).
    Acquire,
    /// Wants a position, work or projects (join, find a role).
    Join,
    /// Wants money (raise, find an investor, find sponsors).
    Raise,
    /// Offers money (invest, back).
    Invest,
    /// Offers a product, service or guidance (sell, find clients, advise).
    Offer,
    /// Wants to meet peers (meet, connect, interview).
    Meet,
}

impl Frame {
    /// Whether the other user's intent of kind `other` can show that the other user serves a
    /// need of this kind.
    pub fn is_served_by(self, other: Frame) -> bool {
        use Frame::*;
        match self {
            Acquire => matches!(other, Join | Offer | Invest | Meet),
            Join => matches!(other, Acquire | Meet),
            Raise => matches!(other, Invest | Offer | Meet),
            Invest => matches!(other, Raise | Meet),
            Offer => matches!(other, Acquire | Raise | Meet),
            Meet => true,
        }
    }

    /// Whether two needs of this kind compete (two people meeting peers do not).
    pub fn competes(self) -> bool {
        self != Frame::Meet
    }

    /// What a need of this kind is after, for people.
    pub fn as_str(self) -> &'static str {
        match self {
            Frame::Acquire => "a person",
            Frame::Join => "a position",
            Frame::Raise => "funding",
            Frame::Invest => "companies to invest in",
            Frame::Offer => "clients",
            Frame::Meet => "peers",
        }
    }
}

/// One word of a need, with its weight.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    /// The word.
    pub word: Word,
    /// How much it weighs (the head most, weak words least).
    pub weight: f64,
    /// Whether it is the head of the need.
    pub head: bool,
    /// Whether the need only implies it (the investor a fundraise needs).
    pub implicit: bool,
    /// Whether it belongs to the need's first noun phrase, what is asked for (`senior`, `rust`,
    /// `engineer` in "a senior Rust engineer for our payments backend").
    pub core: bool,
}

/// One need of a user.
#[derive(Debug, Clone, PartialEq)]
pub struct Need {
    /// The text it was read from, as given.
    pub text: String,
    /// Its kind.
    pub frame: Frame,
    /// Its words, in order, without repeats.
    pub terms: Vec<Term>,
    /// Whether its kind is plain from its words (a verb such as `hire` or `join`, or an object
    /// such as `a role` or `funding`), rather than taken by default (`find a postdoc` names a
    /// person or a post).
    pub sure: bool,
}

/// Weight of a need's head.
pub const HEAD_WEIGHT: f64 = 1.5;
/// Weight of a weak word.
pub const WEAK_WEIGHT: f64 = 0.3;

/// Verbs that give a need its kind outright.
const VERBS: &[(&str, Frame)] = &[
    ("add", Frame::Acquire),
    ("advise", Frame::Offer),
    ("back", Frame::Invest),
    ("become", Frame::Join),
    ("bring", Frame::Acquire),
    ("co-found", Frame::Join),
    ("coach", Frame::Offer),
    ("cofound", Frame::Join),
    ("collaborate", Frame::Meet),
    ("commission", Frame::Acquire),
    ("connect", Frame::Meet),
    ("engage", Frame::Acquire),
    ("fund", Frame::Invest),
    ("fundraise", Frame::Raise),
    ("help", Frame::Offer),
    ("hire", Frame::Acquire),
    ("interview", Frame::Meet),
    ("invest", Frame::Invest),
    ("join", Frame::Join),
    ("land", Frame::Join),
    ("meet", Frame::Meet),
    ("mentor", Frame::Offer),
    ("move", Frame::Join),
    ("network", Frame::Meet),
    ("offer", Frame::Offer),
    ("pitch", Frame::Offer),
    ("promote", Frame::Offer),
    ("provide", Frame::Offer),
    ("raise", Frame::Raise),
    ("recruit", Frame::Acquire),
    ("sell", Frame::Offer),
    ("sign", Frame::Offer),
    ("staff", Frame::Acquire),
    ("support", Frame::Offer),
    ("switch", Frame::Join),
    ("take", Frame::Offer),
    ("teach", Frame::Offer),
    ("train", Frame::Offer),
    ("transition", Frame::Join),
    ("tutor", Frame::Offer),
    ("volunteer", Frame::Offer),
    ("work", Frame::Join),
];

/// Verbs that want something, whose object says what kind of need it is.
/// (Getting verbs are wanting verbs too: what is got, a post, money or a person, says the kind.)
const WANTING: &[&str] = &[
    "find",
    "get",
    "look",
    "looking",
    "need",
    "obtain",
    "search",
    "searching",
    "secure",
    "seek",
    "seeking",
    "source",
    "want",
    "win",
];

/// Words before the verb that say nothing about the need.
const LEAD_INS: &[&str] = &[
    "actively",
    "also",
    "am",
    "are",
    "aspire",
    "aspiring",
    "currently",
    "eager",
    "hope",
    "hoping",
    "i",
    "im",
    "is",
    "keen",
    "like",
    "love",
    "now",
    "open",
    "plan",
    "planning",
    "please",
    "ready",
    "to",
    "trying",
    "we",
    "would",
    "wed",
    "id",
];

/// Verbs of the table whose kind their object decides: taking on a client is offering a
/// service, taking on a person (an apprentice, a trainee) is hiring.
const OBJECT_DECIDES: &[&str] = &["take"];

/// Object heads that make a wanting verb a need for a position.
const POSITIONS: &[&str] = &[
    "apprenticeship",
    "commission",
    "commissions",
    "contract",
    "contracts",
    "employment",
    "gig",
    "gigs",
    "income",
    "internship",
    "job",
    "jobs",
    "opening",
    "opportunities",
    "opportunity",
    "placement",
    "position",
    "positions",
    "project",
    "projects",
    "role",
    "roles",
    "work",
];
/// Object heads that make a wanting verb a need for money.
const MONEY: &[&str] = &[
    "angel",
    "angels",
    "backer",
    "backers",
    "capital",
    "funding",
    "grant",
    "grants",
    "investment",
    "investor",
    "investors",
    "money",
    "round",
    "sponsor",
    "sponsors",
    "sponsorship",
    "vc",
    "vcs",
];
/// Object heads that make a wanting verb an offer looking for takers.
const TAKERS: &[&str] =
    &["audience", "buyer", "buyers", "client", "clients", "customer", "customers", "students", "subscribers", "users"];

/// Words that end a need's first noun phrase.
const PHRASE_ENDS: &[&str] = &[
    ",", "about", "as", "at", "based", "building", "by", "for", "from", "in", "into", "of", "on", "raising",
    "starting", "that", "to", "where", "which", "who", "with", "within",
];

/// Words inside a noun phrase that are not its head.
const DETERMINERS: &[&str] = &["a", "an", "another", "more", "my", "new", "one", "our", "some", "the", "their"];

/// The words of a text as written (folded), including stop words, compounds whole; a bracket,
/// comma, colon or semicolon is a word of its own (`,`), which ends a noun phrase.
fn raw_words(folded: &str) -> Vec<String> {
    let spaced: String = folded
        .chars()
        .flat_map(|c| if matches!(c, '(' | ')' | ',' | ':' | ';') { vec![' ', ',', ' '] } else { vec![c] })
        .collect();
    spaced
        .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '/' | '\'' | ',')))
        .map(|w| if w == "," { w.to_owned() } else { w.trim_matches(['-', '/', '\'', ',']).replace(['\'', ','], "") })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Reads one intent (or discovery query) as a need (kept for the next turns that read it).
pub fn need(text: &str) -> Need {
    // Keyed by the lexicon too: it gives verbs and objects their kinds.
    static CACHE: std::sync::LazyLock<std::sync::Mutex<lru::LruCache<(usize, String), Need>>> =
        std::sync::LazyLock::new(|| {
            std::sync::Mutex::new(lru::LruCache::new(std::num::NonZeroUsize::new(4096).expect("non-zero")))
        });
    if text.len() > 2_000 {
        return read_need(text);
    }
    let key = (crate::lexicon::id(crate::lexicon::get()), text.to_owned());
    if let Some(hit) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return hit.clone();
    }
    let need = read_need(text);
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).put(key, need.clone());
    need
}

fn read_need(text: &str) -> Need {
    let folded = text::fold(text).text;
    let raw = raw_words(&folded);
    // The verb: the first word after the lead-ins.
    let mut i = 0;
    while i < raw.len() && LEAD_INS.contains(&raw[i].as_str()) {
        i += 1;
    }
    // "want to join", "need to hire", "looking to raise": the verb is the one after `to`.
    if raw.get(i).is_some_and(|w| WANTING.contains(&w.as_str()) || w == "like")
        && raw.get(i + 1).is_some_and(|w| w == "to")
    {
        i += 2;
    }
    let verb = raw.get(i).map(String::as_str).unwrap_or("");
    let verb_stem = text::stem(verb);
    let lex = crate::lexicon::get();
    let mut frame = VERBS.iter().find(|(v, _)| *v == verb || text::stem(v) == verb_stem).map(|(_, f)| *f);
    let mut wanting = frame.is_none() && WANTING.contains(&verb);
    // A verb the tables do not name: its class in the lexicon (`procure` gets, `employ` hires,
    // `supply` offers, `require` wants), or a verb of asking with `for` (`apply for`, `ask
    // for`): what is asked for is wanted.
    if frame.is_none() && !wanting && i < raw.len() {
        match verb_class(lex, verb) {
            Some(VerbClass::Gets) => wanting = true,
            Some(VerbClass::Frames(f)) => frame = Some(f),
            None => wanting = raw.get(i + 1).is_some_and(|w| w == "for") && asks(lex, verb),
        }
    }
    let mut sure = frame.is_some();
    let object_start = if frame.is_some() || wanting { i + 1 } else { i };
    // The first noun phrase of the object, and its head.
    let mut object: Vec<&str> = raw[object_start.min(raw.len())..].iter().map(String::as_str).collect();
    while object.first().is_some_and(|w| matches!(*w, "for" | "to" | "out" | "up" | "on")) {
        object.remove(0);
    }
    // A number ends the phrase too: what follows is a quantity ("a hygienist three days a week").
    let phrase: Vec<&str> =
        object.iter().copied().take_while(|w| !PHRASE_ENDS.contains(w) && !text::is_number(w)).collect();
    let candidates: Vec<&str> = phrase
        .iter()
        .copied()
        .filter(|w| !DETERMINERS.contains(w) && !text::is_stop_word(w) && !w.bytes().any(|b| b.is_ascii_digit()))
        .collect();
    // The head: the last noun of the phrase (a word in -ing there is a verb, unless it is all).
    let head_word = candidates.iter().rev().find(|w| !w.ends_with("ing")).or(candidates.last()).copied();
    if frame.is_none() {
        // The head of the object says what it is (a grant writer is a person, not a grant);
        // the phrase's other words only when the head names no person.
        let head_is_person = head_word.is_some_and(|h| lexical_kind(lex, h) == Some(Frame::Acquire));
        let listed = head_word
            .and_then(object_kind)
            .or_else(|| if head_is_person { None } else { phrase.iter().find_map(|w| object_kind(w)) });
        // An activity that is work ("weekend teaching", "freelance bid writing") is a position,
        // though the head chosen above is the last word not in -ing.
        let activity_work = phrase
            .last()
            .filter(|w| w.ends_with("ing") && !phrase.iter().any(|d| matches!(*d, "a" | "an")))
            .is_some_and(|w| lexical_kind(lex, w) == Some(Frame::Join));
        let lexical = if activity_work { Some(Frame::Join) } else { head_word.and_then(|h| lexical_kind(lex, h)) };
        // What the object is for: "Find groups to teach climbing" wants people to serve.
        let purpose = object.iter().position(|w| *w == "to").and_then(|k| object.get(k + 1)).copied();
        // A word that also names a person (`postdoc`, `intern`) leaves the kind in doubt.
        let names_a_person = head_word
            .is_some_and(|h| lex.noun_senses(h).iter().any(|s| lex.lexfile(*s) == crate::lexicon::NOUN_PERSON));
        sure =
            listed.is_some() || (matches!(lexical, Some(Frame::Join | Frame::Raise | Frame::Offer)) && !names_a_person);
        frame = Some(match listed.or(lexical.filter(|f| *f != Frame::Acquire)) {
            Some(kind) => kind,
            None if lexical.is_none()
                && head_word.is_some_and(|h| !lex.noun_senses(h).is_empty())
                && purpose.is_some_and(|v| !matches!(v, "join" | "work" | "be")) =>
            {
                sure = true;
                Frame::Offer
            }
            // "Find agritech companies raising growth rounds": someone looking for deals.
            None if object.iter().any(|w| matches!(*w, "raising" | "fundraising")) => Frame::Invest,
            // "Looking for a fintech startup to join": a position.
            // (Not when a person is sought: "a drummer to join our trio" is someone to find.)
            None if !head_is_person && object.windows(2).any(|w| w[0] == "to" && matches!(w[1], "join" | "work")) => {
                Frame::Join
            }
            // "Find small businesses that need their website redone": someone looking for clients.
            None if object
                .windows(2)
                .any(|w| matches!(w[0], "that" | "who") && matches!(w[1], "need" | "needs" | "want" | "wants"))
                || object.contains(&"needing") =>
            {
                Frame::Offer
            }
            None => Frame::Acquire,
        });
    } else if frame == Some(Frame::Acquire)
        && let Some(kind) = head_word.and_then(object_kind)
    {
        // "Hire" is always for a person; "add a sponsor" is still money. The head decides, not
        // a word before it: a grant writer is a person, not a grant.
        if kind == Frame::Raise {
            frame = Some(kind);
        }
    } else if OBJECT_DECIDES.contains(&verb)
        && let Some(h) = head_word
        && object_kind(h).is_none()
        && lexical_kind(lex, h) == Some(Frame::Acquire)
    {
        // "Take on a client" offers; "take on an apprentice" hires.
        frame = Some(Frame::Acquire);
    }
    let frame = frame.unwrap_or(Frame::Acquire);

    let verb_key = (frame_verb(verb) || wanting).then_some(verb_stem);
    let head_key = head_word.map(concepts::key_of);
    let core_keys: Vec<String> = phrase.iter().flat_map(|w| text::read(w).words).map(|w| w.key).collect();
    let mut terms: Vec<Term> = Vec::new();
    for word in concepts::read(text).words {
        if word.negated || Some(&word.key) == verb_key.as_ref() && terms.is_empty() {
            continue;
        }
        if terms.iter().any(|t| t.word.key == word.key) {
            continue;
        }
        // (A name the lexicon reads as one noun, `dental hygienist`, is keyed by its words'
        // stems joined with `_`: its last is its head.)
        let head = head_key
            .as_ref()
            .is_some_and(|k| *k == word.key || word.parts.last() == Some(k) || word.key.rsplit('_').next() == Some(k));
        let weight = if head {
            HEAD_WEIGHT
        } else if concepts::is_weak(&word) {
            WEAK_WEIGHT
        } else {
            1.0
        };
        // A code (`ISO 13485`) names exactly what is sought, wherever it stands in the need.
        let code = word.key.ends_with(|c: char| c.is_ascii_digit());
        let core = head || code || core_keys.contains(&word.key) || word.parts.iter().any(|p| core_keys.contains(p));
        terms.push(Term { word, weight, head, implicit: false, core });
    }
    // Implicit counterparts: money needs an investor, an investment a fundraise.
    let implicit = match frame {
        Frame::Raise => Some("investor"),
        Frame::Invest => Some("fundraising"),
        _ => None,
    };
    if let Some(spelling) = implicit {
        // Already named (an investor, a sponsor, a round being raised)?
        let present = terms.iter().any(|t| {
            concepts::concepts_of(&t.word).iter().any(|c| matches!(*c, "investor" | "sponsor"))
                || (frame == Frame::Invest && concepts::concepts_of(&t.word).contains(&"funding"))
        });
        if !present {
            terms.push(Term {
                word: Word::new(spelling, false),
                weight: HEAD_WEIGHT,
                head: true,
                implicit: true,
                core: true,
            });
        }
    }
    Need { text: text.to_owned(), frame, terms, sure }
}

/// Whether a need's text starts with a verb (after words such as "I want to"), so that it reads
/// after "is looking to".
pub fn starts_with_verb(text: &str) -> bool {
    let raw = raw_words(&text::fold(text).text);
    raw.iter().find(|w| !LEAD_INS.contains(&w.as_str())).is_some_and(|w| frame_verb(w) || WANTING.contains(&w.as_str()))
}

/// Whether a phrase opens with a verb of wanting someone or something (after words such as
/// "I am"): one of the tables' (`find`, `hire`, `raise`), one the lexicon classes as getting,
/// needing or hiring (`require`, `procure`, `employ`) and that is not also a noun, or a verb of
/// asking with `for` (`apply for`).
pub fn opens_with_want(text: &str) -> bool {
    let raw = raw_words(&text::fold(text).text);
    let Some(i) = raw.iter().position(|w| !LEAD_INS.contains(&w.as_str())) else { return false };
    let verb = raw[i].as_str();
    if WANTING.contains(&verb) || VERBS.iter().any(|(v, f)| *v == verb && matches!(f, Frame::Acquire | Frame::Raise)) {
        return true;
    }
    let lex = crate::lexicon::get();
    if !lex.noun_senses(verb).is_empty() {
        return false;
    }
    matches!(verb_class(lex, verb), Some(VerbClass::Gets | VerbClass::Frames(Frame::Acquire | Frame::Raise)))
        || (raw.get(i + 1).is_some_and(|w| w == "for") && asks(lex, verb))
}

/// Whether `verb` is one of the verbs that give a kind outright.
fn frame_verb(verb: &str) -> bool {
    VERBS.iter().any(|(v, _)| *v == verb)
}

/// What a verb the tables do not name does, by its class in the lexicon.
enum VerbClass {
    /// Gets something (obtain, procure): the object says what.
    Gets,
    /// Gives a need its kind outright.
    Frames(Frame),
}

/// Senses common to two lemmas: the sense they share (`get` and `acquire`).
fn shared_senses(lex: &Lexicon, a: &str, b: &str, verb: bool) -> Vec<Sense> {
    let (sa, sb) =
        if verb { (lex.verb_senses(a), lex.verb_senses(b)) } else { (lex.noun_senses(a), lex.noun_senses(b)) };
    sa.into_iter().filter(|s| sb.contains(s)).collect()
}

/// The class of a verb in the lexicon: which of the senses of getting, hiring, offering and
/// joining its most frequent senses fall under.
fn verb_class(lex: &Lexicon, verb: &str) -> Option<VerbClass> {
    let senses = lex.verb_senses(verb);
    if senses.is_empty() {
        return None;
    }
    let under = |anchors: &[Sense]| {
        senses.iter().take(2).any(|s| anchors.iter().any(|a| s == a || lex.ancestors(*s, 4).any(|x| x == *a)))
    };
    if under(&shared_senses(lex, "hire", "employ", true)) {
        return Some(VerbClass::Frames(Frame::Acquire));
    }
    if under(&shared_senses(lex, "get", "acquire", true)) || under(&shared_senses(lex, "seek", "search", true)) {
        return Some(VerbClass::Gets);
    }
    // Verbs of wanting and needing (`require`, `desire`) want their object as `find` does.
    if under(&shared_senses(lex, "want", "need", true)) || under(&shared_senses(lex, "need", "require", true)) {
        return Some(VerbClass::Gets);
    }
    let offers = [("supply", "provide"), ("teach", "instruct"), ("sell", "sell"), ("offer", "proffer")];
    if offers.iter().any(|(a, b)| under(&shared_senses(lex, a, b, true))) {
        return Some(VerbClass::Frames(Frame::Offer));
    }
    None
}

/// Whether one of a verb's senses is one of asking (`apply`, as in "apply for a job").
fn asks(lex: &Lexicon, verb: &str) -> bool {
    let request = shared_senses(lex, "request", "bespeak", true);
    lex.verb_senses(verb).iter().any(|s| request.iter().any(|a| s == a || lex.ancestors(*s, 2).any(|x| x == *a)))
}

/// The kind a wanting verb's object gives the need, by its senses in the lexicon: a post or
/// work is a position, funds are money, a buyer is a client, a person is someone to find.
fn lexical_kind(lex: &Lexicon, word: &str) -> Option<Frame> {
    let senses = lex.noun_senses(word);
    let first = *senses.first()?;
    let falls_under =
        |s: Sense, anchors: &[Sense]| anchors.iter().any(|a| s == *a || lex.ancestors(s, 4).any(|x| x == *a));
    let under = |anchors: Vec<Sense>| falls_under(first, &anchors);
    // A post is a position in any of its senses, unless one of them is a person (`chair`).
    let work: Vec<Sense> =
        [shared_senses(lex, "position", "post", false), shared_senses(lex, "occupation", "job", false)]
            .concat()
            .into_iter()
            .chain(lex.noun_senses("work").into_iter().take(1))
            .collect();
    // (Not when the word names an organisation first: businesses to find are clients or
    // employers, whatever else `business` can mean.)
    let names_a_person = senses.iter().any(|s| lex.lexfile(*s) == crate::lexicon::NOUN_PERSON);
    let names_a_group = lex.lexfile(first) == crate::lexicon::NOUN_GROUP;
    if falls_under(first, &work) || (!names_a_person && !names_a_group && senses.iter().any(|s| falls_under(*s, &work)))
    {
        return Some(Frame::Join);
    }
    // A degree to find (a funded PhD, a master's) is a place to study for it: a position.
    if under(lex.noun_senses("academic degree").into_iter().take(1).collect()) {
        return Some(Frame::Join);
    }
    if under(shared_senses(lex, "funds", "finances", false))
        || under(lex.noun_senses("financial aid"))
        || under(lex.noun_senses("money").into_iter().take(1).collect())
    {
        return Some(Frame::Raise);
    }
    if under(lex.noun_senses("consumer").into_iter().take(1).collect()) {
        return Some(Frame::Offer);
    }
    (lex.lexfile(first) == crate::lexicon::NOUN_PERSON).then_some(Frame::Acquire)
}

/// The kind a wanting verb's object gives the need, if its word says.
fn object_kind(word: &str) -> Option<Frame> {
    if POSITIONS.contains(&word) {
        Some(Frame::Join)
    } else if MONEY.contains(&word) {
        Some(Frame::Raise)
    } else if TAKERS.contains(&word) {
        Some(Frame::Offer)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(n: &Need) -> Vec<String> {
        n.terms.iter().map(|t| if t.head { format!("*{}", t.word.shown) } else { t.word.shown.clone() }).collect()
    }

    #[test]
    fn tables_are_sorted() {
        assert!(VERBS.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn the_kind_comes_from_the_verb_or_the_object() {
        // (intent, kind)
        let table = [
            ("Hire a senior backend engineer with Go and PostgreSQL experience", Frame::Acquire),
            ("Find a technical co-founder for my cross-border payments startup", Frame::Acquire),
            ("Join an early-stage fintech as a senior backend engineer", Frame::Join),
            ("Find a senior product manager role at a marketplace startup", Frame::Join),
            ("Find freelance UX design projects with early-stage SaaS startups", Frame::Join),
            ("Become the founding CTO of a young logistics company", Frame::Join),
            ("Co-found an early-stage climate startup as CTO", Frame::Join),
            ("Raise a seed round for my edtech startup", Frame::Raise),
            ("Find a seed investor for my medtech startup", Frame::Raise),
            ("Find sponsors for my gaming channel", Frame::Raise),
            ("Invest in seed-stage B2B SaaS startups", Frame::Invest),
            ("Find corporate clients for our office coffee service", Frame::Offer),
            ("Advise first-time founders on go-to-market", Frame::Offer),
            ("Take on one more small food-business client", Frame::Offer),
            ("Meet other founders in the Berlin climate-tech scene", Frame::Meet),
            ("Looking for a technical co-founder to build our platform", Frame::Acquire),
            ("I want to join a seed-stage startup", Frame::Join),
            ("Senior Rust engineer role", Frame::Join),
            ("Looking for a fintech startup to join as a senior backend engineer", Frame::Join),
            ("Move to a senior development role at an arts nonprofit", Frame::Join),
            ("Find small education businesses that need their enrolment redesigned", Frame::Offer),
            // The head decides, not a word before it: a grant writer is a person.
            ("Hire a grant writer for trusts and foundations", Frame::Acquire),
            // Taking on a person hires; taking on a client offers.
            ("Take on an apprentice plumber", Frame::Acquire),
            // Verbs the tables do not name, by their class in the lexicon.
            ("Require a locum pharmacist for Saturdays", Frame::Acquire),
            ("Apply for lecturer posts in archaeology departments", Frame::Join),
            // A degree to find is a place to study; an activity that is work is a position.
            ("Find a funded PhD in soil microbiology", Frame::Join),
            ("Find weekend teaching at a riding school", Frame::Join),
            // The person sought joins: someone to find.
            ("Looking for a drummer to join our trio", Frame::Acquire),
        ];
        for (text, want) in table {
            assert_eq!(need(text).frame, want, "{text}");
        }
    }

    #[test]
    fn terms_are_the_content_without_the_verb_and_the_head_is_marked() {
        let n = need("Hire a senior Rust engineer for our payments backend");
        assert_eq!(terms(&n), ["senior", "rust", "*engineer", "payments", "backend"]);
        let n = need("Find a Python tutor for my data science bootcamp students");
        assert_eq!(terms(&n), ["python", "*tutor", "data science", "bootcamp", "students"]);
        let n = need("Raise a pre-seed round of $300k for my agritech startup");
        assert!(terms(&n).contains(&"*investor".to_owned()), "{:?}", terms(&n));
        let weak = n.terms.iter().find(|t| t.word.shown == "startup").unwrap();
        assert_eq!(weak.weight, WEAK_WEIGHT);
    }

    #[test]
    fn the_core_is_the_first_noun_phrase() {
        let n = need("Find a lead investor for our seed round");
        let core: Vec<&str> = n.terms.iter().filter(|t| t.core).map(|t| t.word.shown.as_str()).collect();
        assert_eq!(core, ["lead", "investor"]);
    }

    #[test]
    fn complements_and_competitors() {
        assert!(Frame::Acquire.is_served_by(Frame::Join));
        assert!(Frame::Join.is_served_by(Frame::Acquire));
        assert!(Frame::Raise.is_served_by(Frame::Invest));
        assert!(!Frame::Acquire.is_served_by(Frame::Acquire));
        assert!(!Frame::Join.is_served_by(Frame::Join));
        assert!(!Frame::Meet.competes());
    }
}
