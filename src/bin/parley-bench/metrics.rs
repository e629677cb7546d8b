//! The metrics-overhead phase (`--only metrics`, never in a default run): one long turn-cycle
//! phase with Prometheus recording flipped on and off every half second, so that both settings
//! see the same database, agents and moment of the run, and their difference is the cost of
//! recording.

use std::sync::{Arc, atomic::Ordering};
use std::time::Duration;

use crate::{
    Plan,
    cycles::{CYCLES_DONE, cycle_window, turn_cycles},
    harness::Bench,
    report::{Results, note},
    stats::mean,
};

/// Length of one slice of [`sliced_off_on`].
const SLICE: Duration = Duration::from_millis(500);
/// The start of a slice that is not counted: requests begun under the other setting finish.
const SLICE_SETTLE: Duration = Duration::from_millis(100);

/// One long turn-cycle phase (90 s) with a switch flipped every [`SLICE`], in pairs of adjacent
/// slices (on then off, then off then on, alternately), so that both settings see the same
/// database, the same agents and the same moment of the run. Returns each pair's cycle rates
/// `(on, off)`, counted over the slice after its first [`SLICE_SETTLE`].
async fn sliced_off_on(bench: &Arc<Bench>, agents: usize, switch: impl Fn(bool)) -> anyhow::Result<Vec<(f64, f64)>> {
    let plan = Plan { negotiations_per_agent: 600, cycle_secs: 90, ..Plan::new(false) };
    *cycle_window() = None;
    let sampler = async {
        let window = loop {
            if let Some(w) = *cycle_window() {
                break w;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let counted = (SLICE - SLICE_SETTLE).as_secs_f64();
        let (mut pairs, mut t) = (Vec::new(), window.from);
        while t + 2 * SLICE <= window.to {
            let order = if pairs.len() % 2 == 0 { [true, false] } else { [false, true] };
            let mut rate = [0.0; 2];
            for on in order {
                switch(on);
                tokio::time::sleep_until((t + SLICE_SETTLE).into()).await;
                let before = CYCLES_DONE.load(Ordering::Relaxed);
                tokio::time::sleep_until((t + SLICE).into()).await;
                rate[usize::from(on)] = (CYCLES_DONE.load(Ordering::Relaxed) - before) as f64 / counted;
                t += SLICE;
            }
            pairs.push((rate[1], rate[0]));
        }
        switch(true);
        pairs
    };
    let mut phase = Results::new();
    let (done, pairs) = tokio::join!(turn_cycles(bench, &plan, agents, &mut phase), sampler);
    done?;
    // A pair in which the agents ran out of parked turns compares nothing.
    Ok(pairs.into_iter().filter(|(on, off)| *on > 0.0 && *off > 0.0).collect())
}

/// The turn cycle with metrics recording on and off, flipped every half second within one phase
/// ([`sliced_off_on`]): the overhead is the mean over the pairs of `(off - on) / off`, with its
/// 95 % confidence interval (two standard errors of that mean).
pub async fn metrics_overhead(bench: &Arc<Bench>, agents: usize, r: &mut Results) -> anyhow::Result<()> {
    note("metrics overhead: one 90 s turn-cycle phase, recording flipped every 0.5 s");
    let pairs = sliced_off_on(bench, agents, parley::install_metrics).await?;
    let n = pairs.len().max(1) as f64;
    let pct: Vec<f64> = pairs.iter().map(|(on, off)| (off - on) / off * 100.0).collect();
    let mean_pct = mean(pct.iter().copied());
    let sd = (pct.iter().map(|d| (d - mean_pct).powi(2)).sum::<f64>() / (n - 1.0).max(1.0)).sqrt();
    r.set("metrics_slice_pairs", pairs.len());
    r.set_rounded("turn_cycles_per_s_metrics_on", mean(pairs.iter().map(|p| p.0)), 1);
    r.set_rounded("turn_cycles_per_s_metrics_off", mean(pairs.iter().map(|p| p.1)), 1);
    r.set_rounded("metrics_overhead_pct", mean_pct, 2);
    r.set_rounded("metrics_overhead_ci95_pct", 2.0 * sd / n.sqrt(), 2);
    r.set_rounded("metrics_overhead_pair_sd_pct", sd, 2);
    Ok(())
}
