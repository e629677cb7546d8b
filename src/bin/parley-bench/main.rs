//! `parley-bench`: measures a real Parley, started in this process, against baselines measured
//! in the same run on the same machine. See BENCHMARKS.md for what each figure
//! means and for the numbers of a full run.
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres parley-bench [--quick] [--json]
//! ```
//!
//! It creates (and drops at the end) its own scratch databases `parley_bench_<pid>` and
//! `parley_bench_<pid>_pgbench` on that server; without `DATABASE_URL` it starts the embedded
//! PostgreSQL in a temporary directory. Everything runs over loopback; every loop is bounded in
//! count and in time.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use anyhow::{Context, bail};
use clap::Parser;
use parley::{
    app::Application,
    config::Config,
    db::{self, EmbeddedPostgres},
    http::{AppState, auth::CallerRole},
    scoring,
};
use reqwest::{StatusCode, Url};
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection, PgPool};
use tokio::task::JoinSet;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "parley-bench",
    about = "Benchmarks a Parley started in process"
)]
struct Args {
    /// Short run (under a minute on 2 cores): fewer turns, wakes and seconds per phase.
    #[arg(long)]
    quick: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Connections in Parley's pool (PARLEY_DB_POOL_SIZE).
    #[arg(long, default_value_t = 16)]
    pool_size: u32,
    /// Concurrent agents (and pgbench clients) of the turn-cycle phase.
    #[arg(long, default_value_t = 32)]
    agents: usize,
    /// Run only these phases (comma-separated: cycles,pgbench,wake,svs,assess,longpoll,directory;
    /// `delegation` (request, accept, complete round trips over HTTP, then the same work's SQL
    /// under pgbench); `metrics` (recording flipped on and off every half second within one 90 s
    /// turn-cycle phase) and `liveness` (the agents' `last_seen_at` writes off and on, round by
    /// round), never part of a default run, compare the turn cycle with and without them;
    /// `floor` is the SQL floor alone
    /// (also part of `pgbench`); `floor-variants`, never part of a default run, measures the floor
    /// with timer-row moves and with a NOTIFY added).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Seconds the delegation phase measures (after its warm-up). Its rate windows span 60 s,
    /// so only a run longer than that shows their cost at a steady rate.
    #[arg(long, default_value_t = DELEGATION_SECS)]
    delegation_secs: u64,
}

/// Sizes of one run.
struct Plan {
    negotiations_per_agent: usize,
    cycle_secs: u64,
    pgbench_secs: u64,
    pgbench_scale: u32,
    wakes: usize,
    svs_secs: u64,
    assess_inprocess_secs: u64,
    http_secs: u64,
    longpolls: usize,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                negotiations_per_agent: 40,
                cycle_secs: 5,
                pgbench_secs: 5,
                pgbench_scale: 10,
                wakes: 300,
                svs_secs: 3,
                assess_inprocess_secs: 1,
                http_secs: 3,
                longpolls: 1000,
            }
        } else {
            Plan {
                negotiations_per_agent: 150,
                cycle_secs: 30,
                pgbench_secs: 30,
                pgbench_scale: 10,
                wakes: 2000,
                svs_secs: 15,
                assess_inprocess_secs: 5,
                http_secs: 10,
                longpolls: 1000,
            }
        }
    }
}

const WARMUP: Duration = Duration::from_secs(1);
const HTTP_CONCURRENCY: usize = 32;
const JWT_SECRET: &str = "parley-bench-secret-0123456789";

/// Everything measured, in JSON field order.
type Results = BTreeMap<&'static str, Value>;

fn with_database(url: &str, name: &str) -> anyhow::Result<String> {
    let mut u = Url::parse(url).context("DATABASE_URL is not a URL")?;
    u.set_path(&format!("/{name}"));
    Ok(u.to_string())
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn round(x: f64, dp: i32) -> f64 {
    let m = 10f64.powi(dp);
    (x * m).round() / m
}

fn note(json: bool, msg: impl AsRef<str>) {
    // Progress goes to stderr so that `--json` output stays one object on stdout.
    let _ = json;
    eprintln!("parley-bench: {}", msg.as_ref());
}

/// The database server, its scratch databases, and the embedded server if we started one.
struct Server {
    admin_url: String,
    app_db: String,
    pgbench_db: String,
    _embedded: Option<EmbeddedPostgres>,
}

impl Server {
    async fn open() -> anyhow::Result<Server> {
        let (admin_url, embedded) =
            match std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()) {
                Some(url) => (with_database(&url, "postgres")?, None),
                None => {
                    let dir =
                        std::env::temp_dir().join(format!("parley-bench-{}", std::process::id()));
                    let pg = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&dir))
                        .await??;
                    (pg.url("postgres"), Some(pg))
                }
            };
        let pid = std::process::id();
        let server = Server {
            app_db: format!("parley_bench_{pid}"),
            pgbench_db: format!("parley_bench_{pid}_pgbench"),
            admin_url,
            _embedded: embedded,
        };
        let mut conn = PgConnection::connect(&server.admin_url)
            .await
            .context("connecting to PostgreSQL")?;
        for name in [&server.app_db, &server.pgbench_db] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
            )))
            .execute(&mut conn)
            .await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut conn)
                .await?;
        }
        Ok(server)
    }

    fn url(&self, db: &str) -> anyhow::Result<String> {
        with_database(&self.admin_url, db)
    }

    async fn drop_databases(&self) {
        if let Ok(mut conn) = PgConnection::connect(&self.admin_url).await {
            for name in [&self.app_db, &self.pgbench_db] {
                let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .execute(&mut conn)
                .await;
            }
        }
    }

    /// `pgbench` with the server's host, port and user, on the pgbench scratch database.
    fn pgbench(&self, args: &[String]) -> anyhow::Result<String> {
        self.pgbench_on(&self.pgbench_db, args)
    }

    /// `pgbench` with the server's host, port and user, on database `db`.
    fn pgbench_on(&self, db: &str, args: &[String]) -> anyhow::Result<String> {
        let url = Url::parse(&self.admin_url)?;
        let mut cmd = std::process::Command::new(pgbench_path());
        cmd.args(args)
            .arg(db)
            .env("PGHOST", url.host_str().unwrap_or("127.0.0.1"))
            .env("PGPORT", url.port().unwrap_or(5432).to_string())
            .env(
                "PGUSER",
                if url.username().is_empty() {
                    "postgres"
                } else {
                    url.username()
                },
            );
        if let Some(p) = url.password() {
            cmd.env("PGPASSWORD", p);
        }
        let out = cmd
            .output()
            .context("running pgbench (install postgresql-contrib or put pgbench on PATH)")?;
        if !out.status.success() {
            bail!(
                "pgbench {:?} failed: {}",
                args,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

fn pgbench_path() -> PathBuf {
    if let Ok(paths) = std::env::var("PATH") {
        for dir in std::env::split_paths(&paths) {
            if dir.join("pgbench").is_file() {
                return dir.join("pgbench");
            }
        }
    }
    for v in ["17", "16", "15", "14"] {
        let p = PathBuf::from(format!("/usr/lib/postgresql/{v}/bin/pgbench"));
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from("pgbench")
}

/// A running Parley and an HTTP client for it.
struct Bench {
    base: String,
    client: reqwest::Client,
    state: AppState,
    pool: PgPool,
    service: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server_task: tokio::task::JoinHandle<anyhow::Result<()>>,
    _skills_dir: PathBuf,
}

/// Nine skills that, with the built-in one, make the 10-skill agent of the assessment figures.
fn extra_skills() -> Value {
    let topics = [
        ("pdf", ["pdf", "tables", "extraction", "invoice"]),
        (
            "translate",
            ["translation", "french", "german", "localization"],
        ),
        ("summarize", ["summary", "report", "digest", "notes"]),
        ("code-review", ["rust", "review", "security", "lint"]),
        ("sql", ["postgresql", "sql", "query", "index"]),
        ("images", ["image", "caption", "ocr", "vision"]),
        ("calendar", ["meeting", "schedule", "calendar", "invite"]),
        (
            "finance",
            ["payments", "ledger", "reconciliation", "fintech"],
        ),
        ("support", ["ticket", "support", "triage", "customer"]),
    ];
    Value::Array(
        topics
            .iter()
            .map(|(id, tags)| {
                json!({
                    "id": format!("{id}-v1"),
                    "name": format!("{id} skill"),
                    "description": format!("Handles {id} work"),
                    "tags": tags,
                    "input_modes": ["text/plain", "application/json"],
                    "output_modes": ["application/json"],
                    "capabilities_detail": { format!("{id}_processing"): {"supported": true} },
                    "allowed_tools": [format!("{id}_tool")],
                    "performance": {"avg_processing_time_ms": 1500},
                    "assessment": {
                        "keywords": tags,
                        "specializations": [{"domain": tags[0], "confidence_boost": 0.1}],
                        "anti_patterns": ["malware"]
                    }
                })
            })
            .collect(),
    )
}

fn assess_request() -> Value {
    json!({
        "task_summary": "Extract the tables from these PDF invoices and reconcile the payments ledger",
        "task_details": "Monthly invoices from three suppliers; the output feeds our fintech reconciliation report",
        "input_mime_types": ["application/pdf", "text/plain"],
        "output_mime_types": ["application/json"],
        "max_latency_ms": 5000,
        "min_score": 0.1
    })
}

impl Bench {
    async fn start(url: &str, pool_size: u32) -> anyhow::Result<Bench> {
        let pool = db::pool(url, pool_size).await?;
        db::migrate(&pool).await?;
        let skills_dir =
            std::env::temp_dir().join(format!("parley-bench-skills-{}", std::process::id()));
        std::fs::create_dir_all(&skills_dir)?;
        let skill_file = skills_dir.join("skills.json");
        std::fs::write(&skill_file, serde_json::to_vec_pretty(&extra_skills())?)?;
        let config = Config {
            database_url: Some(url.to_owned()),
            bind: "127.0.0.1:0".parse()?,
            data_dir: skills_dir.clone(),
            jwt_secret: Some(JWT_SECRET.into()),
            pool_size,
            skill_files: vec![skill_file],
            // The bench measures the delegation flow, not its limiters.
            outbound_rate: BENCH_RATE_LIMIT,
            inbound_rate: BENCH_RATE_LIMIT,
            ..Config::default()
        };
        let app = Application::build(config, pool.clone()).await?;
        let base = format!("http://127.0.0.1:{}", app.port());
        let state = app.state().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server_task = tokio::spawn(app.run_until_stopped(async move {
            let _ = stopped.await;
        }));
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(2048)
            .build()?;
        let service = state.jwt.mint(
            "parley-bench",
            CallerRole::Service,
            Duration::from_secs(6 * 3600),
        )?;
        let bench = Bench {
            base,
            client,
            state,
            pool,
            service,
            stop: Some(stop),
            server_task,
            _skills_dir: skills_dir,
        };
        // Wait until the notification listener is up: long-polls depend on it.
        for _ in 0..200 {
            if bench
                .client
                .get(format!("{}/readyz", bench.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(bench)
    }

    async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(15), &mut self.server_task).await;
        self.pool.close().await;
        let _ = std::fs::remove_dir_all(&self._skills_dir);
    }

    /// Registers a personal agent for `user`; returns (agent id, API key).
    async fn register_agent(&self, user: &str) -> anyhow::Result<(String, String)> {
        let token = self
            .state
            .jwt
            .mint(user, CallerRole::User, Duration::from_secs(6 * 3600))?;
        let r = self
            .client
            .post(format!("{}/api/agents", self.base))
            .bearer_auth(token)
            .json(&json!({"name": format!("bench agent of {user}")}))
            .send()
            .await?;
        if r.status() != StatusCode::CREATED {
            bail!(
                "registering an agent: {} {}",
                r.status(),
                r.text().await.unwrap_or_default()
            );
        }
        let body: Value = r.json().await?;
        let id = body["agent"]["id"].as_str().context("agent.id")?.to_owned();
        let key = body["apiKey"]["key"]
            .as_str()
            .context("apiKey.key")?
            .to_owned();
        Ok((id, key))
    }

    /// Starts a negotiation; returns the response body.
    async fn create(&self, body: &Value) -> anyhow::Result<Value> {
        let r = self
            .client
            .post(format!("{}/api/negotiations", self.base))
            .bearer_auth(&self.service)
            .json(body)
            .send()
            .await?;
        if r.status() != StatusCode::CREATED {
            bail!(
                "creating a negotiation: {} {}",
                r.status(),
                r.text().await.unwrap_or_default()
            );
        }
        Ok(r.json().await?)
    }
}

/// An agent's API, as a personal agent runtime would call it.
#[derive(Clone)]
struct AgentClient {
    client: reqwest::Client,
    base: String,
    key: String,
}

impl AgentClient {
    fn new(bench: &Bench, id: &str, key: &str) -> AgentClient {
        AgentClient {
            client: bench.client.clone(),
            base: format!("{}/api/agents/{id}/negotiations", bench.base),
            key: key.to_owned(),
        }
    }

    async fn pickup(&self, wait: Option<u64>) -> anyhow::Result<Option<Value>> {
        let url = match wait {
            Some(w) => format!("{}/pickup?wait={w}", self.base),
            None => format!("{}/pickup", self.base),
        };
        let r = self
            .client
            .post(url)
            .header("x-api-key", &self.key)
            .send()
            .await?;
        match r.status() {
            StatusCode::NO_CONTENT => Ok(None),
            StatusCode::OK => Ok(Some(r.json().await?)),
            s => bail!("pickup: {s} {}", r.text().await.unwrap_or_default()),
        }
    }

    async fn respond(&self, turn: &Value, action: &str) -> anyhow::Result<Value> {
        let id = turn["negotiationId"].as_str().context("negotiationId")?;
        let body = json!({
            "claimToken": turn["claimToken"],
            "action": action,
            "message": answer_message(turn),
            "assessment": {
                "reasoning": "Holding out for a clearer picture before agreeing.",
                "suggestedRoles": {"ownUser": "peer", "otherUser": "peer"}
            }
        });
        let r = self
            .client
            .post(format!("{}/{id}/respond", self.base))
            .header("x-api-key", &self.key)
            .json(&body)
            .send()
            .await?;
        if r.status() != StatusCode::OK {
            bail!(
                "respond: {} {}",
                r.status(),
                r.text().await.unwrap_or_default()
            );
        }
        Ok(r.json().await?)
    }
}

/// What the benchmark's agent says: it answers the first term the system negotiator's latest
/// counter asked evidence of (`... needs evidence of: a, b.`). The negotiator counters again only
/// when something new was covered and decides at once otherwise, so an agent that said the same
/// thing every turn would end each negotiation at the system's next turn, and the turn cycle
/// would no longer be the same unit of work.
fn answer_message(turn: &Value) -> String {
    let asked = turn["turn"]["history"].as_array().and_then(|history| {
        history.iter().rev().find_map(|t| {
            let (_, list) = t["message"].as_str()?.split_once("needs evidence of: ")?;
            list.split([',', '.', '\n']).next().map(|term| term.trim().to_owned())
        })
    });
    match asked {
        Some(term) if !term.is_empty() && term != "none" => {
            format!("I have {term} experience; tell me more about how you would work together.")
        }
        _ => "Thanks; before we go further, tell me more about how you would work together.".to_owned(),
    }
}

/// The source side (played by the system negotiator): a partial match, so that it counters
/// rather than accepting or rejecting at once, and the turn parks again for the agent.
fn source_user(n: usize) -> Value {
    json!({
        "id": format!("bench-source-{n}"),
        "name": "Source founder",
        "profile": {
            "bio": "Founder of a fintech startup building payments infrastructure",
            "skills": ["product management", "fundraising"],
            "interests": ["payments", "startups"]
        },
        "intents": [{"text": "Looking for a senior rust engineer with payments, kubernetes, compliance and security experience"}]
    })
}

fn candidate_user(id: &str) -> Value {
    json!({
        "id": id,
        "name": "Candidate engineer",
        "profile": {
            "bio": "Backend engineer working with rust on payments systems",
            "skills": ["rust", "payments"],
            "interests": ["startups"]
        },
        "intents": [{"text": "Looking for a startup to join as an engineer"}]
    })
}

fn negotiation_body(source: Value, candidate: Value) -> Value {
    json!({
        "sourceUser": source,
        "candidateUser": candidate,
        "seedAssessment": {"score": 50, "reasoning": "Evaluator: partially overlapping intents"},
        "discoveryQuery": "senior rust engineer"
    })
}

/// Runs `f(i)` for i in 0..n with at most `concurrency` at once.
async fn for_each_concurrent<F, Fut, T>(
    n: usize,
    concurrency: usize,
    f: F,
) -> anyhow::Result<Vec<T>>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    use futures::StreamExt;
    let f = Arc::new(f);
    let results: Vec<anyhow::Result<T>> = futures::stream::iter(0..n)
        .map(|i| (f.clone())(i))
        .buffer_unordered(concurrency)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Turn cycles: each of `agents` agents loops pickup + respond(counter) over HTTP.
async fn turn_cycles(
    bench: &Arc<Bench>,
    plan: &Plan,
    agents: usize,
    r: &mut Results,
    json_out: bool,
) -> anyhow::Result<()> {
    note(
        json_out,
        format!("turn cycles: registering {agents} agents"),
    );
    let b = bench.clone();
    let registered = for_each_concurrent(agents, 8, move |i| {
        let b = b.clone();
        async move { b.register_agent(&format!("bench-agent-user-{i}")).await }
    })
    .await?;
    let total = agents * plan.negotiations_per_agent;
    note(
        json_out,
        format!("turn cycles: creating {total} mixed negotiations (each parks its turn 1)"),
    );
    let started = Instant::now();
    let b = bench.clone();
    for_each_concurrent(total, 16, move |i| {
        let b = b.clone();
        async move {
            // A terse candidate profile: it shows two of the source's seven needs, and each
            // agent turn answers one more, so the system side counters at turns 2, 4 and 6.
            let mut candidate = candidate_user(&format!("bench-agent-user-{}", i % agents));
            candidate["profile"] = json!({"bio": "Backend engineer", "skills": ["rust"], "interests": ["startups"]});
            let body = negotiation_body(source_user(i), candidate);
            let created = b.create(&body).await?;
            anyhow::ensure!(
                created["negotiation"]["status"] == "waiting_for_agent",
                "a benchmark negotiation did not park: {}",
                created["negotiation"]
            );
            Ok(())
        }
    })
    .await?;
    let create_secs = started.elapsed().as_secs_f64();
    r.insert(
        "mixed_creates_per_s",
        json!(round(total as f64 / create_secs, 1)),
    );

    let clients: Vec<AgentClient> = registered
        .iter()
        .map(|(id, key)| AgentClient::new(bench, id, key))
        .collect();
    // Let the creation phase's trailing work settle, so that neither its transactions nor its
    // CPU are counted in the cycles.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let meter = CostMeter::start(&bench.pool).await?;
    let updates_before = row_updates(&bench.pool).await?;
    let all_cycles = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let measure_from = start + WARMUP;
    let deadline = measure_from + Duration::from_secs(plan.cycle_secs);
    *CYCLE_WINDOW.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((measure_from, deadline));
    let out_of_work = Arc::new(AtomicBool::new(false));
    let mut set = JoinSet::new();
    for agent in clients {
        let out_of_work = out_of_work.clone();
        let all_cycles = all_cycles.clone();
        set.spawn(async move {
            let mut counted = 0u64;
            let mut ended = 0u64;
            let mut pickups = Vec::new();
            let mut responds = Vec::new();
            let mut last = Instant::now();
            while Instant::now() < deadline && !out_of_work.load(Ordering::Relaxed) {
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
                last = t2;
                if t2 >= measure_from && t2 <= deadline {
                    counted += 1;
                    if answer["status"] == "completed" {
                        ended += 1;
                    }
                    pickups.push((t1 - t0).as_secs_f64() * 1e3);
                    responds.push((t2 - t1).as_secs_f64() * 1e3);
                }
            }
            anyhow::Ok((counted, ended, pickups, responds, last))
        });
    }
    let (mut cycles, mut ended, mut pickups, mut responds) = (0u64, 0u64, Vec::new(), Vec::new());
    let mut window_end = deadline;
    while let Some(res) = set.join_next().await {
        let (c, e, p, rs, _last) = res??;
        cycles += c;
        ended += e;
        pickups.extend(p);
        responds.extend(rs);
    }
    if out_of_work.load(Ordering::Relaxed) {
        // Some agent ran dry before the deadline: only count up to now, and say so.
        window_end = Instant::now().min(deadline);
        note(
            json_out,
            "turn cycles: an agent ran out of parked turns before the deadline",
        );
    }
    let secs = window_end
        .saturating_duration_since(measure_from)
        .as_secs_f64()
        .max(1e-3);
    // Transactions of Parley's pool per cycle, warm-up included (read-only ones too: each
    // BEGIN..COMMIT and each autocommit statement counts one; the bench's two CPU readings on
    // the pool are in).
    let cycles_all = all_cycles.load(Ordering::Relaxed).max(1) as f64;
    let (own_cpu, pg_cpu) = meter.cpu_secs(&bench.pool).await?;
    r.insert(
        "cpu_ms_per_cycle_parley_process",
        json!(round(own_cpu * 1e3 / cycles_all, 2)),
    );
    r.insert(
        "cpu_ms_per_cycle_postgres_backends",
        json!(round(pg_cpu * 1e3 / cycles_all, 2)),
    );
    // A backend publishes its table counts when it goes idle, at most once a second: after a
    // pause, the statement `local_xact_numbers` runs on every pool connection makes each publish
    // what it holds (before answering), so the row counts below cover the whole phase.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let xacts = meter.transactions(&bench.pool).await?;
    r.insert(
        "db_transactions_per_cycle",
        json!(round(
            xacts as f64 / all_cycles.load(Ordering::Relaxed).max(1) as f64,
            2
        )),
    );
    let updates_after = row_updates(&bench.pool).await?;
    let mut updated = serde_json::Map::new();
    for (table, (upd, hot, dead, live)) in &updates_after {
        let (upd0, hot0, _, _) = updates_before.get(table).copied().unwrap_or_default();
        if upd - upd0 > 0 {
            updated.insert(
                table.clone(),
                json!({"updates": upd - upd0, "hot": hot - hot0, "dead_after": dead, "live_after": live}),
            );
        }
    }
    let (upd, hot) = updates_after
        .iter()
        .map(|(t, (u, h, _, _))| {
            let (u0, h0, _, _) = updates_before.get(t).copied().unwrap_or_default();
            (u - u0, h - h0)
        })
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    r.insert("row_updates_in_cycles", Value::Object(updated));
    r.insert(
        "hot_update_share_in_cycles",
        json!(round(hot as f64 / upd.max(1) as f64, 3)),
    );
    pickups.sort_by(f64::total_cmp);
    responds.sort_by(f64::total_cmp);
    r.insert("turn_cycles_per_s", json!(round(cycles as f64 / secs, 1)));
    r.insert("turn_cycles_measured", json!(cycles));
    r.insert("turn_cycles_ending_negotiation", json!(ended));
    r.insert("turn_cycle_window_s", json!(round(secs, 2)));
    r.insert("turn_cycle_agents", json!(agents));
    r.insert("pickup_p50_ms", json!(round(percentile(&pickups, 50.0), 2)));
    r.insert("pickup_p99_ms", json!(round(percentile(&pickups, 99.0), 2)));
    r.insert(
        "respond_p50_ms",
        json!(round(percentile(&responds, 50.0), 2)),
    );
    r.insert(
        "respond_p99_ms",
        json!(round(percentile(&responds, 99.0), 2)),
    );
    Ok(())
}

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
    json_out: bool,
    what: &str,
    switch: impl Fn(bool),
    measure: impl Fn() -> u64,
) -> anyhow::Result<(Value, BTreeMap<bool, Vec<(f64, u64)>>)> {
    let mut warm_up = Results::new();
    switch(true);
    turn_cycles(bench, plan, agents, &mut warm_up, json_out).await?;
    let mut rounds = BTreeMap::<bool, Vec<(f64, u64)>>::new();
    for on in [false, true, true, false, false, true, true, false] {
        switch(on);
        note(
            json_out,
            format!("{what}: a round with it {}", if on { "on" } else { "off" }),
        );
        let before = measure();
        let mut round = Results::new();
        turn_cycles(bench, plan, agents, &mut round, json_out).await?;
        let rate = round
            .get("turn_cycles_per_s")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        rounds
            .entry(on)
            .or_default()
            .push((rate, measure() - before));
    }
    switch(true);
    Ok((
        warm_up
            .get("turn_cycles_per_s")
            .cloned()
            .unwrap_or(Value::Null),
        rounds,
    ))
}

fn mean_rate(v: &[(f64, u64)]) -> f64 {
    v.iter().map(|(rate, _)| rate).sum::<f64>() / v.len().max(1) as f64
}

fn rates(v: &[(f64, u64)]) -> Vec<f64> {
    v.iter().map(|(rate, _)| *rate).collect()
}

/// The measurement window of the turn-cycle phase under way, for a sampler running beside it.
static CYCLE_WINDOW: Mutex<Option<(Instant, Instant)>> = Mutex::new(None);
/// Turn cycles completed by every phase so far.
static CYCLES_DONE: AtomicU64 = AtomicU64::new(0);
/// Length of one slice of [`sliced_off_on`].
const SLICE: Duration = Duration::from_millis(500);
/// The start of a slice that is not counted: requests begun under the other setting finish.
const SLICE_SETTLE: Duration = Duration::from_millis(100);

/// One long turn-cycle phase (90 s) with a switch flipped every [`SLICE`], in pairs of adjacent
/// slices (on then off, then off then on, alternately), so that both settings see the same
/// database, the same agents and the same moment of the run. Returns each pair's cycle rates
/// `(on, off)`, counted over the slice after its first [`SLICE_SETTLE`].
async fn sliced_off_on(
    bench: &Arc<Bench>,
    agents: usize,
    json_out: bool,
    switch: impl Fn(bool),
) -> anyhow::Result<Vec<(f64, f64)>> {
    let plan = Plan { negotiations_per_agent: 600, cycle_secs: 90, ..Plan::new(false) };
    *CYCLE_WINDOW.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    let sampler = async {
        let (from, to) = loop {
            if let Some(w) = *CYCLE_WINDOW.lock().unwrap_or_else(std::sync::PoisonError::into_inner) {
                break w;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let counted = (SLICE - SLICE_SETTLE).as_secs_f64();
        let (mut pairs, mut t) = (Vec::new(), from);
        while t + 2 * SLICE <= to {
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
    let (done, pairs) = tokio::join!(turn_cycles(bench, &plan, agents, &mut phase, json_out), sampler);
    done?;
    // A pair in which the agents ran out of parked turns compares nothing.
    Ok(pairs.into_iter().filter(|(on, off)| *on > 0.0 && *off > 0.0).collect())
}

/// The turn cycle with metrics recording on and off, flipped every half second within one phase
/// ([`sliced_off_on`]): the overhead is the mean over the pairs of `(off - on) / off`, with its
/// 95 % confidence interval (two standard errors of that mean).
async fn metrics_overhead(
    bench: &Arc<Bench>,
    agents: usize,
    r: &mut Results,
    json_out: bool,
) -> anyhow::Result<()> {
    note(json_out, "metrics overhead: one 90 s turn-cycle phase, recording flipped every 0.5 s");
    let pairs = sliced_off_on(bench, agents, json_out, parley::metrics::install).await?;
    let n = pairs.len().max(1) as f64;
    let pct: Vec<f64> = pairs.iter().map(|(on, off)| (off - on) / off * 100.0).collect();
    let mean = pct.iter().sum::<f64>() / n;
    let sd = (pct.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0)).sqrt();
    let mean_of = |f: fn(&(f64, f64)) -> f64| pairs.iter().map(f).sum::<f64>() / n;
    r.insert("metrics_slice_pairs", json!(pairs.len()));
    r.insert("turn_cycles_per_s_metrics_on", json!(round(mean_of(|p| p.0), 1)));
    r.insert("turn_cycles_per_s_metrics_off", json!(round(mean_of(|p| p.1), 1)));
    r.insert("metrics_overhead_pct", json!(round(mean, 2)));
    r.insert("metrics_overhead_ci95_pct", json!(round(2.0 * sd / n.sqrt(), 2)));
    r.insert("metrics_overhead_pair_sd_pct", json!(round(sd, 2)));
    Ok(())
}

/// The turn cycle with the agents' `last_seen_at` writes off and on ([`rounds_off_on`]); also
/// how many of those writes each round made (none when off; with the throttle, about one per
/// agent per round when on, since every round registers fresh agents).
async fn liveness_overhead(
    bench: &Arc<Bench>,
    plan: &Plan,
    agents: usize,
    r: &mut Results,
    json_out: bool,
) -> anyhow::Result<()> {
    let (engine, counted) = (bench.state.engine.clone(), bench.state.engine.clone());
    let switch = move |on: bool| engine.record_liveness(on);
    let (warm_up, rounds) = rounds_off_on(
        bench,
        plan,
        agents,
        json_out,
        "liveness overhead",
        switch,
        move || counted.liveness_writes(),
    )
    .await?;
    r.insert("liveness_warm_up_round", warm_up);
    let (off, on) = (mean_rate(&rounds[&false]), mean_rate(&rounds[&true]));
    r.insert("turn_cycles_per_s_liveness_off", json!(round(off, 1)));
    r.insert("turn_cycles_per_s_liveness_on", json!(round(on, 1)));
    r.insert("liveness_rounds_off", json!(rates(&rounds[&false])));
    r.insert("liveness_rounds_on", json!(rates(&rounds[&true])));
    let writes = |on: bool| rounds[&on].iter().map(|(_, w)| *w).collect::<Vec<u64>>();
    r.insert("liveness_writes_per_round_off", json!(writes(false)));
    r.insert("liveness_writes_per_round_on", json!(writes(true)));
    r.insert(
        "liveness_overhead_pct",
        json!(round((off - on) / off.max(1e-9) * 100.0, 2)),
    );
    Ok(())
}

/// What a phase costs from its start: the CPU of this process (the service and its clients)
/// and of the database's backends, and the transactions of the service's pool.
struct CostMeter {
    transactions: std::collections::HashMap<i32, i64>,
    process_cpu: f64,
    backends_cpu: std::collections::HashMap<i32, f64>,
}

impl CostMeter {
    /// Reads the counts the phase starts from.
    async fn start(pool: &PgPool) -> anyhow::Result<CostMeter> {
        let transactions = local_xact_numbers(pool).await?;
        Ok(CostMeter { transactions, process_cpu: process_cpu_secs("self"), backends_cpu: backend_cpu_secs(pool).await? })
    }

    /// CPU seconds since the start: this process's, and the backends' together.
    async fn cpu_secs(&self, pool: &PgPool) -> anyhow::Result<(f64, f64)> {
        let own = process_cpu_secs("self") - self.process_cpu;
        let backends = backend_cpu_secs(pool)
            .await?
            .iter()
            .map(|(pid, after)| after - self.backends_cpu.get(pid).copied().unwrap_or(0.0))
            .sum();
        Ok((own, backends))
    }

    /// Transactions of the pool since the start (see [`xacts_between`]).
    async fn transactions(&self, pool: &PgPool) -> anyhow::Result<i64> {
        Ok(xacts_between(&self.transactions, &local_xact_numbers(pool).await?))
    }
}

/// User + system CPU seconds of a process (`self` or a pid), from `/proc/<pid>/stat`.
fn process_cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds so far of every PostgreSQL backend connected to the current database (same
/// machine only; 0 when /proc does not show them).
async fn backend_cpu_secs(pool: &PgPool) -> anyhow::Result<std::collections::HashMap<i32, f64>> {
    let pids: Vec<i32> =
        sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            .fetch_all(pool)
            .await?;
    Ok(pids
        .into_iter()
        .map(|p| (p, process_cpu_secs(&p.to_string())))
        .collect())
}

/// Each pooled connection's backend pid and local transaction number: the count of
/// transactions that backend slot has started, read from the virtual transaction id of the
/// reading transaction itself (`backend/number` in `pg_locks`).
///
/// This, not `pg_stat_database.xact_commit`, is what a turn cycle's transactions are counted
/// from. The database-wide counter also counts the transaction in which PostgreSQL delivers
/// each batch of notifications to the LISTEN connection (one per wake-up, whatever the service
/// does), and a backend publishes its counts at most once a second, holding the rest back until
/// it runs again or exits. Read twice around a phase, it moved between 2.3 and 4.1 per cycle,
/// run to run, with the same binary. The pool's connections run every statement the service
/// sends, and their local numbers are exact at any moment.
async fn local_xact_numbers(pool: &PgPool) -> anyhow::Result<std::collections::HashMap<i32, i64>> {
    // Every connection the pool may hold, at once: each is read once, and the pool is at its
    // full size before the phase, so that no connection opens during it.
    let mut held = Vec::new();
    let mut numbers = std::collections::HashMap::new();
    for _ in 0..pool.options().get_max_connections() {
        let mut conn = pool.acquire().await?;
        let (pid, number): (i32, i64) = sqlx::query_as(
            "SELECT pg_backend_pid(), split_part(virtualtransaction, '/', 2)::bigint FROM pg_locks \
             WHERE pid = pg_backend_pid() AND locktype = 'virtualxid'",
        )
        .fetch_one(&mut *conn)
        .await?;
        numbers.insert(pid, number);
        held.push(conn);
    }
    Ok(numbers)
}

/// Per table of the service's database (the timer queue's included): row updates so far, how
/// many of them were HOT (a new row version on the same page with no new index entry, which
/// page pruning reclaims without a vacuum), dead and live row versions, from
/// `pg_stat_user_tables`.
async fn row_updates(
    pool: &PgPool,
) -> anyhow::Result<BTreeMap<String, (i64, i64, i64, i64)>> {
    let rows: Vec<(String, i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT CASE WHEN schemaname = 'public' THEN relname ELSE schemaname || '.' || relname END, \
                n_tup_upd, n_tup_hot_upd, n_dead_tup, n_live_tup FROM pg_stat_user_tables",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(t, u, h, d, l)| (t, (u, h, d, l)))
        .collect())
}

/// Transactions the pool's connections ran between two readings of [`local_xact_numbers`],
/// the readings' own excluded. Only connections present at both readings count: the pool keeps
/// its connections through a phase (it is filled before, and its idle timeout is minutes), so in
/// practice that is all of them.
fn xacts_between(
    before: &std::collections::HashMap<i32, i64>,
    after: &std::collections::HashMap<i32, i64>,
) -> i64 {
    after
        .iter()
        .filter_map(|(pid, n)| before.get(pid).map(|b| n - b - 1))
        .sum()
}

/// `pgbench -N` at the same client count, on its own scratch database of the same server.
fn pgbench(
    server: &Server,
    plan: &Plan,
    clients: usize,
    r: &mut Results,
    json_out: bool,
) -> anyhow::Result<()> {
    note(
        json_out,
        format!("pgbench: initializing scale {}", plan.pgbench_scale),
    );
    server.pgbench(&[
        "-i".into(),
        "-q".into(),
        "-s".into(),
        plan.pgbench_scale.to_string(),
    ])?;
    note(
        json_out,
        format!("pgbench: -N -c {clients} -j 2 -T {}", plan.pgbench_secs),
    );
    let out = server.pgbench(&[
        "-N".into(),
        "-n".into(),
        "-c".into(),
        clients.to_string(),
        "-j".into(),
        "2".into(),
        "-T".into(),
        plan.pgbench_secs.to_string(),
    ])?;
    let tps = pgbench_figure(&out, "tps = ")?;
    r.insert("pgbench_tps", json!(round(tps, 1)));
    r.insert("pgbench_clients", json!(clients));
    Ok(())
}

/// The number after `prefix` on the line of pgbench's report that starts with it (`tps = `,
/// `latency average = `).
fn pgbench_figure(out: &str, prefix: &str) -> anyhow::Result<f64> {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .with_context(|| format!("no {prefix:?} in pgbench's output:\n{out}"))
}

/// The floor's tables and seed function, and its pgbench script (BENCHMARKS.md, "The SQL floor").
const SQL_FLOOR_SETUP: &str = include_str!("sql_floor_setup.sql");
const SQL_FLOOR_SCRIPT: &str = include_str!("sql_floor.sql");

/// The SQL floor of a turn cycle: `sql_floor.sql` under pgbench (`-M prepared`, one client per
/// agent, as many clients as the turn-cycle phase has agents, the same seconds as `pgbench -N`)
/// on freshly seeded tables in the pgbench scratch database. Each variant is (result key,
/// timer-row moves, NOTIFY in the respond's commit); the first is the floor itself.
async fn sql_floor(
    server: &Server,
    plan: &Plan,
    clients: usize,
    variants: &[(&'static str, bool, bool)],
    r: &mut Results,
    json_out: bool,
) -> anyhow::Result<()> {
    let script =
        std::env::temp_dir().join(format!("parley-bench-floor-{}.sql", std::process::id()));
    std::fs::write(&script, SQL_FLOOR_SCRIPT)?;
    let per_client = i32::try_from(plan.negotiations_per_agent)?;
    let outcome = async {
        for &(key, timers, notify) in variants {
            let mut conn = PgConnection::connect(&server.url(&server.pgbench_db)?).await?;
            sqlx::raw_sql(SQL_FLOOR_SETUP).execute(&mut conn).await?;
            sqlx::query("SELECT floor_seed($1, $2)")
                .bind(i32::try_from(clients)?)
                .bind(per_client)
                .execute(&mut conn)
                .await?;
            conn.close().await?;
            note(
                json_out,
                format!(
                    "sql floor ({key}): -M prepared -c {clients} -j 2 -T {}",
                    plan.pgbench_secs
                ),
            );
            let out = server.pgbench(&script_run(
                &script,
                &[
                    ("timers", u8::from(timers).to_string()),
                    ("notify", u8::from(notify).to_string()),
                ],
                clients,
                plan.pgbench_secs,
            ))?;
            let tps = pgbench_figure(&out, "tps = ")?;
            r.insert(key, json!(round(tps, 1)));
        }
        anyhow::Ok(())
    }
    .await;
    let _ = std::fs::remove_file(&script);
    outcome?;
    let floor = variants
        .first()
        .and_then(|(key, ..)| r.get(key))
        .and_then(Value::as_f64);
    if let (Some(c), Some(f)) = (r.get("turn_cycles_per_s").and_then(Value::as_f64), floor) {
        r.insert("turn_cycle_vs_floor", json!(round(c / f, 3)));
    }
    if let Some(p) = r.get("pgbench_tps").and_then(Value::as_f64) {
        for &(key, ..) in variants {
            if let Some(v) = r.get(key).and_then(Value::as_f64) {
                r.insert(floor_ratio_key(key), json!(round(v / p, 3)));
            }
        }
    }
    Ok(())
}

/// The key of a floor variant's ratio to `pgbench -N` (`sql_floor_tps` -> `sql_floor_ratio`).
fn floor_ratio_key(key: &'static str) -> &'static str {
    match key {
        "sql_floor_tps" => "sql_floor_ratio",
        "sql_floor_timers_tps" => "sql_floor_timers_ratio",
        _ => "sql_floor_timers_notify_ratio",
    }
}

/// Wake latency across processes: a long-poll waits on a second Parley instance (its own
/// pool, listener and waiters, on the same database, as a second process would be); a park
/// commits on the first (a negotiation is created whose turn 1 is the waiting agent's); the
/// long-poll answers. The first instance wakes the second only through PostgreSQL: its wake-up
/// sender's NOTIFY, sent after the park's commit, reaches the second's listener. The headline is
/// measured from the arrival of that NOTIFY at an independent listener in this process to the
/// moment the pickup's 200 has been read by the client. Also reported: from the park
/// transaction's `first_parked_at` (PostgreSQL's `now()`, the start of the park transaction, so
/// an upper bound that includes the park's own statements, its commit and the sender's batching).
async fn wake_latency(
    bench: &Arc<Bench>,
    plan: &Plan,
    r: &mut Results,
    json_out: bool,
) -> anyhow::Result<()> {
    let user = "bench-wake-user";
    let (id, key) = bench.register_agent(user).await?;
    // The second instance the long-polls wait on.
    let url = bench.state.engine.config().database_url.clone().unwrap_or_default();
    let other_config = Config {
        bind: "127.0.0.1:0".parse()?,
        workers: false,
        pool_size: 4,
        ..bench.state.engine.config().clone()
    };
    let other_pool = db::pool(&url, 4).await?;
    let other_app = Application::build(other_config, other_pool.clone()).await?;
    let other_base = format!("http://127.0.0.1:{}", other_app.port());
    let other_state = other_app.state().clone();
    let (stop_other, other_stopped) = tokio::sync::oneshot::channel::<()>();
    let other_task = tokio::spawn(other_app.run_until_stopped(async move {
        let _ = other_stopped.await;
    }));
    // Its listener is up once it answers (it listens before serving long-polls' wake-ups).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let agent = AgentClient {
        client: bench.client.clone(),
        base: format!("{other_base}/api/agents/{id}/negotiations"),
        key: key.clone(),
    };
    note(json_out, format!("wake latency: {} wakes", plan.wakes));
    // An independent LISTEN on the channel parks notify: PostgreSQL delivers the notification
    // only after the park committed, so its arrival here is the earliest moment anyone can
    // observe the commit.
    let mut listener = sqlx::postgres::PgListener::connect(
        bench
            .state
            .engine
            .config()
            .database_url
            .as_deref()
            .unwrap_or_default(),
    )
    .await?;
    listener.listen(parley::delivery::wakeups::WAKE_CHANNEL).await?;
    let (notified_tx, mut notified_rx) = tokio::sync::mpsc::unbounded_channel::<SystemTime>();
    let listening = tokio::spawn(async move {
        while let Ok(n) = listener.recv().await {
            let at = SystemTime::now();
            let names_user = serde_json::from_str::<parley::delivery::wakeups::WakePayload>(n.payload())
                .is_ok_and(|p| p.keys.iter().any(|k| k == "bench-wake-user"));
            if names_user && notified_tx.send(at).is_err() {
                break;
            }
        }
    });
    let mut from_notify = Vec::with_capacity(plan.wakes);
    let mut from_park = Vec::with_capacity(plan.wakes);
    let mut from_create_return = Vec::with_capacity(plan.wakes);
    let mut missed = 0usize;
    let phase_deadline =
        Instant::now() + Duration::from_secs(if plan.wakes > 500 { 240 } else { 60 });
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
        while other_state.engine.wakeups().waiting_users() == 0 {
            if t.elapsed() > Duration::from_secs(5) {
                bail!("the long-poll never started waiting");
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        // Let it reach its wait after the (empty) claim attempt.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let body = negotiation_body(source_user(1_000_000 + i), candidate_user(user));
        let created = bench.create(&body).await?;
        let create_returned = SystemTime::now();
        let (turn, answered) = waiter.await?;
        let notified = tokio::time::timeout(Duration::from_secs(5), notified_rx.recv())
            .await?
            .context("the listener stopped")?;
        from_notify.push(match answered.duration_since(notified) {
            Ok(d) => d.as_secs_f64() * 1e3,
            Err(e) => -e.duration().as_secs_f64() * 1e3,
        });
        let Some(turn) = turn? else {
            missed += 1;
            continue;
        };
        let task_id =
            uuid::Uuid::parse_str(turn["negotiationId"].as_str().context("negotiationId")?)?;
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
        let since_return = answered
            .duration_since(create_returned)
            .map(|d| d.as_secs_f64() * 1e3)
            .unwrap_or_else(|e| -e.duration().as_secs_f64() * 1e3);
        from_create_return.push(since_return);
        // End it, so the next long-poll finds nothing and has to wait.
        agent.respond(&turn, "reject").await?;
    }
    listening.abort();
    let _ = stop_other.send(());
    let _ = other_task.await;
    other_pool.close().await;
    from_notify.sort_by(f64::total_cmp);
    from_park.sort_by(f64::total_cmp);
    from_create_return.sort_by(f64::total_cmp);
    r.insert("wake_latency_samples", json!(from_notify.len()));
    r.insert("wake_latency_missed", json!(missed));
    r.insert(
        "wake_latency_p50_ms",
        json!(round(percentile(&from_notify, 50.0), 3)),
    );
    r.insert(
        "wake_latency_p99_ms",
        json!(round(percentile(&from_notify, 99.0), 3)),
    );
    r.insert(
        "wake_latency_max_ms",
        json!(round(from_notify.last().copied().unwrap_or(f64::NAN), 3)),
    );
    r.insert(
        "wake_from_park_tx_start_p50_ms",
        json!(round(percentile(&from_park, 50.0), 3)),
    );
    r.insert(
        "wake_from_park_tx_start_p99_ms",
        json!(round(percentile(&from_park, 99.0), 3)),
    );
    r.insert(
        "wake_after_create_returned_p50_ms",
        json!(round(percentile(&from_create_return, 50.0), 3)),
    );
    r.insert(
        "wake_after_create_returned_p99_ms",
        json!(round(percentile(&from_create_return, 99.0), 3)),
    );
    Ok(())
}

/// System-vs-system negotiations, created concurrently; each is resolved inside its create call.
async fn svs(
    bench: &Arc<Bench>,
    plan: &Plan,
    r: &mut Results,
    json_out: bool,
) -> anyhow::Result<()> {
    note(
        json_out,
        format!(
            "system vs system: {} s at {HTTP_CONCURRENCY} concurrent creates",
            plan.svs_secs
        ),
    );
    let counter = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let measure_from = start + WARMUP;
    let deadline = measure_from + Duration::from_secs(plan.svs_secs);
    let mut set = JoinSet::new();
    for w in 0..HTTP_CONCURRENCY {
        let bench = bench.clone();
        let counter = counter.clone();
        set.spawn(async move {
            let mut i = 0usize;
            let mut turns = 0u64;
            while Instant::now() < deadline {
                let body = negotiation_body(source_user(2_000_000 + w * 100_000 + i), {
                    let mut c = candidate_user(&format!("bench-svs-candidate-{w}-{i}"));
                    c["profile"]["skills"] = json!(["rust", "payments", "kubernetes", "security"]);
                    c
                });
                i += 1;
                let created = bench.create(&body).await?;
                anyhow::ensure!(
                    created["negotiation"]["status"] == "completed",
                    "a system-vs-system negotiation did not end"
                );
                if Instant::now() >= measure_from && Instant::now() <= deadline {
                    counter.fetch_add(1, Ordering::Relaxed);
                    turns += created["negotiation"]["turnCount"].as_u64().unwrap_or(0);
                }
            }
            anyhow::Ok(turns)
        });
    }
    let mut turns = 0;
    while let Some(res) = set.join_next().await {
        turns += res??;
    }
    let n = counter.load(Ordering::Relaxed);
    r.insert(
        "svs_negotiations_per_s",
        json!(round(n as f64 / plan.svs_secs as f64, 1)),
    );
    r.insert(
        "svs_turns_per_negotiation",
        json!(round(turns as f64 / n.max(1) as f64, 2)),
    );
    Ok(())
}

/// POSTs `body` to `url` in `HTTP_CONCURRENCY` loops for `secs`; returns requests per second.
async fn http_rate(
    client: &reqwest::Client,
    url: String,
    body: Vec<u8>,
    secs: u64,
) -> anyhow::Result<f64> {
    let counter = Arc::new(AtomicU64::new(0));
    let measure_from = Instant::now() + WARMUP;
    let deadline = measure_from + Duration::from_secs(secs);
    let mut set = JoinSet::new();
    for _ in 0..HTTP_CONCURRENCY {
        let (client, url, body, counter) =
            (client.clone(), url.clone(), body.clone(), counter.clone());
        set.spawn(async move {
            while Instant::now() < deadline {
                let r = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await?;
                anyhow::ensure!(r.status() == StatusCode::OK, "POST {url}: {}", r.status());
                let _ = r.bytes().await?;
                let now = Instant::now();
                if now >= measure_from && now <= deadline {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }
            anyhow::Ok(())
        });
    }
    while let Some(res) = set.join_next().await {
        res??;
    }
    Ok(counter.load(Ordering::Relaxed) as f64 / secs as f64)
}

/// Assessments in process and over HTTP, and the empty-handler HTTP baseline.
async fn assess(
    bench: &Arc<Bench>,
    plan: &Plan,
    r: &mut Results,
    json_out: bool,
) -> anyhow::Result<()> {
    let skills = parley::app::hub_skills(&bench.state.engine.config().clone())?;
    let calculator = scoring::Calculator::new(&skills, None);
    r.insert("assess_skills", json!(calculator.skill_count()));
    let body = serde_json::to_vec(&assess_request())?;
    let request = scoring::parse_request(&body).map_err(|e| anyhow::anyhow!("{e}"))?;
    let first = calculator.assess(&request, Some(3), None);
    anyhow::ensure!(
        first.accepted,
        "the benchmark assessment should be accepted"
    );

    note(json_out, "assessments in process (one thread)");
    let secs = plan.assess_inprocess_secs as f64;
    let (mut n, start) = (0u64, Instant::now());
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..256 {
            std::hint::black_box(calculator.assess(std::hint::black_box(&request), Some(3), None));
        }
        n += 256;
    }
    r.insert(
        "assess_per_s_inprocess",
        json!(round(n as f64 / start.elapsed().as_secs_f64(), 0)),
    );
    let (mut n, start) = (0u64, Instant::now());
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..64 {
            let req = scoring::parse_request(std::hint::black_box(&body))
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            std::hint::black_box(scoring::assessment_json(&calculator.assess(
                &req,
                Some(3),
                None,
            )));
        }
        n += 64;
    }
    r.insert(
        "assess_with_parse_and_json_per_s_inprocess",
        json!(round(n as f64 / start.elapsed().as_secs_f64(), 0)),
    );

    // The baseline: the same router stack (body limit, trace layer) and the same `axum::serve`,
    // with one route answering a fixed body, in the same process and runtime.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let fixed = scoring::assessment_json(&first);
    let router = axum::Router::new()
        .route(
            "/empty",
            axum::routing::post(move || {
                let fixed = fixed.clone();
                async move {
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        fixed,
                    )
                }
            }),
        )
        .layer(axum::extract::DefaultBodyLimit::max(
            parley::http::extract::BODY_LIMIT,
        ))
        .layer(tower_http::trace::TraceLayer::new_for_http());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let baseline = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = stop_rx.await;
            })
            .await
    });
    note(
        json_out,
        format!("empty-handler HTTP baseline: {} s", plan.http_secs),
    );
    let base = http_rate(
        &bench.client,
        format!("http://127.0.0.1:{port}/empty"),
        body.clone(),
        plan.http_secs,
    )
    .await?;
    let _ = stop_tx.send(());
    let _ = baseline.await;
    note(
        json_out,
        format!("assessments over HTTP: {} s", plan.http_secs),
    );
    let http = http_rate(
        &bench.client,
        format!("{}/agent/negotiation", bench.base),
        body,
        plan.http_secs,
    )
    .await?;
    r.insert("http_baseline_per_s", json!(round(base, 1)));
    r.insert("assess_per_s_http", json!(round(http, 1)));
    r.insert("assess_http_ratio", json!(round(http / base, 3)));
    Ok(())
}

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

/// Registers 10 000 capabilities over 2 000 agents in bulk SQL (varied kinds, costs, latencies,
/// tags, descriptions; a third with their own skill) and trust records for every agent.
async fn seed_directory(pool: &PgPool) -> anyhow::Result<()> {
    let word = |i: usize| VOCABULARY[i % VOCABULARY.len()];
    let agent_ids: Vec<uuid::Uuid> = (0..DIRECTORY_AGENTS)
        .map(|_| uuid::Uuid::now_v7())
        .collect();
    let owners: Vec<String> = (0..DIRECTORY_AGENTS)
        .map(|i| format!("bench-directory-user-{i}"))
        .collect();
    sqlx::query(
        "INSERT INTO agents (agent_id, owner_user_id, name)
         SELECT a, o, 'bench directory agent' FROM UNNEST($1::uuid[], $2::text[]) AS t(a, o)",
    )
    .bind(&agent_ids)
    .bind(&owners)
    .execute(pool)
    .await?;
    let n = DIRECTORY_AGENTS * DIRECTORY_CAPABILITIES_PER_AGENT;
    let (mut ids, mut agents, mut types, mut customs) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut latencies, mut costs, mut descriptions, mut tags, mut skills) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for (i, agent) in agent_ids.iter().enumerate() {
        for k in 0..DIRECTORY_CAPABILITIES_PER_AGENT {
            let j = i * DIRECTORY_CAPABILITIES_PER_AGENT + k;
            let task_type = TASK_TYPES[(i + k) % TASK_TYPES.len()];
            ids.push(uuid::Uuid::now_v7());
            agents.push(*agent);
            types.push(task_type.to_owned());
            customs.push((task_type == "custom").then(|| format!("custom-{}", i % 20)));
            latencies.push(
                (!j.is_multiple_of(10)).then_some(200 + ((i * 37 + k * 101) % 20_000) as i64),
            );
            costs.push((!j.is_multiple_of(7)).then_some(((i * 13 + k * 7) % 500) as f64 / 100.0));
            descriptions.push(format!(
                "{} {} for {} and {} work",
                task_type,
                word(i),
                word(i + k + 3),
                word(j * 7)
            ));
            let t = json!([word(i * 3 + k), word(i + 11), word(j + 5)]);
            tags.push(t.to_string());
            skills.push((j.is_multiple_of(3)).then(|| {
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
    .bind(&ids)
    .bind(&agents)
    .bind(&types)
    .bind(&customs)
    .bind(&latencies)
    .bind(&costs)
    .bind(&descriptions)
    .bind(&tags)
    .bind(&skills)
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

/// Latencies (ms, sorted) of `DIRECTORY_CONCURRENCY` clients sending `make(i)` for `secs`
/// after a warm-up.
async fn http_latencies(
    bench: &Arc<Bench>,
    secs: u64,
    make: impl Fn(usize) -> reqwest::RequestBuilder + Send + Sync + 'static,
) -> anyhow::Result<Vec<f64>> {
    let make = Arc::new(make);
    let measure_from = Instant::now() + WARMUP;
    let deadline = measure_from + Duration::from_secs(secs);
    let mut set = JoinSet::new();
    for c in 0..DIRECTORY_CONCURRENCY {
        let make = make.clone();
        let _ = bench;
        set.spawn(async move {
            let mut samples = Vec::new();
            let mut i = c;
            while Instant::now() < deadline {
                let t = Instant::now();
                let r = make(i).send().await?;
                let status = r.status();
                let body = r.bytes().await?;
                anyhow::ensure!(
                    status == StatusCode::OK,
                    "{status}: {}",
                    String::from_utf8_lossy(&body)
                );
                if t >= measure_from {
                    samples.push(t.elapsed().as_secs_f64() * 1000.0);
                }
                i += DIRECTORY_CONCURRENCY;
            }
            anyhow::Ok(samples)
        });
    }
    let mut all = Vec::new();
    while let Some(res) = set.join_next().await {
        all.extend(res??);
    }
    all.sort_by(f64::total_cmp);
    Ok(all)
}

/// Discovery and ranking over 10 000 capabilities of 2 000 agents, over HTTP.
async fn directory(
    bench: &Arc<Bench>,
    plan: &Plan,
    r: &mut Results,
    json_out: bool,
) -> anyhow::Result<()> {
    note(
        json_out,
        format!(
            "directory: seeding {} capabilities over {DIRECTORY_AGENTS} agents",
            DIRECTORY_AGENTS * DIRECTORY_CAPABILITIES_PER_AGENT
        ),
    );
    let t = Instant::now();
    seed_directory(&bench.pool).await?;
    r.insert(
        "directory_seed_s",
        json!(round(t.elapsed().as_secs_f64(), 2)),
    );
    r.insert(
        "directory_capabilities",
        json!(DIRECTORY_AGENTS * DIRECTORY_CAPABILITIES_PER_AGENT),
    );
    r.insert("directory_agents", json!(DIRECTORY_AGENTS));
    r.insert("directory_clients", json!(DIRECTORY_CONCURRENCY));

    note(
        json_out,
        format!(
            "discovery: {} s, {DIRECTORY_CONCURRENCY} clients",
            plan.http_secs
        ),
    );
    let (client, base, service) = (
        bench.client.clone(),
        bench.base.clone(),
        bench.service.clone(),
    );
    let discover = http_latencies(bench, plan.http_secs, move |i| {
        let task_type = TASK_TYPES[i % TASK_TYPES.len()];
        let caps = if i % 2 == 0 {
            "&maxCostUsd=3&maxLatencyMs=15000"
        } else {
            ""
        };
        client
            .get(format!(
                "{base}/api/agents/discover?taskType={task_type}{caps}"
            ))
            .bearer_auth(&service)
    })
    .await?;
    r.insert("discover_requests", json!(discover.len()));
    r.insert(
        "discover_p50_ms",
        json!(round(percentile(&discover, 50.0), 2)),
    );
    r.insert(
        "discover_p99_ms",
        json!(round(percentile(&discover, 99.0), 2)),
    );

    note(
        json_out,
        format!(
            "ranking: {} s, {DIRECTORY_CONCURRENCY} clients",
            plan.http_secs
        ),
    );
    let (client, base, service) = (
        bench.client.clone(),
        bench.base.clone(),
        bench.service.clone(),
    );
    let rank = http_latencies(bench, plan.http_secs, move |i| {
        let body = json!({
            "task_summary": format!("{} {} work on {} and {}", TASK_TYPES[i % 7], VOCABULARY[i % 24], VOCABULARY[(i * 7) % 24], VOCABULARY[(i * 5 + 3) % 24]),
            "max_cost_amount": "$3.00",
            "max_latency_ms": 10000,
            "taskType": TASK_TYPES[i % TASK_TYPES.len()],
        });
        client.post(format!("{base}/api/agents/rank")).bearer_auth(&service).json(&body)
    })
    .await?;
    r.insert("rank_requests", json!(rank.len()));
    r.insert("rank_p50_ms", json!(round(percentile(&rank, 50.0), 2)));
    r.insert("rank_p99_ms", json!(round(percentile(&rank, 99.0), 2)));

    // Where a ranking's time goes, one request at a time in process: the candidates' query, then
    // the assessments.
    let body = json!({"task_summary": "code review of rust security work", "max_cost_amount": "$3.00", "max_latency_ms": 10000, "taskType": "code-review"});
    let query =
        parley::directory::ranking::RankQuery::parse(&body).map_err(|e| anyhow::anyhow!("{e}"))?;
    let config = bench.state.engine.config().clone();
    let (mut sql_ms, mut assess_ms, mut full_ms, mut found_n) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for _ in 0..20 {
        let mut conn = bench.pool.acquire().await?;
        let t = Instant::now();
        let found = parley::directory::ranking::candidates(
            &mut conn,
            &query,
            config.min_trust,
            config.anonymous_id_ttl,
        )
        .await?;
        sql_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        found_n = found.len();
        // For comparison: every candidate assessed with its full explanation, as a ranking did
        // before it scored first and explained only what it shows.
        let t = Instant::now();
        for c in &found {
            std::hint::black_box(c.calculator.assess(&query.request, Some(c.queue_depth), None));
        }
        full_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        std::hint::black_box(parley::directory::ranking::rank(
            &query.request,
            found,
            query.limit,
        ));
        assess_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    sql_ms.sort_by(f64::total_cmp);
    assess_ms.sort_by(f64::total_cmp);
    full_ms.sort_by(f64::total_cmp);
    r.insert("rank_candidates_per_request", json!(found_n));
    r.insert(
        "rank_inprocess_assess_all_full_p50_ms",
        json!(round(percentile(&full_ms, 50.0), 2)),
    );
    r.insert(
        "rank_inprocess_sql_p50_ms",
        json!(round(percentile(&sql_ms, 50.0), 2)),
    );
    r.insert(
        "rank_inprocess_assess_p50_ms",
        json!(round(percentile(&assess_ms, 50.0), 2)),
    );
    Ok(())
}

/// Requester/target pairs of the delegation phase.
const DELEGATION_PAIRS: usize = 16;
/// Seconds the delegation phase measures (after the warm-up), unless `--delegation-secs` says.
const DELEGATION_SECS: u64 = 10;

/// A call with an agent key; fails unless the answer has the expected status.
async fn keyed(
    bench: &Bench,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<&Value>,
    expect: StatusCode,
) -> anyhow::Result<Value> {
    let mut req = bench
        .client
        .request(method, format!("{}{path}", bench.base))
        .header("x-api-key", key);
    if let Some(b) = body {
        req = req.json(b);
    }
    let r = req.send().await?;
    let status = r.status();
    let text = r.text().await?;
    anyhow::ensure!(status == expect, "{path}: {status} {text}");
    Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Registers an agent with one capability of `task_type` and the rate limits at their maximum
/// (the bench measures the flow, not the limiter); returns (id, key, anonymous id).
async fn delegation_agent(
    bench: &Bench,
    user: &str,
    task_type: &str,
) -> anyhow::Result<(String, String, String)> {
    use reqwest::Method;
    let (id, key) = bench.register_agent(user).await?;
    let capability = json!({
        "taskType": task_type,
        "inputSchema": {"type": "object", "required": ["code"], "properties": {"code": {"type": "string"}}},
        "outputSchema": {"type": "object", "required": ["feedback"], "properties": {"feedback": {"type": "string"}}},
        "estimatedCostUsd": 1.0,
    });
    let base = format!("/api/agents/{id}/capabilities");
    let put = keyed(
        bench,
        &key,
        Method::PUT,
        &base,
        Some(&capability),
        StatusCode::CREATED,
    )
    .await?;
    let anon = put["anonymousAgentId"]
        .as_str()
        .context("anonymousAgentId")?
        .to_owned();
    let cap = put["capability"]["id"]
        .as_str()
        .context("capability id")?
        .to_owned();
    let limits = json!({
        "inboundRateLimit": BENCH_RATE_LIMIT,
        "outboundRateLimit": BENCH_RATE_LIMIT,
    });
    keyed(
        bench,
        &key,
        Method::PUT,
        &format!("{base}/{cap}/permissions"),
        Some(&limits),
        StatusCode::OK,
    )
    .await?;
    Ok((id, key, anon))
}

/// The service's delegation limits in the bench (`PARLEY_OUTBOUND_RATE`, `PARLEY_INBOUND_RATE`),
/// and what its agents declare: the most there is, so that no limiter decides a figure.
const BENCH_RATE_LIMIT: u32 = 10_000;

/// The SQL floor of a delegation's round trip and its pgbench script (BENCHMARKS.md,
/// "Delegation against its own SQL").
const DELEGATION_FLOOR_SCRIPT: &str = include_str!("delegation_floor.sql");

/// The SQL floor of a delegation round trip: `delegation_floor.sql` under pgbench (`-M prepared`,
/// one client per pair, as many pairs as the HTTP phase, the same seconds) on the service's own
/// database and functions, with pairs of agents of its own registered through the API as the
/// HTTP phase's are. Every delegation the script made must have ended `completed`, or the floor
/// did not do the work it stands for and the phase fails. pgbench logs each transaction's
/// latency (`-l`), so the floor's percentiles stand beside the round trip's.
async fn delegation_floor(
    server: &Server,
    bench: &Arc<Bench>,
    secs: u64,
    json_out: bool,
) -> anyhow::Result<FloorFigures> {
    let mut conn = PgConnection::connect(&server.url(&server.app_db)?).await?;
    sqlx::raw_sql(
        "CREATE TABLE delegation_floor_pairs (n integer PRIMARY KEY, rid uuid NOT NULL, rhash bytea NOT NULL,
                                              tid uuid NOT NULL, thash bytea NOT NULL, tanon uuid NOT NULL)",
    )
    .execute(&mut conn)
    .await?;
    let mut requesters = Vec::new();
    // pgbench numbers its clients from 0.
    for n in 0..DELEGATION_PAIRS {
        let (rid, rkey, _) =
            delegation_agent(bench, &format!("bench-floor-requester-{n}"), "testing").await?;
        let (tid, tkey, tanon) =
            delegation_agent(bench, &format!("bench-floor-target-{n}"), "code-review").await?;
        let (rid, tid, tanon): (uuid::Uuid, uuid::Uuid, uuid::Uuid) =
            (rid.parse()?, tid.parse()?, tanon.parse()?);
        sqlx::query("INSERT INTO delegation_floor_pairs VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(i32::try_from(n)?)
            .bind(rid)
            .bind(parley::delivery::hash_secret(&rkey))
            .bind(tid)
            .bind(parley::delivery::hash_secret(&tkey))
            .bind(tanon)
            .execute(&mut conn)
            .await?;
        requesters.push(rid);
    }
    let work = std::env::temp_dir().join(format!("parley-bench-delegation-floor-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let script = work.join("delegation_floor.sql");
    std::fs::write(&script, DELEGATION_FLOOR_SCRIPT)?;
    note(
        json_out,
        format!("delegation sql floor: -M prepared -c {DELEGATION_PAIRS} -j 2 -T {secs}"),
    );
    let mut args = script_run(
        &script,
        &[
            ("default_limit", BENCH_RATE_LIMIT.to_string()),
            ("inbound_limit", BENCH_RATE_LIMIT.to_string()),
            ("per_requester", parley::config::Config::default().trust_per_requester.to_string()),
        ],
        DELEGATION_PAIRS,
        secs,
    );
    args.extend(["-l".into(), format!("--log-prefix={}", work.join("txn").display())]);
    let out = server.pgbench_on(&server.app_db, &args);
    let logged = out.and_then(|out| Ok((out, transaction_latencies_ms(&work)?)));
    let _ = std::fs::remove_dir_all(&work);
    let (out, mut latencies) = logged?;
    anyhow::ensure!(!latencies.is_empty(), "pgbench logged no transactions of the delegation floor");
    latencies.sort_by(f64::total_cmp);
    let figures = FloorFigures {
        per_s: pgbench_figure(&out, "tps = ")?,
        mean_ms: pgbench_figure(&out, "latency average = ")?,
        p50_ms: percentile(&latencies, 50.0),
        p99_ms: percentile(&latencies, 99.0),
    };
    let ended: Vec<(String, i64)> = sqlx::query_as(
        "SELECT status, count(*) FROM delegations WHERE requester_agent_id = ANY($1) GROUP BY status",
    )
    .bind(&requesters)
    .fetch_all(&mut conn)
    .await?;
    anyhow::ensure!(
        !ended.is_empty() && ended.iter().all(|(status, _)| status == "completed"),
        "the delegation floor's delegations did not all complete: {ended:?}"
    );
    sqlx::raw_sql("DROP TABLE delegation_floor_pairs").execute(&mut conn).await?;
    conn.close().await?;
    Ok(figures)
}

/// pgbench's arguments for a custom script: `-n -M prepared`, each `-D name=value`, `clients`
/// clients on two threads for `secs` seconds.
fn script_run(
    script: &std::path::Path,
    defines: &[(&str, String)],
    clients: usize,
    secs: u64,
) -> Vec<String> {
    let mut args: Vec<String> = ["-n", "-M", "prepared", "-f"].map(String::from).into();
    args.push(script.display().to_string());
    for (name, value) in defines {
        args.extend(["-D".into(), format!("{name}={value}")]);
    }
    args.extend(["-c".into(), clients.to_string(), "-j".into(), "2".into(), "-T".into(), secs.to_string()]);
    args
}

/// What the delegation floor measured: delegations a second, and the latency of one whole
/// delegation (pgbench's mean, and percentiles over its per-transaction log).
struct FloorFigures {
    per_s: f64,
    mean_ms: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// Every transaction's latency, in ms, from the per-transaction logs pgbench `-l` wrote in `dir`
/// (one file per thread; each line `client transaction latency_us script epoch_s epoch_us`).
fn transaction_latencies_ms(dir: &std::path::Path) -> anyhow::Result<Vec<f64>> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("txn.")) {
            continue;
        }
        for line in std::fs::read_to_string(&path)?.lines() {
            let latency_us: f64 = line
                .split_whitespace()
                .nth(2)
                .with_context(|| format!("pgbench log line {line:?}"))?
                .parse()
                .with_context(|| format!("pgbench log line {line:?}"))?;
            all.push(latency_us / 1000.0);
        }
    }
    Ok(all)
}

/// Delegation round trips over HTTP: 16 requesters each delegate (`?wait=` long-poll) to their
/// own target by anonymous id; each target long-polls its inbox, accepts and completes. The round
/// trip is from the delegate call sent to the requester's wait answered with the result.
async fn delegation(
    server: &Server,
    bench: &Arc<Bench>,
    r: &mut Results,
    secs: u64,
    json_out: bool,
) -> anyhow::Result<()> {
    use reqwest::Method;
    note(
        json_out,
        format!("delegation: {DELEGATION_PAIRS} pairs, {secs} s"),
    );
    let mut pairs = Vec::new();
    for i in 0..DELEGATION_PAIRS {
        let requester =
            delegation_agent(bench, &format!("bench-delegation-requester-{i}"), "testing").await?;
        let target = delegation_agent(
            bench,
            &format!("bench-delegation-target-{i}"),
            "code-review",
        )
        .await?;
        pairs.push((requester, target));
    }
    // As for the turn cycles: what one round trip costs the service's process and PostgreSQL's
    // backends, and how many transactions the service's pool runs for it (warm-up included).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let meter = CostMeter::start(&bench.pool).await?;
    let measure_from = Instant::now() + WARMUP;
    let deadline = measure_from + Duration::from_secs(secs);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut targets = JoinSet::new();
    let mut requesters = JoinSet::new();
    for ((rid, rkey, _), (tid, tkey, tanon)) in pairs {
        let (b, done) = (bench.clone(), done.clone());
        targets.spawn(async move {
            let inbox = format!("/api/agents/{tid}/delegations/inbox?wait=5");
            let mut served = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let answer = keyed(&b, &tkey, Method::GET, &inbox, None, StatusCode::OK).await?;
                for item in answer["requests"].as_array().context("requests")? {
                    let id = item["requestId"].as_str().context("requestId")?;
                    let path = format!("/api/agents/{tid}/delegations/{id}");
                    let accepted = keyed(
                        &b,
                        &tkey,
                        Method::POST,
                        &format!("{path}/accept"),
                        None,
                        StatusCode::OK,
                    )
                    .await?;
                    let token = accepted["claimToken"].as_str().context("claimToken")?;
                    let output = json!({"output": {"feedback": "looks fine"}, "claimToken": token});
                    keyed(
                        &b,
                        &tkey,
                        Method::POST,
                        &format!("{path}/complete"),
                        Some(&output),
                        StatusCode::OK,
                    )
                    .await?;
                    served += 1;
                }
            }
            anyhow::Ok(served)
        });
        let b = bench.clone();
        requesters.spawn(async move {
            let (mut samples, mut total) = (Vec::new(), 0u64);
            while Instant::now() < deadline {
                let body = json!({
                    "requestId": uuid::Uuid::new_v4(), "agentId": rid, "taskType": "code-review",
                    "targetAnonymousId": tanon, "input": {"code": "fn main() {}"}, "timeoutMs": 60000,
                });
                let t = Instant::now();
                let answer = keyed(
                    &b,
                    &rkey,
                    Method::POST,
                    "/api/agents/delegate?wait=10",
                    Some(&body),
                    StatusCode::OK,
                )
                .await?;
                anyhow::ensure!(answer["result"]["status"] == "completed", "{answer}");
                total += 1;
                if t >= measure_from {
                    samples.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            }
            anyhow::Ok((samples, total))
        });
    }
    let (mut all, mut total) = (Vec::new(), 0u64);
    let mut failed = None;
    while let Some(res) = requesters.join_next().await {
        match res? {
            Ok((s, n)) => {
                all.extend(s);
                total += n;
            }
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    let elapsed = Instant::now()
        .saturating_duration_since(measure_from)
        .as_secs_f64();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    while let Some(res) = targets.join_next().await {
        res??;
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let (own_cpu, pg_cpu) = meter.cpu_secs(&bench.pool).await?;
    let xacts = meter.transactions(&bench.pool).await?;
    let per = |v: f64| json!(round(v / total.max(1) as f64, 2));
    r.insert("cpu_ms_per_delegation_parley_process", per(own_cpu * 1e3));
    r.insert("cpu_ms_per_delegation_postgres_backends", per(pg_cpu * 1e3));
    r.insert("db_transactions_per_delegation", per(xacts as f64));
    all.sort_by(f64::total_cmp);
    r.insert("delegation_pairs", json!(DELEGATION_PAIRS));
    r.insert("delegation_secs", json!(secs));
    r.insert(
        "delegations_per_s",
        json!(round(all.len() as f64 / elapsed, 1)),
    );
    r.insert(
        "delegation_rtt_p50_ms",
        json!(round(percentile(&all, 50.0), 2)),
    );
    r.insert(
        "delegation_rtt_p99_ms",
        json!(round(percentile(&all, 99.0), 2)),
    );
    let floor = delegation_floor(server, bench, secs, json_out).await?;
    r.insert("delegation_sql_floor_per_s", json!(round(floor.per_s, 1)));
    r.insert("delegation_sql_floor_mean_ms", json!(round(floor.mean_ms, 2)));
    r.insert("delegation_sql_floor_p50_ms", json!(round(floor.p50_ms, 2)));
    r.insert("delegation_sql_floor_p99_ms", json!(round(floor.p99_ms, 2)));
    if let Some(rate) = r.get("delegations_per_s").and_then(Value::as_f64) {
        r.insert("delegation_vs_sql_floor", json!(round(rate / floor.per_s, 3)));
    }
    Ok(())
}

/// 1 000 concurrent long-polls: RSS and database connections while they wait.
async fn longpolls(
    bench: &Arc<Bench>,
    plan: &Plan,
    r: &mut Results,
    json_out: bool,
) -> anyhow::Result<()> {
    let users = 50usize;
    note(
        json_out,
        format!(
            "long-polls: {} concurrent, over {users} agents",
            plan.longpolls
        ),
    );
    let b = bench.clone();
    let agents = for_each_concurrent(users, 8, move |i| {
        let b = b.clone();
        async move { b.register_agent(&format!("bench-longpoll-user-{i}")).await }
    })
    .await?;
    let clients: Vec<AgentClient> = agents
        .iter()
        .map(|(id, key)| AgentClient::new(bench, id, key))
        .collect();
    let mut monitor = PgConnection::connect(
        &bench
            .state
            .engine
            .config()
            .database_url
            .clone()
            .unwrap_or_default(),
    )
    .await?;
    let rss_before = rss_mb();
    let wait_secs = 8u64;
    let mut set = JoinSet::new();
    for i in 0..plan.longpolls {
        let agent = clients[i % users].clone();
        set.spawn(async move { agent.pickup(Some(wait_secs)).await });
    }
    let (mut rss_peak, mut db_peak, mut in_use_peak) = (0f64, 0i64, 0u32);
    let t = Instant::now();
    let mut ready_at = None;
    while t.elapsed() < Duration::from_secs(wait_secs - 2) {
        rss_peak = rss_peak.max(rss_mb());
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_one(&mut monitor)
        .await?;
        db_peak = db_peak.max(n);
        let pool = &bench.pool;
        in_use_peak = in_use_peak.max(pool.size().saturating_sub(pool.num_idle() as u32));
        if ready_at.is_none() && bench.state.engine.wakeups().waiting_users() == users {
            ready_at = Some(t.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pool_size_now = bench.pool.size();
    let mut answered_empty = 0;
    while let Some(res) = set.join_next().await {
        if res??.is_none() {
            answered_empty += 1;
        }
    }
    anyhow::ensure!(
        answered_empty == plan.longpolls,
        "a long-poll got a turn although none was parked"
    );
    r.insert("longpoll_waiters", json!(plan.longpolls));
    r.insert("longpoll_rss_mb", json!(round(rss_peak, 1)));
    r.insert("longpoll_rss_before_mb", json!(round(rss_before, 1)));
    r.insert("longpoll_db_connections", json!(db_peak));
    r.insert("longpoll_pool_in_use_peak", json!(in_use_peak));
    r.insert("longpoll_pool_open", json!(pool_size_now));
    r.insert(
        "longpoll_all_waiting_after_ms",
        json!(ready_at.map(|d| d.as_millis() as u64)),
    );
    Ok(())
}

fn print_table(r: &Results) {
    let g = |k: &str| r.get(k).cloned().unwrap_or(Value::Null);
    let rows: Vec<(&str, String, String)> = vec![
        (
            "turn cycles (pickup+respond) /s",
            g("turn_cycles_per_s").to_string(),
            format!("{} agents", g("turn_cycle_agents")),
        ),
        (
            "pgbench -N TPS (same clients)",
            g("pgbench_tps").to_string(),
            format!("-c {} -j 2", g("pgbench_clients")),
        ),
        (
            "  ratio (target >= 0.5)",
            g("turn_cycle_ratio").to_string(),
            String::new(),
        ),
        (
            "SQL floor cycles /s (pgbench script)",
            g("sql_floor_tps").to_string(),
            format!("ratio to pgbench -N {}", g("sql_floor_ratio")),
        ),
        (
            "  turn cycles vs floor",
            g("turn_cycle_vs_floor").to_string(),
            String::new(),
        ),
        (
            "  floor + timer moves /s",
            g("sql_floor_timers_tps").to_string(),
            format!("ratio {}", g("sql_floor_timers_ratio")),
        ),
        (
            "  floor + timers + NOTIFY /s",
            g("sql_floor_timers_notify_tps").to_string(),
            format!("ratio {}", g("sql_floor_timers_notify_ratio")),
        ),
        (
            "  row updates in the cycles: HOT share",
            g("hot_update_share_in_cycles").to_string(),
            g("row_updates_in_cycles").to_string(),
        ),
        (
            "  pickup p50 / p99 ms",
            format!("{} / {}", g("pickup_p50_ms"), g("pickup_p99_ms")),
            String::new(),
        ),
        (
            "  respond p50 / p99 ms",
            format!("{} / {}", g("respond_p50_ms"), g("respond_p99_ms")),
            String::new(),
        ),
        (
            "wake latency p50 / p99 ms",
            format!(
                "{} / {}",
                g("wake_latency_p50_ms"),
                g("wake_latency_p99_ms")
            ),
            format!("{} wakes, target p99 < 10", g("wake_latency_samples")),
        ),
        (
            "  from park tx start p50 / p99 ms",
            format!(
                "{} / {}",
                g("wake_from_park_tx_start_p50_ms"),
                g("wake_from_park_tx_start_p99_ms")
            ),
            "upper bound".into(),
        ),
        (
            "system-vs-system negotiations /s",
            g("svs_negotiations_per_s").to_string(),
            format!("{} turns each", g("svs_turns_per_negotiation")),
        ),
        (
            "assessments /s in process",
            g("assess_per_s_inprocess").to_string(),
            format!("{} skills, one thread", g("assess_skills")),
        ),
        (
            "assessments /s over HTTP",
            g("assess_per_s_http").to_string(),
            format!("{HTTP_CONCURRENCY} concurrent"),
        ),
        (
            "empty handler /s over HTTP",
            g("http_baseline_per_s").to_string(),
            format!("ratio {}", g("assess_http_ratio")),
        ),
        (
            "discovery p50 / p99 ms",
            format!("{} / {}", g("discover_p50_ms"), g("discover_p99_ms")),
            format!(
                "{} capabilities, {} clients, target p99 <= 20",
                g("directory_capabilities"),
                g("directory_clients")
            ),
        ),
        (
            "ranking p50 / p99 ms",
            format!("{} / {}", g("rank_p50_ms"), g("rank_p99_ms")),
            format!(
                "{} candidates each, target p99 <= 50",
                g("rank_candidates_per_request")
            ),
        ),
        (
            "  in process: query / assess p50 ms",
            format!(
                "{} / {}",
                g("rank_inprocess_sql_p50_ms"),
                g("rank_inprocess_assess_p50_ms")
            ),
            format!("one at a time; every candidate explained: {} ms", g("rank_inprocess_assess_all_full_p50_ms")),
        ),
        (
            "delegations /s (request-accept-complete)",
            g("delegations_per_s").to_string(),
            format!("{} requester/target pairs", g("delegation_pairs")),
        ),
        (
            "  round trip p50 / p99 ms",
            format!(
                "{} / {}",
                g("delegation_rtt_p50_ms"),
                g("delegation_rtt_p99_ms")
            ),
            "delegate sent -> result answered, target p99 < 25".into(),
        ),
        (
            "  SQL floor: delegations /s (mean ms)",
            format!(
                "{} ({})",
                g("delegation_sql_floor_per_s"),
                g("delegation_sql_floor_mean_ms")
            ),
            format!(
                "the same functions under pgbench; HTTP / floor {}",
                g("delegation_vs_sql_floor")
            ),
        ),
        (
            "  SQL floor: p50 / p99 ms",
            format!(
                "{} / {}",
                g("delegation_sql_floor_p50_ms"),
                g("delegation_sql_floor_p99_ms")
            ),
            "one delegation's SQL, no HTTP".into(),
        ),
        (
            "long-polls waiting",
            g("longpoll_waiters").to_string(),
            String::new(),
        ),
        (
            "  process RSS MB (peak)",
            g("longpoll_rss_mb").to_string(),
            format!("before {}", g("longpoll_rss_before_mb")),
        ),
        (
            "  DB connections (pg_stat_activity)",
            g("longpoll_db_connections").to_string(),
            format!("pool size {}", g("pool_size")),
        ),
        (
            "turn cycles /s, metrics off / on",
            format!(
                "{} / {}",
                g("turn_cycles_per_s_metrics_off"),
                g("turn_cycles_per_s_metrics_on")
            ),
            format!(
                "overhead {} % ± {} (95 %, {} half-second pairs), target <= 3",
                g("metrics_overhead_pct"),
                g("metrics_overhead_ci95_pct"),
                g("metrics_slice_pairs")
            ),
        ),
        (
            "turn cycles /s, liveness off / on",
            format!(
                "{} / {}",
                g("turn_cycles_per_s_liveness_off"),
                g("turn_cycles_per_s_liveness_on")
            ),
            format!("overhead {} %", g("liveness_overhead_pct")),
        ),
    ];
    println!(
        "parley-bench ({}; load before: {}, after: {})",
        g("mode").as_str().unwrap_or(""),
        g("load_before").as_str().unwrap_or(""),
        g("load_after").as_str().unwrap_or("")
    );
    for (name, value, note) in rows {
        if value == "null" || value == "null / null" {
            continue;
        }
        println!("{name:<38} {value:>14}   {note}");
    }
}

async fn run(args: Args) -> anyhow::Result<Results> {
    let plan = Plan::new(args.quick);
    let phase = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);
    let mut r = Results::new();
    r.insert("mode", json!(if args.quick { "quick" } else { "full" }));
    r.insert("load_before", json!(load_average()));
    r.insert(
        "cores",
        json!(
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(0)
        ),
    );
    r.insert("pool_size", json!(args.pool_size));
    let began = Instant::now();
    let server = Server::open().await?;
    let outcome = async {
        let bench = Arc::new(Bench::start(&server.url(&server.app_db)?, args.pool_size).await?);
        let result = async {
            if phase("cycles") {
                turn_cycles(&bench, &plan, args.agents, &mut r, args.json).await?;
            }
            if phase("pgbench") {
                pgbench(&server, &plan, args.agents, &mut r, args.json)?;
            }
            if phase("pgbench") || phase("floor") {
                sql_floor(
                    &server,
                    &plan,
                    args.agents,
                    &[("sql_floor_tps", false, false)],
                    &mut r,
                    args.json,
                )
                .await?;
            }
            if args.only.iter().any(|o| o == "floor-variants") {
                let variants = [
                    ("sql_floor_tps", false, false),
                    ("sql_floor_timers_tps", true, false),
                    ("sql_floor_timers_notify_tps", true, true),
                ];
                sql_floor(&server, &plan, args.agents, &variants, &mut r, args.json).await?;
            }
            if let (Some(c), Some(p)) = (
                r.get("turn_cycles_per_s").and_then(Value::as_f64),
                r.get("pgbench_tps").and_then(Value::as_f64),
            ) {
                r.insert("turn_cycle_ratio", json!(round(c / p, 3)));
            }
            if phase("wake") {
                wake_latency(&bench, &plan, &mut r, args.json).await?;
            }
            if phase("svs") {
                svs(&bench, &plan, &mut r, args.json).await?;
            }
            if phase("assess") {
                assess(&bench, &plan, &mut r, args.json).await?;
            }
            if phase("longpoll") {
                longpolls(&bench, &plan, &mut r, args.json).await?;
            }
            if phase("directory") {
                directory(&bench, &plan, &mut r, args.json).await?;
            }
            if args.only.iter().any(|o| o == "delegation") {
                delegation(&server, &bench, &mut r, args.delegation_secs, args.json).await?;
            }
            if args.only.iter().any(|o| o == "metrics") {
                metrics_overhead(&bench, args.agents, &mut r, args.json).await?;
            }
            if args.only.iter().any(|o| o == "liveness") {
                liveness_overhead(&bench, &plan, args.agents, &mut r, args.json).await?;
            }
            anyhow::Ok(())
        }
        .await;
        match Arc::try_unwrap(bench) {
            Ok(b) => b.shutdown().await,
            Err(_) => note(
                args.json,
                "the service is still referenced; not waiting for its shutdown",
            ),
        }
        result
    }
    .await;
    server.drop_databases().await;
    outcome?;
    r.insert("load_after", json!(load_average()));
    r.insert("elapsed_s", json!(round(began.elapsed().as_secs_f64(), 1)));
    Ok(r)
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let json_out = args.json;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(run(args)) {
        Ok(r) => {
            if json_out {
                println!("{}", serde_json::to_string(&r).unwrap_or_default());
            } else {
                print_table(&r);
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("parley-bench: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_latencies_are_read_from_every_thread_log_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("parley-bench-txn-log-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // pgbench -l with two threads: `txn.<pid>` and `txn.<pid>.1`.
        std::fs::write(dir.join("txn.77"), "0 0 20125 0 1764090000 120000\n1 0 1500 0 1764090000 130000\n").unwrap();
        std::fs::write(dir.join("txn.77.1"), "8 0 33000 0 1764090001 5\n").unwrap();
        std::fs::write(dir.join("delegation_floor.sql"), "SELECT 1;\n").unwrap();
        let mut ms = transaction_latencies_ms(&dir).unwrap();
        ms.sort_by(f64::total_cmp);
        assert_eq!(ms, vec![1.5, 20.125, 33.0]);
        std::fs::write(dir.join("txn.77.2"), "8 0\n").unwrap();
        assert!(transaction_latencies_ms(&dir).is_err(), "a line without a latency is an error, not a zero");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_agent_answers_the_first_term_the_latest_counter_asked_for() {
        let turn = |messages: &[&str]| {
            json!({ "turn": { "history": messages.iter().map(|m| json!({ "message": m })).collect::<Vec<_>>() } })
        };
        let asked = "To go ahead, Source founder needs evidence of: senior, kubernetes.\nSource founder brings: x.";
        let later = "Now covered: senior; to go ahead, Source founder still needs evidence of: kubernetes.\nx";
        assert!(answer_message(&turn(&["Source founder brings: x.", "Thanks"])).starts_with("Thanks;"));
        assert!(answer_message(&turn(&["p", "q", asked, "I have senior experience"])).starts_with("I have senior experience;"));
        assert!(answer_message(&turn(&[asked, "a", later, "b"])).starts_with("I have kubernetes experience;"));
    }
}
