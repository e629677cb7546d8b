//! The test harness: a real Parley on a real socket, on its own freshly migrated database.
//!
//! The database server is `DATABASE_URL`'s when set, otherwise Parley's embedded PostgreSQL in
//! the target directory (started once, left running between runs for speed). Every test gets its
//! own database, cloned from a migrated template, so tests never see each other's rows.

use std::{
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use parley::{
    AppState, Application, CallerRole, Config,
    database::{self as db, EmbeddedPostgres},
};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use sqlx::{Connection, PgConnection, PgPool};
use tokio::sync::OnceCell;

/// The secret test tokens are signed with.
pub const TEST_SECRET: &str = "test-secret-0123456789abcdef";

struct Server {
    /// URL of the server's `postgres` database.
    admin_url: String,
    template: String,
    _embedded: Option<EmbeddedPostgres>,
}

static SERVER: OnceCell<Server> = OnceCell::const_new();
static COUNTER: AtomicU32 = AtomicU32::new(0);

fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let slash = base.rfind('/').filter(|i| *i > base.find("://").map(|s| s + 2).unwrap_or(0));
    let host_part = match slash {
        Some(i) => &base[..i],
        None => base,
    };
    format!("{host_part}/{name}{query}")
}

async fn server() -> &'static Server {
    SERVER
        .get_or_init(|| async {
            let (admin_url, embedded) = match std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()) {
                Some(url) => (with_database(&url, "postgres"), None),
                None => {
                    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("test-pg");
                    let pg = tokio::task::spawn_blocking(move || EmbeddedPostgres::start_or_attach(&dir))
                        .await
                        .unwrap()
                        .expect("starting the embedded PostgreSQL for tests");
                    (pg.url("postgres"), Some(pg))
                }
            };
            let template = prepare_template(&admin_url).await;
            Server { admin_url, template, _embedded: embedded }
        })
        .await
}

/// Creates (once per schema version, across processes) a migrated template database, and drops
/// databases that earlier, finished test processes left behind.
async fn prepare_template(admin_url: &str) -> String {
    use sha2::Digest as _;
    let version: i64 = db::MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    // Every migration, every SQL function's definition and the timer crate's SQL: any change to
    // the schema makes a new template.
    let mut schema = sha2::Sha256::new();
    for m in db::MIGRATOR.iter() {
        schema.update(&m.checksum);
    }
    for d in db::definitions::DEFINITIONS {
        schema.update(d.checksum());
    }
    schema.update(parley_jobs::TIMERS_SQL.as_bytes());
    let checksum: String = schema.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    let template = format!("parley_tpl_{version}_{checksum}");
    let mut conn = PgConnection::connect(admin_url).await.expect("connecting to the test PostgreSQL");
    sqlx::query("SELECT pg_advisory_lock(727274)").execute(&mut conn).await.unwrap();
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(&template)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    if !exists {
        let building = format!("{template}_building");
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)")))
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {building}"))).execute(&mut conn).await.unwrap();
        let pool = PgPool::connect(&with_database(admin_url, &building)).await.unwrap();
        db::migrate(&pool).await.expect("migrating the template");
        pool.close().await;
        sqlx::query(sqlx::AssertSqlSafe(format!("ALTER DATABASE {building} RENAME TO {template}")))
            .execute(&mut conn)
            .await
            .unwrap();
    }
    // Databases of test processes that are gone.
    let leftovers: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 'parley_t\\_%'")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    for name in leftovers {
        let pid = name.strip_prefix("parley_t_").and_then(|r| r.split('_').next()).unwrap_or("");
        if !std::path::Path::new("/proc").join(pid).exists() {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                .execute(&mut conn)
                .await;
        }
    }
    sqlx::query("SELECT pg_advisory_unlock(727274)").execute(&mut conn).await.unwrap();
    template
}

/// A fresh, migrated database; returns its URL.
pub async fn fresh_database() -> String {
    let server = server().await;
    let name = format!("parley_t_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst));
    let mut conn = PgConnection::connect(&server.admin_url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name} TEMPLATE {}", server.template)))
        .execute(&mut conn)
        .await
        .expect("creating a test database");
    with_database(&server.admin_url, &name)
}

/// Configuration for tests: loopback on a free port, a fixed secret, short durations.
pub fn test_config(database_url: &str) -> Config {
    Config {
        database_url: Some(database_url.to_owned()),
        bind: "127.0.0.1:0".parse().unwrap(),
        data_dir: std::env::temp_dir().join("parley-tests"),
        jwt_secret: Some(TEST_SECRET.into()),
        claim_timeout: Duration::from_secs(60),
        park_timeout: Duration::from_secs(120),
        pvp_timeout: Duration::from_secs(120),
        pending_ttl: Duration::from_secs(600),
        long_poll_max: Duration::from_secs(5),
        pool_size: 10,
        timer_poll: Duration::from_millis(200),
        // Tests make many failed authentications from one address on purpose.
        auth_failure_burst: 1_000_000,
        ..Config::default()
    }
}

/// A running Parley and a client for it.
pub struct TestApp {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// The HTTP client.
    pub client: reqwest::Client,
    /// A pool on the test's database, for checking what was stored.
    pub pool: PgPool,
    /// The database URL.
    pub database_url: String,
    /// The service's state.
    pub state: AppState,
    /// The port of the open `/metrics` listener, when the configuration asked for one.
    pub metrics_port: Option<u16>,
}

/// An HTTP answer: status and JSON body (`Value::Null` when empty or not JSON).
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
    pub text: String,
}

impl TestApp {
    /// A Parley on a fresh database with the test configuration.
    pub async fn spawn() -> TestApp {
        TestApp::spawn_with(|_| {}).await
    }

    /// Like [`TestApp::spawn`], with the configuration adjusted by `adjust`.
    pub async fn spawn_with(adjust: impl FnOnce(&mut Config)) -> TestApp {
        let database_url = fresh_database().await;
        TestApp::spawn_on(&database_url, adjust).await
    }

    /// A Parley on an existing database (e.g. to simulate a restart).
    pub async fn spawn_on(database_url: &str, adjust: impl FnOnce(&mut Config)) -> TestApp {
        if std::env::var_os("TEST_LOG").is_some() {
            parley::init_logging(parley::LogFormat::Pretty);
        }
        let mut config = test_config(database_url);
        adjust(&mut config);
        let pool = db::pool(database_url, config.pool_size).await.unwrap();
        let app = Application::build(config, pool.clone()).await.expect("building the app");
        let base = format!("http://127.0.0.1:{}", app.port());
        let metrics_port = app.metrics_port();
        let state = app.state().clone();
        tokio::spawn(app.run_until_stopped(std::future::pending()));
        TestApp {
            base,
            client: reqwest::Client::new(),
            pool,
            database_url: database_url.to_owned(),
            state,
            metrics_port,
        }
    }

    /// A token for `sub` with `role`, valid for an hour.
    pub fn token(&self, sub: &str, role: CallerRole) -> String {
        self.state.jwt().mint(sub, role, Duration::from_secs(3600)).unwrap()
    }

    /// The platform's token.
    pub fn service_token(&self) -> String {
        self.token("platform", CallerRole::Service)
    }

    /// A user's token.
    pub fn user_token(&self, sub: &str) -> String {
        self.token(sub, CallerRole::User)
    }

    /// Sends a request with an optional bearer token and JSON body.
    pub async fn call(&self, method: Method, path: &str, token: Option<&str>, body: Option<&Value>) -> Answer {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        Answer::from(req.send().await.expect("request failed")).await
    }

    /// Sends a raw body.
    pub async fn call_raw(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: impl Into<reqwest::Body>,
    ) -> Answer {
        let mut req = self.client.request(method, format!("{}{path}", self.base)).body(body);
        req = req.header("content-type", "application/json");
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        Answer::from(req.send().await.expect("request failed")).await
    }

    /// `GET` with a token.
    pub async fn get(&self, path: &str, token: &str) -> Answer {
        self.call(Method::GET, path, Some(token), None).await
    }

    /// `POST` JSON with a token.
    pub async fn post(&self, path: &str, token: &str, body: &Value) -> Answer {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }

    /// Number of rows in `table` (for proving that a refused request stored nothing).
    pub async fn count(&self, table: &str) -> i64 {
        self.counted(&format!("SELECT count(*) FROM {table}")).await
    }

    /// The number `sql` selects: a count, for checking an invariant in SQL.
    pub async fn counted(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned())).fetch_one(&self.pool).await.unwrap()
    }
}

/// A registered personal agent and its key.
#[derive(Clone)]
pub struct TestAgent {
    pub id: String,
    pub key: String,
    pub key_id: String,
}

impl TestApp {
    /// Registers a personal agent for `user` and returns it with its first key.
    pub async fn register_agent(&self, user: &str) -> TestAgent {
        let answer = self
            .post("/api/agents", &self.user_token(user), &serde_json::json!({ "name": format!("{user}'s agent") }))
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text);
        TestAgent {
            id: answer.body["agent"]["id"].as_str().unwrap().to_owned(),
            key: answer.body["apiKey"]["key"].as_str().unwrap().to_owned(),
            key_id: answer.body["apiKey"]["id"].as_str().unwrap().to_owned(),
        }
    }

    /// Registers a personal agent for each of `users`, in order.
    pub async fn register_agents<const N: usize>(&self, users: [&str; N]) -> [TestAgent; N] {
        let mut agents = Vec::with_capacity(N);
        for user in users {
            agents.push(self.register_agent(user).await);
        }
        agents.try_into().ok().expect("one agent for each user")
    }

    /// An agent call authenticated with `x-api-key`.
    pub async fn agent_call(&self, agent: &TestAgent, method: Method, path: &str, body: Option<&Value>) -> Answer {
        let mut req = self.client.request(method, format!("{}/api/agents/{}{path}", self.base, agent.id));
        req = req.header("x-api-key", &agent.key);
        if let Some(b) = body {
            req = req.json(b);
        }
        Answer::from(req.send().await.expect("request failed")).await
    }

    /// `POST .../negotiations/pickup` (optionally long-polling).
    pub async fn pickup(&self, agent: &TestAgent, wait: Option<u64>) -> Answer {
        let path = match wait {
            Some(w) => format!("/negotiations/pickup?wait={w}"),
            None => "/negotiations/pickup".to_owned(),
        };
        self.agent_call(agent, Method::POST, &path, None).await
    }

    /// Tomas's agent holding the claim on its turn of a [`TestApp::mixed_negotiation`]: the
    /// agent, the negotiation's id and the claim token.
    pub async fn claimed_negotiation(&self) -> (TestAgent, String, String) {
        let (agent, id) = self.mixed_negotiation().await;
        let token = self.claim_token(&agent).await;
        (agent, id, token)
    }

    /// Picks up a turn as `agent`, asserting there was one (200); returns its claim token.
    pub async fn claim_token(&self, agent: &TestAgent) -> String {
        let picked = self.pickup(agent, None).await;
        assert_eq!(picked.status, StatusCode::OK, "{}", picked.text);
        picked.body["claimToken"].as_str().unwrap().to_owned()
    }

    /// `POST .../negotiations/{id}/respond`.
    pub async fn respond(&self, agent: &TestAgent, negotiation: &str, body: &Value) -> Answer {
        self.agent_call(agent, Method::POST, &format!("/negotiations/{negotiation}/respond"), Some(body)).await
    }

    /// Starts a negotiation as the platform; returns the 201 body.
    pub async fn start(&self, body: &Value) -> Value {
        let answer = self.post("/api/negotiations", &self.service_token(), body).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text);
        answer.body
    }

    /// Polls `GET /api/negotiations/{id}` until `done` holds for it (at most `limit`).
    pub async fn wait_for(&self, negotiation: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let view = self.get(&format!("/api/negotiations/{negotiation}"), &self.service_token()).await.body;
            if done(&view) {
                return view;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("timed out waiting; last view: {view:#}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `(state, turn_count, messages)` of a negotiation, read from the database.
    pub async fn snapshot(&self, negotiation: &str) -> (String, i32, i64) {
        let id: uuid::Uuid = negotiation.parse().unwrap();
        let (state, turns): (String, i32) = sqlx::query_as("SELECT state, turn_count FROM tasks WHERE task_id = $1")
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .unwrap();
        let messages: i64 = sqlx::query_scalar("SELECT count(*) FROM messages WHERE task_id = $1")
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .unwrap();
        (state, turns, messages)
    }
}

impl TestApp {
    /// Delegates `input` of `task_type` to the target known as `target_anon`, as `requester`,
    /// answered at once (`Prefer: respond-async`); returns the answer.
    pub async fn delegate_to(&self, requester: &TestAgent, target_anon: &str, task_type: &str, input: Value) -> Answer {
        let body = serde_json::json!({
            "requestId": uuid::Uuid::new_v4(),
            "agentId": requester.id,
            "targetAnonymousId": target_anon,
            "taskType": task_type,
            "input": input,
        });
        self.delegate_async(requester, &body).await
    }

    /// Sends the delegate call `body` as `requester`, answered at once (`Prefer: respond-async`).
    pub async fn delegate_async(&self, requester: &TestAgent, body: &Value) -> Answer {
        let resp = self
            .client
            .post(format!("{}/api/agents/delegate", self.base))
            .header("x-api-key", &requester.key)
            .header("prefer", "respond-async")
            .json(body)
            .send()
            .await
            .expect("request failed");
        Answer::from(resp).await
    }

    /// Registers Tomas's personal agent, then starts the founder/engineer negotiation
    /// ([`crate::fixtures::good_match`]), whose turn waits for that agent; returns the agent and
    /// the negotiation's id.
    pub async fn mixed_negotiation(&self) -> (TestAgent, String) {
        let agent = self.register_agent("user-tomas").await;
        let started = self.start(&crate::fixtures::good_match()).await;
        assert_eq!(started["negotiation"]["status"], "waiting_for_agent");
        (agent, started["negotiation"]["id"].as_str().unwrap().to_owned())
    }
}

/// POSTs `body` to `url` with the bearer `token` and reads the answer as JSON: for a Parley run
/// as a process of its own, outside [`TestApp`].
pub async fn post_for_json(client: &reqwest::Client, url: &str, token: &str, body: &Value) -> Value {
    client.post(url).bearer_auth(token).json(body).send().await.unwrap().json().await.unwrap()
}

/// A respond body.
pub fn answer(action: &str, token: Option<&str>) -> Value {
    let mut body = serde_json::json!({
        "action": action,
        "message": format!("my {action}"),
        "assessment": {
            "reasoning": format!("Because the profiles support a {action}"),
            "suggestedRoles": { "ownUser": "agent", "otherUser": "patient" }
        }
    });
    if let Some(t) = token {
        body["claimToken"] = Value::String(t.to_owned());
    }
    body
}

impl Answer {
    /// Reads a response whole: its status, its text, and the text as JSON (null when it is not).
    pub async fn from(resp: reqwest::Response) -> Answer {
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Answer { status, body, text }
    }

    /// Asserts the status and the shared error body with `code`.
    pub fn assert_error(&self, status: StatusCode, code: &str) {
        assert_eq!(self.status, status, "body: {}", self.text);
        assert_eq!(self.body["code"], code, "body: {}", self.text);
        assert!(self.body["error"].as_str().is_some_and(|e| !e.is_empty()), "body: {}", self.text);
    }
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: String,
    pub data: Value,
}

/// Reads an SSE stream.
pub struct SseReader {
    stream: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: String,
    pub content_type: String,
}

impl SseReader {
    /// Opens `GET /api/events` with `token`, resuming after `last_id` when given.
    pub async fn open(base: &str, token: &str, last_id: Option<&str>) -> SseReader {
        let mut req = reqwest::Client::new().get(format!("{base}/api/events")).bearer_auth(token);
        if let Some(id) = last_id {
            req = req.header("Last-Event-ID", id);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let content_type =
            resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        SseReader { stream: Box::pin(resp.bytes_stream()), buffer: String::new(), content_type }
    }

    /// Reads the SSE answer `resp` (any route's).
    pub fn from_response(resp: reqwest::Response) -> SseReader {
        let content_type =
            resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        SseReader { stream: Box::pin(resp.bytes_stream()), buffer: String::new(), content_type }
    }

    /// The next event (comments skipped), or `None` if none arrives within `wait`.
    pub async fn next(&mut self, wait: Duration) -> Option<SseEvent> {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut ev = SseEvent { id: None, event: "message".into(), data: Value::Null };
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        ev.id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        ev.event = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() && ev.id.is_none() {
                    continue; // a comment (heartbeat)
                }
                ev.data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                return Some(ev);
            }
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Ok(Some(Ok(chunk))) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return None,
            }
        }
    }
}
