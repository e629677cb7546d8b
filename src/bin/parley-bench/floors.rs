//! The baselines PostgreSQL sets under pgbench, beside which Parley's own figures are read:
//! `pgbench -N` at the turn-cycle phase's client count (`pgbench`), the SQL floor of a turn cycle
//! (`floor`, `floor-variants`; the script `sql_floor.sql` on the tables of
//! `sql_floor_setup.sql`), and the SQL floor of a delegation round trip (`delegation_floor.sql`,
//! run by the delegation phase). The scripts stand next to this file.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use sqlx::{Connection, PgConnection};

use crate::{
    Plan,
    delegation::{DELEGATION_PAIRS, register_pairs},
    harness::{BENCH_RATE_LIMIT, Bench},
    report::{Results, note},
    server::Server,
};

/// The floor's tables and seed function, and its pgbench script (BENCHMARKS.md, "The SQL floor").
const SQL_FLOOR_SETUP: &str = include_str!("sql_floor_setup.sql");
const SQL_FLOOR_SCRIPT: &str = include_str!("sql_floor.sql");
/// The SQL floor of a delegation's round trip and its pgbench script (BENCHMARKS.md,
/// "Delegation against its own SQL").
const DELEGATION_FLOOR_SCRIPT: &str = include_str!("delegation_floor.sql");

/// `pgbench -N` at the same client count, on its own scratch database of the same server.
pub fn pgbench(server: &Server, plan: &Plan, clients: usize, r: &mut Results) -> anyhow::Result<()> {
    note(format!("pgbench: initializing scale {}", plan.pgbench_scale));
    server.pgbench(&strings(&["-i", "-q", "-s", &plan.pgbench_scale.to_string()]))?;
    note(format!("pgbench: -N -c {clients} -j 2 -T {}", plan.pgbench_secs));
    let out = server.pgbench(&strings(&[
        "-N",
        "-n",
        "-c",
        &clients.to_string(),
        "-j",
        "2",
        "-T",
        &plan.pgbench_secs.to_string(),
    ]))?;
    r.set_rounded("pgbench_tps", pgbench_figure(&out, "tps = ")?, 1);
    r.set("pgbench_clients", clients);
    Ok(())
}

/// The SQL floor of a turn cycle: `sql_floor.sql` under pgbench (`-M prepared`, one client per
/// agent, as many clients as the turn-cycle phase has agents, the same seconds as `pgbench -N`)
/// on freshly seeded tables in the pgbench scratch database. Each variant is (result key,
/// timer-row moves, NOTIFY in the respond's commit); the first is the floor itself.
pub async fn sql_floor(
    server: &Server,
    plan: &Plan,
    clients: usize,
    variants: &[(&'static str, bool, bool)],
    r: &mut Results,
) -> anyhow::Result<()> {
    let script = std::env::temp_dir().join(format!("parley-bench-floor-{}.sql", std::process::id()));
    std::fs::write(&script, SQL_FLOOR_SCRIPT)?;
    let per_client = i32::try_from(plan.negotiations_per_agent)?;
    let outcome = async {
        for &(key, timers, notify) in variants {
            let mut conn = PgConnection::connect(&server.url(&server.pgbench_db)?).await?;
            sqlx::raw_sql(SQL_FLOOR_SETUP).execute(&mut conn).await?;
            sqlx::query("SELECT floor_seed($1, $2)")
                .bind(i32::try_from(clients)?)
                .bind(per_client)
                .execute(&mut conn)
                .await?;
            conn.close().await?;
            note(format!("sql floor ({key}): -M prepared -c {clients} -j 2 -T {}", plan.pgbench_secs));
            let defines = [("timers", u8::from(timers).to_string()), ("notify", u8::from(notify).to_string())];
            let out = server.pgbench(&script_run(&script, &defines, clients, plan.pgbench_secs))?;
            r.set_rounded(key, pgbench_figure(&out, "tps = ")?, 1);
        }
        anyhow::Ok(())
    }
    .await;
    let _ = std::fs::remove_file(&script);
    outcome?;
    let floor = variants.first().and_then(|(key, ..)| r.number(key));
    if let (Some(c), Some(f)) = (r.number("turn_cycles_per_s"), floor) {
        r.set_rounded("turn_cycle_vs_floor", c / f, 3);
    }
    if let Some(p) = r.number("pgbench_tps") {
        for &(key, ..) in variants {
            if let Some(v) = r.number(key) {
                r.set_rounded(floor_ratio_key(key), v / p, 3);
            }
        }
    }
    Ok(())
}

/// The key of a floor variant's ratio to `pgbench -N` (`sql_floor_tps` -> `sql_floor_ratio`).
fn floor_ratio_key(key: &'static str) -> &'static str {
    match key {
        "sql_floor_tps" => "sql_floor_ratio",
        "sql_floor_timers_tps" => "sql_floor_timers_ratio",
        _ => "sql_floor_timers_notify_ratio",
    }
}

/// The SQL floor of a delegation round trip: `delegation_floor.sql` under pgbench (`-M prepared`,
/// one client per pair, as many pairs as the HTTP phase, the same seconds) on the service's own
/// database and functions, with pairs of agents of its own registered through the API as the
/// HTTP phase's are. Every delegation the script made must have ended `completed`, or the floor
/// did not do the work it stands for and the phase fails. pgbench logs each transaction's
/// latency (`-l`), so the floor's percentiles stand beside the round trip's. Reports
/// `delegation_sql_floor_*` and, after an HTTP phase, `delegation_vs_sql_floor`.
pub async fn delegation_floor(server: &Server, bench: &Arc<Bench>, secs: u64, r: &mut Results) -> anyhow::Result<()> {
    let mut conn = PgConnection::connect(&server.url(&server.app_db)?).await?;
    sqlx::raw_sql(
        "CREATE TABLE delegation_floor_pairs (n integer PRIMARY KEY, rid uuid NOT NULL, rhash bytea NOT NULL,
                                              tid uuid NOT NULL, thash bytea NOT NULL, tanon uuid NOT NULL)",
    )
    .execute(&mut conn)
    .await?;
    let mut requesters = Vec::new();
    // pgbench numbers its clients from 0.
    for (n, (requester, target)) in register_pairs(bench, "bench-floor").await?.into_iter().enumerate() {
        let (rid, tid, tanon): (uuid::Uuid, uuid::Uuid, uuid::Uuid) =
            (requester.id.parse()?, target.id.parse()?, target.anonymous_id.parse()?);
        sqlx::query("INSERT INTO delegation_floor_pairs VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(i32::try_from(n)?)
            .bind(rid)
            .bind(parley::hash_secret(&requester.key))
            .bind(tid)
            .bind(parley::hash_secret(&target.key))
            .bind(tanon)
            .execute(&mut conn)
            .await?;
        requesters.push(rid);
    }
    let work = std::env::temp_dir().join(format!("parley-bench-delegation-floor-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let script = work.join("delegation_floor.sql");
    std::fs::write(&script, DELEGATION_FLOOR_SCRIPT)?;
    note(format!("delegation sql floor: -M prepared -c {DELEGATION_PAIRS} -j 2 -T {secs}"));
    let defines = [
        ("default_limit", BENCH_RATE_LIMIT.to_string()),
        ("inbound_limit", BENCH_RATE_LIMIT.to_string()),
        ("per_requester", parley::Config::default().trust_per_requester.to_string()),
    ];
    let mut args = script_run(&script, &defines, DELEGATION_PAIRS, secs);
    args.extend(["-l".into(), format!("--log-prefix={}", work.join("txn").display())]);
    let out = server.pgbench_on(&server.app_db, &args);
    let logged = out.and_then(|out| Ok((out, transaction_latencies_ms(&work)?)));
    let _ = std::fs::remove_dir_all(&work);
    let (out, latencies) = logged?;
    anyhow::ensure!(!latencies.is_empty(), "pgbench logged no transactions of the delegation floor");
    let per_s = pgbench_figure(&out, "tps = ")?;
    r.set_rounded("delegation_sql_floor_per_s", per_s, 1);
    r.set_rounded("delegation_sql_floor_mean_ms", pgbench_figure(&out, "latency average = ")?, 2);
    r.set_p50_p99("delegation_sql_floor", &latencies, 2);
    if let Some(rate) = r.number("delegations_per_s") {
        r.set_rounded("delegation_vs_sql_floor", rate / per_s, 3);
    }
    let ended: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM delegations WHERE requester_agent_id = ANY($1) GROUP BY status")
            .bind(&requesters)
            .fetch_all(&mut conn)
            .await?;
    anyhow::ensure!(
        !ended.is_empty() && ended.iter().all(|(status, _)| status == "completed"),
        "the delegation floor's delegations did not all complete: {ended:?}"
    );
    sqlx::raw_sql("DROP TABLE delegation_floor_pairs").execute(&mut conn).await?;
    conn.close().await?;
    Ok(())
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// pgbench's arguments for a custom script: `-n -M prepared`, each `-D name=value`, `clients`
/// clients on two threads for `secs` seconds.
fn script_run(script: &Path, defines: &[(&str, String)], clients: usize, secs: u64) -> Vec<String> {
    let mut args = strings(&["-n", "-M", "prepared", "-f"]);
    args.push(script.display().to_string());
    for (name, value) in defines {
        args.extend(["-D".into(), format!("{name}={value}")]);
    }
    args.extend(strings(&["-c", &clients.to_string(), "-j", "2", "-T", &secs.to_string()]));
    args
}

/// The number after `prefix` on the line of pgbench's report that starts with it (`tps = `,
/// `latency average = `).
fn pgbench_figure(out: &str, prefix: &str) -> anyhow::Result<f64> {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .with_context(|| format!("no {prefix:?} in pgbench's output:\n{out}"))
}

/// Every transaction's latency, in ms, from the per-transaction logs pgbench `-l` wrote in `dir`
/// (one file per thread; each line `client transaction latency_us script epoch_s epoch_us`).
fn transaction_latencies_ms(dir: &Path) -> anyhow::Result<Vec<f64>> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("txn.")) {
            continue;
        }
        for line in std::fs::read_to_string(&path)?.lines() {
            let latency_us: f64 = line
                .split_whitespace()
                .nth(2)
                .with_context(|| format!("pgbench log line {line:?}"))?
                .parse()
                .with_context(|| format!("pgbench log line {line:?}"))?;
            all.push(latency_us / 1000.0);
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_latencies_are_read_from_every_thread_log_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("parley-bench-txn-log-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // pgbench -l with two threads: `txn.<pid>` and `txn.<pid>.1`.
        std::fs::write(dir.join("txn.77"), "0 0 20125 0 1764090000 120000\n1 0 1500 0 1764090000 130000\n").unwrap();
        std::fs::write(dir.join("txn.77.1"), "8 0 33000 0 1764090001 5\n").unwrap();
        std::fs::write(dir.join("delegation_floor.sql"), "SELECT 1;\n").unwrap();
        let mut ms = transaction_latencies_ms(&dir).unwrap();
        ms.sort_by(f64::total_cmp);
        assert_eq!(ms, vec![1.5, 20.125, 33.0]);
        std::fs::write(dir.join("txn.77.2"), "8 0\n").unwrap();
        assert!(transaction_latencies_ms(&dir).is_err(), "a line without a latency is an error, not a zero");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
