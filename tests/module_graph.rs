//! The code's shape: no Rust file is longer than 1 000 lines, no two modules import each other,
//! directly or around a longer loop, and each top-level module imports only the top-level modules
//! below it that [`ALLOWED`] lists.
//!
//! A circle of imports between files means none of them can be read, moved or tested without the
//! others; the fix is to move the shared item to the lower module or to merge what belongs
//! together. This test reads every `.rs` file of the service's library (`src/`, without the
//! binaries under `src/bin/`, which are crates of their own) and of the jobs crate (`jobs/src/`),
//! takes every `crate::`, `super::` and `self::` path in it (in `use` trees and inline), resolves
//! each to the deepest module file it names, and fails naming every circle it finds. The
//! benchmark binary (`src/bin/parley-bench/`) is read the same way, as the crate it is.
//! `#[cfg(test)]` modules are left out: a test may use anything. No database is involved.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// The longest a Rust file may be.
const MAX_LINES: usize = 1_000;

/// A module, as its path from the crate root (`["http", "a2a"]`; the root is `[]`).
type Module = Vec<String>;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file below `dir`, with its module path; `skip` names top-level folders to leave out.
fn modules(dir: &Path, skip: &[&str]) -> BTreeMap<Module, PathBuf> {
    fn walk(dir: &Path, rel: &[String], skip: &[&str], out: &mut BTreeMap<Module, PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).expect("readable folder").flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() {
                if !(rel.is_empty() && skip.contains(&name.as_str())) {
                    walk(&entry.path(), &[rel, &[name]].concat(), skip, out);
                }
            } else if let Some(stem) = name.strip_suffix(".rs") {
                let module = match stem {
                    "mod" | "lib" | "main" => rel.to_vec(),
                    _ => [rel, &[stem.to_owned()]].concat(),
                };
                out.insert(module, entry.path());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &[], skip, &mut out);
    out
}

/// The file's code as the crate builds it outside tests: line comments dropped, and everything
/// from the first `#[cfg(test)]` on left out (test modules come last in every file here).
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// The paths a `use` tree names, braces expanded: `a::{b, c::{d, e}}` gives `a::b`, `a::c::d`
/// and `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else { return vec![tree] };
    let (prefix, inner) = (&tree[..open], &tree[open + 1..tree.len().saturating_sub(1)]);
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).flat_map(|p| expand(&format!("{prefix}{p}"))).collect()
}

/// The paths a file names: every `use` tree, and every inline path that starts with `crate::`
/// or `super::`.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for statement in code.split(';') {
        let statement = statement.trim_start();
        let statement = statement.strip_prefix("pub ").or(statement.strip_prefix("pub(crate) ")).unwrap_or(statement);
        if let Some(tree) = statement.strip_prefix("use ") {
            out.extend(expand(tree));
        }
    }
    let bytes = code.as_bytes();
    for start in ["crate::", "super::"].iter().flat_map(|p| code.match_indices(p).map(|(i, _)| i)) {
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        let end = code[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .map_or(code.len(), |n| start + n);
        out.push(code[start..end].to_owned());
    }
    out
}

/// The module file a path in `from` names: the deepest module along it, if it leaves `from`
/// for another file (a path into `from` itself or one of its ancestors is not an import).
fn resolve(from: &Module, path: &str, known: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    let mut segments = path.split("::").filter(|s| !s.is_empty()).peekable();
    let mut at: Module = match *segments.peek()? {
        "crate" => Vec::new(),
        "self" => from.clone(),
        "super" => from.clone(),
        _ => return None,
    };
    if segments.peek() == Some(&"crate") || segments.peek() == Some(&"self") {
        segments.next();
    }
    while segments.peek() == Some(&"super") {
        segments.next();
        at.pop();
    }
    let mut deepest = known.contains_key(&at).then(|| at.clone());
    for segment in segments {
        at.push(segment.to_owned());
        if !known.contains_key(&at) {
            break;
        }
        deepest = Some(at.clone());
    }
    deepest.filter(|to| to != from && !from.starts_with(to))
}

/// Which module imports which.
fn graph(dir: &Path, skip: &[&str]) -> BTreeMap<Module, BTreeSet<Module>> {
    let known = modules(dir, skip);
    known
        .iter()
        .map(|(module, file)| {
            let text = std::fs::read_to_string(file).expect("readable source");
            let to = paths(&code(&text)).iter().filter_map(|p| resolve(module, p, &known)).collect();
            (module.clone(), to)
        })
        .collect()
}

/// The strongly connected components of more than one module (Tarjan's algorithm): the circles.
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'g Module, usize>,
        low: BTreeMap<&'g Module, usize>,
        stack: Vec<&'g Module>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g Module) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in &self.graph[v] {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    self.low.insert(v, self.low[v].min(self.low[w]));
                } else if self.stack.contains(&w) {
                    self.low.insert(v, self.low[v].min(self.index[w]));
                }
            }
            if self.low[v] == self.index[v] {
                let at = self.stack.iter().rposition(|m| *m == v).expect("on the stack");
                let component: Vec<String> = self.stack.drain(at..).map(|m| m.join("::")).collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn no_module_imports_itself_around_a_circle() {
    let crates = [
        (root().join("src"), &["bin"][..]),
        (root().join("jobs/src"), &[][..]),
        (root().join("src/bin/parley-bench"), &[][..]),
    ];
    for (dir, skip) in crates {
        let graph = graph(&dir, skip);
        // The reading works: the delivery engine's claims are stored through `store::tasks`.
        if dir.ends_with("src") && !dir.ends_with("jobs/src") {
            let claims = graph.get(&vec!["delivery".to_owned(), "claims".to_owned()]).expect("src/delivery/claims.rs");
            assert!(claims.contains(&vec!["store".to_owned(), "tasks".to_owned()]), "{claims:?}");
        }
        assert_eq!(circles(&graph), Vec::<Vec<String>>::new(), "import circles under {}", dir.display());
    }
}

#[test]
fn a_circle_is_found_however_long() {
    let module = |name: &str| vec![name.to_owned()];
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")] {
        graph.entry(module(from)).or_default().insert(module(to));
        graph.entry(module(to)).or_default();
    }
    let mut found = circles(&graph);
    found.iter_mut().for_each(|c| c.sort());
    assert_eq!(found, vec![vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]]);
    assert_eq!(
        expand("crate::{store::{tasks, messages}, domain::Task}"),
        ["crate::store::tasks", "crate::store::messages", "crate::domain::Task"]
    );
}

#[test]
fn no_rust_file_is_longer_than_the_limit() {
    let mut long = Vec::new();
    for dir in ["src", "jobs/src", "tests"] {
        for file in modules(&root().join(dir), &[]).into_values() {
            let lines = std::fs::read_to_string(&file).expect("readable source").lines().count();
            if lines > MAX_LINES {
                long.push(format!("{} ({lines} lines)", file.display()));
            }
        }
    }
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:?}");
}

/// The top-level modules of the service's library, lowest layers first, and the only other
/// top-level modules each may import. An import not listed fails [`layers_import_only_downwards`],
/// and so does a top-level module missing from the table (a new one is placed here on purpose).
/// The table itself must have no circle: it reads as layers.
///
/// - The leaves import nothing: the configuration, error codes, quoting, the failure limiter,
///   the reader of outbound answers, the database's creation; the model client and the A2A client
///   (the outbound guard and AgentCards, which the SQL uses for the stored card's types) import
///   only that reader.
/// - The domain (states, transition tables, outcomes) imports nothing: it is handed the values
///   it needs; the pure deciders (`negotiator`, `scoring`) know nothing of storage, the services or the wire.
/// - The SQL (`store`) knows only the domain.
/// - `runtime` is what the two services share (wake-ups, the seen-throttle, agent keys, the
///   token key), below both; `live` carries its wake-ups and the event log across processes.
/// - The two services know nothing of each other and nothing of the wire (`http`, `mcp`) or of
///   how the process is assembled (`services`, `app`, `cli`): the turn engine (`delivery`) does
///   not import the directory, and the directory (with its delegations) does not import the
///   engine. `services` builds both over one runtime and routes the timers to them.
/// - `wire` is what both adapters render (bodies, views, error answers, the A2A shapes), beneath
///   both and importing neither; the HTTP adapter builds on the services and `wire`, and never
///   reaches into the MCP adapter.
/// - `auth` tells who is calling, for both adapters: above the services (it looks keys up and
///   marks agents seen), beneath the adapters, importing neither.
/// - `parley agent` (`agent`) is a client: it shares the wire's types, the key's prefix and the
///   schema checker, never the service's storage, runtime or engine.
const ALLOWED: &[(&str, &[&str])] = &[
    ("config", &[]),
    ("db", &[]),
    ("error_code", &[]),
    ("failure_limiter", &[]),
    ("quote", &[]),
    // The one reader of answers from servers Parley calls, within a size limit.
    ("bounded_body", &[]),
    ("llm", &["bounded_body"]),
    // Parley as an A2A client: the outbound guard (SSRF rule) and AgentCards; knows no storage.
    ("a2a_client", &["bounded_body"]),
    ("telemetry", &["config"]),
    ("domain", &[]),
    // English words and their senses (WordNet, read once): below the negotiator, knows nothing else.
    ("lexicon", &[]),
    ("negotiator", &["config", "domain", "lexicon"]),
    ("scoring", &["config", "error_code"]),
    ("embeddings", &["bounded_body", "config", "quote", "scoring"]),
    ("metrics", &["config", "domain"]),
    ("store", &["a2a_client", "config", "domain"]),
    ("runtime", &["config", "domain", "store"]),
    ("live", &["config", "domain", "runtime", "store"]),
    (
        "delivery",
        &["config", "domain", "error_code", "llm", "metrics", "negotiator", "quote", "runtime", "scoring", "store"],
    ),
    (
        "directory",
        &["config", "domain", "error_code", "failure_limiter", "metrics", "quote", "runtime", "scoring", "store"],
    ),
    // Parley calling agents that never poll: the push jobs' steps, over both services.
    (
        "a2a_push",
        &["a2a_client", "config", "delivery", "directory", "domain", "metrics", "quote", "runtime", "store", "wire"],
    ),
    // The outbox: the deliveries of events to webhooks and A2A push notification configurations.
    ("outbox", &["a2a_client", "config", "directory", "metrics", "quote", "store", "wire"]),
    (
        "services",
        &["a2a_push", "config", "delivery", "directory", "domain", "negotiator", "outbox", "runtime", "store"],
    ),
    // Who is calling, for every adapter: one policy per kind of route and one `authenticate()`.
    ("auth", &["config", "delivery", "error_code", "runtime", "store"]),
    // What both adapters render (bodies, views, error answers, the A2A shapes), beneath both.
    (
        "wire",
        &[
            "auth",
            "config",
            "delivery",
            "directory",
            "domain",
            "error_code",
            "metrics",
            "quote",
            "runtime",
            "scoring",
            "store",
        ],
    ),
    (
        "http",
        &[
            "a2a_client",
            "auth",
            "config",
            "delivery",
            "directory",
            "domain",
            "embeddings",
            "error_code",
            "failure_limiter",
            "live",
            "metrics",
            "outbox",
            "quote",
            "runtime",
            "scoring",
            "store",
            "wire",
        ],
    ),
    ("mcp", &["auth", "config", "delivery", "directory", "domain", "error_code", "quote", "runtime", "store", "wire"]),
    // The A2A endpoint: a third adapter over the same services, beside HTTP and MCP; it
    // forwards routed messages to agents with the A2A client's calls.
    (
        "a2a",
        &[
            "a2a_client",
            "auth",
            "config",
            "delivery",
            "directory",
            "error_code",
            "live",
            "metrics",
            "outbox",
            "quote",
            "runtime",
            "store",
            "wire",
        ],
    ),
    ("openapi", &["a2a", "http"]),
    ("agent", &["auth", "config", "directory", "domain", "error_code", "http", "llm", "quote", "scoring"]),
    (
        "app",
        &[
            "a2a",
            "auth",
            "config",
            "db",
            "delivery",
            "directory",
            "embeddings",
            "http",
            "lexicon",
            "live",
            "mcp",
            "metrics",
            "negotiator",
            "openapi",
            "runtime",
            "scoring",
            "services",
            "store",
            "telemetry",
            "wire",
        ],
    ),
    ("cli", &["agent", "app", "auth", "config", "db", "http", "openapi", "scoring", "services", "store", "telemetry"]),
];

/// Which top-level module imports which (the root, `lib.rs`, left out).
fn layers(graph: &BTreeMap<Module, BTreeSet<Module>>) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in graph {
        let Some(a) = from.first() else { continue };
        let imports = out.entry(a.clone()).or_default();
        imports.extend(to.iter().filter_map(|t| t.first()).filter(|b| *b != a).cloned());
    }
    out
}

#[test]
fn layers_import_only_downwards() {
    let graph = graph(&root().join("src"), &["bin"]);
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    assert_eq!(allowed.len(), ALLOWED.len(), "a module listed twice in ALLOWED");
    let mut unplaced = Vec::new();
    let mut crossed = Vec::new();
    for (layer, imports) in layers(&graph) {
        let Some(may) = allowed.get(layer.as_str()) else {
            unplaced.push(layer);
            continue;
        };
        for b in imports.iter().filter(|b| !may.contains(&b.as_str())) {
            // Name the files, so that the import to move is found at once.
            for (from, to) in graph.iter().filter(|(from, _)| from.first() == Some(&layer)) {
                for target in to.iter().filter(|t| t.first() == Some(b)) {
                    crossed.push(format!("{} -> {}", from.join("::"), target.join("::")));
                }
            }
        }
    }
    assert_eq!(unplaced, Vec::<String>::new(), "top-level modules missing from ALLOWED");
    assert_eq!(crossed, Vec::<String>::new(), "imports across the layers");

    // The table names only modules that exist, and reads as layers: no circle in it.
    let modules: BTreeSet<String> = graph.keys().filter_map(|m| m.first().cloned()).collect();
    let mut table: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (layer, may) in ALLOWED {
        assert!(modules.contains(*layer), "ALLOWED names {layer}, which is no module of src/");
        for b in *may {
            assert!(allowed.contains_key(b), "ALLOWED lets {layer} import {b}, which it does not place");
            table.entry(vec![b.to_string()]).or_default();
        }
        table.entry(vec![layer.to_string()]).or_default().extend(may.iter().map(|b| vec![b.to_string()]));
    }
    assert_eq!(circles(&table), Vec::<Vec<String>>::new(), "circles in ALLOWED");
}

/// The library is crate-private by default, so that the compiler reports what nothing uses:
/// `src/lib.rs` declares its file modules private, and its public items are only `pub use` lines
/// and inline facade modules (`pub mod x { pub use ...; }`), each with a doc comment saying who
/// needs it. The facade is what the binaries and the integration tests use; anything else they
/// need is added to it on purpose, with its reason.
#[test]
fn the_library_is_private_but_for_its_facade() {
    let text = std::fs::read_to_string(root().join("src/lib.rs")).expect("readable src/lib.rs");
    let lines: Vec<&str> = text.lines().collect();
    let mut wrong = Vec::new();
    let (mut depth, mut in_use) = (0usize, false);
    for (i, raw) in lines.iter().enumerate() {
        let line = raw.split("//").next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let at = format!("src/lib.rs:{}: {}", i + 1, raw.trim());
        let facade = line.starts_with("pub mod ") && line.ends_with('{');
        let documented = lines[..i].last().is_some_and(|l| l.trim_start().starts_with("///"));
        if in_use || line.starts_with("pub use ") {
            in_use = !line.ends_with(';');
        } else if facade && !documented {
            wrong.push(format!("{at} (a facade module without a doc comment saying who needs it)"));
        } else if depth == 0 && line.starts_with("pub mod ") && !facade {
            wrong.push(format!("{at} (a public file module: make it private and re-export what it needs)"));
        } else if depth == 0 && line.starts_with("pub ") && !facade {
            wrong.push(format!("{at} (a public item that is not a re-export)"));
        } else if depth > 0 && !facade && line != "}" {
            wrong.push(format!("{at} (a facade module holds only `pub use` lines)"));
        }
        depth = (depth + line.matches('{').count()).saturating_sub(line.matches('}').count());
    }
    assert_eq!(wrong, Vec::<String>::new(), "the library's public surface");
}

/// Where each marker of a negotiation's ending occurs in the library outside the domain and the
/// store that define it: (file, marker).
fn endings(markers: &[&str]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for file in modules(&root().join("src"), &["bin", "domain"]).into_values() {
        let rel = file.strip_prefix(root()).unwrap().display().to_string();
        if rel == "src/store/messages.rs" {
            continue;
        }
        let text = code(&std::fs::read_to_string(&file).expect("readable source"));
        for marker in markers {
            if text.contains(marker) {
                found.push((rel.clone(), (*marker).to_owned()));
            }
        }
    }
    found
}

/// A negotiation ends in one place: only `delivery::finalize` writes the outcome artifact and
/// moves a task by the ending events of the transition table (`Finish`, `Cancel`); every other
/// ending (respond, timers, system turns, cancel) calls it.
#[test]
fn a_negotiation_ends_only_in_finalize() {
    let markers = ["insert_outcome(", "TaskEvent::Finish", "TaskEvent::Cancel"];
    let found = endings(&markers);
    let finalize = "src/delivery/finalize.rs";
    let elsewhere: Vec<_> = found.iter().filter(|(file, _)| file != finalize).collect();
    assert!(elsewhere.is_empty(), "a negotiation ended outside {finalize}: {elsewhere:?}");
    for marker in markers {
        assert!(found.iter().any(|(_, m)| m == marker), "{finalize} no longer holds {marker}: the test reads nothing");
    }
}
