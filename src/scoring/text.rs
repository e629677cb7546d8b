//! Text handling shared by the calculator and the negotiator: Python-compatible lowercasing,
//! truncation by characters and Bindu's keyword tokenizer.
//!
//! Bindu lowercases with Python's `str.lower()` (full Unicode), then splits on `[^a-z0-9]+` and
//! keeps tokens of 2 to 100 characters. So `"café"` yields `"caf"`, and the Kelvin sign `K`
//! lowercases to an ASCII `k`. Lengths are counted in code points, as Python does.

use std::borrow::Cow;
use std::collections::HashSet;

/// A set of words: hashed with aHash, keyed per process (fast, and not open to crafted
/// collisions in request text).
pub type WordSet = HashSet<String, ahash::RandomState>;

/// Shortest token kept by the tokenizer.
pub const MIN_KEYWORD_LEN: usize = 2;
/// Longest token kept by the tokenizer (Bindu's `max_keyword_length`).
pub const MAX_KEYWORD_LEN: usize = 100;
/// Characters of summary and of details that take part in keyword extraction.
pub const MAX_TASK_TEXT_LEN: usize = 10_000;

/// Lowercases like Python's `str.lower()`; borrows when the text is already lowercase ASCII.
pub fn lowercase(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        if text.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(text.to_ascii_lowercase())
        } else {
            Cow::Borrowed(text)
        }
    } else {
        Cow::Owned(text.to_lowercase())
    }
}

/// The first `max_chars` characters (code points) of `text`, like Python's `text[:max_chars]`.
pub fn truncate_chars(text: &str, max_chars: usize) -> &str {
    if text.len() <= max_chars {
        return text;
    }
    match text.char_indices().nth(max_chars) {
        Some((byte, _)) => &text[..byte],
        None => text,
    }
}

/// Number of characters (code points), Python's `len(text)`.
pub fn char_len(text: &str) -> usize {
    if text.is_ascii() { text.len() } else { text.chars().count() }
}

/// Splits already-lowercased text on runs of characters outside `[a-z0-9]` and keeps the
/// tokens of 2..=100 characters (tokens are ASCII, so bytes are characters).
pub fn tokenize(lowered: &str) -> impl Iterator<Item = &str> {
    lowered
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|t| (MIN_KEYWORD_LEN..=MAX_KEYWORD_LEN).contains(&t.len()))
}

/// Whitespace as Python's `str.split()` (no argument) understands it.
pub fn is_python_whitespace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `text.split()`: words separated by runs of whitespace, no empty words.
pub fn split_whitespace_py(text: &str) -> impl Iterator<Item = &str> {
    text.split(is_python_whitespace).filter(|w| !w.is_empty())
}

/// The lowercased text Bindu extracts task keywords from: the truncated summary, plus a space
/// and the truncated details when details are non-empty.
pub fn task_text_lowered(summary: &str, details: Option<&str>) -> String {
    let summary = truncate_chars(summary, MAX_TASK_TEXT_LEN);
    match details.filter(|d| !d.is_empty()) {
        Some(d) => {
            let d = truncate_chars(d, MAX_TASK_TEXT_LEN);
            let mut text = String::with_capacity(summary.len() + 1 + d.len());
            text.push_str(summary);
            text.push(' ');
            text.push_str(d);
            lowercase(&text).into_owned()
        }
        None => lowercase(summary).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<&str> {
        tokenize(s).collect()
    }

    #[test]
    fn tokenizer_splits_on_non_alphanumerics_and_filters_lengths() {
        assert_eq!(toks("extract tables, from pdf-invoices!"), ["extract", "tables", "from", "pdf", "invoices"]);
        assert_eq!(toks("a b2 c_d"), ["b2"]); // single characters dropped, `_` separates
        let long = "x".repeat(101);
        let ok = "y".repeat(100);
        let text = format!("{long} {ok}");
        assert_eq!(toks(&text), [ok.as_str()]);
    }

    #[test]
    fn non_ascii_letters_are_separators_after_lowercasing() {
        assert_eq!(toks(&lowercase("Café au lait")), ["caf", "au", "lait"]);
        // KELVIN SIGN lowercases to ASCII 'k' in Python as in Rust.
        assert_eq!(toks(&lowercase("\u{212A}ernel")), ["kernel"]);
        assert_eq!(toks(&lowercase("ÜBER straße")), ["ber", "stra"]);
    }

    #[test]
    fn truncation_counts_code_points() {
        assert_eq!(truncate_chars("héllo", 2), "hé");
        assert_eq!(truncate_chars("abc", 10), "abc");
        assert_eq!(char_len("héllo"), 5);
    }

    #[test]
    fn task_text_joins_details_only_when_non_empty() {
        assert_eq!(task_text_lowered("PDF", Some("Invoices")), "pdf invoices");
        assert_eq!(task_text_lowered("PDF", Some("")), "pdf");
        assert_eq!(task_text_lowered("PDF", None), "pdf");
        let long = "a".repeat(10_005);
        assert_eq!(task_text_lowered(&long, Some(&long)).len(), 20_001);
    }

    #[test]
    fn python_split_uses_unicode_whitespace_and_separators() {
        let words: Vec<&str> = split_whitespace_py("a\u{a0}b\u{1f}c  d\te").collect();
        assert_eq!(words, ["a", "b", "c", "d", "e"]);
    }
}
