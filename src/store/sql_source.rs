//! Reading the SQL functions' source for the tests that pin their words to the Rust types: the
//! outcome words each function answers, the states it writes, and the lists of states it tests
//! for. Deliberately small: the functions write their words as plain literals (`x := 'word'`,
//! `CASE ... THEN 'word'`, `IN ('a', 'b')`), and these read exactly those shapes.

use std::collections::BTreeSet;

/// The source of `migrations/functions/{name}.sql`, its `--` comments removed.
pub(crate) fn function_source(name: &str) -> String {
    let path = format!("{}/migrations/functions/{name}.sql", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    without_comments(&text)
}

/// `text` without its `--` comments.
pub(crate) fn without_comments(text: &str) -> String {
    text.lines().map(|line| line.split("--").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// The quoted literal that starts at the beginning of `rest` (after blanks), if one does.
fn literal(rest: &str) -> Option<String> {
    let rest = rest.trim_start().strip_prefix('\'')?;
    rest.find('\'').map(|end| rest[..end].to_owned())
}

/// Whether a word starts at `text[at..]` (so that `status` does not match `delegation_status`;
/// a qualified `t.status` does match).
fn starts_word(text: &str, at: usize) -> bool {
    text[..at].chars().next_back().is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
}

/// Every literal that directly follows `prefix` where `prefix` starts a word (`state =`
/// finds `state = 'claimed'` and `t.state = 'claimed'`).
pub(crate) fn words_after(text: &str, prefix: &str) -> BTreeSet<String> {
    text.match_indices(prefix)
        .filter(|(at, _)| starts_word(text, *at))
        .filter_map(|(at, _)| literal(&text[at + prefix.len()..]))
        .collect()
}

/// Every literal assigned to the variable `var` (`var := 'word'`).
pub(crate) fn assigned_words(text: &str, var: &str) -> BTreeSet<String> {
    words_after(text, &format!("{var} :="))
}

/// The SQL name of a unit variant as `sqlx::Type` writes it with `rename_all = "snake_case"`.
pub(crate) fn snake_name(variant: impl std::fmt::Debug) -> String {
    let mut out = String::new();
    for (i, c) in format!("{variant:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The literals a `CASE` answers (after `THEN` and `ELSE`), in the first `CASE` that follows
/// `start`, up to its `END`.
pub(crate) fn case_words(text: &str, start: &str) -> BTreeSet<String> {
    let from = text.find(start).unwrap_or_else(|| panic!("no {start:?} in the source"));
    let case = &text[from..];
    let case = &case[..case.find("END").unwrap_or(case.len())];
    ["THEN", "ELSE"]
        .iter()
        .flat_map(|kw| case.match_indices(kw).filter_map(|(at, _)| literal(&case[at + kw.len()..])))
        .collect()
}

/// Every `IN (...)` list made only of literals, each as a set.
pub(crate) fn in_lists(text: &str) -> Vec<BTreeSet<String>> {
    text.match_indices("IN (")
        .filter(|(at, _)| starts_word(text, *at))
        .filter_map(|(at, _)| {
            let inner = &text[at + 4..];
            let inner = &inner[..inner.find(')')?];
            inner.split(',').map(literal).collect::<Option<BTreeSet<String>>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(words: &[&str]) -> BTreeSet<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn the_readers_find_the_literal_shapes_and_nothing_else() {
        let sql = "v_status := 'a'; status := 'b'; status :=  'c' -- status := 'd'\n\
                   x := CASE WHEN s <> 'e' THEN 'f' WHEN t THEN 'g' ELSE 'h' END; y := 'i';\n\
                   WHERE s IN ('j', 'k') AND n IN (SELECT 1) AND TG_OP IN ('l')";
        let sql = without_comments(sql);
        assert_eq!(assigned_words(&sql, "status"), set(&["b", "c"]));
        assert_eq!(words_after("t.state = 'x' AND v_state = 'y' AND state <> 'z'", "state ="), set(&["x"]));
        assert_eq!(snake_name(crate::domain::TaskState::WaitingForAgent), "waiting_for_agent");
        assert_eq!(case_words(&sql, "x := CASE"), set(&["f", "g", "h"]));
        assert_eq!(in_lists(&sql), vec![set(&["j", "k"]), set(&["l"])]);
    }
}
