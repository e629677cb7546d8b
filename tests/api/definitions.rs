//! The SQL functions' one home: a migrated database holds exactly the functions and triggers of
//! `migrations/functions/`, as those files define them, and an unchanged file is not applied
//! again.

use std::collections::BTreeMap;

use parley::database::{self as db, definitions::DEFINITIONS};
use sqlx::PgPool;

/// Every function of the public schema with its full definition, and every trigger with its.
async fn catalog(pool: &PgPool) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let functions: Vec<(String, String)> = sqlx::query_as(
        "SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid)
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = 'public'
            -- Not the functions of extensions the server installs in every new database.
            AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let triggers: Vec<(String, String)> = sqlx::query_as(
        "SELECT t.tgname || ' ON ' || c.relname, pg_get_triggerdef(t.oid)
           FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'public' AND NOT t.tgisinternal",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    (functions.into_iter().collect(), triggers.into_iter().collect())
}

#[tokio::test]
async fn a_fresh_database_holds_exactly_the_functions_the_files_define() {
    let pool = PgPool::connect(&crate::helpers::fresh_database().await).await.unwrap();
    let (functions, triggers) = catalog(&pool).await;

    // One function per file, named after it, and no other.
    let mut names: Vec<String> = functions.keys().map(|f| f.split('(').next().unwrap().to_owned()).collect();
    names.sort();
    let files: Vec<String> = DEFINITIONS.iter().map(|d| d.name.to_owned()).collect();
    assert_eq!(names, files);

    // Running every file again over the migrated database changes no definition: what the
    // database holds is what the files say (function bodies, arguments, triggers).
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SET LOCAL check_function_bodies = off").execute(&mut *tx).await.unwrap();
    for d in DEFINITIONS {
        sqlx::raw_sql(sqlx::AssertSqlSafe(d.sql)).execute(&mut *tx).await.unwrap();
    }
    tx.commit().await.unwrap();
    assert_eq!(catalog(&pool).await, (functions, triggers.clone()));
    // Every trigger calls a function of the files.
    for (name, def) in &triggers {
        assert!(DEFINITIONS.iter().any(|d| def.contains(&format!("{}()", d.name))), "{name}: {def}");
    }
}

#[tokio::test]
async fn migrating_again_applies_only_the_files_that_changed() {
    let pool = PgPool::connect(&crate::helpers::fresh_database().await).await.unwrap();
    let before: Vec<(String, Vec<u8>, chrono::DateTime<chrono::Utc>)> =
        sqlx::query_as("SELECT name, checksum, applied_at FROM parley_definitions ORDER BY name")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(before.len(), DEFINITIONS.len());

    db::migrate(&pool).await.unwrap();
    assert!(db::definitions::apply(&pool).await.unwrap().is_empty(), "nothing changed, nothing applied");
    let after: Vec<(String, Vec<u8>, chrono::DateTime<chrono::Utc>)> =
        sqlx::query_as("SELECT name, checksum, applied_at FROM parley_definitions ORDER BY name")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(after, before);

    // A definition applied under another text (an older version of the file) is applied again.
    sqlx::query("UPDATE parley_definitions SET checksum = '\\x00' WHERE name = 'parley_pickup'")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(db::definitions::apply(&pool).await.unwrap(), vec!["parley_pickup"]);
}
