//! The wake-latency phase (`wake`): how soon a long-poll waiting on one Parley instance answers
//! after a turn parks on another, the two reaching each other only through PostgreSQL's NOTIFY,
//! as two processes of a deployment would.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use parley::{
    Config, database as db,
    wakeups::{WAKE_CHANNEL, WakePayload},
};

use crate::{
    Plan,
    agent::{AgentClient, candidate_user, negotiation_body, source_user},
    harness::{Bench, Instance},
    report::{Results, note},
    stats::ms_between,
};

/// The user whose agent's long-polls are woken.
const USER: &str = "bench-wake-user";

/// Wake latency across processes: a long-poll waits on a second Parley instance (its own
/// pool, listener and waiters, on the same database, as a second process would be); a park
/// commits on the first (a negotiation is created whose turn 1 is the waiting agent's); the
/// long-poll answers. The first instance wakes the second only through PostgreSQL: its wake-up
/// sender's NOTIFY, sent after the park's commit, reaches the second's listener. The headline is
/// measured from the arrival of that NOTIFY at an independent listener in this process to the
/// moment the pickup's 200 has been read by the client. Also reported: from the park
/// transaction's `first_parked_at` (PostgreSQL's `now()`, the start of the park transaction, so
/// an upper bound that includes the park's own statements, its commit and the sender's batching).
pub async fn wake_latency(bench: &Arc<Bench>, plan: &Plan, r: &mut Results) -> anyhow::Result<()> {
    let (id, key) = bench.register_agent(USER).await?;
    // The second instance the long-polls wait on.
    let url = bench.database_url();
    let other_config =
        Config { bind: "127.0.0.1:0".parse()?, workers: false, pool_size: 4, ..bench.state.config().clone() };
    let other_pool = db::pool(&url, 4).await?;
    let other = Instance::serve(other_config, other_pool.clone()).await?;
    // Its listener is up once it answers (it listens before serving long-polls' wake-ups).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let agent = AgentClient::new(&bench.client, &other.base, &id, &key);
    note(format!("wake latency: {} wakes", plan.wakes));
    // An independent LISTEN on the channel parks notify: PostgreSQL delivers the notification
    // only after the park committed, so its arrival here is the earliest moment anyone can
    // observe the commit.
    let mut listener = sqlx::postgres::PgListener::connect(&url).await?;
    listener.listen(WAKE_CHANNEL).await?;
    let (notified_tx, mut notified_rx) = tokio::sync::mpsc::unbounded_channel::<SystemTime>();
    let listening = tokio::spawn(async move {
        while let Ok(n) = listener.recv().await {
            let at = SystemTime::now();
            let names_user =
                serde_json::from_str::<WakePayload>(n.payload()).is_ok_and(|p| p.keys.iter().any(|k| k == USER));
            if names_user && notified_tx.send(at).is_err() {
                break;
            }
        }
    });
    let mut from_notify = Vec::with_capacity(plan.wakes);
    let mut from_park = Vec::with_capacity(plan.wakes);
    let mut from_create_return = Vec::with_capacity(plan.wakes);
    let mut missed = 0usize;
    let phase_deadline = Instant::now() + Duration::from_secs(if plan.wakes > 500 { 240 } else { 60 });
    for i in 0..plan.wakes {
        if Instant::now() > phase_deadline {
            break;
        }
        let waiter = {
            let agent = agent.clone();
            tokio::spawn(async move {
                let turn = agent.pickup(Some(10)).await;
                (turn, SystemTime::now())
            })
        };
        // The long-poll is registered once its user has a live waiter.
        let t = Instant::now();
        while other.state.waiting_users() == 0 {
            if t.elapsed() > Duration::from_secs(5) {
                bail!("the long-poll never started waiting");
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        // Let it reach its wait after the (empty) claim attempt.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let created = bench.create(&negotiation_body(source_user(1_000_000 + i), candidate_user(USER))).await?;
        let create_returned = SystemTime::now();
        let (turn, answered) = waiter.await?;
        let notified =
            tokio::time::timeout(Duration::from_secs(5), notified_rx.recv()).await?.context("the listener stopped")?;
        from_notify.push(ms_between(notified, answered));
        let Some(turn) = turn? else {
            missed += 1;
            continue;
        };
        let task_id = uuid::Uuid::parse_str(turn["negotiationId"].as_str().context("negotiationId")?)?;
        anyhow::ensure!(
            created["negotiation"]["id"] == turn["negotiationId"],
            "the woken pickup got another negotiation"
        );
        let parked_at: chrono::DateTime<chrono::Utc> =
            sqlx::query_scalar("SELECT first_parked_at FROM tasks WHERE task_id = $1")
                .bind(task_id)
                .fetch_one(&bench.pool)
                .await?;
        let answered_at: chrono::DateTime<chrono::Utc> = answered.into();
        from_park.push((answered_at - parked_at).num_microseconds().unwrap_or(0) as f64 / 1e3);
        from_create_return.push(ms_between(create_returned, answered));
        // End it, so the next long-poll finds nothing and has to wait.
        agent.respond(&turn, "reject").await?;
    }
    listening.abort();
    other.stop().await;
    other_pool.close().await;
    r.set("wake_latency_samples", from_notify.len());
    r.set("wake_latency_missed", missed);
    r.set_p50_p99("wake_latency", &from_notify, 3);
    r.set_rounded("wake_latency_max_ms", from_notify.iter().copied().fold(f64::NAN, f64::max), 3);
    r.set_p50_p99("wake_from_park_tx_start", &from_park, 3);
    r.set_p50_p99("wake_after_create_returned", &from_create_return, 3);
    Ok(())
}
