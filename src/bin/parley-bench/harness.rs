//! The Parley under test, started in this process the way `parley serve` starts it (the real
//! router on `127.0.0.1:0`, pool, LISTEN connection and timer workers), and the calls every phase
//! makes on it: HTTP requests that must answer a given status, agent registration, negotiation
//! creation. A phase that needs a second instance (the wake-latency one) starts it here too.

use std::{path::PathBuf, time::Duration};

use anyhow::Context;
use axum::body::Bytes;
use parley::{AppState, Application, CallerRole, Config, database as db};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;

const JWT_SECRET: &str = "parley-bench-secret-0123456789";

/// The service's delegation limits in the bench (`PARLEY_OUTBOUND_RATE`, `PARLEY_INBOUND_RATE`),
/// and what its agents declare: the most there is, so that no limiter decides a figure.
pub const BENCH_RATE_LIMIT: u32 = 10_000;

/// How long the bench's tokens live: longer than any run.
const TOKEN_TTL: Duration = Duration::from_secs(6 * 3600);

/// One Parley application serving on a loopback port until stopped.
pub struct Instance {
    pub base: String,
    pub state: AppState,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Instance {
    /// Builds the application from `config` on `pool` and serves it on a task of its own.
    pub async fn serve(config: Config, pool: PgPool) -> anyhow::Result<Instance> {
        let app = Application::build(config, pool).await?;
        let base = format!("http://127.0.0.1:{}", app.port());
        let state = app.state().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(app.run_until_stopped(async move {
            let _ = stopped.await;
        }));
        Ok(Instance { base, state, stop, task })
    }

    /// Asks it to stop and waits until it has.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// A running Parley and an HTTP client for it.
pub struct Bench {
    pub base: String,
    pub client: reqwest::Client,
    pub state: AppState,
    pub pool: PgPool,
    /// A service token (the matching platform's).
    pub service: String,
    instance: Instance,
    skills_dir: PathBuf,
}

impl Bench {
    /// Migrates the database at `url` and starts Parley on it with a pool of `pool_size`, the
    /// skills of [`extra_skills`] and rate limits that never decide a figure; returns once it
    /// is ready (its notification listener up: long-polls depend on it).
    pub async fn start(url: &str, pool_size: u32) -> anyhow::Result<Bench> {
        Bench::start_with(url, pool_size, |_| {}).await
    }

    /// [`Bench::start`] with the configuration changed by `tweak` first (the history phase makes
    /// its template negotiations end by their timers within seconds).
    pub async fn start_with(url: &str, pool_size: u32, tweak: impl FnOnce(&mut Config)) -> anyhow::Result<Bench> {
        let pool = db::pool(url, pool_size).await?;
        db::migrate(&pool).await?;
        let skills_dir = std::env::temp_dir().join(format!("parley-bench-skills-{}", std::process::id()));
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
            // The webhooks phase's receiver is on loopback.
            a2a_allow_private_targets: true,
            ..Config::default()
        };
        let mut config = config;
        tweak(&mut config);
        let instance = Instance::serve(config, pool.clone()).await?;
        let client = reqwest::Client::builder().pool_max_idle_per_host(2048).build()?;
        let service = instance.state.jwt().mint("parley-bench", CallerRole::Service, TOKEN_TTL)?;
        let bench = Bench {
            base: instance.base.clone(),
            client,
            state: instance.state.clone(),
            pool,
            service,
            instance,
            skills_dir,
        };
        // Wait until the notification listener is up: long-polls depend on it.
        for _ in 0..200 {
            let ready = bench.client.get(format!("{}/readyz", bench.base)).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(bench)
    }

    /// Stops the service (waiting up to 15 s), closes its pool and removes its skills file.
    pub async fn shutdown(self) {
        let _ = tokio::time::timeout(Duration::from_secs(15), self.instance.stop()).await;
        self.pool.close().await;
        let _ = std::fs::remove_dir_all(&self.skills_dir);
    }

    /// The service's database URL.
    pub fn database_url(&self) -> String {
        self.state.config().database_url.clone().unwrap_or_default()
    }

    /// Registers a personal agent for `user`; returns (agent id, API key).
    pub async fn register_agent(&self, user: &str) -> anyhow::Result<(String, String)> {
        let token = self.state.jwt().mint(user, CallerRole::User, TOKEN_TTL)?;
        let req = self.client.post(format!("{}/api/agents", self.base)).bearer_auth(token);
        let req = req.json(&json!({"name": format!("bench agent of {user}")}));
        let body = call(req, StatusCode::CREATED, "registering an agent").await?;
        let id = body["agent"]["id"].as_str().context("agent.id")?.to_owned();
        let key = body["apiKey"]["key"].as_str().context("apiKey.key")?.to_owned();
        Ok((id, key))
    }

    /// Starts a negotiation; returns the response body.
    pub async fn create(&self, body: &Value) -> anyhow::Result<Value> {
        let req = self.client.post(format!("{}/api/negotiations", self.base)).bearer_auth(&self.service).json(body);
        call(req, StatusCode::CREATED, "creating a negotiation").await
    }

    /// A call with an agent key to `path` of the service; fails unless the answer has the
    /// expected status.
    pub async fn keyed(
        &self,
        key: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
        expect: StatusCode,
    ) -> anyhow::Result<Value> {
        let mut req = self.client.request(method, format!("{}{path}", self.base)).header("x-api-key", key);
        if let Some(b) = body {
            req = req.json(b);
        }
        call(req, expect, path).await
    }
}

/// Sends `req` and reads its whole answer; fails with `what`, the status and the answer unless
/// the status is `expect`.
pub async fn send_expecting(req: RequestBuilder, expect: StatusCode, what: &str) -> anyhow::Result<Bytes> {
    let r = req.send().await?;
    let status = r.status();
    let body = r.bytes().await?;
    anyhow::ensure!(status == expect, "{what}: {status} {}", String::from_utf8_lossy(&body));
    Ok(body)
}

/// [`send_expecting`], with the answer read as JSON (null when it is none).
pub async fn call(req: RequestBuilder, expect: StatusCode, what: &str) -> anyhow::Result<Value> {
    let body = send_expecting(req, expect, what).await?;
    Ok(serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// Nine skills that, with the built-in one, make the 10-skill agent of the assessment figures.
fn extra_skills() -> Value {
    let topics = [
        ("pdf", ["pdf", "tables", "extraction", "invoice"]),
        ("translate", ["translation", "french", "german", "localization"]),
        ("summarize", ["summary", "report", "digest", "notes"]),
        ("code-review", ["rust", "review", "security", "lint"]),
        ("sql", ["postgresql", "sql", "query", "index"]),
        ("images", ["image", "caption", "ocr", "vision"]),
        ("calendar", ["meeting", "schedule", "calendar", "invite"]),
        ("finance", ["payments", "ledger", "reconciliation", "fintech"]),
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
