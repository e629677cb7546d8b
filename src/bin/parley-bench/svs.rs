//! The system-vs-system phase (`svs`): negotiations in which the system negotiator plays both
//! seats, created concurrently; each runs to its end inside its create call, so the rate is of
//! whole negotiations.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};
use std::time::Instant;

use serde_json::json;

use crate::{
    Plan,
    agent::{candidate_user, negotiation_body, source_user},
    harness::Bench,
    report::{Results, note},
    timing::{HTTP_CONCURRENCY, Window, join_all, spawn_all},
};

/// System-vs-system negotiations, created concurrently; each is resolved inside its create call.
pub async fn svs(bench: &Arc<Bench>, plan: &Plan, r: &mut Results) -> anyhow::Result<()> {
    note(format!("system vs system: {} s at {HTTP_CONCURRENCY} concurrent creates", plan.svs_secs));
    let counter = Arc::new(AtomicU64::new(0));
    let window = Window::after_warmup(plan.svs_secs);
    let creators = (0..HTTP_CONCURRENCY).map(|w| {
        let (bench, counter) = (bench.clone(), counter.clone());
        async move {
            let mut i = 0usize;
            let mut turns = 0u64;
            while window.open() {
                let mut candidate = candidate_user(&format!("bench-svs-candidate-{w}-{i}"));
                candidate["profile"]["skills"] = json!(["rust", "payments", "kubernetes", "security"]);
                let body = negotiation_body(source_user(2_000_000 + w * 100_000 + i), candidate);
                i += 1;
                let created = bench.create(&body).await?;
                anyhow::ensure!(
                    created["negotiation"]["status"] == "completed",
                    "a system-vs-system negotiation did not end"
                );
                if window.contains(Instant::now()) {
                    counter.fetch_add(1, Ordering::Relaxed);
                    turns += created["negotiation"]["turnCount"].as_u64().unwrap_or(0);
                }
            }
            anyhow::Ok(turns)
        }
    });
    let turns: u64 = join_all(spawn_all(creators)).await?.into_iter().sum();
    let n = counter.load(Ordering::Relaxed);
    r.set_rounded("svs_negotiations_per_s", n as f64 / plan.svs_secs as f64, 1);
    r.set_rounded("svs_turns_per_negotiation", turns as f64 / n.max(1) as f64, 2);
    Ok(())
}
