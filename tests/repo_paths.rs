//! Every path the repository mentions exists in it.
//!
//! Docs, comments and scripts point at files: markdown links (`[text](path)`), backticked paths
//! such as `src/http/error.rs`, `tests/api`, `migrations/`, `jobs/sql/timers.sql`, `.ci/run` or
//! `api-spec/openapi.json`, and top-level markdown files named in capitals, backticked or not
//! (`README.md`, `ARCHITECTURE.md`). A reference to a file that is not here sends a newcomer
//! nowhere, so this test reads every tracked text file and fails with `file:line -> path` for each
//! reference that does not resolve: markdown links relative to the file's directory, everything
//! else relative to the repository root. A glob or placeholder (`tests/api/*.rs`) only needs the
//! directory before it to exist. No database is involved.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
};

/// Prefixes of backticked tokens that name files of this repository.
const PREFIXES: [&str; 10] =
    ["src/", "tests/", "migrations/", "jobs/", ".ci/", "api-spec/", ".cargo/", ".sqlx/", "docs/", "examples/"];

/// Characters that start a glob or a placeholder inside a path.
const WILDCARDS: [char; 8] = ['*', '?', '<', '>', '{', '}', '[', '$'];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether a tracked file is one whose references are checked.
fn scanned(rel: &str) -> bool {
    !(rel == "Cargo.lock" || rel.starts_with(".sqlx/") || rel.ends_with("package-lock.json"))
}

/// The repository's files, relative to its root: `git ls-files` when git is there, otherwise a
/// walk of the tree without build output and installed packages.
fn files() -> Vec<String> {
    let git = Command::new("git").arg("-C").arg(root()).args(["ls-files", "-z"]).output();
    if let Ok(out) = git
        && out.status.success()
        && !out.stdout.is_empty()
    {
        return String::from_utf8_lossy(&out.stdout).split('\0').filter(|s| !s.is_empty()).map(str::to_owned).collect();
    }
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if matches!(name.as_str(), "target" | "node_modules" | ".git" | ".parley") {
                continue;
            }
            let child = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            if entry.path().is_dir() {
                walk(&entry.path(), &child, out);
            } else {
                out.push(child);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root(), "", &mut out);
    out
}

/// Whether `path` (relative to `base`, a directory relative to the root) exists; for a glob or
/// placeholder, whether the directory before it exists.
fn resolves(base: &str, path: &str) -> bool {
    let path = match path.find(WILDCARDS) {
        Some(i) => match path[..i].rfind('/') {
            Some(slash) => &path[..slash],
            None => return true,
        },
        None => path,
    };
    root().join(base).join(path).exists()
}

/// Markdown link targets on a line: `[text](target)`, without URLs and in-page anchors.
fn markdown_links(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        let target = target.split('#').next().unwrap_or("");
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            found.push(target.to_owned());
        }
        rest = &rest[end..];
    }
    found
}

/// Path-like words inside backticks on a line.
fn backticked_paths(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for span in line.split('`').skip(1).step_by(2) {
        for word in span.split(|c: char| c.is_whitespace() || "=(),\"';&|".contains(c)) {
            let word = word.trim_end_matches(['.', ':', ';', ',']);
            // `src/app.rs:42` names a line of a file.
            let word = match word.rsplit_once(':') {
                Some((file, line)) if !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) => file,
                _ => word,
            };
            let is_path = PREFIXES.iter().any(|p| word.starts_with(p)) || (word.ends_with(".md") && word.len() > 3);
            if is_path {
                found.push(word.to_owned());
            }
        }
    }
    found
}

/// Top-level markdown files named in capitals anywhere on a line (`README.md`), backticked or not.
fn capital_markdown_names(line: &str) -> Vec<String> {
    let bytes = line.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(offset) = line[i..].find(".md") {
        let dot = i + offset;
        i = dot + 3;
        if bytes.get(dot + 3).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_') {
            continue;
        }
        let start = line[..dot]
            .rfind(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '-'))
            .map_or(0, |j| j + 1);
        let name = &line[start..dot];
        let before = line[..start].chars().next_back();
        let standalone = before.is_none_or(|c| !(c.is_alphanumeric() || "/._-".contains(c)));
        if standalone && name.starts_with(|c: char| c.is_ascii_uppercase()) {
            found.push(format!("{name}.md"));
        }
    }
    found
}

#[test]
fn every_path_the_repository_mentions_exists() {
    let mut missing = Vec::new();
    let mut checked = 0;
    for rel in files().into_iter().filter(|f| scanned(f)) {
        let Ok(text) = std::fs::read_to_string(root().join(&rel)) else { continue };
        let dir = Path::new(&rel).parent().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let is_markdown = rel.ends_with(".md");
        for (n, line) in text.lines().enumerate() {
            let mut refs: BTreeSet<(String, String)> = BTreeSet::new();
            if is_markdown {
                refs.extend(markdown_links(line).into_iter().map(|t| (dir.clone(), t)));
            }
            refs.extend(backticked_paths(line).into_iter().map(|t| (String::new(), t)));
            refs.extend(capital_markdown_names(line).into_iter().map(|t| (String::new(), t)));
            for (base, target) in refs {
                checked += 1;
                if !resolves(&base, &target) {
                    missing.push(format!("{rel}:{} -> {target}", n + 1));
                }
            }
        }
    }
    assert!(checked > 0, "no path references found at all; is the scan broken?");
    assert!(
        missing.is_empty(),
        "{} reference(s) to paths that do not exist in the repository:\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

#[test]
fn the_scanner_recognises_each_kind_of_reference() {
    assert_eq!(
        markdown_links("see [the spec](api-spec/openapi.json#x) and [site](https://a.b/c)"),
        ["api-spec/openapi.json"]
    );
    assert_eq!(
        backticked_paths("run `bash .ci/run` or read `src/app.rs:12`, `tests/api/*.rs`."),
        [".ci/run", "src/app.rs", "tests/api/*.rs"]
    );
    assert_eq!(backticked_paths("`GET /api-spec/openapi.json` and `store::tasks::lock`"), Vec::<String>::new());
    // Spelled in pieces so that this file does not itself mention a missing file.
    let notes = concat!("NOTES", ".md");
    assert_eq!(
        capital_markdown_names(&format!("as README.md says (and {notes}); not docs/X.md nor readme.md")),
        ["README.md", notes]
    );
    assert!(resolves("", "tests/api/*.rs"));
    assert!(!resolves("", notes));
}
