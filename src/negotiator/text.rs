//! How the negotiator reads a text: one pass from raw Unicode to the content words it compares.
//!
//! - **Folding.** NFKC first (fullwidth letters, the Kelvin sign and ligatures become plain
//!   letters), then accents are dropped (`Inês` reads `ines`), then every letter that still is not
//!   ASCII is replaced by the Latin letter it looks like (the confusables skeleton of Unicode's
//!   security mechanisms: Cyrillic `ѕ` and `Р`, Greek `Ν`, Cherokee `Ꮲ`). A text that needed such
//!   a replacement is marked [`Reading::look_alikes`]: people do not write their own profile in
//!   two alphabets at once, so look-alike letters in a claim are a sign of manipulation, and once
//!   folded they carry exactly the evidence their plain spelling would. Invisible characters
//!   (zero-width spaces and joiners, soft hyphens) are removed, so they cannot split a word.
//!   Letters written in compatibility forms (fullwidth, mathematical bold, the Kelvin sign) and
//!   invisible characters inside a word mark the text just as other alphabets' look-alikes do:
//!   nobody types them by accident, and each exists in a claim only to slip a word past a reader
//!   that compares spellings. Ligatures, superscripts and emoji joiners are ordinary typography.
//! - **Words.** Runs of letters and digits; a single `-` or `/` between two of them joins a
//!   compound, which stays whole (`part-time`, `co-founder`, `ci/cd`). `c++`, `c#` and `.net`
//!   are words of their own. Stop words and numbers are not content; a number of years (`9
//!   years`, `eight years`) of five or more reads as the word `experienced`.
//! - **Stems.** Every word is compared by its English stem (the Snowball stemmer), so `founders`,
//!   `hiring` and `engineering` meet `founder`, `hire` and `engineer`. British spellings in
//!   `-ise`/`-isation` are read as `-ize`/`-ization` first, and a few forms a stemmer cannot
//!   relate (`built`, `grew`, `founding`) are mapped by hand. A compound is compared by the stem
//!   of its parts written together, so `full-time`, `full/time`, `fulltime` and, written apart,
//!   `full time` are one key.
//! - **Negation.** A word inside the scope of a negation (`not`, `never`, `no`, `without`,
//!   `lacks`, `doesn't`, ...; the scope runs to the end of the clause, to a `but`, or to a comma
//!   that starts a new clause) is marked [`Word::negated`]. A compound whose first part is `non`
//!   (`non-technical`) is read as its negated rest, and `pre-revenue`, `pre-product` and
//!   `pre-launch` say that what follows `pre-` is not there yet.
//!
//! The result is plain data: [`read`] is pure and deterministic.

use unicode_normalization::UnicodeNormalization;
use unicode_security::confusable_detection::skeleton;

/// Longest word kept, in characters.
const MAX_WORD_LEN: usize = 100;

/// A text folded to lowercase ASCII letters, digits, spaces and punctuation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folded {
    /// The folded text.
    pub text: String,
    /// Whether a letter had to be replaced by the Latin letter it looks like.
    pub look_alikes: bool,
}

use super::disguise::is_invisible;

/// Folds `raw` (see the module docs). Look-alikes are marked where a word mixes letters that
/// are Latin with letters that only look Latin (a word wholly in another script is just that),
/// and wherever a letter was written in a compatibility form or a word was split by an invisible
/// character ([`super::disguise::disguised`]).
pub fn fold(raw: &str) -> Folded {
    let mut text = String::with_capacity(raw.len());
    let mut look_alikes = super::disguise::disguised(raw);
    // Within the current word: a Latin letter seen, a look-alike letter seen.
    let (mut latin, mut mapped) = (false, false);
    let mut end_word = |latin: &mut bool, mapped: &mut bool| {
        if *latin && *mapped {
            look_alikes = true;
        }
        *latin = false;
        *mapped = false;
    };
    for c in raw.nfkc() {
        if c.is_ascii() {
            if c.is_ascii_alphanumeric() {
                latin |= c.is_ascii_alphabetic();
            } else {
                end_word(&mut latin, &mut mapped);
            }
            text.push(c.to_ascii_lowercase());
            continue;
        }
        if is_invisible(c) {
            continue;
        }
        match c {
            '\u{2010}' | '\u{2011}' => {
                text.push('-');
                continue;
            }
            '\u{2018}' | '\u{2019}' | '\u{02BC}' => {
                text.push('\'');
                continue;
            }
            _ => {}
        }
        // Accented Latin letters: the base letter.
        let base: String = c.to_string().nfkd().filter(char::is_ascii).collect();
        if !base.is_empty() {
            latin = true;
            text.push_str(&base.to_ascii_lowercase());
            continue;
        }
        if c.is_alphabetic() {
            let shape: String = skeleton(&c.to_string()).collect();
            if !shape.is_empty() && shape.chars().all(|s| s.is_ascii_alphanumeric()) {
                mapped = true;
                // The skeleton writes capital-I look-alikes as `l`; in lowercase text they are `i`.
                if c.is_uppercase() && shape == "l" {
                    text.push('i');
                } else {
                    text.push_str(&shape.to_ascii_lowercase());
                }
                continue;
            }
        }
        // Anything else (other scripts, symbols, dashes) separates words.
        end_word(&mut latin, &mut mapped);
        text.push(if c.is_whitespace() { ' ' } else { '\u{1}' });
    }
    end_word(&mut latin, &mut mapped);
    Folded { text, look_alikes }
}

/// One content word of a text.
#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// What it is compared by: its stem; for a compound, the stem of its parts written together.
    pub key: String,
    /// As written (folded).
    pub shown: String,
    /// The stems of a compound's parts (empty for a plain word).
    pub parts: Vec<String>,
    /// Whether the text says it is *not* so.
    pub negated: bool,
    /// Whether the text says it is something to learn or move into (`learn machine learning`,
    /// `switching careers into ML`): wanted, not had.
    pub aspired: bool,
    /// Whether the text says it is all there is of its kind (`ISO 9001 only`, `only cats and
    /// dogs`): what is of the same kind and not said is ruled out.
    pub exclusive: bool,
    /// Its senses in the lexicon, as the words around it decide them (empty until decided by
    /// [`super::senses::annotate`], or when the lexicon does not know the word).
    pub senses: Vec<u32>,
    /// Whether the context chose among several senses (else `senses` is the most frequent one).
    pub decided: bool,
    /// How much the context spoke for the chosen senses.
    pub confidence: u8,
    /// How much the context spoke for each sense the word may have (when it had several), in
    /// tenths.
    pub sense_scores: Vec<(u32, u16)>,
    /// Whether it names the series of a code that follows it (`class` of `Class 1`, `iso` of
    /// `ISO 9001`): the code says what is meant, and the word's senses say nothing.
    pub coded: bool,
}

impl Word {
    /// A word with its key computed from `shown`.
    pub fn new(shown: &str, negated: bool) -> Word {
        let pieces: Vec<&str> = shown.split(['-', '/']).filter(|p| !p.is_empty()).collect();
        if pieces.len() > 1 {
            Word {
                key: stem(&pieces.concat()),
                shown: shown.to_owned(),
                parts: pieces.iter().map(|p| stem(p)).collect(),
                negated,
                ..Word::default()
            }
        } else {
            Word { key: stem(shown), shown: shown.to_owned(), negated, ..Word::default() }
        }
    }
}

/// What a text says, as content words in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// Content words, in order.
    pub words: Vec<Word>,
    /// Whether look-alike letters had to be folded.
    pub look_alikes: bool,
}

/// The stem a word is compared by (see [`crate::lexicon::stem`]).
pub use crate::lexicon::stem;

/// Words that carry no matching signal. Sorted (binary search).
const STOP_WORDS: &[&str] = &[
    "a",
    "able",
    "about",
    "above",
    "across",
    "after",
    "again",
    "all",
    "almost",
    "along",
    "already",
    "also",
    "always",
    "am",
    "among",
    "an",
    "and",
    "and/or",
    "another",
    "any",
    "anyone",
    "anything",
    "are",
    "around",
    "as",
    "ask",
    "asked",
    "at",
    "away",
    "back",
    "based",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "best",
    "better",
    "between",
    "beyond",
    "both",
    "bringing",
    "brings",
    "but",
    "by",
    "call",
    "came",
    "can",
    "come",
    "could",
    "currently",
    "day",
    "days",
    "deeper",
    "did",
    "do",
    "does",
    "doing",
    "done",
    "down",
    "during",
    "each",
    "either",
    "else",
    "enough",
    "especially",
    "etc",
    "even",
    "ever",
    "every",
    "exactly",
    "experience",
    "fact",
    "far",
    "few",
    "find",
    "finding",
    "for",
    "from",
    "further",
    "get",
    "gets",
    "getting",
    "give",
    "given",
    "glad",
    "goes",
    "going",
    "good",
    "got",
    "great",
    "had",
    "happy",
    "has",
    "have",
    "having",
    "he",
    "he/she",
    "hello",
    "helping",
    "her",
    "here",
    "hers",
    "hi",
    "him",
    "himself",
    "his",
    "his/her",
    "how",
    "however",
    "i",
    "id",
    "if",
    "ill",
    "im",
    "in",
    "including",
    "indeed",
    "interested",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "ive",
    "just",
    "keen",
    "keeping",
    "kind",
    "know",
    "last",
    "lets",
    "like",
    "likes",
    "lot",
    "lots",
    "love",
    "loves",
    "made",
    "make",
    "makes",
    "making",
    "many",
    "may",
    "me",
    "might",
    "more",
    "most",
    "moving",
    "much",
    "must",
    "my",
    "myself",
    "need",
    "needing",
    "needs",
    "new",
    "next",
    "nice",
    "now",
    "of",
    "off",
    "often",
    "ok",
    "okay",
    "on",
    "once",
    "one",
    "only",
    "onto",
    "or",
    "other",
    "others",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "per",
    "perhaps",
    "please",
    "put",
    "quite",
    "rather",
    "really",
    "right",
    "running",
    "said",
    "same",
    "say",
    "says",
    "see",
    "seek",
    "seeking",
    "seem",
    "seems",
    "several",
    "shall",
    "she",
    "should",
    "since",
    "so",
    "some",
    "somebody",
    "someone",
    "something",
    "sometimes",
    "soon",
    "starting",
    "still",
    "stopping",
    "such",
    "sure",
    "take",
    "taking",
    "talk",
    "tell",
    "than",
    "thank",
    "thanks",
    "that",
    "thats",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "thing",
    "things",
    "think",
    "this",
    "those",
    "though",
    "through",
    "thus",
    "to",
    "together",
    "too",
    "toward",
    "towards",
    "truly",
    "try",
    "trying",
    "under",
    "until",
    "up",
    "upon",
    "us",
    "use",
    "used",
    "using",
    "very",
    "via",
    "want",
    "wants",
    "was",
    "way",
    "ways",
    "we",
    "well",
    "went",
    "were",
    "what",
    "whatever",
    "when",
    "where",
    "whether",
    "which",
    "while",
    "who",
    "whole",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "within",
    "without",
    "working",
    "would",
    "yes",
    "yet",
    "you",
    "your",
    "yours",
    "yourself",
];

/// Whether `word` (folded, whole) is a stop word.
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// Words that open a negation's scope.
const NEGATORS: &[&str] = &[
    "arent", "cannot", "cant", "couldnt", "didnt", "doesnt", "dont", "hadnt", "hasnt", "havent", "isnt", "lack",
    "lacked", "lacking", "lacks", "neither", "never", "no", "none", "nor", "not", "nothing", "wasnt", "werent",
    "without", "wont", "wouldnt",
];

/// Words after a negator that undo it (`not only`, `no doubt`).
const NOT_A_NEGATION: &[&str] = &["doubt", "just", "matter", "only", "problem", "worries"];

/// Words that open a scope of things wanted rather than had (`learn`, `switching careers into`).
const ASPIRATIONS: &[&str] = &["learn", "learning", "pivoting", "study", "studying", "switching", "transitioning"];

/// Words that end a negation's scope: the clause turns.
const SCOPE_ENDS: &[&str] = &["although", "but", "except", "however", "instead", "still", "though", "whereas", "while"];

/// Words that, right after a comma, start a new clause (and so end a negation's scope).
const CLAUSE_STARTS: &[&str] =
    &["and", "he", "her", "his", "i", "it", "its", "she", "so", "their", "they", "we", "which", "who"];

/// Prefixes of a compound that say its rest is not there.
const NEGATING_PREFIXES: &[&str] = &["non"];

/// `non-` compounds that name a thing of their own (a non-profit is an organisation).
const NOT_NEGATING: &[&str] = &["executive", "fiction", "governmental", "linear", "profit", "profits", "stop"];

/// `pre-` compounds that say their rest is not there yet.
const NOT_YET: &[&str] = &["customer", "customers", "launch", "product", "revenue", "traction"];

/// Words after a number that make it a quantity rather than part of a name.
const QUANTITIES: &[&str] = &[
    "days", "guests", "hours", "members", "minutes", "months", "people", "percent", "staff", "weeks", "year", "years",
    "yrs",
];

/// Number words, for years of experience.
const NUMBER_WORDS: &[(&str, u32)] = &[
    ("a", 1),
    ("an", 1),
    ("eight", 8),
    ("eighteen", 18),
    ("eleven", 11),
    ("fifteen", 15),
    ("five", 5),
    ("four", 4),
    ("fourteen", 14),
    ("nine", 9),
    ("nineteen", 19),
    ("seven", 7),
    ("seventeen", 17),
    ("six", 6),
    ("sixteen", 16),
    ("ten", 10),
    ("thirteen", 13),
    ("thirty", 30),
    ("three", 3),
    ("twelve", 12),
    ("twenty", 20),
    ("two", 2),
    ("one", 1),
];

/// Years from which a number of years reads as `experienced`.
const EXPERIENCED_YEARS: f64 = 5.0;
/// Years up to which a number of years reads as `junior`.
const JUNIOR_YEARS: f64 = 2.0;

/// Whether a word is a number, in digits or in words.
/// (`one` is left out: it is a determiner as often as a number, "one more client".)
pub fn is_number(word: &str) -> bool {
    (!word.is_empty() && word.bytes().all(|b| b.is_ascii_digit() || b == b',' || b == b'.'))
        || (word.len() > 2 && word != "one" && number_value(word).is_some())
}

fn number_value(word: &str) -> Option<f64> {
    let digits = word.replace(',', "");
    if let Ok(n) = digits.parse::<f64>() {
        return Some(n);
    }
    NUMBER_WORDS.iter().find(|(w, _)| *w == word).map(|(_, n)| f64::from(*n))
}

/// A piece of folded text: a word or something that ends a clause or a list item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece<'a> {
    Word(&'a str),
    /// `.`, `;`, `:`, `!`, `?`, brackets, a line break: the clause ends.
    ClauseEnd,
    /// `,`: a clause may end here.
    Comma,
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// The pieces of folded, lowercased text. A single `-` or `/` between letters or digits joins
/// a compound; `'` inside a word is dropped (`doesn't` reads `doesnt`), and a final `'s` too.
fn pieces(text: &str) -> Vec<Piece<'_>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if is_alnum(b) {
            let start = i;
            loop {
                while i < bytes.len() && (is_alnum(bytes[i]) || bytes[i] == b'\'') {
                    i += 1;
                }
                if i + 1 < bytes.len() && matches!(bytes[i], b'-' | b'/') && is_alnum(bytes[i + 1]) {
                    i += 1;
                } else if i + 1 < bytes.len()
                    && matches!(bytes[i], b'.' | b',')
                    && bytes[i - 1].is_ascii_digit()
                    && bytes[i + 1].is_ascii_digit()
                {
                    // `1.5`, `50,000`: one number.
                    i += 1;
                } else {
                    break;
                }
            }
            out.push(Piece::Word(&text[start..i]));
            continue;
        }
        match b {
            b'.' | b';' | b':' | b'!' | b'?' | b'(' | b')' | b'[' | b']' | b'\n' | b'|' | 1
                if out.last() != Some(&Piece::ClauseEnd) =>
            {
                out.push(Piece::ClauseEnd);
            }
            b',' => out.push(Piece::Comma),
            _ => {}
        }
        i += 1;
    }
    out
}

/// A word as written with its apostrophes taken out (`doesn't` -> `doesnt`, `maya's` -> `maya`).
fn without_apostrophes(word: &str) -> std::borrow::Cow<'_, str> {
    if !word.contains('\'') {
        return word.into();
    }
    let word = word.strip_suffix("'s").unwrap_or(word);
    word.replace('\'', "").into()
}

/// Rewrites the names of languages and frameworks that punctuation would break apart.
fn name_tokens(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(['+', '#', '.']) {
        return text.into();
    }
    let mut out = text.replace("c++", " cplusplus ").replace("c#", " csharp ").replace("f#", " fsharp ");
    out = out.replace(".net", " dotnet ");
    for js in ["node", "next", "vue", "nuxt", "express", "three", "d3", "react"] {
        out = out.replace(&format!("{js}.js"), &format!("{js}js"));
    }
    out.into()
}

/// Words that start with a digit and still name something (`3d` printing, `5g`).
const DIGIT_WORDS: &[&str] = &["2d", "3d", "4g", "5g"];

/// Whether a word is content: not a stop word, not a number or an amount (`$1M`, `300k`,
/// `2023-2024`), of a sensible length.
fn is_content(word: &str) -> bool {
    (2..=MAX_WORD_LEN).contains(&word.len())
        && !is_stop_word(word)
        && !NEGATORS.contains(&word)
        && !NUMBER_WORDS.iter().any(|(w, _)| *w == word)
        && (!word.as_bytes()[0].is_ascii_digit() || DIGIT_WORDS.contains(&word))
}

/// Words that, in a description of someone, open a scope of what they are after rather than
/// what they are (`looking for a technical co-founder`, `hiring iOS engineers`).
const SEEKING: &[&str] = &[
    "hiring",
    "looking",
    "need",
    "needs",
    "raising",
    "recruiting",
    "searching",
    "seeking",
    "sourcing",
    "want",
    "wants",
];

/// Reads `raw` (see the module docs).
pub fn read(raw: &str) -> Reading {
    read_as(raw, false)
}

/// Reads a description of someone (a bio): like [`read`], and what follows `looking for`,
/// `hiring`, `need` and the like in a clause is marked [`Word::aspired`] too: it is what they
/// are after, not what they are.
pub fn read_description(raw: &str) -> Reading {
    read_as(raw, true)
}

fn read_as(raw: &str, description: bool) -> Reading {
    let folded = fold(raw);
    let text = name_tokens(&folded.text);
    let pieces = pieces(&text);
    let mut words = Vec::new();
    let mut negating = false;
    let mut negated_since = 0usize;
    let mut aspiring = false;
    // `only X`: the words up to the clause's end are all there is; `X only`: the clause's words
    // so far are.
    let mut exclusive = false;
    let mut clause_start = 0usize;
    let mut i = 0;
    while i < pieces.len() {
        let word = match pieces[i] {
            Piece::ClauseEnd => {
                negating = false;
                aspiring = false;
                exclusive = false;
                clause_start = words.len();
                i += 1;
                continue;
            }
            Piece::Comma => {
                if let Some(Piece::Word(next)) = pieces.get(i + 1)
                    && CLAUSE_STARTS.contains(next)
                {
                    negating = false;
                    aspiring = false;
                    exclusive = false;
                    clause_start = words.len();
                }
                i += 1;
                continue;
            }
            Piece::Word(w) => without_apostrophes(w),
        };
        i += 1;
        let word = word.as_ref();
        if word == "only"
            && !matches!(i.checked_sub(2).and_then(|p| pieces.get(p)), Some(Piece::Word(w)) if NEGATORS.contains(w))
        {
            let ends_clause = !matches!(pieces.get(i), Some(Piece::Word(_)));
            if ends_clause || words.len() > clause_start && !negating {
                for w in &mut words[clause_start..] {
                    let w: &mut Word = w;
                    w.exclusive = !w.negated;
                }
            }
            exclusive = !ends_clause;
            continue;
        }
        if NEGATORS.contains(&word) {
            let undone = matches!(pieces.get(i), Some(Piece::Word(next)) if NOT_A_NEGATION.contains(next));
            if !undone {
                negating = true;
                negated_since = 0;
            }
            continue;
        }
        if SCOPE_ENDS.contains(&word) || (word == "yet" && negated_since > 0) {
            negating = false;
            aspiring = false;
            continue;
        }
        // `learning` opens a scope only as a verb: not in `machine learning`, `learning science`.
        let after_noun =
            words.last().is_some_and(|w: &Word| matches!(w.shown.as_str(), "machine" | "deep" | "e" | "distance"));
        if description && SEEKING.contains(&word) {
            aspiring = true;
            continue;
        }
        if ASPIRATIONS.contains(&word) && !after_noun {
            let next_is_noun = matches!(pieces.get(i), Some(Piece::Word(next)) if matches!(*next, "science" | "sciences" | "platform" | "platforms" | "companies" | "company" | "experience" | "design"));
            if !next_is_noun {
                aspiring = true;
                continue;
            }
        }
        // A number of years: experience.
        if let Some(n) = number_value(word)
            && matches!(pieces.get(i), Some(Piece::Word(next)) if matches!(*next, "years" | "yrs" | "year"))
        {
            if !negating && n >= EXPERIENCED_YEARS {
                words.push(Word::new("experienced", false));
            } else if !negating && n <= JUNIOR_YEARS {
                words.push(Word::new("junior", false));
            }
            i += 1;
            continue;
        }
        // A code after a name (`ISO 13485`, `Windows 11`, `Level 3`) names something of its own.
        if let Some(Piece::Word(next)) = pieces.get(i)
            && next.bytes().all(|b| b.is_ascii_digit())
            && word.bytes().all(|b| b.is_ascii_lowercase())
            && is_content(word)
            && !matches!(pieces.get(i + 1), Some(Piece::Word(unit)) if QUANTITIES.contains(unit))
        {
            if !NEGATORS.contains(&word) {
                let mut w = Word::new(word, negating);
                w.aspired = aspiring && !negating;
                w.exclusive = exclusive && !negating;
                w.coded = true;
                words.push(w);
            }
            let code = Word {
                key: format!("{}{next}", stem(word)),
                shown: format!("{word} {next}"),
                negated: negating,
                aspired: aspiring && !negating,
                exclusive: exclusive && !negating,
                ..Word::default()
            };
            words.push(code);
            i += 1;
            continue;
        }
        let parts: Vec<&str> = word.split(['-', '/']).collect();
        if parts.len() > 1 && NEGATING_PREFIXES.contains(&parts[0]) && !NOT_NEGATING.contains(&parts[1]) {
            let rest = parts[1..].join("-");
            if is_content(&rest) {
                words.push(Word::new(&rest, true));
            }
            continue;
        }
        if parts.len() == 2 && parts[0] == "pre" && NOT_YET.contains(&parts[1]) {
            words.push(Word::new(word, negating));
            words.push(Word::new(parts[1], true));
            continue;
        }
        if is_content(word) {
            if negating {
                negated_since += 1;
            }
            let mut w = Word::new(word, negating);
            w.aspired = aspiring && !negating;
            w.exclusive = exclusive && !negating;
            words.push(w);
        }
    }
    Reading { words, look_alikes: folded.look_alikes }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> Vec<String> {
        read(text).words.into_iter().map(|w| if w.negated { format!("!{}", w.shown) } else { w.shown }).collect()
    }

    fn keys(text: &str) -> Vec<String> {
        read(text).words.into_iter().map(|w| w.key).collect()
    }

    #[test]
    fn stop_words_and_negators_are_sorted() {
        for list in [STOP_WORDS, NEGATORS, NOT_A_NEGATION, SCOPE_ENDS, NOT_YET, ASPIRATIONS, SEEKING] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
        }
    }

    #[test]
    fn look_alike_letters_fold_to_what_they_look_like_and_are_marked() {
        // (raw, folded, look-alikes)
        let table = [
            ("Bob is a ѕenior Руthon data ѕcientiѕt", "bob is a senior python data scientist", true),
            ("Іndex Νetwork", "index network", true),
            ("Ꮲarley", "parley", true),
            ("Ｐｙｔｈｏｎ developer", "python developer", true),
            ("the Kelvin sign: \u{212A}elvin", "the kelvin sign: kelvin", true),
            ("𝐫𝐞𝐠𝐢𝐬𝐭𝐞𝐫𝐞𝐝 nurse", "registered nurse", true),
            ("Inês Costa, café, Hélène", "ines costa, cafe, helene", false),
            ("Py\u{200B}thon", "python", true),
            ("physio\u{00AD}therapist", "physiotherapist", true),
            ("eﬃcient, m², ½ day, caf\u{0065}\u{0301}", "efficient, m2, 1\u{1}2 day, cafe", false),
            (
                "family 👨\u{200D}👩\u{200D}👧 and a zero-width space at the end\u{200B}",
                "family \u{1}\u{1}\u{1} and a zero-width space at the end",
                false,
            ),
            ("doesn’t", "doesn't", false),
        ];
        for (raw, want, marked) in table {
            let f = fold(raw);
            assert_eq!(f.text, want, "{raw}");
            assert_eq!(f.look_alikes, marked, "{raw}");
        }
        // A name wholly in another script is not a look-alike.
        assert!(!fold("Олег Иванов").look_alikes);
    }

    #[test]
    fn inflections_meet_through_stems_and_spellings() {
        let same = [
            ("founders", "founder"),
            ("hiring", "hire"),
            ("engineering", "engineers"),
            ("built", "build"),
            ("optimisation", "optimization"),
            ("organised", "organized"),
            ("full-time", "fulltime"),
            ("co-founders", "cofounder"),
            ("startups", "startup"),
            ("routing", "route"),
        ];
        for (a, b) in same {
            assert_eq!(keys(a), keys(b), "{a} / {b}");
        }
        assert_ne!(keys("part"), keys("part-time"));
        assert_eq!(keys("C++ and C# on .NET with Node.js"), ["cplusplus", "csharp", "dotnet", "nodej"]);
    }

    #[test]
    fn negation_marks_its_clause_only() {
        // (text, words, `!` marking the negated ones)
        let table: &[(&str, &[&str])] = &[
            (
                "Owen is not a machine learning engineer yet and has never built a recommender system in production, but he learns fast",
                &[
                    "owen",
                    "!machine",
                    "!learning",
                    "!engineer",
                    "!built",
                    "!recommender",
                    "!system",
                    "!production",
                    "learns",
                    "fast",
                ],
            ),
            (
                "Claire is an experienced sales lead, but she doesn't speak Spanish and has no interest in working on an expansion into Mexico; she would enjoy a chat",
                &[
                    "claire",
                    "experienced",
                    "sales",
                    "lead",
                    "!speak",
                    "!spanish",
                    "!interest",
                    "!expansion",
                    "!mexico",
                    "enjoy",
                    "chat",
                ],
            ),
            ("Non-technical founder, ex-banker", &["!technical", "founder", "ex-banker"]),
            ("pre-revenue, in pilots", &["pre-revenue", "!revenue", "pilots"]),
            ("not only a designer but a developer", &["designer", "developer"]),
            ("He lacks Rust, she has Go", &["!rust", "go"]),
            ("No product or customers yet", &["!product", "!customers"]),
        ];
        for (text, want) in table {
            assert_eq!(shown(text), *want, "{text}");
        }
    }

    #[test]
    fn things_to_learn_are_wanted_not_had() {
        let r =
            read("Find a first role where I can learn machine learning; frontend engineer switching careers into ML");
        let aspired: Vec<&str> = r.words.iter().filter(|w| w.aspired).map(|w| w.shown.as_str()).collect();
        assert_eq!(aspired, ["machine", "learning", "careers", "ml"]);
        let r = read("Machine learning engineer, deep learning, learning science");
        assert!(r.words.iter().all(|w| !w.aspired));
    }

    #[test]
    fn a_description_keeps_what_someone_is_apart_from_what_they_are_after() {
        let r = read_description("Non-technical founder of a remittance startup, searching for a technical co-founder");
        let had: Vec<&str> = r.words.iter().filter(|w| !w.aspired && !w.negated).map(|w| w.shown.as_str()).collect();
        assert_eq!(had, ["founder", "remittance", "startup"]);
        assert!(read("searching for a technical co-founder").words.iter().all(|w| !w.aspired));
    }

    #[test]
    fn years_of_experience_read_as_experienced() {
        assert_eq!(shown("Senior engineer, 9 years"), ["senior", "engineer", "experienced"]);
        assert_eq!(shown("eight years of Rust"), ["experienced", "rust"]);
        assert_eq!(shown("3 years at a bank"), ["bank"]);
        assert_eq!(shown("Data analyst, 1.5 years"), ["data", "analyst", "junior"]);
        assert_eq!(shown("50,000 units"), ["units"]);
        assert_eq!(shown("never 10 years anywhere"), ["!anywhere"]);
    }

    #[test]
    fn compounds_stay_whole_and_keep_their_parts() {
        let w = &read("a part-time CI/CD role").words;
        assert_eq!(w[0].shown, "part-time");
        assert_eq!(w[0].parts, ["part", "time"]);
        assert_eq!(w[1].key, stem("cicd"));
        assert_eq!(shown("rust - go, -fast, slow-, a--b"), ["rust", "go", "fast", "slow"]);
    }
}
