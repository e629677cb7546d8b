//! The directory phase (`directory`): discovery and ranking over HTTP against 10 000
//! capabilities of 2 000 agents seeded in bulk SQL, and where one ranking's time goes in
//! process (the candidates' query, then the assessments).

use std::sync::Arc;
use std::time::Instant;

use reqwest::StatusCode;
use serde_json::json;
use sqlx::PgPool;

use crate::{
    Plan,
    harness::{Bench, send_expecting},
    report::{Results, note},
    stats::ms_since,
    timing::{Window, join_all, spawn_all},
};

/// Agents and capabilities of the directory phase.
const DIRECTORY_AGENTS: usize = 2000;
const DIRECTORY_CAPABILITIES_PER_AGENT: usize = 5;
/// Concurrent clients of the directory phase.
const DIRECTORY_CONCURRENCY: usize = 16;
const TASK_TYPES: [&str; 8] = [
    "code-review",
    "code-generation",
    "testing",
    "documentation",
    "analysis",
    "summarization",
    "translation",
    "custom",
];
const VOCABULARY: [&str; 24] = [
    "rust",
    "python",
    "security",
    "performance",
    "api",
    "database",
    "sql",
    "frontend",
    "react",
    "legal",
    "contract",
    "finance",
    "invoice",
    "pdf",
    "report",
    "french",
    "german",
    "spanish",
    "unit",
    "integration",
    "docs",
    "markdown",
    "metrics",
    "logs",
];

/// The capability columns [`seed_directory`] inserts, one entry per capability.
#[derive(Default)]
struct Capabilities {
    ids: Vec<uuid::Uuid>,
    agents: Vec<uuid::Uuid>,
    types: Vec<String>,
    customs: Vec<Option<String>>,
    latencies: Vec<Option<i64>>,
    costs: Vec<Option<f64>>,
    descriptions: Vec<String>,
    tags: Vec<String>,
    skills: Vec<Option<String>>,
}

/// Registers 10 000 capabilities over 2 000 agents in bulk SQL (varied kinds, costs, latencies,
/// tags, descriptions; a third with their own skill) and trust records for every agent.
async fn seed_directory(pool: &PgPool) -> anyhow::Result<()> {
    let word = |i: usize| VOCABULARY[i % VOCABULARY.len()];
    let agent_ids: Vec<uuid::Uuid> = (0..DIRECTORY_AGENTS).map(|_| uuid::Uuid::now_v7()).collect();
    let owners: Vec<String> = (0..DIRECTORY_AGENTS).map(|i| format!("bench-directory-user-{i}")).collect();
    sqlx::query(
        "INSERT INTO agents (agent_id, owner_user_id, name)
         SELECT a, o, 'bench directory agent' FROM UNNEST($1::uuid[], $2::text[]) AS t(a, o)",
    )
    .bind(&agent_ids)
    .bind(&owners)
    .execute(pool)
    .await?;
    let mut c = Capabilities::default();
    for (i, agent) in agent_ids.iter().enumerate() {
        for k in 0..DIRECTORY_CAPABILITIES_PER_AGENT {
            let j = i * DIRECTORY_CAPABILITIES_PER_AGENT + k;
            let task_type = TASK_TYPES[(i + k) % TASK_TYPES.len()];
            c.ids.push(uuid::Uuid::now_v7());
            c.agents.push(*agent);
            c.types.push(task_type.to_owned());
            c.customs.push((task_type == "custom").then(|| format!("custom-{}", i % 20)));
            c.latencies.push((!j.is_multiple_of(10)).then_some(200 + ((i * 37 + k * 101) % 20_000) as i64));
            c.costs.push((!j.is_multiple_of(7)).then_some(((i * 13 + k * 7) % 500) as f64 / 100.0));
            c.descriptions.push(format!("{} {} for {} and {} work", task_type, word(i), word(i + k + 3), word(j * 7)));
            let t = json!([word(i * 3 + k), word(i + 11), word(j + 5)]);
            c.tags.push(t.to_string());
            c.skills.push((j.is_multiple_of(3)).then(|| {
                json!({
                    "id": format!("skill-{j}"), "name": format!("{} {}", word(j), task_type), "tags": t,
                    "input_modes": ["application/json"], "output_modes": ["application/json"],
                    "capabilities_detail": {format!("{}_{}", word(j + 1), word(j + 2)): {}},
                    "performance": {"avg_processing_time_ms": 500 + (j % 9000)},
                    "assessment": {"keywords": [word(j + 9), word(j + 13)], "anti_patterns": [format!("no {}", word(j + 4))]}
                })
                .to_string()
            }));
        }
    }
    sqlx::query(
        r#"INSERT INTO capabilities (capability_id, agent_id, task_type, custom_type, input_schema, output_schema,
                                     estimated_latency_ms, estimated_cost_usd, description, tags, skill)
           SELECT c, a, t, ct, '{"type": "object"}', '{"type": "object"}', l, co, d, tg::jsonb, s::jsonb
             FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int8[], $6::float8[], $7::text[],
                         $8::text[], $9::text[]) AS x(c, a, t, ct, l, co, d, tg, s)"#,
    )
    .bind(&c.ids)
    .bind(&c.agents)
    .bind(&c.types)
    .bind(&c.customs)
    .bind(&c.latencies)
    .bind(&c.costs)
    .bind(&c.descriptions)
    .bind(&c.tags)
    .bind(&c.skills)
    .execute(pool)
    .await?;
    let answered: Vec<i32> = (0..DIRECTORY_AGENTS).map(|i| (i % 10) as i32).collect();
    let expired: Vec<i32> = (0..DIRECTORY_AGENTS).map(|i| (i % 3) as i32).collect();
    sqlx::query(
        "INSERT INTO agent_trust_days (agent_id, day, claims_answered, claims_expired)
         SELECT a, (now() AT TIME ZONE 'UTC')::date, x, e FROM UNNEST($1::uuid[], $2::int4[], $3::int4[]) AS t(a, x, e)",
    )
    .bind(&agent_ids)
    .bind(&answered)
    .bind(&expired)
    .execute(pool)
    .await?;
    sqlx::query("ANALYZE").execute(pool).await?;
    Ok(())
}

/// Latencies (ms) of `DIRECTORY_CONCURRENCY` clients sending `make(i)` for `secs` after a
/// warm-up; client `c` sends requests c, c + `DIRECTORY_CONCURRENCY`, ...
async fn http_latencies(
    secs: u64,
    make: impl Fn(usize) -> reqwest::RequestBuilder + Send + Sync + 'static,
) -> anyhow::Result<Vec<f64>> {
    let make = Arc::new(make);
    let window = Window::after_warmup(secs);
    let clients = (0..DIRECTORY_CONCURRENCY).map(|c| {
        let make = make.clone();
        async move {
            let mut samples = Vec::new();
            let mut i = c;
            while window.open() {
                let t = Instant::now();
                send_expecting(make(i), StatusCode::OK, "directory request").await?;
                if window.started_in(t) {
                    samples.push(ms_since(t));
                }
                i += DIRECTORY_CONCURRENCY;
            }
            anyhow::Ok(samples)
        }
    });
    Ok(join_all(spawn_all(clients)).await?.concat())
}

/// Discovery and ranking over 10 000 capabilities of 2 000 agents, over HTTP.
pub async fn directory(bench: &Arc<Bench>, plan: &Plan, r: &mut Results) -> anyhow::Result<()> {
    let capabilities = DIRECTORY_AGENTS * DIRECTORY_CAPABILITIES_PER_AGENT;
    note(format!("directory: seeding {capabilities} capabilities over {DIRECTORY_AGENTS} agents"));
    let t = Instant::now();
    seed_directory(&bench.pool).await?;
    r.set_rounded("directory_seed_s", t.elapsed().as_secs_f64(), 2);
    r.set("directory_capabilities", capabilities);
    r.set("directory_agents", DIRECTORY_AGENTS);
    r.set("directory_clients", DIRECTORY_CONCURRENCY);

    note(format!("discovery: {} s, {DIRECTORY_CONCURRENCY} clients", plan.http_secs));
    let (client, base, service) = (bench.client.clone(), bench.base.clone(), bench.service.clone());
    let discover = http_latencies(plan.http_secs, move |i| {
        let task_type = TASK_TYPES[i % TASK_TYPES.len()];
        let caps = if i % 2 == 0 { "&maxCostUsd=3&maxLatencyMs=15000" } else { "" };
        client.get(format!("{base}/api/agents/discover?taskType={task_type}{caps}")).bearer_auth(&service)
    })
    .await?;
    r.set("discover_requests", discover.len());
    r.set_p50_p99("discover", &discover, 2);

    note(format!("ranking: {} s, {DIRECTORY_CONCURRENCY} clients", plan.http_secs));
    let (client, base, service) = (bench.client.clone(), bench.base.clone(), bench.service.clone());
    let rank = http_latencies(plan.http_secs, move |i| {
        let body = json!({
            "task_summary": format!("{} {} work on {} and {}", TASK_TYPES[i % 7], VOCABULARY[i % 24], VOCABULARY[(i * 7) % 24], VOCABULARY[(i * 5 + 3) % 24]),
            "max_cost_amount": "$3.00",
            "max_latency_ms": 10000,
            "taskType": TASK_TYPES[i % TASK_TYPES.len()],
        });
        client.post(format!("{base}/api/agents/rank")).bearer_auth(&service).json(&body)
    })
    .await?;
    r.set("rank_requests", rank.len());
    r.set_p50_p99("rank", &rank, 2);
    rank_in_process(bench, r).await
}

/// Where a ranking's time goes, one request at a time in process: the candidates' query, then
/// the assessments (and, for comparison, every candidate assessed with its full explanation, as
/// a ranking did before it scored first and explained only what it shows).
async fn rank_in_process(bench: &Bench, r: &mut Results) -> anyhow::Result<()> {
    use parley::ranking;
    let body = json!({"task_summary": "code review of rust security work", "max_cost_amount": "$3.00", "max_latency_ms": 10000, "taskType": "code-review"});
    let query = ranking::RankQuery::parse(&body).map_err(|e| anyhow::anyhow!("{e}"))?;
    let config = bench.state.config().clone();
    let (mut sql_ms, mut assess_ms, mut full_ms, mut found_n) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for _ in 0..20 {
        let mut conn = bench.pool.acquire().await?;
        let t = Instant::now();
        let found = ranking::candidates(&mut conn, &query, config.min_trust, config.anonymous_id_ttl).await?;
        sql_ms.push(ms_since(t));
        found_n = found.len();
        let t = Instant::now();
        for c in &found {
            std::hint::black_box(c.calculator.assess(&query.request, Some(c.queue_depth), None));
        }
        full_ms.push(ms_since(t));
        let t = Instant::now();
        std::hint::black_box(ranking::rank(&query.request, found, query.limit));
        assess_ms.push(ms_since(t));
    }
    r.set("rank_candidates_per_request", found_n);
    r.set_percentile("rank_inprocess_assess_all_full_p50_ms", &full_ms, 50.0, 2);
    r.set_percentile("rank_inprocess_sql_p50_ms", &sql_ms, 50.0, 2);
    r.set_percentile("rank_inprocess_assess_p50_ms", &assess_ms, 50.0, 2);
    Ok(())
}
