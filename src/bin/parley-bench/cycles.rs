//! The turn-cycle phase (`cycles`), the headline figure: agents each loop pickup + respond
//! (counter) over HTTP against negotiations whose system side keeps countering, with what a
//! cycle costs in CPU, transactions and row updates. The metrics and liveness phases run it
//! again with a switch flipped, and read [`CYCLE_WINDOW`] and [`CYCLES_DONE`] to do so.

use std::sync::{
    Arc, Mutex, PoisonError,
    atomic::{AtomicBool, AtomicU64, Ordering},
};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{
    Plan,
    agent::{candidate_user, negotiation_body, source_user},
    cost::{CostMeter, TableUpdates, row_updates},
    harness::Bench,
    report::{Results, note},
    stats::ms,
    timing::{Window, for_each_concurrent, join_all, spawn_all},
};

/// The measurement window of the turn-cycle phase under way, for a sampler running beside it.
pub static CYCLE_WINDOW: Mutex<Option<Window>> = Mutex::new(None);
/// Turn cycles completed by every phase so far.
pub static CYCLES_DONE: AtomicU64 = AtomicU64::new(0);

/// The window of the turn-cycle phase under way (`None` between phases).
pub fn cycle_window() -> std::sync::MutexGuard<'static, Option<Window>> {
    CYCLE_WINDOW.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one agent's loop counted within the window.
#[derive(Default)]
struct Counted {
    cycles: u64,
    ended: u64,
    pickups: Vec<f64>,
    responds: Vec<f64>,
}

/// Turn cycles: each of `agents` agents loops pickup + respond(counter) over HTTP.
pub async fn turn_cycles(bench: &Arc<Bench>, plan: &Plan, agents: usize, r: &mut Results) -> anyhow::Result<()> {
    note(format!("turn cycles: registering {agents} agents"));
    let clients = bench.register_agents("bench-agent-user", agents).await?;
    let total = agents * plan.negotiations_per_agent;
    note(format!("turn cycles: creating {total} mixed negotiations (each parks its turn 1)"));
    let started = Instant::now();
    let b = bench.clone();
    for_each_concurrent(total, 16, move |i| {
        let b = b.clone();
        async move {
            // A terse candidate profile: it shows two of the source's seven needs, and each
            // agent turn answers one more, so the system side counters at turns 2, 4 and 6.
            let mut candidate = candidate_user(&format!("bench-agent-user-{}", i % agents));
            candidate["profile"] = json!({"bio": "Backend engineer", "skills": ["rust"], "interests": ["startups"]});
            let created = b.create(&negotiation_body(source_user(i), candidate)).await?;
            anyhow::ensure!(
                created["negotiation"]["status"] == "waiting_for_agent",
                "a benchmark negotiation did not park: {}",
                created["negotiation"]
            );
            Ok(())
        }
    })
    .await?;
    r.set_rounded("mixed_creates_per_s", total as f64 / started.elapsed().as_secs_f64(), 1);

    // Let the creation phase's trailing work settle, so that neither its transactions nor its
    // CPU are counted in the cycles.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let meter = CostMeter::start(&bench.pool).await?;
    let updates_before = row_updates(&bench.pool).await?;
    let all_cycles = Arc::new(AtomicU64::new(0));
    let window = Window::after_warmup(plan.cycle_secs);
    *cycle_window() = Some(window);
    let out_of_work = Arc::new(AtomicBool::new(false));
    let loops = clients.into_iter().map(|agent| {
        let (out_of_work, all_cycles) = (out_of_work.clone(), all_cycles.clone());
        async move {
            let mut counted = Counted::default();
            while window.open() && !out_of_work.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                let Some(turn) = agent.pickup(None).await? else {
                    out_of_work.store(true, Ordering::Relaxed);
                    break;
                };
                let t1 = Instant::now();
                let answer = agent.respond(&turn, "counter").await?;
                let t2 = Instant::now();
                all_cycles.fetch_add(1, Ordering::Relaxed);
                CYCLES_DONE.fetch_add(1, Ordering::Relaxed);
                if window.contains(t2) {
                    counted.cycles += 1;
                    counted.ended += u64::from(answer["status"] == "completed");
                    counted.pickups.push(ms(t1 - t0));
                    counted.responds.push(ms(t2 - t1));
                }
            }
            anyhow::Ok(counted)
        }
    });
    let mut all = Counted::default();
    for c in join_all(spawn_all(loops)).await? {
        all.cycles += c.cycles;
        all.ended += c.ended;
        all.pickups.extend(c.pickups);
        all.responds.extend(c.responds);
    }
    let mut window_end = window.to;
    if out_of_work.load(Ordering::Relaxed) {
        // Some agent ran dry before the deadline: only count up to now, and say so.
        window_end = Instant::now().min(window.to);
        note("turn cycles: an agent ran out of parked turns before the deadline");
    }
    let secs = window_end.saturating_duration_since(window.from).as_secs_f64().max(1e-3);
    // Transactions of Parley's pool per cycle, warm-up included (read-only ones too: each
    // BEGIN..COMMIT and each autocommit statement counts one; the bench's two CPU readings on
    // the pool are in). A backend publishes its table counts when it goes idle, at most once a
    // second: after a pause, the statement `local_xact_numbers` runs on every pool connection
    // makes each publish what it holds (before answering), so the row counts below cover the
    // whole phase.
    let cycles_all = all_cycles.load(Ordering::Relaxed);
    meter.report_per(&bench.pool, r, "cycle", cycles_all, Duration::from_millis(1100)).await?;
    report_row_updates(&updates_before, &row_updates(&bench.pool).await?, r);
    r.set_rounded("turn_cycles_per_s", all.cycles as f64 / secs, 1);
    r.set("turn_cycles_measured", all.cycles);
    r.set("turn_cycles_ending_negotiation", all.ended);
    r.set_rounded("turn_cycle_window_s", secs, 2);
    r.set("turn_cycle_agents", agents);
    r.set_p50_p99("pickup", &all.pickups, 2);
    r.set_p50_p99("respond", &all.responds, 2);
    Ok(())
}

/// The tables whose rows the phase updated (updates, HOT ones, dead and live rows after) and
/// the HOT share of all its updates.
fn report_row_updates(before: &TableUpdates, after: &TableUpdates, r: &mut Results) {
    let mut updated = serde_json::Map::new();
    let (mut upd, mut hot) = (0, 0);
    for (table, (u, h, dead, live)) in after {
        let (u0, h0, _, _) = before.get(table).copied().unwrap_or_default();
        upd += u - u0;
        hot += h - h0;
        if u - u0 > 0 {
            updated.insert(
                table.clone(),
                json!({"updates": u - u0, "hot": h - h0, "dead_after": dead, "live_after": live}),
            );
        }
    }
    r.set("row_updates_in_cycles", Value::Object(updated));
    r.set_rounded("hot_update_share_in_cycles", hot as f64 / upd.max(1) as f64, 3);
}
