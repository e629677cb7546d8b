//! The long-poll phase (`longpoll`): 1 000 pickups waiting at once with nothing to claim, and
//! what they hold while they wait: this process's memory, PostgreSQL connections, pool
//! connections in use (a waiting long-poll should hold none), and how soon all were waiting.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection};

use crate::{
    Plan,
    cost::rss_mb,
    harness::Bench,
    report::{Results, note},
    timing::{join_all, spawn_all},
};

/// Agents the long-polls are spread over.
const USERS: usize = 50;
/// Seconds each long-poll waits; the phase samples for two seconds less.
const WAIT_SECS: u64 = 8;

/// 1 000 concurrent long-polls: RSS and database connections while they wait.
pub async fn longpolls(bench: &Arc<Bench>, plan: &Plan, r: &mut Results) -> anyhow::Result<()> {
    note(format!("long-polls: {} concurrent, over {USERS} agents", plan.longpolls));
    let clients = bench.register_agents("bench-longpoll-user", USERS).await?;
    let mut monitor = PgConnection::connect(&bench.database_url()).await?;
    let rss_before = rss_mb();
    let waiting = spawn_all((0..plan.longpolls).map(|i| {
        let agent = clients[i % USERS].clone();
        async move { agent.pickup(Some(WAIT_SECS)).await }
    }));
    let (mut rss_peak, mut db_peak, mut in_use_peak) = (0f64, 0i64, 0u32);
    let t = Instant::now();
    let mut ready_at = None;
    while t.elapsed() < Duration::from_secs(WAIT_SECS - 2) {
        rss_peak = rss_peak.max(rss_mb());
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_one(&mut monitor)
        .await?;
        db_peak = db_peak.max(n);
        let pool = &bench.pool;
        in_use_peak = in_use_peak.max(pool.size().saturating_sub(pool.num_idle() as u32));
        if ready_at.is_none() && bench.state.waiting_users() == USERS {
            ready_at = Some(t.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pool_size_now = bench.pool.size();
    let answered_empty = join_all(waiting).await?.iter().filter(|turn| turn.is_none()).count();
    anyhow::ensure!(answered_empty == plan.longpolls, "a long-poll got a turn although none was parked");
    r.set("longpoll_waiters", plan.longpolls);
    r.set_rounded("longpoll_rss_mb", rss_peak, 1);
    r.set_rounded("longpoll_rss_before_mb", rss_before, 1);
    r.set("longpoll_db_connections", db_peak);
    r.set("longpoll_pool_in_use_peak", in_use_peak);
    r.set("longpoll_pool_open", pool_size_now);
    r.set("longpoll_all_waiting_after_ms", ready_at.map(|d| d.as_millis() as u64));
    Ok(())
}
