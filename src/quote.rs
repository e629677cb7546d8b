//! Quoting what a client sent back to it, in error messages: a short prefix, never the whole.
//!
//! An error names the field at fault and may show the start of the bad value, so that the
//! sender can find it; it never echoes the value whole. An answer to a bad request is then a
//! few hundred bytes whatever was sent, and a value made of characters that escape long (a
//! combining mark is `\u{300}`, eight bytes for two) cannot make it grow either.
//!
//! [`quote`] is for values the service quotes itself; [`shorten_quoted`] is for messages
//! written by a library (the JSON parser's, the query string's), which quote what they did not
//! understand: each quoted run in them is cut the same way, and the message as a whole to
//! [`MAX_MESSAGE`] characters.
//!
//! The log is held to the same rule: [`logged`] is how text that came from outside (an agent's
//! words, a client's release reason, a model's or a library's message quoting what it was sent)
//! goes into a log line: at most [`MAX_LOGGED`] characters, control characters escaped, so that
//! one line stays a few KB whatever was sent and no value can forge a line of its own.

/// Characters of a value shown in an error.
pub const MAX_QUOTED: usize = 32;
/// Characters of a library's message kept in an error.
pub const MAX_MESSAGE: usize = 600;

/// Characters of a string from outside kept in a log line.
pub const MAX_LOGGED: usize = 500;

/// `text` as a log line carries it: its first [`MAX_LOGGED`] characters, with newlines, tabs and
/// other control characters escaped (`\n`, `\u{1b}`), then, when it was longer, how many
/// characters were left out. Every quoted run in it is cut as [`shorten_quoted`] cuts them first,
/// so that a library's message keeps its end (`expected ... at line 1 column 5012`).
pub fn logged(text: &str) -> String {
    let text = if text.contains(['"', '`']) { shorten_quoted(text) } else { text.to_owned() };
    let mut out = String::with_capacity(text.len().min(MAX_LOGGED + 40));
    let mut chars = text.chars();
    for c in chars.by_ref().take(MAX_LOGGED) {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    let left = chars.count();
    if left > 0 {
        out.push_str(&format!("… ({left} more characters)"));
    }
    out
}

/// `value` in double quotes, at most [`MAX_QUOTED`] of its characters (then `…`), with quotes,
/// backslashes and control characters escaped as JSON escapes them and every other character
/// as it is.
pub fn quote(value: &str) -> String {
    let mut out = String::with_capacity(MAX_QUOTED + 8);
    out.push('"');
    for (i, c) in value.chars().enumerate() {
        if i == MAX_QUOTED {
            out.push('…');
            break;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `message` with every quoted run (between `"` or between backticks) cut to [`MAX_QUOTED`]
/// characters (escapes inside it count as the characters they spell), and the whole cut to
/// [`MAX_MESSAGE`] characters.
pub fn shorten_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_MESSAGE + 8));
    let mut chars = message.chars().peekable();
    let mut written = 0usize;
    let push = |out: &mut String, written: &mut usize, s: &str| {
        *written += s.chars().count();
        out.push_str(s);
    };
    while let Some(c) = chars.next() {
        if written >= MAX_MESSAGE {
            out.push('…');
            return out;
        }
        if c != '"' && c != '`' {
            push(&mut out, &mut written, c.encode_utf8(&mut [0; 4]));
            continue;
        }
        // A quoted run: copy up to MAX_QUOTED of its characters, skip the rest up to its end.
        let close = c;
        push(&mut out, &mut written, c.encode_utf8(&mut [0; 4]));
        let mut kept = 0usize;
        let mut cut = false;
        while let Some(q) = chars.next() {
            if q == close {
                break;
            }
            // An escape (`\"`, `\u{300}`) is kept or cut whole with its first character.
            let mut piece = String::from(q);
            if q == '\\'
                && let Some(next) = chars.next()
            {
                piece.push(next);
                if next == 'u' && chars.peek() == Some(&'{') {
                    for e in chars.by_ref() {
                        piece.push(e);
                        if e == '}' {
                            break;
                        }
                    }
                }
            }
            if kept < MAX_QUOTED {
                push(&mut out, &mut written, &piece);
                kept += 1;
            } else {
                cut = true;
            }
        }
        if cut {
            push(&mut out, &mut written, "…");
        }
        push(&mut out, &mut written, close.encode_utf8(&mut [0; 4]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quote_is_a_short_prefix() {
        assert_eq!(quote("abc"), "\"abc\"");
        assert_eq!(quote("a\"b\\c\n"), r#""a\"b\\c\n""#);
        let long = "x".repeat(10_000);
        let q = quote(&long);
        assert_eq!(q.chars().count(), MAX_QUOTED + 3);
        // Combining marks stay one character each: no escape blows them up.
        let marks = "\u{300}".repeat(25_000);
        assert!(quote(&marks).len() < 80, "{}", quote(&marks).len());
    }

    #[test]
    fn logged_text_is_a_short_prefix_on_one_line() {
        assert_eq!(logged("no reason given"), "no reason given");
        let long = "x".repeat(900_000);
        let cut = logged(&long);
        assert!(cut.starts_with(&"x".repeat(MAX_LOGGED)) && cut.ends_with("(899500 more characters)"), "{cut}");
        assert!(cut.len() < MAX_LOGGED + 40, "{}", cut.len());
        // A value cannot forge a line of its own, nor grow by its escapes past a few KB.
        assert_eq!(logged("a\nINFO forged\r\u{1b}[31m"), "a\\nINFO forged\\r\\u{1b}[31m");
        assert!(logged(&"\u{7}".repeat(100_000)).len() < 4_000);
        // A library's message quoting what it was sent keeps its end.
        let serde = format!("invalid type: string \"{}\", expected a map at line 1 column 300012", "r".repeat(300_000));
        let cut = logged(&serde);
        assert!(cut.ends_with("expected a map at line 1 column 300012"), "{cut}");
        assert!(cut.len() < 200, "{cut}");
    }

    #[test]
    fn quoted_runs_in_a_message_are_cut() {
        let long = "y".repeat(5_000);
        let m = format!("invalid type: string \"{long}\", expected u64 at line 1 column 5012");
        let s = shorten_quoted(&m);
        assert!(s.starts_with("invalid type: string \"yyyy"), "{s}");
        assert!(s.ends_with("\", expected u64 at line 1 column 5012"), "{s}");
        assert!(s.len() < 120, "{s}");
        let escaped = format!("unknown variant `{}`, expected one of `a`, `b`", "\\u{300}".repeat(1000));
        let s = shorten_quoted(&escaped);
        assert!(s.len() < 400 && s.ends_with("expected one of `a`, `b`"), "{s}");
        assert_eq!(shorten_quoted("no quotes here"), "no quotes here");
        assert!(shorten_quoted(&"z".repeat(5_000)).chars().count() <= MAX_MESSAGE + 1);
    }
}
