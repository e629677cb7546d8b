//! The PostgreSQL server a run measures on: `DATABASE_URL`'s, or the embedded one started in a
//! temporary directory; the two scratch databases created on it for the run (the service's and
//! pgbench's) and dropped at its end; and the `pgbench` command pointed at it.

use std::path::PathBuf;

use anyhow::{Context, bail};
use parley::database::EmbeddedPostgres;
use reqwest::Url;
use sqlx::{Connection, PgConnection};

/// The database server, its scratch databases, and the embedded server if we started one.
pub struct Server {
    admin_url: String,
    pub app_db: String,
    pub pgbench_db: String,
    _embedded: Option<EmbeddedPostgres>,
}

impl Server {
    /// Connects to (or starts) the server and creates the run's scratch databases afresh.
    pub async fn open() -> anyhow::Result<Server> {
        let (admin_url, embedded) = match std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()) {
            Some(url) => (with_database(&url, "postgres")?, None),
            None => {
                let dir = std::env::temp_dir().join(format!("parley-bench-{}", std::process::id()));
                let pg = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&dir)).await??;
                (pg.url("postgres"), Some(pg))
            }
        };
        let pid = std::process::id();
        let server = Server {
            app_db: format!("parley_bench_{pid}"),
            pgbench_db: format!("parley_bench_{pid}_pgbench"),
            admin_url,
            _embedded: embedded,
        };
        let mut conn = PgConnection::connect(&server.admin_url).await.context("connecting to PostgreSQL")?;
        for name in server.databases() {
            drop_database(&mut conn, name).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await?;
        }
        Ok(server)
    }

    fn databases(&self) -> [&String; 2] {
        [&self.app_db, &self.pgbench_db]
    }

    /// The URL of database `db` on this server.
    pub fn url(&self, db: &str) -> anyhow::Result<String> {
        with_database(&self.admin_url, db)
    }

    /// Drops the scratch databases, those of [`Server::create_scratch`] left behind included,
    /// ignoring failures: the run's outcome is already decided.
    pub async fn drop_databases(&self) {
        if let Ok(mut conn) = PgConnection::connect(&self.admin_url).await {
            let pattern = format!("{}\\_%", self.app_db);
            let extra: Vec<String> = sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE $1")
                .bind(pattern)
                .fetch_all(&mut conn)
                .await
                .unwrap_or_default();
            for name in self.databases().into_iter().chain(extra.iter()) {
                let _ = drop_database(&mut conn, name).await;
            }
        }
    }

    /// Creates (afresh) one more scratch database, `<app_db>_<suffix>`, for a phase that needs a
    /// database of its own; returns its name. The phase drops it with [`Server::drop_scratch`].
    pub async fn create_scratch(&self, suffix: &str) -> anyhow::Result<String> {
        let name = format!("{}_{suffix}", self.app_db);
        let mut conn = PgConnection::connect(&self.admin_url).await.context("connecting to PostgreSQL")?;
        drop_database(&mut conn, &name).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await?;
        Ok(name)
    }

    /// Drops a database made by [`Server::create_scratch`], ignoring failures (a phase calls it
    /// on its way out, whatever its outcome).
    pub async fn drop_scratch(&self, name: &str) {
        if let Ok(mut conn) = PgConnection::connect(&self.admin_url).await {
            let _ = drop_database(&mut conn, name).await;
        }
    }

    /// Renames a database made by [`Server::create_scratch`] to `to` (dropping any database of
    /// that name first), so that the run's end leaves it in place.
    pub async fn rename_scratch(&self, name: &str, to: &str) -> anyhow::Result<()> {
        let mut conn = PgConnection::connect(&self.admin_url).await.context("connecting to PostgreSQL")?;
        drop_database(&mut conn, to).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("ALTER DATABASE {name} RENAME TO {to}"))).execute(&mut conn).await?;
        Ok(())
    }

    /// `pgbench` with the server's host, port and user, on the pgbench scratch database.
    pub fn pgbench(&self, args: &[String]) -> anyhow::Result<String> {
        self.pgbench_on(&self.pgbench_db, args)
    }

    /// `pgbench` with the server's host, port and user, on database `db`.
    pub fn pgbench_on(&self, db: &str, args: &[String]) -> anyhow::Result<String> {
        let url = Url::parse(&self.admin_url)?;
        let mut cmd = std::process::Command::new(pgbench_path());
        let user = if url.username().is_empty() { "postgres" } else { url.username() };
        cmd.args(args)
            .arg(db)
            .env("PGHOST", url.host_str().unwrap_or("127.0.0.1"))
            .env("PGPORT", url.port().unwrap_or(5432).to_string())
            .env("PGUSER", user);
        if let Some(p) = url.password() {
            cmd.env("PGPASSWORD", p);
        }
        let out = cmd.output().context("running pgbench (install postgresql-contrib or put pgbench on PATH)")?;
        if !out.status.success() {
            bail!("pgbench {:?} failed: {}", args, String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

async fn drop_database(conn: &mut PgConnection, name: &str) -> sqlx::Result<()> {
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))).execute(conn).await?;
    Ok(())
}

/// `url` with its database replaced by `name`.
fn with_database(url: &str, name: &str) -> anyhow::Result<String> {
    let mut u = Url::parse(url).context("DATABASE_URL is not a URL")?;
    u.set_path(&format!("/{name}"));
    Ok(u.to_string())
}

/// `pgbench` on PATH, else in a Debian PostgreSQL's directory, else the bare name.
fn pgbench_path() -> PathBuf {
    if let Ok(paths) = std::env::var("PATH") {
        for dir in std::env::split_paths(&paths) {
            if dir.join("pgbench").is_file() {
                return dir.join("pgbench");
            }
        }
    }
    for v in ["17", "16", "15", "14"] {
        let p = PathBuf::from(format!("/usr/lib/postgresql/{v}/bin/pgbench"));
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from("pgbench")
}
