//! A dated migration never holds `parley serve` up in proportion to the history it finds.
//!
//! `parley serve` runs the migrations before it answers, each in one transaction holding its
//! tables' locks. A statement that rewrites existing rows (`UPDATE`, `DELETE`, `INSERT ...
//! SELECT`) or validates a new check over them (`ADD CONSTRAINT ... CHECK` without `NOT VALID`)
//! takes time in proportion to the history: on a year of it, minutes before the first request.
//! Such work belongs in an online backfill that runs after start, in batches, each its own
//! transaction (as the insights rollups do: `insight_backfill` holds their cursors and
//! `src/store/insight_rollups.rs` walks them), and a check is added `NOT VALID` and, when it
//! must be, validated the same way (`VALIDATE CONSTRAINT` takes no lock that stops writes).
//!
//! This test reads every dated up migration and fails on such a statement, naming the file and
//! the statement. The migrations older than the rule are listed below with what they do: they
//! were applied as they are wherever they could have met a history, and a migration's text
//! cannot change once applied (its checksum is recorded). Function bodies (`$$ ... $$`),
//! comments and string literals are not statements of the migration and are not read. No
//! database is involved.

use std::path::PathBuf;

/// The tables that grow with the work done: every finished negotiation or delegation leaves
/// rows in them, a year of history is millions.
const HISTORY: [&str; 20] = [
    // Every plain A2A message routed to an agent leaves one.
    "a2a_routes",
    "a2a_sends",
    "agent_trust_days",
    "anonymous_ids",
    "artifacts",
    "conversation_participants",
    "conversations",
    "delegation_attempts",
    "delegations",
    "events",
    "insight_counts",
    "insight_days",
    "messages",
    "opportunities",
    "opportunity_decisions",
    "outbox_deliveries",
    // Webhooks are few, but every A2A push notification configuration is a row too.
    "outbox_targets",
    "person_questions",
    "tasks",
    "trust_requester_days",
];

/// The tables bounded by the people and agents registered (or of a fixed size): a statement
/// over them costs the same in the first week and after a year.
const POPULATION: [&str; 11] = [
    "agent_cards",
    "agent_skills",
    "agents",
    "api_keys",
    "capabilities",
    "directory_version",
    "insight_backfill",
    "parley_definitions",
    "task_counts",
    "trust_records",
    "trust_score_counts",
];

/// Migrations older than this rule that break it, each with what it does over the history.
/// They have been applied as they are (a migration's text cannot change once applied: its
/// checksum is recorded), so a database upgraded from before them runs them once at start.
const BEFORE_THE_RULE: [(&str, &str); 5] = [
    ("20261226000001_directory_integrity", "renews duplicate request ids and marks every ended attempt counted"),
    ("20261226000004_inbound_share_ranks", "ranks every ranked attempt by its requesting owner"),
    ("20261228000100_insight_rollups", "counts today's lapsed claims from the agents' daily records"),
    ("20261229000100_delegation_canceled", "renews the status checks of delegations and their attempts"),
    ("20261230000100_a2a_calls", "adds a checked column to the delegation attempts"),
];

fn migrations() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("migrations/ is readable")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".up.sql")?.to_owned();
            Some((stem, std::fs::read_to_string(dir.join(&name)).expect("a migration is readable")))
        })
        .collect();
    out.sort();
    out
}

/// The migration's statements, with comments, string literals and dollar-quoted bodies blanked
/// out, upper-cased and with their whitespace folded.
fn statements(sql: &str) -> Vec<String> {
    let mut text = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("--") {
            rest = rest.find('\n').map_or("", |i| &rest[i..]);
        } else if rest.starts_with("/*") {
            rest = rest.find("*/").map_or("", |i| &rest[i + 2..]);
        } else if c == '\'' {
            // '' inside a literal ends it and opens the next one: the same blank either way.
            rest = rest[1..].find('\'').map_or("", |i| &rest[i + 2..]);
            text.push_str(" '' ");
        } else if let Some(tag) = dollar_tag(rest) {
            let body = &rest[tag.len()..];
            rest = body.find(tag).map_or("", |i| &body[i + tag.len()..]);
            text.push_str(" $$ ");
        } else {
            text.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    text.split(';')
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" ").to_uppercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// `$tag$` (or `$$`) at the start of `s`.
fn dollar_tag(s: &str) -> Option<&str> {
    let inner = s.strip_prefix('$')?;
    let end = inner.find('$')?;
    inner[..end].chars().all(|c| c.is_ascii_alphanumeric() || c == '_').then(|| &s[..end + 2])
}

/// Why `statement` would hold start-up up in proportion to the history, if it would: it names
/// a table of [`HISTORY`] and rewrites, copies or checks rows.
fn rewrites_history(statement: &str) -> Option<&'static str> {
    let words: Vec<&str> =
        statement.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
    if !HISTORY.iter().any(|t| words.contains(&t.to_uppercase().as_str())) {
        return None;
    }
    let first = words.first().copied().unwrap_or("");
    let starts_with_cte = first == "WITH";
    if first == "UPDATE" || (starts_with_cte && statement.contains(" UPDATE ")) {
        return Some("rewrites existing rows (UPDATE)");
    }
    if first == "DELETE" || (starts_with_cte && statement.contains(" DELETE FROM ")) {
        return Some("deletes existing rows (DELETE)");
    }
    if first == "INSERT" && statement.contains(" SELECT ") && statement.contains(" FROM ") {
        return Some("copies existing rows (INSERT ... SELECT ... FROM)");
    }
    if first == "ALTER" && statement.contains(" CHECK") && !statement.contains(" NOT VALID") {
        return Some("validates a check over existing rows (ADD CONSTRAINT ... CHECK without NOT VALID)");
    }
    None
}

#[test]
fn no_migration_rewrites_history_before_serve_answers() {
    let mut found = Vec::new();
    for (name, sql) in migrations() {
        if BEFORE_THE_RULE.iter().any(|(old, _)| *old == name) {
            continue;
        }
        for statement in statements(&sql) {
            if let Some(why) = rewrites_history(&statement) {
                found.push(format!("migrations/{name}.up.sql {why}: {statement}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a migration would hold `parley serve` up for as long as the history takes; move the work to an \
         online backfill after start (batches, one transaction each) and add checks NOT VALID:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_table_is_known_as_history_or_population() {
    let mut tables: Vec<String> = Vec::new();
    for (_, sql) in migrations() {
        for statement in statements(&sql) {
            if let Some(rest) = statement.strip_prefix("CREATE TABLE ") {
                let name = rest.trim_start_matches("IF NOT EXISTS ").split([' ', '(']).next().unwrap_or("");
                tables.push(name.to_lowercase());
            }
        }
    }
    assert!(tables.len() >= HISTORY.len() + POPULATION.len(), "{tables:?}");
    for t in &tables {
        assert!(
            HISTORY.contains(&t.as_str()) || POPULATION.contains(&t.as_str()),
            "table {t} is neither in HISTORY nor in POPULATION: say whether it grows with the work done"
        );
    }
}

#[test]
fn the_listed_older_migrations_exist_and_do_what_they_are_listed_for() {
    let all = migrations();
    for (old, what) in BEFORE_THE_RULE {
        let (_, sql) = all.iter().find(|(n, _)| n == old).unwrap_or_else(|| panic!("{old} is not in migrations/"));
        assert!(
            statements(sql).iter().any(|s| rewrites_history(s).is_some()),
            "{old} is listed as older than the rule ({what}) but breaks none: take it off the list"
        );
    }
}

#[test]
fn the_reader_sees_statements_and_not_their_bodies_comments_or_literals() {
    let sql = "-- UPDATE tasks SET a = 1;\n\
               CREATE FUNCTION f() RETURNS void LANGUAGE sql AS $$ UPDATE tasks SET a = 1; DELETE FROM tasks $$;\n\
               CREATE FUNCTION g() RETURNS void LANGUAGE plpgsql AS $body$ BEGIN DELETE FROM tasks; END $body$;\n\
               COMMENT ON COLUMN tasks.a IS 'UPDATE tasks; it''s DELETE FROM tasks';\n\
               /* INSERT INTO tasks SELECT * FROM messages; */\n\
               ALTER TABLE tasks ADD CONSTRAINT c CHECK (a > 0) NOT VALID;\n\
               INSERT INTO tasks (a) VALUES (1);\n\
               UPDATE capabilities SET a = 1;\n\
               ALTER TABLE agents ADD COLUMN b text CHECK (length(b) < 9)";
    let found: Vec<_> = statements(sql).iter().filter_map(|s| rewrites_history(s)).collect();
    assert!(found.is_empty(), "{found:?} in {:?}", statements(sql));

    for (sql, why) in [
        ("update tasks set a = 1 where b", "UPDATE"),
        ("DELETE FROM messages WHERE a < now()", "DELETE"),
        ("WITH x AS (SELECT 1) UPDATE delegations SET a = 1", "UPDATE"),
        ("INSERT INTO capabilities (a) SELECT b FROM delegation_attempts", "INSERT"),
        ("ALTER TABLE events ADD CONSTRAINT c\n  CHECK (a > 0)", "CHECK"),
        ("ALTER TABLE artifacts ADD COLUMN b text CHECK(length(b) < 9)", "CHECK"),
    ] {
        let got: Vec<_> = statements(sql).iter().filter_map(|s| rewrites_history(s)).collect();
        assert!(got.len() == 1 && got[0].contains(why), "{sql:?} gave {got:?}");
    }
}
