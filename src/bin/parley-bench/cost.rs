//! What a phase costs beyond its rate: CPU of this process (the service and its clients) and of
//! PostgreSQL's backends, transactions of the service's pool, row updates per table, the
//! process's memory and the machine's load. Read from `/proc` and PostgreSQL's statistics; shared
//! by the turn-cycle, delegation and long-poll phases and by the run's header.

use std::collections::{BTreeMap, HashMap};

use sqlx::PgPool;

use crate::report::Results;
use crate::stats::round;

/// What a phase costs from its start: the CPU of this process (the service and its clients)
/// and of the database's backends, and the transactions of the service's pool.
pub struct CostMeter {
    transactions: HashMap<i32, i64>,
    process_cpu: f64,
    backends_cpu: HashMap<i32, f64>,
}

impl CostMeter {
    /// Reads the counts the phase starts from.
    pub async fn start(pool: &PgPool) -> anyhow::Result<CostMeter> {
        let transactions = local_xact_numbers(pool).await?;
        let process_cpu = process_cpu_secs("self");
        Ok(CostMeter { transactions, process_cpu, backends_cpu: backend_cpu_secs(pool).await? })
    }

    /// CPU seconds since the start: this process's, and the backends' together.
    pub async fn cpu_secs(&self, pool: &PgPool) -> anyhow::Result<(f64, f64)> {
        let own = process_cpu_secs("self") - self.process_cpu;
        let backends = backend_cpu_secs(pool)
            .await?
            .iter()
            .map(|(pid, after)| after - self.backends_cpu.get(pid).copied().unwrap_or(0.0))
            .sum();
        Ok((own, backends))
    }

    /// Transactions of the pool since the start (see [`xacts_between`]).
    pub async fn transactions(&self, pool: &PgPool) -> anyhow::Result<i64> {
        Ok(xacts_between(&self.transactions, &local_xact_numbers(pool).await?))
    }

    /// Reports the cost of each of `count` units of work since the start, two decimals each:
    /// `cpu_ms_per_<unit>_parley_process`, `cpu_ms_per_<unit>_postgres_backends`, and, after
    /// waiting `settle` (none when zero), `db_transactions_per_<unit>`.
    pub async fn report_per(
        &self,
        pool: &PgPool,
        r: &mut Results,
        unit: &str,
        count: u64,
        settle: std::time::Duration,
    ) -> anyhow::Result<()> {
        let per = |v: f64| round(v / count.max(1) as f64, 2);
        let (own_cpu, pg_cpu) = self.cpu_secs(pool).await?;
        r.set(format!("cpu_ms_per_{unit}_parley_process"), per(own_cpu * 1e3));
        r.set(format!("cpu_ms_per_{unit}_postgres_backends"), per(pg_cpu * 1e3));
        if !settle.is_zero() {
            tokio::time::sleep(settle).await;
        }
        let xacts = self.transactions(pool).await?;
        r.set(format!("db_transactions_per_{unit}"), per(xacts as f64));
        Ok(())
    }
}

/// User + system CPU seconds of a process (`self` or a pid), from `/proc/<pid>/stat`.
fn process_cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds so far of every PostgreSQL backend connected to the current database (same
/// machine only; 0 when /proc does not show them).
async fn backend_cpu_secs(pool: &PgPool) -> anyhow::Result<HashMap<i32, f64>> {
    let pids: Vec<i32> = sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        .fetch_all(pool)
        .await?;
    Ok(pids.into_iter().map(|p| (p, process_cpu_secs(&p.to_string()))).collect())
}

/// Each pooled connection's backend pid and local transaction number: the count of
/// transactions that backend slot has started, read from the virtual transaction id of the
/// reading transaction itself (`backend/number` in `pg_locks`).
///
/// This, not `pg_stat_database.xact_commit`, is what a turn cycle's transactions are counted
/// from. The database-wide counter also counts the transaction in which PostgreSQL delivers
/// each batch of notifications to the LISTEN connection (one per wake-up, whatever the service
/// does), and a backend publishes its counts at most once a second, holding the rest back until
/// it runs again or exits. Read twice around a phase, it moved between 2.3 and 4.1 per cycle,
/// run to run, with the same binary. The pool's connections run every statement the service
/// sends, and their local numbers are exact at any moment.
async fn local_xact_numbers(pool: &PgPool) -> anyhow::Result<HashMap<i32, i64>> {
    // Every connection the pool may hold, at once: each is read once, and the pool is at its
    // full size before the phase, so that no connection opens during it.
    let mut held = Vec::new();
    let mut numbers = HashMap::new();
    for _ in 0..pool.options().get_max_connections() {
        let mut conn = pool.acquire().await?;
        let (pid, number): (i32, i64) = sqlx::query_as(
            "SELECT pg_backend_pid(), split_part(virtualtransaction, '/', 2)::bigint FROM pg_locks \
             WHERE pid = pg_backend_pid() AND locktype = 'virtualxid'",
        )
        .fetch_one(&mut *conn)
        .await?;
        numbers.insert(pid, number);
        held.push(conn);
    }
    Ok(numbers)
}

/// Transactions the pool's connections ran between two readings of [`local_xact_numbers`],
/// the readings' own excluded. Only connections present at both readings count: the pool keeps
/// its connections through a phase (it is filled before, and its idle timeout is minutes), so in
/// practice that is all of them.
fn xacts_between(before: &HashMap<i32, i64>, after: &HashMap<i32, i64>) -> i64 {
    after.iter().filter_map(|(pid, n)| before.get(pid).map(|b| n - b - 1)).sum()
}

/// Per table: row updates, HOT ones, dead and live row versions (see [`row_updates`]).
pub type TableUpdates = BTreeMap<String, (i64, i64, i64, i64)>;

/// Per table of the service's database (the timer queue's included): row updates so far, how
/// many of them were HOT (a new row version on the same page with no new index entry, which
/// page pruning reclaims without a vacuum), dead and live row versions, from
/// `pg_stat_user_tables`.
pub async fn row_updates(pool: &PgPool) -> anyhow::Result<TableUpdates> {
    let rows: Vec<(String, i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT CASE WHEN schemaname = 'public' THEN relname ELSE schemaname || '.' || relname END, \
                n_tup_upd, n_tup_hot_upd, n_dead_tup, n_live_tup FROM pg_stat_user_tables",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|(t, u, h, d, l)| (t, (u, h, d, l))).collect())
}

/// This process's resident memory in MB, from `/proc/self/status` (0 when unreadable).
pub fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// The machine's 1, 5 and 15 minute load averages, as `/proc/loadavg` shows them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
