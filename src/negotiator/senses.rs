//! Which sense a word has, decided by the words around it, and what follows from senses: that
//! a more specific word meets a broader need (a chef is a cook), that a word in another sense
//! meets nothing (a tram conductor is not a choir's), and that a claim or a listed role is or
//! is not borne out by the rest of a profile.
//!
//! The senses come from the process's lexicon ([`crate::lexicon`], WordNet). A word's sense is
//! the one whose signature (its own words, its definition, its broader senses' words, its topic)
//! shares most with the context: the rest of the text and of the profile it stands in (the
//! simplified Lesk method). A word the context says nothing about keeps its most frequent sense
//! and is *undecided*: it is then never taken to be in another sense, so a thin profile loses
//! nothing it would have matched by spelling. Without a lexicon every word is undecided and the
//! negotiator judges by stems and its concept table alone.

use super::concepts;
use super::text::Word;
use crate::lexicon::{Lexicon, NOUN_PERSON, Sense};
use std::collections::{HashMap, HashSet};

/// Steps up the hierarchy within which a specific word meets a broader one (a chef is a cook).
pub const IS_A_LEVELS: usize = 3;
/// Steps up within which two senses count as kin (a cellist and a violist are musicians).
pub const KIN_LEVELS: usize = 2;
/// Most senses of one word weighed (the rarest senses of common words are left out).
const MAX_SENSES: usize = 12;

/// The stems around a word, as ids of the lexicon's stems.
#[derive(Debug, Default, Clone)]
pub struct Context {
    /// Stem ids, with how many words of the context bring each.
    stems: HashMap<u32, u16>,
    /// How often each word (by key) stands in the context.
    keys: HashMap<String, u16>,
    /// Broader senses of the context's words (of their most frequent senses), with how many
    /// words bring each: a sense that words of the context fall under (shrubs and perennials
    /// under `plant, flora`) is the strongest sign of the sense meant.
    under: HashMap<Sense, u16>,
}

/// Senses of a context word whose broader senses vote.
const VOTING_SENSES: usize = 2;
/// Steps up from a context word's senses that vote.
const VOTING_LEVELS: usize = 4;
/// What context words falling under a sense count for, against shared words (a telling word
/// shared counts about 9; one most definitions use about 3).
const UNDER_WEIGHT: f64 = 12.0;

/// What the lexicon says of one written word, kept for the next decisions that read it.
#[derive(Debug, Default)]
struct Known {
    /// The senses it may have (see [`candidates`]).
    candidates: Vec<Sense>,
    /// What it brings to a context: its stems, the words of its most frequent sense and of that
    /// sense's broader senses (so that `choir` brings `music` along), and the broader senses of
    /// its first senses, which vote.
    stems: HashSet<u32>,
    under: HashSet<Sense>,
    /// The activity it names its doer by, if it is an agent noun (see [`activity`]).
    activity: Option<String>,
}

/// How many words' lexicon entries the process keeps.
const KNOWN_WORDS: usize = 16_384;

/// What the lexicon says of `w` (cached by its spelling and keys).
fn known(lex: &Lexicon, w: &Word) -> std::sync::Arc<Known> {
    type Cache = std::sync::Mutex<lru::LruCache<(usize, String, String), std::sync::Arc<Known>>>;
    static CACHE: std::sync::LazyLock<Cache> = std::sync::LazyLock::new(|| {
        std::sync::Mutex::new(lru::LruCache::new(std::num::NonZeroUsize::new(KNOWN_WORDS).expect("non-zero")))
    });
    let key = (crate::lexicon::id(lex), w.shown.clone(), w.key.clone());
    if let Some(hit) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return hit.clone();
    }
    let mut k = Known::default();
    let nouns = lex.noun_senses(&w.shown);
    k.candidates = if nouns.is_empty() { lex.verb_senses(&w.shown) } else { nouns.clone() };
    k.candidates.truncate(MAX_SENSES);
    for key in std::iter::once(&w.key).chain(&w.parts) {
        if let Some(id) = lex.stem_id(key) {
            k.stems.insert(id);
        }
    }
    if let Some(first) = nouns.first() {
        k.stems.extend(lex.own_words(*first));
        for a in lex.ancestors(*first, 2) {
            k.stems.extend(lex.own_words(a));
        }
    }
    for s in nouns.iter().take(VOTING_SENSES) {
        k.under.extend(lex.ancestors(*s, VOTING_LEVELS));
    }
    if w.key.ends_with('r') && w.parts.is_empty() && !w.key.contains('_') {
        k.activity = activity_of(lex, w);
    }
    let k = std::sync::Arc::new(k);
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).put(key, k.clone());
    k
}

impl Context {
    /// The context of `words` (what each brings, see [`Known`]).
    pub fn of<'a>(lex: &Lexicon, words: impl IntoIterator<Item = &'a Word>) -> Context {
        let mut ctx = Context::default();
        for w in words {
            *ctx.keys.entry(w.key.clone()).or_default() += 1;
            let k = known(lex, w);
            for id in &k.stems {
                *ctx.stems.entry(*id).or_default() += 1;
            }
            for s in &k.under {
                *ctx.under.entry(*s).or_default() += 1;
            }
        }
        ctx
    }

    /// Adds another context's words.
    pub fn extend(&mut self, other: &Context) {
        for (id, n) in &other.stems {
            *self.stems.entry(*id).or_default() += n;
        }
        for (s, n) in &other.under {
            *self.under.entry(*s).or_default() += n;
        }
        for (k, n) in &other.keys {
            *self.keys.entry(k.clone()).or_default() += n;
        }
    }

    /// How often a word stands in the context (at least once: it is scored as part of it).
    fn times(&self, w: &Word) -> u16 {
        self.keys.get(&w.key).copied().unwrap_or(0).max(1)
    }

    /// How much the context, less what the word itself brings (`own`, as often as the word
    /// stands in the context), speaks for sense `s`.
    fn score(&self, lex: &Lexicon, s: Sense, own: &Known, times: u16) -> f64 {
        let others = |n: Option<&u16>, mine: bool| n.copied().unwrap_or(0) > if mine { times } else { 0 };
        let shared: f64 = lex
            .signature(s)
            .iter()
            .filter(|id| others(self.stems.get(id), own.stems.contains(id)))
            .map(|id| lex.weight(*id))
            .sum();
        shared + if others(self.under.get(&s), own.under.contains(&s)) { UNDER_WEIGHT } else { 0.0 }
    }
}

/// The senses a word may have in the lexicon, most frequent first: its noun senses when it has
/// any (what people are, have and seek are named by nouns; a verb's senses are too fine to tell
/// one use from another), else its verb senses.
fn candidates(lex: &Lexicon, w: &Word) -> Vec<Sense> {
    known(lex, w).candidates.clone()
}

/// Gives each word its sense in `ctx` (see the module docs). Words already given one keep it.
pub fn annotate(lex: &Lexicon, words: &mut [Word], ctx: &Context) {
    for w in words.iter_mut().filter(|w| w.senses.is_empty() && !w.coded) {
        let cands = candidates(lex, w);
        if cands.len() <= 1 {
            w.decided = cands.len() == 1;
            w.confidence = u8::MAX;
            w.senses = cands;
            continue;
        }
        let own = known(lex, w);
        let times = ctx.times(w);
        let scores: Vec<f64> = cands.iter().map(|s| ctx.score(lex, *s, &own, times)).collect();
        let best = scores.iter().copied().fold(0.0, f64::max);
        if best < MIN_SCORE {
            w.senses = vec![cands[0]];
            w.decided = false;
        } else {
            // The senses within a small margin of the best are all kept: the context did not
            // tell them apart.
            w.senses = cands.iter().zip(&scores).filter(|(_, n)| **n >= best - MARGIN).map(|(s, _)| *s).collect();
            w.decided = w.senses.len() < cands.len();
            w.confidence = best.min(f64::from(u8::MAX - 1)) as u8;
        }
        w.sense_scores = cands.iter().zip(&scores).map(|(s, n)| (*s, (n * 10.0).round().min(60000.0) as u16)).collect();
    }
}

/// How much more the context of `w` spoke for its own sense than for `other`.
fn preference(w: &Word, own: Sense, other: Sense) -> f32 {
    let score = |s: Sense| w.sense_scores.iter().find(|(x, _)| *x == s).map_or(0.0, |(_, n)| f32::from(*n) / 10.0);
    score(own) - score(other)
}

/// Whether two words, written alike, are used in compatible senses. They are not when both are
/// nouns whose contexts chose senses that are different things (of different kinds, or meeting
/// only far up the hierarchy: an orchestra's conductor and a tram's meet at `person`), one of
/// them a thing one can point at ([`CONCRETE`]), and the
/// contexts are not in doubt: one of them speaks for its sense over the other's by a telling
/// word or more, and the other at least prefers its own. Verbs are never told apart: their
/// senses are too fine to rule anything out.
pub fn compatible(lex: &Lexicon, a: &Word, b: &Word) -> bool {
    if !a.decided || !b.decided {
        return true;
    }
    let nouns = |w: &Word| w.senses.iter().all(|s| !lex.is_verb(*s));
    if !nouns(a) || !nouns(b) {
        return true;
    }
    let pairs = || a.senses.iter().flat_map(|x| b.senses.iter().map(move |y| (*x, *y)));
    if pairs().any(|(x, y)| lex.is_a(x, y, IS_A_LEVELS) || lex.is_a(y, x, IS_A_LEVELS)) {
        return true;
    }
    let concrete = |x: Sense| CONCRETE.contains(&lex.lexfile(x));
    let apart = |x: Sense, y: Sense| {
        (concrete(x) || concrete(y))
            && (lex.lexfile(x) != lex.lexfile(y) || lex.distance(x, y, FAR_LEVELS).is_none_or(|d| d >= FAR))
    };
    // Two senses whose definitions share a telling word are one thing in two guises (the grape
    // and the vine it grows on, both of the genus Vitis), not two things by one name.
    let guises = |x: Sense, y: Sense| {
        let own = lex.stem_id(&a.key);
        let gy = lex.gloss_words(y);
        lex.gloss_words(x).iter().any(|id| Some(*id) != own && gy.contains(id) && lex.weight(*id) >= TELLING)
    };
    let clear = |x: Sense, y: Sense| {
        let (pa, pb) = (preference(a, x, y), preference(b, y, x));
        (pa >= STRONG && pb > 0.0) || (pb >= STRONG && pa > 0.0)
    };
    !pairs().all(|(x, y)| apart(x, y) && clear(x, y) && !guises(x, y))
}

/// Lexicographer files of things one can point at: people, artifacts, animals, plants, objects,
/// places, groups, food, body parts, substances. Homonyms that mislead a match are of these
/// (a conductor, a plant, a bar, a bass, a court); abstract senses (strength, night) are too
/// finely split to tell one use from another.
const CONCRETE: &[u8] = &[5, 6, 8, 13, 14, 15, 17, 18, 20, 27];

/// How much more a context must speak for one sense than for another to rule the other out.
const STRONG: f32 = 10.0;
/// Weight of a definition word that two senses share for them to be one thing in two guises (a
/// word fewer than about one sense in a thousand uses).
const TELLING: f64 = 7.0;
/// Least score that decides a sense at all (one fairly telling word).
const MIN_SCORE: f64 = 4.0;
/// Scores this close to the best are not told apart.
const MARGIN: f64 = 2.0;
/// Steps between two senses of one kind from which they are different things (a conductor who
/// leads musicians and one who collects fares meet only at `person`, six steps apart; the two
/// senses of `technician` meet at `expert`, two apart).
const FAR: usize = 5;
/// Steps up looked at when measuring how far apart two senses are.
const FAR_LEVELS: usize = 6;

/// Whether claims about a need of this kind must be borne out by the profile: they describe the
/// person sought.
pub fn claims_describe_the_person(frame: super::needs::Frame) -> bool {
    frame == super::needs::Frame::Acquire
}

/// The senses a word shows as evidence: its own and their specific broader senses (a chef
/// shows `cook`; a tree surgeon shows `specialist`, not `surgeon`).
pub fn shown(lex: &Lexicon, w: &Word) -> Vec<Sense> {
    let mut out = w.senses.clone();
    for s in &w.senses {
        out.extend(lex.specific_ancestors(*s, IS_A_LEVELS));
    }
    out
}

/// Whether `w` is kin to any of `others`: the same word, a concept of the table in common, or
/// senses that are one another's or share a specific broader sense nearby.
pub fn related(lex: &Lexicon, w: &Word, others: &[Word]) -> bool {
    let mine = concepts::concepts_of(w);
    others.iter().any(|o| {
        o.key == w.key
            || (!o.parts.is_empty() && o.parts.contains(&w.key))
            || (!w.parts.is_empty() && w.parts.contains(&o.key))
            || concepts::concepts_of(o).iter().any(|c| mine.contains(c))
            || w.senses.iter().any(|a| o.senses.iter().any(|b| lex.kin(*a, *b, KIN_LEVELS)))
            || doer_of(lex, w, o)
            || doer_of(lex, o, w)
    })
}

/// Whether `doer` is an agent noun of the activity `done` names (a picker, picking).
pub fn doer_of(lex: &Lexicon, doer: &Word, done: &Word) -> bool {
    // (The activity's stem begins the doer's: a cheap test first.)
    !done.negated
        && done.key.len() >= 4
        && doer.key.len() > done.key.len()
        && doer.key.starts_with(done.key.as_str())
        && activity(lex, doer).is_some_and(|a| a == done.key)
}

/// The activity an agent noun names its doer by, as the stem it is compared by: a picker picks,
/// a carer cares, a driver drives, so "grape picking" and "home care" show them. The word must
/// name a person (or be unknown to the lexicon as a noun) and, without its `-er`, `-r` or `-or`,
/// be a verb of the lexicon (an officer does not office, a corner does not corn).
pub fn activity(lex: &Lexicon, w: &Word) -> Option<String> {
    if !w.parts.is_empty() || w.key.contains('_') || w.negated || !w.key.ends_with('r') {
        return None;
    }
    known(lex, w).activity.clone()
}

/// [`activity`], computed once per word (see [`known`]).
fn activity_of(lex: &Lexicon, w: &Word) -> Option<String> {
    let nouns = lex.noun_senses(&w.shown);
    if nouns.first().is_some_and(|s| lex.lexfile(*s) != NOUN_PERSON) {
        return None;
    }
    let key = w.key.as_str();
    ["er", "r", "or"].iter().find_map(|suffix| {
        let verb = key.strip_suffix(suffix)?;
        (verb.len() >= 4 && !lex.verb_senses(verb).is_empty()).then(|| crate::lexicon::stem(verb))
    })
}

/// Whether the word names a kind of person (an occupation, a role): its sense is one of
/// WordNet's people, and not as broad as `person` or `worker`.
pub fn is_role(lex: &Lexicon, w: &Word) -> bool {
    w.senses.first().is_some_and(|s| lex.lexfile(*s) == NOUN_PERSON && !lex.is_verb(*s) && lex.depth(*s) >= 5)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(text: &str) -> Word {
        concepts::read(text).words.remove(0)
    }

    #[test]
    fn an_agent_noun_is_shown_by_its_activity_and_only_a_verbs_doer_is_one() {
        let lex = crate::lexicon::get();
        if lex.is_empty() {
            return;
        }
        assert_eq!(activity(lex, &word("pickers")).as_deref(), Some("pick"));
        assert_eq!(activity(lex, &word("carer")).as_deref(), Some("care"));
        assert_eq!(activity(lex, &word("driver")).as_deref(), Some("drive"));
        assert_eq!(activity(lex, &word("officer")), None);
        assert_eq!(activity(lex, &word("corner")), None);
        assert!(doer_of(lex, &word("plumber"), &word("plumbing")));
    }

    #[test]
    fn one_thing_in_two_guises_is_no_homonym_and_a_codes_name_has_no_sense() {
        let lex = crate::lexicon::get();
        if lex.is_empty() {
            return;
        }
        let sensed = |text: &str, pick: &str| {
            let mut words = concepts::read(text).words;
            let ctx = Context::of(lex, &words);
            annotate(lex, &mut words, &ctx);
            words.into_iter().find(|w| w.shown == pick).unwrap()
        };
        // The grape a vineyard grows and the grape a picker picks (both of the genus Vitis).
        let vine = sensed("grapes for our vineyard: viticulture, vines, winemaking", "grapes");
        let fruit = sensed("picked grapes and apples at harvest, fruit picking", "grapes");
        assert!(compatible(lex, &vine, &fruit));
        // A tram's conductor and a choir's are two things.
        let tram = sensed("tram conductor collecting fares on the city trams", "conductor");
        let choir = sensed("conductor of our community choir, choral singing", "conductor");
        assert!(!compatible(lex, &tram, &choir));
        // `Class 1` is a code: `class` has no sense of its own there.
        let class = sensed("Class 1 lorry driver", "class");
        assert!(class.coded && class.senses.is_empty());
    }

    /// Prints how the words of `PARLEY_SENSE_TEXT` are read in the context of
    /// `PARLEY_SENSE_CONTEXT` (a tool for working on the lexicon's use).
    #[test]
    #[ignore]
    fn explain_senses() {
        let (Ok(text), Ok(context)) = (std::env::var("PARLEY_SENSE_TEXT"), std::env::var("PARLEY_SENSE_CONTEXT"))
        else {
            return;
        };
        let lex = crate::lexicon::get();
        let mut words = concepts::read(&text).words;
        let ctx_words = concepts::read(&context).words;
        let ctx = Context::of(lex, words.iter().chain(&ctx_words));
        for w in &words {
            let own = known(lex, w);
            for s in candidates(lex, w) {
                let hits = ctx.score(lex, s, &own, ctx.times(w));
                let shared: Vec<String> = lex
                    .signature(s)
                    .iter()
                    .filter(|id| ctx.stems.get(id).copied().unwrap_or(0) > u16::from(own.stems.contains(id)))
                    .map(|id| format!("{}={:.1}", lex.stem_of(*id), lex.weight(*id)))
                    .collect();
                println!("    shared {shared:?}");
                println!("{:20} {:6} score {hits:.1} {}", w.shown, s, lex.describe(s));
            }
        }
        annotate(lex, &mut words, &ctx);
        for w in &words {
            println!("{} -> {:?} decided {} confidence {}", w.shown, w.senses, w.decided, w.confidence);
        }
    }
}
