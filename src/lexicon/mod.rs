//! English words and what they mean: stems, and word senses from WordNet.
//!
//! The system negotiator compares what people need with what others are and offer. Spellings
//! are not enough for that: a bookkeeper keeps accounts, an apiarist is a beekeeper, a chef is a
//! cook (and not the reverse), and a train conductor is not an orchestra's. This module holds
//! that knowledge, from a real lexical resource rather than lists in the code:
//!
//! - **Stems** ([`stem`]): the Snowball stem a word is compared by (`founders`, `founding` and
//!   `founder` meet), with British `-ise` spellings and a few irregular forms first.
//! - **Senses** ([`Lexicon`]): WordNet 3.0's nouns and verbs, read once at start-up from the
//!   `dict` folder (Debian's `wordnet-base`; [`wordnet`] reads it) into a compact in-memory index:
//!   for each lemma its senses, most frequent first; for each sense its lexicographer file (people,
//!   acts, artifacts...), its broader senses (hypernyms), its topic (`music`, `law`), and a
//!   signature (its own words and its definition's, as stems) by which the words around a word
//!   decide which sense it has. Irregular forms (`mice`, `ran`) and WordNet's detachment rules
//!   (`-ies` to `-y`) find a word's lemma.
//!
//! One lexicon serves the process ([`get`]): [`install`] sets it at start-up (the service says in
//! its log when the database is missing, and judges without senses); without one, the first use
//! loads it from [`DEFAULT_DIR`], or runs without it. Lookups are pure reads of data loaded once:
//! the negotiator stays deterministic for a given lexicon.

pub mod wordnet;

use rust_stemmers::{Algorithm, Stemmer};
use std::collections::HashMap;
use std::sync::{LazyLock, OnceLock};

/// Where Debian's `wordnet-base` puts the database.
pub const DEFAULT_DIR: &str = "/usr/share/wordnet";

/// Lexicographer file of nouns that name people (`noun.person`).
pub const NOUN_PERSON: u8 = 18;
/// Lexicographer file of nouns that name groups and organisations (`noun.group`).
pub const NOUN_GROUP: u8 = 14;

/// Depth below which a sense is too general to relate two words (`person`, `worker`, `act`).
const GENERAL_DEPTH: u8 = 5;

/// One sense (a synset), compactly: ranges into [`Lexicon::pool`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Synset {
    lexfile: u8,
    verb: bool,
    /// Whether it is one named thing (Wiley Post, the island of Java) rather than a kind.
    instance: bool,
    /// Fewest hypernym steps to a root.
    depth: u8,
    hyper: (u32, u8),
    topic: (u32, u8),
    /// Stem ids: the synset's own words (`own` of them), then its definition's content words.
    sig: (u32, u16),
    own: u8,
}

/// WordNet's nouns and verbs, indexed for the negotiator (see the module docs).
#[derive(Debug, Default)]
pub struct Lexicon {
    /// Lemma (lowercase, words joined by `_`) -> (start in `senses`, nouns, verbs).
    lemmas: HashMap<Box<str>, (u32, u16, u16)>,
    senses: Vec<u32>,
    synsets: Vec<Synset>,
    /// Pointer targets and signature stems, in ranges.
    pool: Vec<u32>,
    /// Stem -> id.
    stems: HashMap<Box<str>, u32>,
    /// How many senses' signatures use each stem (by stem id): common words tell little.
    stem_uses: Vec<u32>,
    /// Irregular form -> lemma (`mice` -> `mouse`).
    exceptions: HashMap<Box<str>, Box<str>>,
    /// Lemma -> senses, gathered while loading (nouns, verbs).
    building: HashMap<Box<str>, (Vec<u32>, Vec<u32>)>,
    /// First words of multi-word lemmas (`physical` for `physical_therapist`).
    starts_phrase: std::collections::HashSet<Box<str>>,
    /// Each sense's signature, computed on first use (the same senses are weighed at every
    /// decision).
    signatures: Vec<OnceLock<Box<[u32]>>>,
}

/// A sense of a word: an index into the lexicon's synsets.
pub type Sense = u32;

impl Lexicon {
    /// An empty lexicon: every word unknown.
    pub fn empty() -> Lexicon {
        Lexicon::default()
    }

    /// Whether it knows no word.
    pub fn is_empty(&self) -> bool {
        self.lemmas.is_empty()
    }

    /// How many senses it holds.
    pub fn sense_count(&self) -> usize {
        self.synsets.len()
    }

    fn intern_stem(&mut self, cache: &mut wordnet::StemCache, word: &str) -> u32 {
        if let Some(id) = cache.get(word) {
            return *id;
        }
        let s = stem(word);
        let next = self.stems.len() as u32;
        let id = *self.stems.entry(s.into_boxed_str()).or_insert(next);
        cache.insert(word.to_owned(), id);
        id
    }

    fn add_senses(&mut self, lemma: &str, verb: bool, senses: &[u32]) {
        let entry = self.building.entry(lemma.into()).or_default();
        if verb { entry.1.extend(senses) } else { entry.0.extend(senses) }
    }

    fn finish(&mut self) {
        for (lemma, (nouns, verbs)) in std::mem::take(&mut self.building) {
            let start = self.senses.len() as u32;
            self.senses.extend(&nouns);
            self.senses.extend(&verbs);
            if let Some((first, _)) = lemma.split_once('_') {
                self.starts_phrase.insert(first.into());
            }
            self.lemmas.insert(lemma, (start, nouns.len() as u16, verbs.len() as u16));
        }
        let mut uses = vec![0u32; self.stems.len()];
        for syn in &self.synsets {
            let (start, len) = syn.sig;
            for id in &self.pool[start as usize..start as usize + len as usize] {
                uses[*id as usize] += 1;
            }
        }
        self.stem_uses = uses;
        self.signatures = (0..self.synsets.len()).map(|_| OnceLock::new()).collect();
        self.senses.shrink_to_fit();
        self.pool.shrink_to_fit();
        self.synsets.shrink_to_fit();
    }

    fn compute_depths(&mut self) {
        const UNKNOWN: u8 = u8::MAX;
        for s in &mut self.synsets {
            s.depth = UNKNOWN;
        }
        // Hypernym chains are short (under 20 steps); resolve each synset by walking up.
        for i in 0..self.synsets.len() {
            let mut stack = vec![i as u32];
            while let Some(&top) = stack.last() {
                let s = self.synsets[top as usize];
                if s.depth != UNKNOWN {
                    stack.pop();
                    continue;
                }
                let hypers = self.hypernyms(top);
                let pending: Vec<u32> = hypers
                    .iter()
                    .copied()
                    .filter(|h| self.synsets[*h as usize].depth == UNKNOWN && !stack.contains(h))
                    .collect();
                if pending.is_empty() || stack.len() > 64 {
                    let depth = hypers
                        .iter()
                        .map(|h| self.synsets[*h as usize].depth)
                        .filter(|d| *d != UNKNOWN)
                        .min()
                        .map_or(0, |d| d.saturating_add(1));
                    self.synsets[top as usize].depth = depth.min(UNKNOWN - 1);
                    stack.pop();
                } else {
                    stack.extend(pending);
                }
            }
        }
    }

    /// The lemmas a written word may be (itself, its irregular base, its detached forms), as
    /// WordNet would find them, most likely first.
    fn lemma_candidates(&self, word: &str) -> Vec<String> {
        let word = word.to_ascii_lowercase().replace([' ', '-'], "_");
        let mut out = vec![word.clone()];
        if let Some(base) = self.exceptions.get(word.as_str()) {
            out.push(base.to_string());
        }
        // WordNet's detachment rules for nouns and verbs.
        const RULES: &[(&str, &str)] = &[
            ("ies", "y"),
            ("ses", "s"),
            ("xes", "x"),
            ("zes", "z"),
            ("ches", "ch"),
            ("shes", "sh"),
            ("men", "man"),
            ("s", ""),
            ("es", "e"),
            ("es", ""),
            ("ed", "e"),
            ("ed", ""),
            ("ing", "e"),
            ("ing", ""),
        ];
        for (suffix, with) in RULES {
            if let Some(base) = word.strip_suffix(suffix)
                && base.len() >= 2
            {
                out.push(format!("{base}{with}"));
            }
        }
        out
    }

    /// The senses of a written word (nouns first, each most frequent first); empty when unknown.
    #[cfg(test)]
    pub fn senses(&self, word: &str) -> Vec<Sense> {
        for lemma in self.lemma_candidates(word) {
            if let Some(&(start, nouns, verbs)) = self.lemmas.get(lemma.as_str()) {
                let (s, n) = (start as usize, (nouns + verbs) as usize);
                return self.senses[s..s + n].to_vec();
            }
        }
        Vec::new()
    }

    /// The noun senses of a written word that name kinds of things (not one named thing: `post`
    /// is a position or a mail service, not Emily Post).
    pub fn noun_senses(&self, word: &str) -> Vec<Sense> {
        for lemma in self.lemma_candidates(word) {
            if let Some(&(start, nouns, _)) = self.lemmas.get(lemma.as_str()) {
                let all = &self.senses[start as usize..start as usize + nouns as usize];
                return all.iter().copied().filter(|s| !self.synsets[*s as usize].instance).collect();
            }
        }
        Vec::new()
    }

    /// The verb senses of a written word.
    pub fn verb_senses(&self, word: &str) -> Vec<Sense> {
        for lemma in self.lemma_candidates(word) {
            if let Some(&(start, nouns, verbs)) = self.lemmas.get(lemma.as_str())
                && verbs > 0
            {
                let s = (start + nouns as u32) as usize;
                return self.senses[s..s + verbs as usize].to_vec();
            }
        }
        Vec::new()
    }

    /// Whether `first` begins some multi-word lemma.
    pub fn starts_phrase(&self, first: &str) -> bool {
        self.starts_phrase.contains(first)
    }

    /// Whether the words, written together, are one noun of the lexicon (`physical therapist`,
    /// `truck drivers`): the last word may be inflected.
    pub fn is_noun_phrase(&self, words: &[&str]) -> bool {
        if words.len() < 2 {
            return false;
        }
        let head = words[..words.len() - 1].join("_");
        self.lemma_candidates(words[words.len() - 1])
            .iter()
            .any(|last| self.lemmas.get(format!("{head}_{last}").as_str()).is_some_and(|(_, nouns, _)| *nouns > 0))
    }

    fn hypernyms(&self, s: Sense) -> &[u32] {
        let (start, len) = self.synsets[s as usize].hyper;
        &self.pool[start as usize..start as usize + len as usize]
    }

    /// The lexicographer file of a sense (see [`NOUN_PERSON`]).
    pub fn lexfile(&self, s: Sense) -> u8 {
        self.synsets[s as usize].lexfile
    }

    /// Whether the sense is a verb's.
    pub fn is_verb(&self, s: Sense) -> bool {
        self.synsets[s as usize].verb
    }

    /// Fewest steps from the sense to a root of the hierarchy.
    pub fn depth(&self, s: Sense) -> u8 {
        self.synsets[s as usize].depth
    }

    /// Broader senses of `s`, up to `levels` steps up, nearest first (without `s`).
    pub fn ancestors(&self, s: Sense, levels: usize) -> impl Iterator<Item = Sense> + '_ {
        let mut seen: Vec<Sense> = Vec::new();
        let mut frontier = vec![s];
        for _ in 0..levels {
            let mut next = Vec::new();
            for f in &frontier {
                for h in self.hypernyms(*f) {
                    if !seen.contains(h) && *h != s {
                        seen.push(*h);
                        next.push(*h);
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            frontier = next;
        }
        seen.into_iter()
    }

    /// Broader senses of `s` that are still specific (not `person`, `worker`, `act`), up to
    /// `levels` steps up.
    pub fn specific_ancestors(&self, s: Sense, levels: usize) -> impl Iterator<Item = Sense> + '_ {
        self.ancestors(s, levels).filter(|a| self.depth(*a) >= GENERAL_DEPTH)
    }

    /// Whether `a` is `b` or a narrower sense of it, within `levels` steps (a chef is a cook).
    pub fn is_a(&self, a: Sense, b: Sense, levels: usize) -> bool {
        a == b || (self.depth(b) >= GENERAL_DEPTH && self.ancestors(a, levels).any(|x| x == b))
    }

    /// Whether two senses are kin: one is the other or narrower within `levels` steps, or both
    /// fall under a common specific sense within `levels` steps (a cellist and a violist are
    /// both musicians).
    pub fn kin(&self, a: Sense, b: Sense, levels: usize) -> bool {
        if self.is_a(a, b, levels) || self.is_a(b, a, levels) {
            return true;
        }
        let up: Vec<Sense> = self.specific_ancestors(a, levels).collect();
        self.specific_ancestors(b, levels).any(|x| up.contains(&x))
    }

    /// The topics of a sense (`music`, `law`), from WordNet's domain pointers, its own or its
    /// nearest hypernyms'.
    pub fn topics(&self, s: Sense) -> Vec<Sense> {
        let mut out = Vec::new();
        for x in std::iter::once(s).chain(self.ancestors(s, 2)) {
            let (start, len) = self.synsets[x as usize].topic;
            out.extend(&self.pool[start as usize..start as usize + len as usize]);
        }
        out
    }

    /// How telling a stem is: the log of how rare it is among the senses' signatures (a word
    /// most definitions use, `work` or `person`, tells little; `fare` tells much).
    pub fn weight(&self, id: u32) -> f64 {
        let uses = self.stem_uses.get(id as usize).copied().unwrap_or(0) as f64;
        ((self.synsets.len() as f64 + 1.0) / (uses + 1.0)).ln()
    }

    /// The id of a stem, if any sense's signature uses it.
    pub fn stem_id(&self, stem: &str) -> Option<u32> {
        self.stems.get(stem).copied()
    }

    /// The stem ids that show a sense: its own words and definition, its hypernyms' words (two
    /// steps up) and its topics' words.
    pub fn signature(&self, s: Sense) -> &[u32] {
        let compute = || {
            let mut out = self.sig(s, false).to_vec();
            for a in self.ancestors(s, 2).chain(self.topics(s)) {
                out.extend(self.sig(a, true));
            }
            out.sort_unstable();
            out.dedup();
            out.into_boxed_slice()
        };
        match self.signatures.get(s as usize) {
            Some(cell) => cell.get_or_init(compute),
            None => &[],
        }
    }

    /// The stem ids of the sense's own words and its definition's (not its broader senses').
    pub fn gloss_words(&self, s: Sense) -> &[u32] {
        self.sig(s, false)
    }

    /// The stem ids of the sense's own words (`conductor`, `music`, `director`).
    pub fn own_words(&self, s: Sense) -> &[u32] {
        self.sig(s, true)
    }

    /// The sense's signature stems; with `own_only`, only its own words.
    fn sig(&self, s: Sense, own_only: bool) -> &[u32] {
        let syn = &self.synsets[s as usize];
        let (start, len) = syn.sig;
        let len = if own_only { syn.own as u16 } else { len };
        &self.pool[start as usize..start as usize + len as usize]
    }

    /// Steps between two senses through their nearest common broader sense (within `levels`
    /// steps up from each), if they have one.
    pub fn distance(&self, a: Sense, b: Sense, levels: usize) -> Option<usize> {
        let up = |s: Sense| -> Vec<(Sense, usize)> {
            let mut out = vec![(s, 0)];
            let mut frontier = vec![s];
            for step in 1..=levels {
                let mut next = Vec::new();
                for f in &frontier {
                    for h in self.hypernyms(*f) {
                        if !out.iter().any(|(x, _)| x == h) {
                            out.push((*h, step));
                            next.push(*h);
                        }
                    }
                }
                frontier = next;
            }
            out
        };
        let (ua, ub) = (up(a), up(b));
        ua.iter().filter_map(|(x, da)| ub.iter().find(|(y, _)| y == x).map(|(_, db)| da + db)).min()
    }

    /// The stem of an id (for explaining a decision; slow).
    #[cfg(test)]
    pub fn stem_of(&self, id: u32) -> &str {
        self.stems.iter().find(|(_, v)| **v == id).map(|(k, _)| &**k).unwrap_or("?")
    }

    /// The sense's own words, as stems (for explaining a decision).
    #[cfg(test)]
    pub fn describe(&self, s: Sense) -> String {
        let words: Vec<&str> = self.own_words(s).iter().map(|id| self.stem_of(*id)).collect();
        format!("{}:{}", self.lexfile(s), words.join("/"))
    }

    /// Approximate bytes held (for the start-up log).
    pub fn approx_bytes(&self) -> usize {
        let strings: usize = self.lemmas.keys().map(|k| k.len() + 40).sum::<usize>()
            + self.stems.keys().map(|k| k.len() + 28).sum::<usize>()
            + self.exceptions.iter().map(|(k, v)| k.len() + v.len() + 48).sum::<usize>();
        strings
            + self.stem_uses.len() * 4
            + self.senses.len() * 4
            + self.pool.len() * 4
            + self.synsets.len() * std::mem::size_of::<Synset>()
            + self.starts_phrase.iter().map(|k| k.len() + 24).sum::<usize>()
    }
}

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// Forms the stemmer cannot relate to their family, mapped to a word of it.
const IRREGULAR: &[(&str, &str)] = &[
    ("built", "build"),
    ("cofounding", "cofounder"),
    ("founded", "founder"),
    ("founding", "cofounding"),
    ("grew", "grow"),
    ("grown", "grow"),
    ("led", "lead"),
    ("men", "man"),
    ("people", "person"),
    ("ran", "run"),
    ("sold", "sell"),
    ("taught", "teach"),
    ("women", "woman"),
    ("written", "write"),
    ("wrote", "write"),
];

/// The stem a word is compared by.
pub fn stem(word: &str) -> String {
    if let Ok(i) = IRREGULAR.binary_search_by(|(w, _)| (*w).cmp(word)) {
        return STEMMER.stem(IRREGULAR[i].1).into_owned();
    }
    STEMMER.stem(&americanize(word)).into_owned()
}

/// `-isation` as `-ization`, and `-ise`/`-ised`/`-ises`/`-ising` of longer words as `-ize...`
/// (`optimise`, `organised`): the stemmer relates each spelling only to its own family.
fn americanize(word: &str) -> std::borrow::Cow<'_, str> {
    if let Some(i) = word.find("isation") {
        return format!("{}iz{}", &word[..i], &word[i + 2..]).into();
    }
    if word.len() >= 8 {
        for (from, to) in [("ise", "ize"), ("ised", "ized"), ("ises", "izes"), ("ising", "izing")] {
            if let Some(stem) = word.strip_suffix(from) {
                return format!("{stem}{to}").into();
            }
        }
    }
    word.into()
}

static LEXICON: OnceLock<Lexicon> = OnceLock::new();

/// Sets the process's lexicon (at start-up); a second call changes nothing.
pub fn install(lexicon: Lexicon) {
    let _ = LEXICON.set(lexicon);
}

/// Whether a lexicon is installed.
pub fn installed() -> bool {
    LEXICON.get().is_some()
}

/// The process's lexicon: the installed one, else loaded from [`DEFAULT_DIR`] on first use,
/// else empty.
pub fn get() -> &'static Lexicon {
    #[cfg(test)]
    if let Some(lex) = OVERRIDE.with(std::cell::Cell::get) {
        return lex;
    }
    LEXICON.get_or_init(|| wordnet::load(std::path::Path::new(DEFAULT_DIR)).unwrap_or_default())
}

/// A number telling lexicons apart, for caches of what is read with one.
pub fn id(lex: &Lexicon) -> usize {
    std::ptr::from_ref(lex) as usize
}

#[cfg(test)]
thread_local! {
    static OVERRIDE: std::cell::Cell<Option<&'static Lexicon>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with `lex` as this thread's lexicon (tests of how the negotiator judges without one).
#[cfg(test)]
pub fn with<R>(lex: &'static Lexicon, f: impl FnOnce() -> R) -> R {
    OVERRIDE.with(|o| o.set(Some(lex)));
    let out = f();
    OVERRIDE.with(|o| o.set(None));
    out
}

/// An empty lexicon that lives as long as the process (tests of the negotiator without one).
#[cfg(test)]
pub fn empty() -> &'static Lexicon {
    static EMPTY: LazyLock<Lexicon> = LazyLock::new(Lexicon::empty);
    &EMPTY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irregular_forms_are_sorted() {
        assert!(IRREGULAR.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn an_empty_lexicon_knows_nothing() {
        let lex = Lexicon::empty();
        assert!(lex.senses("conductor").is_empty());
        assert!(!lex.is_noun_phrase(&["truck", "driver"]));
    }
}
