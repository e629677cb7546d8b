//! The liveness-overhead phase (`--only liveness`, never in a default run): whole turn-cycle
//! rounds with the agents' `last_seen_at` writes off and on, in an order that spreads the drift
//! of a growing database over both settings, and how many of those writes each round made.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::{
    Plan,
    cycles::turn_cycles,
    harness::Bench,
    report::{Results, note},
    stats::mean,
};

/// Rounds of the turn cycle with a switch off and on, in one run: a warm-up round (returned,
/// not counted: the first round on a fresh database is much faster than the ones after it), then
/// eight rounds in the order off, on, on, off, off, on, on, off, so that a drift over the run
/// (the tables grow with every round) weighs on both sides alike. Each round is a whole
/// turn-cycle phase with its own negotiations and agents. Returns the warm-up rate and each
/// round's rate, with how much `measure` grew during it, by switch position.
async fn rounds_off_on(
    bench: &Arc<Bench>,
    plan: &Plan,
    agents: usize,
    what: &str,
    switch: impl Fn(bool),
    measure: impl Fn() -> u64,
) -> anyhow::Result<(Value, BTreeMap<bool, Vec<(f64, u64)>>)> {
    let mut warm_up = Results::new();
    switch(true);
    turn_cycles(bench, plan, agents, &mut warm_up).await?;
    let mut rounds = BTreeMap::<bool, Vec<(f64, u64)>>::new();
    for on in [false, true, true, false, false, true, true, false] {
        switch(on);
        note(format!("{what}: a round with it {}", if on { "on" } else { "off" }));
        let before = measure();
        let mut round = Results::new();
        turn_cycles(bench, plan, agents, &mut round).await?;
        let rate = round.number("turn_cycles_per_s").unwrap_or(0.0);
        rounds.entry(on).or_default().push((rate, measure() - before));
    }
    switch(true);
    Ok((warm_up.get("turn_cycles_per_s").cloned().unwrap_or(Value::Null), rounds))
}

/// The turn cycle with the agents' `last_seen_at` writes off and on ([`rounds_off_on`]); also
/// how many of those writes each round made (none when off; with the throttle, about one per
/// agent per round when on, since every round registers fresh agents).
pub async fn liveness_overhead(bench: &Arc<Bench>, plan: &Plan, agents: usize, r: &mut Results) -> anyhow::Result<()> {
    let (state, counted) = (bench.state.clone(), bench.state.clone());
    let switch = move |on: bool| state.record_liveness(on);
    let measure = move || counted.liveness_writes();
    let (warm_up, rounds) = rounds_off_on(bench, plan, agents, "liveness overhead", switch, measure).await?;
    r.set("liveness_warm_up_round", warm_up);
    let rates = |on: bool| rounds[&on].iter().map(|(rate, _)| *rate).collect::<Vec<f64>>();
    let writes = |on: bool| rounds[&on].iter().map(|(_, w)| *w).collect::<Vec<u64>>();
    let (off, on) = (mean(rates(false).into_iter()), mean(rates(true).into_iter()));
    r.set_rounded("turn_cycles_per_s_liveness_off", off, 1);
    r.set_rounded("turn_cycles_per_s_liveness_on", on, 1);
    r.set("liveness_rounds_off", rates(false));
    r.set("liveness_rounds_on", rates(true));
    r.set("liveness_writes_per_round_off", writes(false));
    r.set("liveness_writes_per_round_on", writes(true));
    r.set_rounded("liveness_overhead_pct", (off - on) / off.max(1e-9) * 100.0, 2);
    Ok(())
}
