//! The memory compiled schemas hold, measured from the process (its resident set), in a test
//! binary of its own so that nothing else runs beside it.
//!
//! Many capabilities each with the heaviest patterns a schema may hold, each checked against a
//! long text on two threads (so that every pattern also grows its matching caches): what they
//! would weigh if kept adds up to far more than the cache's budget, and the process grows by
//! about the budget, not by that.

use std::{sync::Arc, time::Duration};

use parley::schema::{Checker, CheckerConfig, Prepared};
use serde_json::{Value, json};

/// The process's resident set, bytes.
fn resident() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux's /proc");
    let kb: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kb * 1024
}

/// A schema whose patterns weigh nearly what one schema may: five Unicode-class patterns,
/// distinct per `i`.
fn heavy(i: usize) -> Value {
    let props: serde_json::Map<String, Value> = (0..5)
        .map(|j| (format!("p{j}"), json!({"type": "string", "pattern": format!("\\p{{L}}{{6}}{i}x{j}")})))
        .collect();
    json!({"type": "object", "properties": props})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heavy_schemas_cost_the_process_their_budget_not_their_sum() {
    const BUDGET: usize = 8 << 20;
    const SCHEMAS: usize = 16;
    let checker = Checker::new(CheckerConfig {
        threads: 2,
        timeout: Duration::from_secs(60),
        budget: Duration::from_secs(3600),
        cache_bytes: BUDGET,
    });
    // Warm up what every check allocates once (the runtime, the pool's threads).
    checker.check("owner", &json!({"type": "object"}), &json!({}), "input").await.unwrap().unwrap();
    let before = resident();
    let mut weights = 0usize;
    for i in 0..SCHEMAS {
        let schema = heavy(i);
        weights += Prepared::compile(&schema).expect("accepted").weight(2);
        let text: serde_json::Map<String, Value> =
            (0..5).map(|j| (format!("p{j}"), json!(format!("{}{i}x{j}", "éü".repeat(4_000))))).collect();
        let text = Arc::new(Value::Object(text));
        // Two checks at once: both threads grow their caches for the patterns.
        let (a, b) = tokio::join!(
            checker.check_all("owner", vec![schema.clone()], text.clone(), "input"),
            checker.check_all("other", vec![schema], text, "input"),
        );
        assert_eq!((a.unwrap().pop(), b.unwrap().pop()), (Some(Ok(())), Some(Ok(()))));
    }
    let grown = resident().saturating_sub(before);
    let (held, kept) = checker.cached();
    eprintln!(
        "{SCHEMAS} heavy schemas weigh {} MiB kept; the cache held {} MiB in {kept} of them; the process grew by {} MiB",
        weights >> 20,
        held >> 20,
        grown >> 20
    );
    assert!(held <= BUDGET);
    assert!(weights > 6 * BUDGET, "the schemas together weigh far more than the budget: {weights}");
    assert!(grown < 3 * BUDGET, "the process grew by {grown} bytes for a budget of {BUDGET}");
}
