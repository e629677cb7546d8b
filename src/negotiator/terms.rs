//! Content terms: the scoring tokenizer minus stop words, with a light plural folding.
//!
//! The negotiator compares what its user asks for with what the other side shows. Bindu's
//! tokenizer alone would count "looking", "for" and "with" as terms, so they are dropped here;
//! plurals are folded (`startups` -> `startup`, `companies` -> `company`) so that an intent and a
//! profile that say the same thing in different numbers still meet. Terms keep the first
//! spelling seen, for explanations.

use crate::scoring::text::{lowercase, tokenize};
use std::collections::HashSet;

/// Words that carry no matching signal in intents, profiles or turns. Sorted (binary search).
const STOP_WORDS: &[&str] = &[
    "able",
    "about",
    "after",
    "again",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "been",
    "being",
    "best",
    "both",
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
    "help",
    "her",
    "here",
    "him",
    "his",
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
    "would",
    "year",
    "years",
    "yet",
    "you",
    "your",
];

/// Whether `token` (lowercase) is a stop word.
pub fn is_stop_word(token: &str) -> bool {
    STOP_WORDS.binary_search(&token).is_ok()
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

/// One content term: its folded form (what is compared) and the first spelling seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// Folded form, e.g. `startup`.
    pub key: String,
    /// As first written (lowercased), e.g. `startups`.
    pub shown: String,
}

/// Distinct content terms of `texts`, in first-seen order.
pub fn terms<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<Term> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for text in texts {
        let lowered = lowercase(text);
        for tok in tokenize(&lowered) {
            if is_stop_word(tok) || tok.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let key = fold(tok);
            if seen.insert(key.clone()) {
                out.push(Term {
                    key,
                    shown: tok.to_owned(),
                });
            }
        }
    }
    out
}

/// The folded keys of the content terms of `texts`.
pub fn term_keys<'a>(texts: impl IntoIterator<Item = &'a str>) -> HashSet<String> {
    terms(texts).into_iter().map(|t| t.key).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
