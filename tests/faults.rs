//! The fault harness: many agents polling (sometimes twice at once), answering late, releasing
//! and vanishing over many turns, with the service killed (SIGKILL), PostgreSQL restarted and
//! the service's database connections terminated under load. Throughout, no agent may hold two
//! live claims; afterwards every negotiation must have ended and every invariant must hold in
//! SQL. Counts are reported the Jepsen way: lost, duplicated, unexpected, recovered.
//!
//! Delegations run through the same faults (`delegations`): requesters keep delegating with
//! their own request ids (resent after a lost answer), targets accept, complete, reject, fail or
//! vanish, and the timers end the rest. Afterwards every delegation must have ended, nothing the
//! clients were told may be missing or doubled, in SQL and over HTTP; their counts are reported
//! on a line of their own the same way.
//!
//! A2A agents registered by their AgentCard take delegations too (`a2a`): Parley pushes each
//! attempt to them and follows it through the same faults; afterwards no attempt may be lost, no
//! message may have started two tasks at the agent, no accepted attempt may have timed out though
//! its task had completed before the deadline, no task may be left working for an ended attempt,
//! and no message may have reached the agent after its attempt's accept deadline. Their line is
//! the third.
//!
//! The platform's webhook takes every event through the same faults (`webhooks`), its receiver
//! failing and slow while they happen: afterwards every event must have been delivered, signed,
//! and any event received twice only under its one `webhook-id`. Its line is the fourth.
//!
//! `cargo test --test faults` runs the short version (CI runs it). Set
//! `PARLEY_FAULT_SCALE=full` for the long one (more negotiations, more agents, more kills).

#[path = "faults/a2a.rs"]
mod a2a;
#[path = "faults/delegations.rs"]
mod delegations;
#[path = "api/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;
#[path = "api/helpers.rs"]
#[allow(dead_code)]
mod helpers;
#[path = "faults/webhooks.rs"]
mod webhooks;

use std::{
    collections::{HashMap, HashSet},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use helpers::{TEST_SECRET, post_for_json};
use parley::{CallerRole, JwtKeys};
use serde_json::{Value, json};

/// How big a run is.
#[derive(Clone, Copy, Debug)]
struct Scale {
    negotiations: usize,
    agents: usize,
    kills: usize,
    /// Agents that keep delegating, and agents that take the work.
    requesters: usize,
    targets: usize,
    /// Agents registered by their AgentCard, which Parley calls.
    a2a_agents: usize,
}

fn scale() -> Scale {
    match std::env::var("PARLEY_FAULT_SCALE").as_deref() {
        Ok("full") => Scale { negotiations: 1500, agents: 32, kills: 8, requesters: 6, targets: 8, a2a_agents: 6 },
        _ => Scale { negotiations: 120, agents: 12, kills: 3, requesters: 3, targets: 4, a2a_agents: 3 },
    }
}

/// What the clients saw, for the Jepsen-style report.
#[derive(Default)]
struct Ledger {
    /// (task, turn) -> action, for every respond answered 200.
    acknowledged: Mutex<HashMap<(String, u64), String>>,
    /// (task, claim token) -> agent, for every pickup answered 200.
    claims: Mutex<HashMap<(String, String), String>>,
    /// Same claim token handed to two different agents.
    double_claims: AtomicU64,
    /// Times an agent was seen holding two live claims at once (sampled throughout the run).
    two_live_claims: AtomicU64,
    /// 5xx answers or bodies that broke the contract.
    unexpected: AtomicU64,
    /// Requests that failed to connect or got 503 (the service or its database was down):
    /// expected under faults, and retried.
    refused: AtomicU64,
}

/// A tiny deterministic generator, so that a failing run can be replayed with its seed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One agent's polling loop against `base` until `stop`; behaves badly on purpose.
async fn agent_loop(
    base: Arc<Mutex<String>>,
    agent: (String, String),
    ledger: Arc<Ledger>,
    stop: Arc<AtomicBool>,
    seed: u64,
) {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let mut rng = Lcg(seed);
    let (agent_id, key) = agent;
    while !stop.load(Ordering::Relaxed) {
        let url = base.lock().unwrap().clone();
        let pickup = || {
            client
                .post(format!("{url}/api/agents/{agent_id}/negotiations/pickup?wait=1"))
                .header("x-api-key", &key)
                .send()
        };
        let picked = if rng.below(4) == 0 {
            // Impatient: two pickups at once, the first answer used. Both get the agent's one
            // claim; two claims would show in `watch_claims`.
            tokio::join!(pickup(), pickup()).0
        } else {
            pickup().await
        };
        let picked = match picked {
            Ok(r) => r,
            Err(_) => {
                ledger.refused.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let status = picked.status();
        if status.as_u16() == 204 {
            continue;
        }
        if status.as_u16() == 503 {
            ledger.refused.fetch_add(1, Ordering::Relaxed); // the database was down: retry
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        if status.is_server_error() {
            ledger.unexpected.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let Ok(body) = picked.json::<Value>().await else { continue };
        let (Some(task), Some(token), Some(turn)) =
            (body["negotiationId"].as_str(), body["claimToken"].as_str(), body["turn"]["number"].as_u64())
        else {
            ledger.unexpected.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        {
            let mut claims = ledger.claims.lock().unwrap();
            let key = (task.to_owned(), token.to_owned());
            match claims.get(&key) {
                Some(holder) if holder != &agent_id => {
                    ledger.double_claims.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    claims.insert(key, agent_id.clone());
                }
            }
        }
        let behaviour = rng.below(100);
        if behaviour < 12 {
            continue; // vanish: the claim expires, the turn is picked up again or falls back
        }
        if behaviour < 20 {
            let _ = client
                .post(format!("{url}/api/agents/{agent_id}/negotiations/{task}/release"))
                .header("x-api-key", &key)
                .json(&json!({ "claimToken": token }))
                .send()
                .await;
            continue;
        }
        if behaviour < 30 {
            tokio::time::sleep(Duration::from_millis(900 + rng.below(600))).await; // around the claim timeout
        }
        let action = if turn == 0 {
            "propose"
        } else {
            ["counter", "question", "accept", "reject", "counter"][rng.below(5) as usize]
        };
        let answer = json!({
            "claimToken": token,
            "action": action,
            "message": "fault harness",
            "assessment": { "reasoning": "fault harness turn", "suggestedRoles": { "ownUser": "peer", "otherUser": "peer" } }
        });
        let url = base.lock().unwrap().clone();
        match client
            .post(format!("{url}/api/agents/{agent_id}/negotiations/{task}/respond"))
            .header("x-api-key", &key)
            .json(&answer)
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => {
                ledger.acknowledged.lock().unwrap().insert((task.to_owned(), turn), action.to_owned());
            }
            Ok(r) if r.status().as_u16() == 503 => {
                ledger.refused.fetch_add(1, Ordering::Relaxed);
            }
            Ok(r) if r.status().is_server_error() => {
                ledger.unexpected.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) => {} // 409 stale/completed: the race was lost, correctly
            Err(_) => {
                ledger.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A `parley serve` child process on a fixed port.
struct Service {
    child: Child,
}

impl Service {
    fn start(database_url: &str, port: u16, data_dir: &std::path::Path) -> Service {
        let child = Command::new(env!("CARGO_BIN_EXE_parley"))
            .arg("serve")
            .env("DATABASE_URL", database_url)
            .env("PARLEY_BIND", format!("127.0.0.1:{port}"))
            .env("PARLEY_DATA_DIR", data_dir)
            .env("PARLEY_JWT_SECRET", TEST_SECRET)
            .env("PARLEY_CLAIM_TIMEOUT", "1s")
            .env("PARLEY_PARK_TIMEOUT", "2s")
            .env("PARLEY_PVP_TIMEOUT", "20s")
            .env("PARLEY_DELEGATION_ACCEPT_TIMEOUT", "2s")
            // The run measures faults, not rate limits (see `faults::delegations::cast`).
            .env("PARLEY_OUTBOUND_RATE", "10000")
            .env("PARLEY_INBOUND_RATE", "10000")
            .env("PARLEY_TIMER_POLL", "200ms")
            .env("PARLEY_HOUSEKEEPING_EVERY", "2s")
            // Webhook deliveries fail, time out and are retried within the run (`webhooks`).
            .env("PARLEY_WEBHOOK_TIMEOUT", "1s")
            .env("PARLEY_WEBHOOK_RETRY_FIRST", "1s")
            .env("PARLEY_DB_POOL_SIZE", "24")
            // The A2A agents (`a2a`) are served on 127.0.0.1.
            .env("PARLEY_A2A_ALLOW_PRIVATE_TARGETS", "true")
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting parley serve");
        Service { child }
    }

    fn kill9(mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

/// How many agents hold more than one live claim right now.
const AGENTS_WITH_TWO_LIVE_CLAIMS: &str = "SELECT count(*) FROM (SELECT claim_agent_id FROM tasks
     WHERE state = 'claimed' AND claim_expires_at > now() AND claim_agent_id IS NOT NULL
     GROUP BY claim_agent_id HAVING count(*) > 1) a";

/// Watches the claims throughout the run: no agent may ever hold two live claims at once.
/// Samples that fail (the database is down during a fault) are skipped.
async fn watch_claims(database_url: String, ledger: Arc<Ledger>, stop: Arc<AtomicBool>) {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .test_before_acquire(true)
        .connect_lazy(&database_url)
        .unwrap();
    while !stop.load(Ordering::Relaxed) {
        if let Ok(n) = sqlx::query_scalar::<_, i64>(AGENTS_WITH_TWO_LIVE_CLAIMS).fetch_one(&pool).await {
            ledger.two_live_claims.fetch_add(n as u64, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    pool.close().await;
}

/// Waits for the service to answer `/readyz`: at most a minute (a debug build loads WordNet in
/// seconds, more on a busy machine).
async fn wait_ready(base: &str) {
    for _ in 0..1200 {
        if reqwest::get(format!("{base}/readyz")).await.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the service at {base} did not become ready");
}

/// Everything the invariants check, read from the database.
#[derive(Debug, Default)]
struct Report {
    lost: u64,
    duplicated: u64,
    unexpected: u64,
    recovered: u64,
}

async fn check(pool: &sqlx::PgPool, ledger: &Ledger, in_flight_at_faults: &HashSet<String>) -> Report {
    let mut report = Report::default();
    // The number of rows `sql` counts.
    let count = async |sql: &'static str| sqlx::query_scalar::<_, i64>(sql).fetch_one(pool).await.unwrap() as u64;
    // Duplicated: a turn stored twice, a claim handed to two agents.
    report.duplicated +=
        count("SELECT count(*) FROM (SELECT 1 FROM messages GROUP BY task_id, turn_number HAVING count(*) > 1) d")
            .await;
    report.duplicated += ledger.double_claims.load(Ordering::Relaxed);
    // An agent holding two claims: seen live during the run, or left claimed at the end.
    report.duplicated += ledger.two_live_claims.load(Ordering::Relaxed);
    report.duplicated += count(
        "SELECT count(*) FROM (SELECT 1 FROM tasks WHERE state = 'claimed'
                              GROUP BY claim_agent_id HAVING count(*) > 1) d",
    )
    .await;
    report.duplicated +=
        count("SELECT count(*) FROM (SELECT 1 FROM artifacts GROUP BY task_id, name HAVING count(*) > 1) d").await;
    // Lost: a negotiation that never ended; an acknowledged turn that is not stored as answered.
    report.lost += count("SELECT count(*) FROM tasks WHERE state NOT IN ('completed', 'canceled', 'failed')").await;
    let stored: HashSet<(String, i64, String)> = sqlx::query_as::<_, (uuid::Uuid, i32, String)>(
        "SELECT task_id, turn_number, action FROM messages WHERE played_by = 'personal'",
    )
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .map(|(t, n, a)| (t.to_string(), i64::from(n), a))
    .collect();
    for ((task, turn), action) in ledger.acknowledged.lock().unwrap().iter() {
        if !stored.contains(&(task.clone(), *turn as i64, action.clone())) {
            report.lost += 1;
        }
    }
    // Unexpected: 5xx answers and broken invariants.
    report.unexpected += ledger.unexpected.load(Ordering::Relaxed);
    report.unexpected += count("SELECT count(*) FROM tasks t WHERE t.turn_count <> (SELECT count(*) FROM messages m WHERE m.task_id = t.task_id)").await;
    report.unexpected += count("SELECT count(*) FROM tasks t WHERE t.state IN ('completed', 'canceled')
                              AND (SELECT count(*) FROM artifacts a WHERE a.task_id = t.task_id AND a.name = 'negotiation-outcome') <> 1").await;
    // (The opportunity's latest round: an earlier one ended before a reactivation.)
    report.unexpected += count("SELECT count(*) FROM tasks t JOIN opportunities o USING (opportunity_id)
                              WHERE (t.state = 'completed') = (o.status = 'negotiating')
                                AND t.round = (SELECT max(r.round) FROM tasks r WHERE r.opportunity_id = t.opportunity_id)").await;
    // Gaps in the turn sequence.
    report.unexpected += count("SELECT count(*) FROM (SELECT task_id FROM messages GROUP BY task_id HAVING max(turn_number) + 1 <> count(*)) g").await;
    // Recovered: negotiations in flight at a fault that still ended.
    let ended: HashSet<String> =
        sqlx::query_scalar::<_, uuid::Uuid>("SELECT task_id FROM tasks WHERE state IN ('completed', 'canceled')")
            .fetch_all(pool)
            .await
            .unwrap()
            .into_iter()
            .map(|u| u.to_string())
            .collect();
    report.recovered = in_flight_at_faults.iter().filter(|t| ended.contains(*t)).count() as u64;
    report
}

/// The harness's own connections: unlike the service's pool, this one tests each connection
/// before use, because the faults it causes kill its own connections too.
async fn checker_pool(url: &str) -> sqlx::PgPool {
    sqlx::postgres::PgPoolOptions::new().max_connections(4).test_before_acquire(true).connect(url).await.unwrap()
}

async fn in_flight(pool: &sqlx::PgPool) -> HashSet<String> {
    sqlx::query_scalar::<_, uuid::Uuid>(
        "SELECT task_id FROM tasks WHERE state NOT IN ('completed', 'canceled', 'failed')",
    )
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .map(|u| u.to_string())
    .collect()
}

async fn wait_all_ended(pool: &sqlx::PgPool, limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let open: i64 =
            sqlx::query_scalar("SELECT count(*) FROM tasks WHERE state NOT IN ('completed', 'canceled', 'failed')")
                .fetch_one(pool)
                .await
                .unwrap();
        if open == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_restarts_and_dropped_connections_lose_nothing() {
    let scale = scale();
    let started = Instant::now();
    // A private PostgreSQL, so that restarting it disturbs nothing else.
    let pg_dir = std::env::temp_dir().join(format!("parley-faults-{}", uuid::Uuid::now_v7()));
    let mut pg = parley::database::EmbeddedPostgres::start(&pg_dir).expect("a private PostgreSQL for the fault run");
    let database_url = pg.url("parley_faults");
    parley::database::create_database_if_missing(&database_url).await.unwrap();
    let mut pool = checker_pool(&database_url).await;
    parley::database::migrate(&pool).await.unwrap();

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let data_dir = pg_dir.join("service");
    // In this process, so that it outlives every kill of the service.
    let a2a_server = a2a::AgentServer::start(77).await;
    let mut service = Service::start(&database_url, port, &data_dir);
    wait_ready(&base).await;

    let jwt = JwtKeys::new(TEST_SECRET.as_bytes());
    let service_token = jwt.mint("platform", CallerRole::Service, Duration::from_secs(3600)).unwrap();
    let client = reqwest::Client::new();
    // The platform's webhook, whose receiver fails while the faults happen.
    let hooks = webhooks::Receiver::start(99).await;
    webhooks::register(&client, &base, &service_token, &hooks).await;
    // Agents: `agents` users, each with one personal agent; every negotiation is mixed.
    let mut agents = Vec::new();
    for i in 0..scale.agents {
        let user = format!("agent-user-{i}");
        let token = jwt.mint(&user, CallerRole::User, Duration::from_secs(3600)).unwrap();
        let r = post_for_json(&client, &format!("{base}/api/agents"), &token, &json!({ "name": "fault agent" })).await;
        agents.push((r["agent"]["id"].as_str().unwrap().to_owned(), r["apiKey"]["key"].as_str().unwrap().to_owned()));
    }

    let ledger = Arc::new(Ledger::default());
    let stop = Arc::new(AtomicBool::new(false));
    let shared_base = Arc::new(Mutex::new(base.clone()));
    let mut pollers = Vec::new();
    for (i, agent) in agents.iter().enumerate() {
        pollers.push(tokio::spawn(agent_loop(
            shared_base.clone(),
            agent.clone(),
            ledger.clone(),
            stop.clone(),
            7 + i as u64,
        )));
    }
    pollers.push(tokio::spawn(watch_claims(database_url.clone(), ledger.clone(), stop.clone())));
    // Delegations in flight through the same faults: the requesters stop with the faults, the
    // targets with the agents.
    let cast = delegations::cast(&client, &base, &jwt, scale.requesters, scale.targets).await;
    let delegation_ledger = Arc::new(delegations::Ledger::default());
    let stop_delegating = Arc::new(AtomicBool::new(false));
    let mut requesters = Vec::new();
    for (i, agent) in cast.requesters.iter().enumerate() {
        let (base, ledger, stop) = (shared_base.clone(), delegation_ledger.clone(), stop_delegating.clone());
        requesters.push(tokio::spawn(delegations::requester_loop(
            base,
            i,
            agent.clone(),
            ledger,
            stop,
            1000 + i as u64,
        )));
    }
    for (i, agent) in cast.targets.iter().enumerate() {
        let (base, ledger) = (shared_base.clone(), delegation_ledger.clone());
        pollers.push(tokio::spawn(delegations::target_loop(
            base,
            agent.clone(),
            ledger,
            stop.clone(),
            2000 + i as u64,
        )));
    }
    // The same requesters delegate to the A2A agents too, through the same faults.
    let a2a_agents = a2a::cast(&client, &base, &jwt, &a2a_server, scale.a2a_agents).await;
    let a2a_ledger = Arc::new(a2a::Ledger::default());
    for (i, agent) in cast.requesters.iter().enumerate() {
        let (base, ledger, stop) = (shared_base.clone(), a2a_ledger.clone(), stop_delegating.clone());
        requesters.push(tokio::spawn(a2a::requester_loop(base, agent.clone(), ledger, stop, 3000 + i as u64)));
    }
    let mut delegations_in_flight_at_faults = HashSet::new();

    // Negotiations arrive while faults happen.
    let mut rng = Lcg(42);
    let mut in_flight_at_faults = HashSet::new();
    let per_phase = scale.negotiations / (scale.kills + 2);
    let mut created = 0;
    let mut create = |n: usize, rng: &mut Lcg| {
        let mut bodies = Vec::new();
        for _ in 0..n {
            let i = created;
            created += 1;
            let mut body = fixtures::good_match();
            body["sourceUser"]["id"] = json!(format!("source-{i}"));
            body["candidateUser"]["id"] = json!(format!("agent-user-{}", rng.below(scale.agents as u64)));
            if i % 3 == 0 {
                body["candidateUser"]["profile"]["skills"] = json!(["go"]);
            }
            bodies.push(body);
        }
        bodies
    };
    let post_all = |bodies: Vec<Value>| {
        let client = client.clone();
        let token = service_token.clone();
        let base = base.clone();
        let ledger = ledger.clone();
        async move {
            for body in bodies {
                // A create that fails while the service is down (a restart loads WordNet first:
                // seconds in a debug build on a busy machine) is retried with the same
                // opportunity id for up to two minutes: it is idempotent.
                let opportunity = uuid::Uuid::now_v7();
                let mut body = body;
                body["opportunityId"] = json!(opportunity.to_string());
                let give_up = tokio::time::Instant::now() + Duration::from_secs(120);
                while tokio::time::Instant::now() < give_up {
                    match client.post(format!("{base}/api/negotiations")).bearer_auth(&token).json(&body).send().await {
                        Ok(r) if r.status().is_success() => break,
                        Ok(r) if r.status().as_u16() == 503 => tokio::time::sleep(Duration::from_millis(100)).await,
                        Ok(r) if r.status().is_server_error() => {
                            ledger.unexpected.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                        Ok(r) => panic!("create refused: {}", r.text().await.unwrap_or_default()),
                        Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                }
            }
        }
    };

    post_all(create(per_phase, &mut rng)).await;
    for round in 0..scale.kills {
        let load = tokio::spawn(post_all(create(per_phase, &mut rng)));
        tokio::time::sleep(Duration::from_millis(300 + rng.below(700))).await;
        in_flight_at_faults.extend(in_flight(&pool).await);
        delegations_in_flight_at_faults.extend(delegations::in_flight(&pool).await);
        match round % 3 {
            // SIGKILL of the service under load, then a restart on the same database.
            0 => {
                service.kill9();
                tokio::time::sleep(Duration::from_millis(200)).await;
                service = Service::start(&database_url, port, &data_dir);
            }
            // Every connection of the service terminated by the database.
            1 => {
                sqlx::query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                     WHERE datname = current_database() AND pid <> pg_backend_pid()",
                )
                .execute(&pool)
                .await
                .unwrap();
            }
            // PostgreSQL itself restarted under the running service.
            _ => {
                pool.close().await;
                tokio::task::block_in_place(|| pg.restart()).expect("restarting PostgreSQL");
                pool = checker_pool(&database_url).await;
            }
        }
        let _ = load.await;
        wait_ready(&base).await;
    }
    post_all(create(per_phase, &mut rng)).await;
    hooks.heal();
    stop_delegating.store(true, Ordering::Relaxed);
    for r in requesters {
        let _ = r.await;
    }
    let faults_over = started.elapsed();

    // Let the agents and the timers finish everything.
    wait_all_ended(&pool, Duration::from_secs(90)).await;
    let negotiations_over = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for p in pollers {
        let _ = p.await;
    }
    let report = check(&pool, &ledger, &in_flight_at_faults).await;
    // Nobody answers delegations any more: the timers end what is left.
    let targets_stopped = Instant::now();
    delegations::wait_all_ended(&pool, Duration::from_secs(60)).await;
    let delegations_ended_after = targets_stopped.elapsed();
    let (delegation_report, delegation_counts) =
        delegations::check(&pool, &base, &cast, &delegation_ledger, &delegations_in_flight_at_faults).await;
    let (a2a_report, a2a_timeliness, a2a_line) =
        a2a::check(&pool, &a2a_server, &a2a_agents, &a2a_ledger, &delegations_in_flight_at_faults).await;
    // Every event made by now reaches the webhook (a killed sender's leases lapse, a lost job is
    // armed again by housekeeping).
    webhooks::wait_all_delivered(&pool, Duration::from_secs(120)).await;
    let (webhook_report, webhook_line) = webhooks::check(&pool, &hooks).await;
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks").fetch_one(&pool).await.unwrap();
    let turns: i64 = sqlx::query_scalar("SELECT count(*) FROM messages").fetch_one(&pool).await.unwrap();
    let acknowledged = ledger.acknowledged.lock().unwrap().len();
    eprintln!(
        "fault run {scale:?}: {total} negotiations, {turns} turns, {acknowledged} acknowledged responds, {} refused \
         requests during faults, {} agents seen with two live claims | lost {} duplicated {} unexpected {} recovered {} \
         (of {} in flight at faults)",
        ledger.refused.load(Ordering::Relaxed),
        ledger.two_live_claims.load(Ordering::Relaxed),
        report.lost,
        report.duplicated,
        report.unexpected,
        report.recovered,
        in_flight_at_faults.len(),
    );
    eprintln!(
        "delegations: {delegation_counts}; all ended {:.1} s after the targets stopped | lost {} duplicated {} \
         unexpected {} recovered {} (of {} in flight at faults)",
        delegations_ended_after.as_secs_f64(),
        delegation_report.lost,
        delegation_report.duplicated,
        delegation_report.unexpected,
        delegation_report.recovered,
        delegations_in_flight_at_faults.len(),
    );
    eprintln!("a2a delegations: {a2a_line}");
    eprintln!(
        "webhooks: {webhook_line} | lost {} duplicated {} unexpected {}",
        webhook_report.lost, webhook_report.duplicated, webhook_report.unexpected
    );
    eprintln!(
        "fault run took {:.0} s: faults over at {:.0} s, every negotiation ended at {:.0} s",
        started.elapsed().as_secs_f64(),
        faults_over.as_secs_f64(),
        negotiations_over.as_secs_f64(),
    );
    service.kill9();
    pool.close().await;
    drop(pg);
    let _ = std::fs::remove_dir_all(&pg_dir);

    assert_eq!(total as usize, created, "every create landed exactly once");
    assert_eq!(report.lost, 0, "lost");
    assert_eq!(report.duplicated, 0, "duplicated");
    assert_eq!(report.unexpected, 0, "unexpected");
    assert_eq!(report.recovered as usize, in_flight_at_faults.len(), "every negotiation in flight at a fault ended");
    assert_eq!(delegation_report.lost, 0, "delegations lost");
    assert_eq!(delegation_report.duplicated, 0, "delegations duplicated");
    assert_eq!(delegation_report.unexpected, 0, "delegations unexpected");
    assert_eq!(
        delegation_report.recovered as usize,
        delegations_in_flight_at_faults.len(),
        "every delegation in flight at a fault ended"
    );
    assert!(delegation_counts.acknowledged > 0 && delegation_counts.completed > 0, "delegations ran and completed");
    assert_eq!(a2a_report.lost, 0, "a2a delegations lost");
    assert_eq!(a2a_report.duplicated, 0, "a2a messages that started two tasks");
    assert_eq!(
        a2a_timeliness,
        a2a::Timeliness::default(),
        "no a2a attempt timed out though its task had completed in time, no task left working for an ended \
         attempt, no message sent after its attempt's accept deadline"
    );
    assert!(hooks.received() > 0, "the webhook received deliveries");
    assert_eq!(webhook_report.lost, 0, "events never delivered to the webhook");
    assert_eq!(webhook_report.duplicated, 0, "events delivered under two webhook-ids, or one id with two bodies");
    assert_eq!(webhook_report.unexpected, 0, "unsigned deliveries, wrong ids, deliveries given up or left pending");
}
