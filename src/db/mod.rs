//! The database: where it comes from (given URL or embedded server), creation, migration, the pool.

pub mod definitions;
pub mod embedded;

use std::{str::FromStr, time::Duration};

use anyhow::Context;
use sqlx::{
    Connection, PgConnection, PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};

pub use embedded::EmbeddedPostgres;

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// A connected, migrated database, and the embedded server behind it if there is one.
pub struct Database {
    /// The service's pool.
    pub pool: PgPool,
    /// The URL the pool connects to (handed to listeners that need their own connection).
    pub url: String,
    /// Kept alive for as long as the database is used; stopped on drop.
    pub embedded: Option<EmbeddedPostgres>,
}

/// Connects to `database_url`, or starts the embedded server in `data_dir`; creates the database
/// if it is missing and runs the migrations.
pub async fn open(database_url: Option<&str>, data_dir: &std::path::Path, pool_size: u32) -> anyhow::Result<Database> {
    let (url, embedded) = match database_url {
        Some(url) => (url.to_owned(), None),
        None => {
            let dir = data_dir.to_owned();
            let pg = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&dir)).await??;
            (pg.url("parley"), Some(pg))
        }
    };
    create_database_if_missing(&url).await?;
    let pool = pool(&url, pool_size).await?;
    migrate(&pool).await?;
    Ok(Database { pool, url, embedded })
}

/// Runs Parley's migrations, applies the SQL functions' current definitions
/// ([`definitions::apply`]) and sets up the timer queue's tables (apalis keeps its own migration
/// history in `apalis._sqlx_migrations`, so the two never conflict).
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    refuse_folded_history(pool).await?;
    MIGRATOR.run(pool).await.context("running migrations")?;
    definitions::apply(pool).await.context("applying the SQL functions")?;
    parley_jobs::setup(pool).await.context("setting up the timer queue")?;
    Ok(())
}

/// The first migration of the history that was folded into the baseline: a database that has it
/// was made before the fold.
const FOLDED_HISTORY: i64 = 20261122000001;

/// Refuses, with a message that says what to do, a database migrated by a development version
/// from before the migrations were folded into one baseline: its history names migrations that
/// no longer exist, and the migrator would stop at the first one without saying why.
async fn refuse_folded_history(pool: &PgPool) -> anyhow::Result<()> {
    let migrated: bool =
        sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL").fetch_one(pool).await?;
    if !migrated {
        return Ok(());
    }
    let folded: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM _sqlx_migrations WHERE version = $1)")
        .bind(FOLDED_HISTORY)
        .fetch_one(pool)
        .await?;
    if folded {
        anyhow::bail!(
            "this database was made by a development version of Parley whose migrations have since been \
             folded into one baseline; it cannot be migrated in place. Drop it and start again (for the \
             embedded database: stop Parley and delete the data directory's `pg` folder)"
        );
    }
    Ok(())
}

/// A pool on `url` with Parley's settings.
pub async fn pool(url: &str, size: u32) -> anyhow::Result<PgPool> {
    let options = PgConnectOptions::from_str(url).context("parsing the database URL")?;
    PgPoolOptions::new()
        // No round trip to test a connection before every use: a connection that died (a
        // restarted or terminating server) fails its statement, the request answers 503
        // `unavailable` for the client to retry, and the pool drops that connection.
        .test_before_acquire(false)
        .max_connections(size)
        .min_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .with_context(|| format!("connecting to {}", redact(url)))
}

/// Creates the URL's database when it does not exist yet (connecting to `postgres` to do so).
pub async fn create_database_if_missing(url: &str) -> anyhow::Result<()> {
    let options = PgConnectOptions::from_str(url).context("parsing the database URL")?;
    let name = options.get_database().unwrap_or("postgres").to_owned();
    let admin = options.clone().database("postgres");
    let mut conn =
        PgConnection::connect_with(&admin).await.with_context(|| format!("connecting to {}", redact(url)))?;
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(&name)
        .fetch_one(&mut conn)
        .await?;
    if !exists {
        // Identifiers cannot be bound as parameters; quote it.
        let sql = format!("CREATE DATABASE \"{}\"", name.replace('"', "\"\""));
        if let Err(e) = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await {
            // Another process may have created it at the same moment.
            let raced = e.as_database_error().and_then(|d| d.code()).is_some_and(|c| c == "42P04");
            if !raced {
                return Err(e).context("creating the database");
            }
        }
    }
    conn.close().await.ok();
    Ok(())
}

impl Database {
    /// Which database this is, for the start-up log: the embedded server's data directory, port
    /// and URL, or the configured URL without its password.
    pub fn describe(&self) -> String {
        match &self.embedded {
            Some(pg) => format!(
                "embedded PostgreSQL, data directory {}, port 127.0.0.1:{} ({}; stopped on exit)",
                pg.cluster_dir().display(),
                pg.port(),
                redact(&self.url)
            ),
            None => redact(&self.url),
        }
    }
}

/// The URL without its password (in the user part or a `password=` parameter), for messages.
pub fn redact(url: &str) -> String {
    let without_user_password = match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{}:***{}", &url[..scheme + 3], user, &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    };
    match without_user_password.split_once('?') {
        Some((base, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{base}?{}", query.join("&"))
        }
        None => without_user_password,
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn redact_hides_every_password_and_keeps_the_rest() {
        assert_eq!(redact("postgres://u:p%40ss@h:5432/db"), "postgres://u:***@h:5432/db");
        assert_eq!(redact("postgres://u@h/db?sslmode=require"), "postgres://u@h/db?sslmode=require");
        assert_eq!(redact("postgres://h/db?user=u&password=s3cret&x=1"), "postgres://h/db?user=u&password=***&x=1");
        assert_eq!(redact("postgres://u:a@b?c@h/db"), "postgres://u:***@h/db");
    }
}
