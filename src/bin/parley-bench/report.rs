//! What a run measured and how it is shown: the [`Results`] every phase writes its figures into
//! (one JSON object with `--json`, keys in sorted order), the table printed otherwise, and the
//! progress notes on stderr. Kept apart from the phases so that the keys and rows BENCHMARKS.md
//! describes are read off in one place.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::{
    stats::{percentile, round},
    timing::HTTP_CONCURRENCY,
};

/// Everything measured, by key; serialized as one JSON object in key order.
#[derive(Debug, Default, Serialize)]
#[serde(transparent)]
pub struct Results(BTreeMap<String, Value>);

impl Results {
    pub fn new() -> Results {
        Results::default()
    }

    /// Sets `key` to `value` as JSON (a NaN becomes null).
    pub fn set(&mut self, key: impl Into<String>, value: impl Serialize) {
        self.0.insert(key.into(), serde_json::to_value(value).unwrap_or(Value::Null));
    }

    /// Sets `key` to `value` rounded to `dp` decimal places.
    pub fn set_rounded(&mut self, key: impl Into<String>, value: f64, dp: i32) {
        self.set(key, round(value, dp));
    }

    /// Sets `key` to the `p`th percentile of `samples` (in any order), rounded to `dp` places.
    pub fn set_percentile(&mut self, key: impl Into<String>, samples: &[f64], p: f64, dp: i32) {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        self.set_rounded(key, percentile(&sorted, p), dp);
    }

    /// Sets `<prefix>_p50_ms` and `<prefix>_p99_ms` from latency samples in milliseconds.
    pub fn set_p50_p99(&mut self, prefix: &str, samples: &[f64], dp: i32) {
        self.set_percentile(format!("{prefix}_p50_ms"), samples, 50.0, dp);
        self.set_percentile(format!("{prefix}_p99_ms"), samples, 99.0, dp);
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// The figure at `key`, when there is one.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(Value::as_f64)
    }
}

/// A progress note. It goes to stderr so that `--json` output stays one object on stdout.
pub fn note(msg: impl AsRef<str>) {
    eprintln!("parley-bench: {}", msg.as_ref());
}

/// The rows of the table printed without `--json`: name, value and note, where each `{key}`
/// stands for the figure at that key (`null` when the run has none). A row whose value is all
/// nulls belongs to a phase that did not run and is left out.
const ROWS: [(&str, &str, &str); 35] = [
    ("turn cycles (pickup+respond) /s", "{turn_cycles_per_s}", "{turn_cycle_agents} agents"),
    ("pgbench -N TPS (same clients)", "{pgbench_tps}", "-c {pgbench_clients} -j 2"),
    ("  ratio (target >= 0.5)", "{turn_cycle_ratio}", ""),
    ("SQL floor cycles /s (pgbench script)", "{sql_floor_tps}", "ratio to pgbench -N {sql_floor_ratio}"),
    ("  turn cycles vs floor", "{turn_cycle_vs_floor}", ""),
    ("  floor + timer moves /s", "{sql_floor_timers_tps}", "ratio {sql_floor_timers_ratio}"),
    ("  floor + timers + NOTIFY /s", "{sql_floor_timers_notify_tps}", "ratio {sql_floor_timers_notify_ratio}"),
    ("  row updates in the cycles: HOT share", "{hot_update_share_in_cycles}", "{row_updates_in_cycles}"),
    ("  pickup p50 / p99 ms", "{pickup_p50_ms} / {pickup_p99_ms}", ""),
    ("  respond p50 / p99 ms", "{respond_p50_ms} / {respond_p99_ms}", ""),
    (
        "wake latency p50 / p99 ms",
        "{wake_latency_p50_ms} / {wake_latency_p99_ms}",
        "{wake_latency_samples} wakes, target p99 < 10",
    ),
    (
        "  from park tx start p50 / p99 ms",
        "{wake_from_park_tx_start_p50_ms} / {wake_from_park_tx_start_p99_ms}",
        "upper bound",
    ),
    ("system-vs-system negotiations /s", "{svs_negotiations_per_s}", "{svs_turns_per_negotiation} turns each"),
    (
        "decision, first sight: mean us / p99 <= ms",
        "{decision_first_sight_mean_us} / {decision_first_sight_p99_bound_ms}",
        "{decisions_first_sight} decisions, {decision_first_sight_within_1ms} within 1 ms",
    ),
    (
        "decision, warm: mean us / p99 <= ms",
        "{decision_warm_mean_us} / {decision_warm_p99_bound_ms}",
        "{decisions_warm} decisions, {decision_warm_within_1ms} within 1 ms",
    ),
    ("assessments /s in process", "{assess_per_s_inprocess}", "{assess_skills} skills, one thread"),
    ("assessments /s over HTTP", "{assess_per_s_http}", "{http_concurrency} concurrent"),
    ("empty handler /s over HTTP", "{http_baseline_per_s}", "ratio {assess_http_ratio}"),
    (
        "discovery p50 / p99 ms",
        "{discover_p50_ms} / {discover_p99_ms}",
        "{directory_capabilities} capabilities, {directory_clients} clients, target p99 <= 20",
    ),
    (
        "ranking p50 / p99 ms",
        "{rank_p50_ms} / {rank_p99_ms}",
        "{rank_candidates_per_request} candidates each, target p99 <= 50",
    ),
    (
        "  in process: query / assess p50 ms",
        "{rank_inprocess_sql_p50_ms} / {rank_inprocess_assess_p50_ms}",
        "one at a time; every candidate explained: {rank_inprocess_assess_all_full_p50_ms} ms",
    ),
    ("delegations /s (request-accept-complete)", "{delegations_per_s}", "{delegation_pairs} requester/target pairs"),
    (
        "  round trip p50 / p99 ms",
        "{delegation_rtt_p50_ms} / {delegation_rtt_p99_ms}",
        "delegate sent -> result answered, target p99 < 25",
    ),
    (
        "  over A2A (blocking SendMessage): /s",
        "{a2a_delegations_per_s}",
        "the same pairs and work, asked as A2A 1.0 sends in the same run",
    ),
    (
        "  over A2A: send -> completed p50 / p99 ms",
        "{a2a_delegation_rtt_p50_ms} / {a2a_delegation_rtt_p99_ms}",
        "beside the delegate call's round trip above",
    ),
    (
        "  SQL floor: delegations /s (mean ms)",
        "{delegation_sql_floor_per_s} ({delegation_sql_floor_mean_ms})",
        "the same functions under pgbench; HTTP / floor {delegation_vs_sql_floor}",
    ),
    (
        "  SQL floor: p50 / p99 ms",
        "{delegation_sql_floor_p50_ms} / {delegation_sql_floor_p99_ms}",
        "one delegation's SQL, no HTTP",
    ),
    ("long-polls waiting", "{longpoll_waiters}", ""),
    ("  process RSS MB (peak)", "{longpoll_rss_mb}", "before {longpoll_rss_before_mb}"),
    ("  DB connections (pg_stat_activity)", "{longpoll_db_connections}", "pool size {pool_size}"),
    (
        "turn cycles /s, metrics off / on",
        "{turn_cycles_per_s_metrics_off} / {turn_cycles_per_s_metrics_on}",
        "overhead {metrics_overhead_pct} % ± {metrics_overhead_ci95_pct} (95 %, {metrics_slice_pairs} half-second pairs), target <= 3",
    ),
    (
        "turn cycles /s, liveness off / on",
        "{turn_cycles_per_s_liveness_off} / {turn_cycles_per_s_liveness_on}",
        "overhead {liveness_overhead_pct} %",
    ),
    (
        "webhook: event -> delivery p50 / p99 ms",
        "{webhook_latency_p50_ms} / {webhook_latency_p99_ms}",
        "max {webhook_latency_max_ms}, {webhook_events} events of system-vs-system negotiations",
    ),
    ("  deliveries /s while events come", "{webhook_deliveries_per_s_live}", "one endpoint, every event type"),
    (
        "  deliveries /s draining a backlog",
        "{webhook_deliveries_per_s_backlog}",
        "{webhook_backlog} redelivered in {webhook_backlog_secs} s, {webhook_concurrency} in flight",
    ),
];

/// `template` with each `{key}` replaced by the figure at `key` as JSON (`null` when absent);
/// `{http_concurrency}` is [`HTTP_CONCURRENCY`].
fn fill(template: &str, r: &Results) -> String {
    let (mut out, mut rest) = (String::new(), template);
    while let Some((before, after)) = rest.split_once('{') {
        let Some((key, after)) = after.split_once('}') else { break };
        out.push_str(before);
        match key {
            "http_concurrency" => out.push_str(&HTTP_CONCURRENCY.to_string()),
            _ => out.push_str(&r.get(key).cloned().unwrap_or(Value::Null).to_string()),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The keys a template's `{key}`s name (not `{http_concurrency}`).
fn figures(template: &str) -> impl Iterator<Item = &str> {
    template
        .split('{')
        .skip(1)
        .filter_map(|part| part.split_once('}'))
        .map(|(key, _)| key)
        .filter(|key| *key != "http_concurrency")
}

/// Prints the table: a header with the mode and the load before and after, then [`ROWS`].
pub fn print_table(r: &Results) {
    let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    println!("parley-bench ({}; load before: {}, after: {})", text("mode"), text("load_before"), text("load_after"));
    for (name, value, note) in ROWS {
        if figures(value).all(|key| r.get(key).is_none_or(Value::is_null)) {
            continue;
        }
        let value = fill(value, r);
        println!("{name:<38} {value:>14}   {}", fill(note, r));
    }
    print_history(r);
}

/// The history phase's figures, one line per size and path: `history_<N>_<path>` keys, whose
/// sizes the run chose, so they are listed as they come rather than from [`ROWS`].
fn print_history(r: &Results) {
    for (key, value) in r.0.iter().filter(|(k, _)| k.starts_with("history_")) {
        println!("{key:<52} {value:>14}");
    }
}
