//! Letters written to slip past a reader that compares spellings: letters and digits in
//! Unicode's compatibility forms (fullwidth `ｃ`, mathematical bold `𝐫`, the Kelvin sign `K`,
//! circled letters), which NFKC turns into plain ones, and invisible characters (zero-width
//! spaces and joiners, soft hyphens) inside a word. Nobody types either into a profile or a
//! message by accident; [`super::text::fold`] marks a text that has them just as it marks
//! letters of other alphabets that only look Latin. Ligatures (from copied documents),
//! superscripts, fractions and the joiners inside emoji are ordinary typography and are not
//! marked.

use unicode_normalization::UnicodeNormalization;

/// Characters that are dropped outright: invisible joiners and breaks that could split a word.
pub fn is_invisible(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{180E}')
}

/// Whether a character is a letter or digit written in a compatibility form that NFKC turns
/// into a plain one: fullwidth (`ｃ`), mathematical alphanumerics (`𝐫`), letterlike symbols (the
/// Kelvin sign `K`), circled letters. Ligatures (`ﬁ`, from copied documents), superscripts and
/// fractions are ordinary typography, not disguise.
fn is_compatibility_letter(c: char) -> bool {
    let digit_form = matches!(c, '\u{FF10}'..='\u{FF19}' | '\u{1D7CE}'..='\u{1D7FF}');
    if c.is_ascii() || !(c.is_alphabetic() || digit_form) || ('\u{FB00}'..='\u{FB06}').contains(&c) {
        return false;
    }
    let mut plain = std::iter::once(c).nfkc();
    matches!((plain.next(), plain.next()), (Some(p), None) if p != c && p.is_ascii_alphanumeric())
}

/// Whether `raw` hides its words: a letter in a compatibility form, or an invisible character
/// (zero-width space or joiner, soft hyphen) inside a word. People do not type either into a
/// profile or a message; both are ways to slip a word past a reader that compares spellings.
pub fn disguised(raw: &str) -> bool {
    if raw.is_ascii() {
        return false;
    }
    let chars: Vec<char> = raw.chars().collect();
    chars.iter().enumerate().any(|(i, &c)| {
        is_compatibility_letter(c)
            || (is_invisible(c)
                && i > 0
                && chars[i - 1].is_alphanumeric()
                && chars[i + 1..].iter().find(|n| !is_invisible(**n)).is_some_and(|n| n.is_alphanumeric()))
    })
}
