//! Content terms: the words the negotiator compares between what its user asks for and what
//! the other side shows.
//!
//! This is the negotiator's own reading of text, deliberately separate from the calculator's
//! keyword tokenizer in [`crate::scoring::text`] (which must stay exactly Bindu's: it splits on
//! every character outside `[a-z0-9]`). Here:
//!
//! - **Compounds stay whole.** Letters and digits joined by single hyphens or slashes are one
//!   term: `part-time`, `full-time`, `co-founder`, `ci/cd`, `e-commerce`. Split, `part-time`
//!   would become `part` (and `time`), and "I was part of a team" would answer a need for
//!   part-time work.
//! - **A compound is compared without its separators**, so a need for `full-time` is met by
//!   evidence that writes `full-time`, `full/time` or `fulltime` (all one key, `fulltime`), and by
//!   evidence that writes the parts apart as consecutive words (`full time`, see
//!   [`Evidence::covers`]). The other way round, a compound in the evidence also shows each of
//!   its parts: `rust-based` is evidence of `rust`, `backend/frontend` of `backend`.
//! - **Stop words are dropped only as whole terms.** "looking", "for" and "with" carry no
//!   signal, so they go; `one-on-one` stays although each of its parts is a stop word. A few
//!   compounds are stop words themselves (`and/or`). Numbers (`8`, `2023-2024`, `24/7`) are
//!   dropped too.
//! - **Plurals are folded** (`startups` -> `startup`, `companies` -> `company`,
//!   `co-founders` -> `cofounder`) so that an intent and a profile that say the same thing in
//!   different numbers still meet. A term keeps its first spelling for explanations.
//!
//! Text is lowercased like the calculator does (Python's `str.lower()`); terms are ASCII.

use crate::scoring::text::lowercase;
use std::borrow::Cow;
use std::collections::HashSet;

/// Words that carry no matching signal in intents, profiles or turns, compared with whole terms
/// only. Sorted (binary search).
const STOP_WORDS: &[&str] = &[
    "able",
    "about",
    "after",
    "again",
    "also",
    "am",
    "an",
    "and",
    "and/or",
    "any",
    "are",
    "as",
    "at",
    "be",
    "been",
    "being",
    "best",
    "both",
    "brings",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "each",
    "etc",
    "experience",
    "experienced",
    "find",
    "finding",
    "for",
    "from",
    "get",
    "good",
    "great",
    "had",
    "has",
    "have",
    "having",
    "he",
    "he/she",
    "help",
    "her",
    "here",
    "him",
    "his",
    "his/her",
    "how",
    "if",
    "im",
    "in",
    "interested",
    "into",
    "is",
    "it",
    "its",
    "ive",
    "join",
    "joining",
    "just",
    "keen",
    "let",
    "like",
    "looking",
    "lot",
    "make",
    "me",
    "more",
    "most",
    "much",
    "my",
    "need",
    "needs",
    "new",
    "no",
    "not",
    "now",
    "of",
    "on",
    "one",
    "only",
    "or",
    "other",
    "our",
    "out",
    "over",
    "really",
    "s/he",
    "see",
    "seeking",
    "she",
    "should",
    "so",
    "some",
    "someone",
    "something",
    "such",
    "than",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "up",
    "us",
    "very",
    "via",
    "want",
    "wants",
    "was",
    "we",
    "well",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "within",
    "working",
    "would",
    "year",
    "years",
    "yet",
    "you",
    "your",
];

/// Longest term kept, in characters (the calculator's longest keyword).
const MAX_TERM_LEN: usize = 100;

/// Whether `term` (lowercase, whole) is a stop word.
pub fn is_stop_word(term: &str) -> bool {
    STOP_WORDS.binary_search(&term).is_ok()
}

/// Folds simple English plurals: `-ies` -> `-y`, a trailing `s` (not `ss`/`us`/`is`) dropped,
/// for words long enough that the fold is safe.
pub fn fold(token: &str) -> String {
    if token.len() > 4
        && let Some(stem) = token.strip_suffix("ies")
    {
        return format!("{stem}y");
    }
    if token.len() > 3
        && token.ends_with('s')
        && !(token.ends_with("ss") || token.ends_with("us") || token.ends_with("is"))
    {
        return token[..token.len() - 1].to_owned();
    }
    token.to_owned()
}

/// The key a term is compared by: folded, and for a compound its parts joined without their
/// separators (`co-founders` -> `cofounder`, `ci/cd` -> `cicd`).
fn key_of(word: &str, parts: usize) -> String {
    if parts > 1 {
        fold(&word.replace(['-', '/'], ""))
    } else {
        fold(word)
    }
}

/// One content term: the key it is compared by and the first spelling seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// Folded form, separators removed: `startup`, `parttime`.
    pub key: String,
    /// As first written (lowercased): `startups`, `part-time`.
    pub shown: String,
    /// How many parts it was written with: 1 for a word, 2 for `part-time`, 3 for `end-to-end`.
    pub parts: usize,
}

/// A run of letters and digits, possibly joined to more runs by single `-` or `/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Word<'a> {
    text: &'a str,
    parts: usize,
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// The words of already-lowercased text, compounds whole. Anything outside `[a-z0-9]` separates
/// words, except a single `-` or `/` with a letter or digit on both sides.
fn words(lowered: &str) -> impl Iterator<Item = Word<'_>> {
    let bytes = lowered.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() && !is_alnum(bytes[i]) {
            i += 1;
        }
        if i >= bytes.len() {
            return None;
        }
        let start = i;
        let mut parts = 1;
        loop {
            while i < bytes.len() && is_alnum(bytes[i]) {
                i += 1;
            }
            if i + 1 < bytes.len() && matches!(bytes[i], b'-' | b'/') && is_alnum(bytes[i + 1]) {
                parts += 1;
                i += 1;
            } else {
                break;
            }
        }
        Some(Word {
            text: &lowered[start..i],
            parts,
        })
    })
}

/// Whether a word is a content term: long enough, not too long, not a stop word, not a number.
fn is_content(word: &str, parts: usize) -> bool {
    let len_ok = if parts > 1 {
        word.len() <= MAX_TERM_LEN
    } else {
        (2..=MAX_TERM_LEN).contains(&word.len())
    };
    len_ok
        && !is_stop_word(word)
        && !word
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'-' || b == b'/')
}

/// Distinct content terms of `texts`, in first-seen order, compounds whole.
pub fn terms<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<Term> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for text in texts {
        let lowered = lowercase(text);
        for w in words(&lowered) {
            if !is_content(w.text, w.parts) {
                continue;
            }
            let key = key_of(w.text, w.parts);
            if seen.insert(key.clone()) {
                out.push(Term {
                    key,
                    shown: w.text.to_owned(),
                    parts: w.parts,
                });
            }
        }
    }
    out
}

/// What a body of text shows, for deciding which terms it covers.
///
/// It holds the keys of the text's terms (and of the parts of its compounds), in first-seen
/// order for the calculator, plus the lowercased texts themselves, read again only for a
/// compound need that no key covers (to find it written apart, `full time`).
#[derive(Debug, Default)]
pub struct Evidence<'a> {
    keys: HashSet<String>,
    ordered: Vec<String>,
    texts: Vec<Cow<'a, str>>,
}

impl<'a> Evidence<'a> {
    /// Empty evidence.
    pub fn new() -> Self {
        Evidence::default()
    }

    /// Evidence from `texts`.
    pub fn of(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut e = Evidence::new();
        for t in texts {
            e.add(t);
        }
        e
    }

    fn insert(&mut self, key: String) {
        if !self.keys.contains(&key) {
            self.keys.insert(key.clone());
            self.ordered.push(key);
        }
    }

    /// Adds one text.
    pub fn add(&mut self, text: &'a str) {
        let lowered = lowercase(text);
        for w in words(&lowered) {
            if is_content(w.text, w.parts) {
                self.insert(key_of(w.text, w.parts));
            }
            if w.parts > 1 {
                for part in w.text.split(['-', '/']) {
                    if is_content(part, 1) {
                        self.insert(fold(part));
                    }
                }
            }
        }
        self.texts.push(lowered);
    }

    /// Whether `need` appears: its key among the evidence's keys, or, for a compound, its parts
    /// written apart as consecutive words (`full time` for `full-time`).
    pub fn covers(&self, need: &Term) -> bool {
        self.keys.contains(&need.key)
            || (need.parts > 1 && self.texts.iter().any(|t| spelled_apart(t, need)))
    }

    /// The distinct keys, in first-seen order.
    pub fn keys(&self) -> &[String] {
        &self.ordered
    }
}

/// Whether `need.parts` consecutive runs of letters and digits of `lowered` spell the compound
/// `need` once joined (and folded: `co founders` spells `co-founder`).
fn spelled_apart(lowered: &str, need: &Term) -> bool {
    let runs: Vec<&str> = lowered
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|r| !r.is_empty())
        .collect();
    runs.windows(need.parts).any(|w| {
        let len: usize = w.iter().map(|r| r.len()).sum();
        // A cheap length test first: folding removes at most three characters.
        len >= need.key.len() && len <= need.key.len() + 3 && fold(&w.concat()) == need.key
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shown(text: &str) -> Vec<String> {
        terms([text]).into_iter().map(|t| t.shown).collect()
    }

    fn need(text: &str) -> Term {
        let mut t = terms([text]);
        assert_eq!(t.len(), 1, "{text} should be one term: {t:?}");
        t.remove(0)
    }

    #[test]
    fn stop_words_are_sorted_and_unique() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn drops_stop_words_and_numbers_and_folds_plurals() {
        let t = terms([
            "I am looking for a Rust engineer with 8 years of experience",
            "Startups and companies, kubernetes",
        ]);
        let keys: Vec<&str> = t.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(
            keys,
            ["rust", "engineer", "startup", "company", "kubernete"]
        );
        assert_eq!(t[2].shown, "startups");
        assert_eq!(fold("business"), "business");
        assert_eq!(fold("status"), "status");
        assert_eq!(fold("analysis"), "analysis");
        assert_eq!(fold("gas"), "gas");
    }

    #[test]
    fn hyphen_and_slash_compounds_stay_whole() {
        // (text, terms as shown)
        let table: &[(&str, &[&str])] = &[
            (
                "Looking for a part-time designer",
                &["part-time", "designer"],
            ),
            (
                "Full-time role, co-founders welcome",
                &["full-time", "role", "co-founders", "welcome"],
            ),
            (
                "CI/CD pipelines and e-commerce",
                &["ci/cd", "pipelines", "e-commerce"],
            ),
            (
                "end-to-end one-on-one mentoring",
                &["end-to-end", "one-on-one", "mentoring"],
            ),
            // Separators that do not join two letters or digits split as before.
            (
                "rust - go, -fast, slow-, a--b, x//y",
                &["rust", "go", "fast", "slow"],
            ),
            // Stop words go only as whole terms; numbers and number ranges go too.
            (
                "design and/or illustration 24/7 2023-2024",
                &["design", "illustration"],
            ),
            // Non-ASCII letters separate, as in the calculator.
            ("café-owner", &["caf", "owner"]),
        ];
        for (text, want) in table {
            assert_eq!(shown(text), *want, "{text}");
        }
        let t = need("Co-Founders");
        assert_eq!(
            (t.key.as_str(), t.shown.as_str(), t.parts),
            ("cofounder", "co-founders", 2)
        );
        assert_eq!(need("CI/CD").key, "cicd");
    }

    #[test]
    fn a_compound_is_covered_whole_hyphen_free_or_written_apart_but_not_by_one_part() {
        let full_time = need("full-time");
        // (evidence, covers full-time)
        let table = [
            ("I work full-time", true),
            ("I work fulltime", true),
            ("I work full time", true),
            ("I work Full/Time", true),
            ("I work full-time.", true),
            ("I work full hours at a time", false),
            ("I work part-time", false),
            ("full", false),
            ("time", false),
        ];
        for (text, want) in table {
            assert_eq!(Evidence::of([text]).covers(&full_time), want, "{text}");
        }
        assert!(Evidence::of(["co founders wanted"]).covers(&need("co-founder")));
        assert!(Evidence::of(["end to end testing"]).covers(&need("end-to-end")));
        assert!(Evidence::of(["cofounder"]).covers(&need("co-founders")));
        // A compound in the evidence shows its parts, never the other way round.
        assert!(Evidence::of(["rust-based backend/frontend work"]).covers(&need("rust")));
        assert!(Evidence::of(["rust-based backend/frontend work"]).covers(&need("frontend")));
        assert!(!Evidence::of(["I was part of a team"]).covers(&need("part-time")));
        // A plain word is never pieced together from two words.
        assert!(!Evidence::of(["the rapist"]).covers(&need("therapist")));
    }

    #[test]
    fn evidence_keys_keep_first_seen_order() {
        let e = Evidence::of(["Rust and Go", "part-time rust"]);
        assert_eq!(e.keys(), ["rust", "go", "parttime", "part", "time"]);
    }

    /// Small words that are neither stop words nor numbers.
    const VOCAB: &[&str] = &[
        "part", "time", "full", "co", "founder", "ci", "cd", "design", "rust", "data", "ops",
        "end", "sales", "x", "e", "commerce",
    ];

    fn compound() -> impl Strategy<Value = (Vec<&'static str>, Vec<char>)> {
        (2usize..4).prop_flat_map(|n| {
            (
                proptest::collection::vec(proptest::sample::select(VOCAB), n),
                proptest::collection::vec(proptest::sample::select(vec!['-', '/']), n - 1),
            )
        })
    }

    fn join(parts: &[&str], seps: &[char]) -> String {
        let mut s = parts[0].to_owned();
        for (p, sep) in parts[1..].iter().zip(seps) {
            s.push(*sep);
            s.push_str(p);
        }
        s
    }

    proptest! {
        /// Any compound of content words is one term, shown as written, whatever surrounds it;
        /// it is covered by itself, hyphen-free and written apart, and not by its first part.
        #[test]
        fn compounds_are_whole_terms_matched_in_every_spelling(
            (parts, seps) in compound(),
            before in "[0-9 ,.;:()]{0,12}",
            after in "[ ,.;:()][0-9 ,.;:()]{0,12}",
        ) {
            let written = join(&parts, &seps);
            let text = format!("{before} {written}{after}");
            let t = terms([text.as_str()]);
            let found = t.iter().find(|t| t.shown == written);
            prop_assert!(found.is_some(), "{written} not whole in {t:?}");
            let term = found.unwrap();
            prop_assert_eq!(term.parts, parts.len());
            for spelling in [written.clone(), parts.concat(), parts.join(" "), written.to_uppercase()] {
                prop_assert!(Evidence::of([spelling.as_str()]).covers(term), "{} does not cover {}", spelling, written);
            }
            // One part alone is not the compound (unless the parts join to that very word).
            if fold(parts[0]) != term.key {
                prop_assert!(!Evidence::of([parts[0]]).covers(term));
            }
        }

        /// Dropping stop words never splits or shortens a term: every term of a text is a whole
        /// word or compound of it, and no term is a stop word.
        #[test]
        fn terms_are_whole_words_of_the_text(text in "[a-zA-Z0-9 ,./-]{0,60}") {
            let lowered = text.to_lowercase();
            let written: Vec<&str> = words(&lowered).map(|w| w.text).collect();
            for t in terms([text.as_str()]) {
                prop_assert!(written.contains(&t.shown.as_str()), "{} is not a word of {:?}", t.shown, written);
                prop_assert!(!is_stop_word(&t.shown));
            }
        }
    }
}
