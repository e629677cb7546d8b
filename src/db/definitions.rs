//! The SQL functions, each defined in one file of `migrations/functions/` (with the triggers
//! that call it, when it is a trigger function), applied after the dated migrations as a
//! repeatable definition.
//!
//! Why a second mechanism beside the migrations: a dated migration is history, applied once and
//! never edited, so a function changed five times used to be restated five times (and once more
//! in each down migration), and reading what `parley_pickup` does today meant knowing which
//! migration came last. Here each function has one home, its current text. The dated migrations
//! hold schema changes only (tables, columns, indexes, storage settings); the definitions follow
//! the newest schema.
//!
//! [`apply`] runs in one transaction under the migration lock (the advisory lock the migrator
//! takes for this database, so two processes starting at once apply them one after the other):
//! every file whose text differs from the one last applied (a SHA-256 checksum kept in
//! `parley_definitions`), or whose function is missing, is executed again, with `check_function_bodies` off so that files may
//! refer to one another in any order. The files are written to be re-run: `CREATE OR REPLACE
//! FUNCTION`, and `DROP TRIGGER IF EXISTS` before each `CREATE TRIGGER`. A change that
//! `CREATE OR REPLACE` cannot make (a new argument list or result type, a function removed)
//! needs a dated migration that drops the old function first (`DROP FUNCTION IF EXISTS`: on a
//! new database the migrations run before any function exists). A down migration that drops
//! something a definition made (a trigger on a column it removes) clears `parley_definitions`,
//! so that the next start applies every definition again.

use anyhow::Context;
use sha2::{Digest, Sha256};
use sqlx::PgPool;

/// One file of `migrations/functions/`: its name (the function it defines) and its SQL.
#[derive(Debug, Clone, Copy)]
pub struct Definition {
    /// The file's name without `.sql`: the function it defines.
    pub name: &'static str,
    /// The file's text.
    pub sql: &'static str,
}

impl Definition {
    /// The checksum the file is applied under.
    pub fn checksum(&self) -> Vec<u8> {
        Sha256::digest(self.sql.as_bytes()).to_vec()
    }
}

macro_rules! definition {
    ($name:literal) => {
        Definition { name: $name, sql: include_str!(concat!("../../migrations/functions/", $name, ".sql")) }
    };
}

/// Every file of `migrations/functions/`, by name (a unit test checks that none is missing).
pub const DEFINITIONS: &[Definition] = &[
    definition!("parley_a2a_turn_parked"),
    definition!("parley_agent_of_key"),
    definition!("parley_count_active_tasks"),
    definition!("parley_count_claim_end"),
    definition!("parley_delegation_accept"),
    definition!("parley_delegation_addressed"),
    definition!("parley_delegation_complete"),
    definition!("parley_delegation_inbound_full"),
    definition!("parley_delegation_live"),
    definition!("parley_delegation_make"),
    definition!("parley_delegation_move"),
    definition!("parley_delegation_offer"),
    definition!("parley_delegation_open"),
    definition!("parley_delegation_record"),
    definition!("parley_delegation_status_event"),
    definition!("parley_directory_changed"),
    definition!("parley_history"),
    definition!("parley_insights_bucket"),
    definition!("parley_insights_decided"),
    definition!("parley_insights_expired"),
    definition!("parley_insights_negotiations"),
    definition!("parley_insights_seats"),
    definition!("parley_insights_shard"),
    definition!("parley_issue_placeholder_ids"),
    definition!("parley_key_works"),
    definition!("parley_outbox_fan_out"),
    definition!("parley_park"),
    definition!("parley_parked"),
    definition!("parley_pickup"),
    definition!("parley_refresh_trust_records"),
    definition!("parley_respond"),
    definition!("parley_store_turns"),
    definition!("parley_trust_capabilities_added"),
    definition!("parley_trust_capabilities_removed"),
    definition!("parley_trust_day_counted"),
    definition!("parley_trust_day_share"),
    definition!("parley_trust_of"),
    definition!("parley_trust_provisional"),
    definition!("parley_trust_score_counted"),
    definition!("parley_trust_scores"),
];

/// Applies the definitions whose text changed since they were last applied (all of them on a
/// new database); returns the names applied.
pub async fn apply(pool: &PgPool) -> anyhow::Result<Vec<&'static str>> {
    let mut tx = pool.begin().await?;
    let database: String = sqlx::query_scalar("SELECT current_database()::text").fetch_one(&mut *tx).await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(migration_lock_id(&database))
        .execute(&mut *tx)
        .await
        .context("taking the migration lock")?;
    sqlx::query("SET LOCAL check_function_bodies = off").execute(&mut *tx).await?;
    // `DROP TRIGGER IF EXISTS` on a new database says "does not exist, skipping" for each.
    sqlx::query("SET LOCAL client_min_messages = warning").execute(&mut *tx).await?;
    // Each file's checksum as last applied, when its function still exists (a dated migration
    // that drops a function has it made again even if its file did not change).
    let applied: Vec<(String, Vec<u8>)> = sqlx::query_as(
        "SELECT d.name, d.checksum FROM parley_definitions d
          WHERE EXISTS (SELECT 1 FROM pg_proc p WHERE p.proname = d.name
                           AND p.pronamespace = 'public'::regnamespace)",
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut changed = Vec::new();
    for d in DEFINITIONS {
        let checksum = d.checksum();
        if applied.iter().any(|(name, sum)| name == d.name && *sum == checksum) {
            continue;
        }
        sqlx::raw_sql(sqlx::AssertSqlSafe(d.sql))
            .execute(&mut *tx)
            .await
            .with_context(|| format!("applying migrations/functions/{}.sql", d.name))?;
        sqlx::query(
            "INSERT INTO parley_definitions (name, checksum) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()",
        )
        .bind(d.name)
        .bind(&checksum)
        .execute(&mut *tx)
        .await?;
        changed.push(d.name);
    }
    tx.commit().await?;
    Ok(changed)
}

/// The advisory lock the migrator holds while it migrates the database named `database`: the
/// same key, so that definitions are never applied while another process migrates.
pub fn migration_lock_id(database: &str) -> i64 {
    0x3d32_ad9e * i64::from(crc32(database.as_bytes()))
}

/// CRC-32 (the ISO-HDLC polynomial, as zlib and the migrator compute it).
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_folder_is_listed_once_in_order() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/functions");
        let mut files: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        files.sort();
        let listed: Vec<String> = DEFINITIONS.iter().map(|d| format!("{}.sql", d.name)).collect();
        assert_eq!(listed, files);
    }

    #[test]
    fn each_file_defines_the_function_it_is_named_after() {
        for d in DEFINITIONS {
            let create = format!("CREATE OR REPLACE FUNCTION {}(", d.name);
            assert!(d.sql.contains(&create), "{} does not define {}", d.name, d.name);
        }
    }

    #[test]
    fn the_lock_key_is_the_migrators() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(migration_lock_id("parley"), 0x3d32_ad9e * i64::from(crc32(b"parley")));
    }
}
