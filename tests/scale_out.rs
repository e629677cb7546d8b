//! Scale-out with real processes: two `parley serve --no-workers` (A and B) and one
//! `parley worker` on one fresh database behave as one service.
//!
//! - a turn parked through A wakes a long-poll waiting on B (PostgreSQL NOTIFY, not a poll);
//! - a claim taken on A that lapses is handed back by the worker, and B's waiting pickup gets it;
//! - B's event stream (`GET /api/events`) shows a turn made through A;
//! - with the worker killed (SIGKILL) while claim timers are pending, none fires; a new worker
//!   fires every one of them.
//!
//! The database server is `DATABASE_URL`'s (a uniquely named database, dropped at the end), or a
//! private embedded PostgreSQL when it is unset. Children are killed when the test ends, also on
//! a panic; their logs are kept in the temporary directory named in the failure message.

#[path = "api/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;
#[path = "api/helpers.rs"]
#[allow(dead_code)]
mod helpers;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use helpers::{SseReader, TEST_SECRET};
use parley::{CallerRole, JwtKeys};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

/// How long a claim lives in this test: short, so that the worker's claim timers fire quickly.
const CLAIM_TIMEOUT: Duration = Duration::from_secs(2);

/// Cross-process wake-up must be a notification, not a poll: a long-poll on B answers within
/// 100 ms of the park through A (measured from A's answer, so the bound is if anything generous
/// to the service; runs here measured 6 to 8 ms on two busy cores). The value is printed.
const WAKE_BOUND: Duration = Duration::from_millis(100);

/// A child process, killed (SIGKILL) and reaped when dropped, so that a failing test leaves no
/// Parley running.
struct Proc {
    child: Option<Child>,
}

impl Proc {
    fn spawn(args: &[&str], database_url: &str, port: Option<u16>, dir: &Path, name: &str) -> Proc {
        let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("a log file");
        let bind = format!("127.0.0.1:{}", port.unwrap_or(0));
        let child = Command::new(env!("CARGO_BIN_EXE_parley"))
            .args(args)
            .env("DATABASE_URL", database_url)
            .env("PARLEY_BIND", bind)
            .env("PARLEY_DATA_DIR", dir.join(name))
            .env("PARLEY_JWT_SECRET", TEST_SECRET)
            .env("PARLEY_CLAIM_TIMEOUT", format!("{}s", CLAIM_TIMEOUT.as_secs()))
            // Long enough that no park fallback interferes with what the test watches.
            .env("PARLEY_PARK_TIMEOUT", "10m")
            .env("PARLEY_TIMER_POLL", "100ms")
            .env("PARLEY_HOUSEKEEPING_EVERY", "5s")
            .env("PARLEY_DB_POOL_SIZE", "8")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting parley");
        Proc { child: Some(child) }
    }

    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `url` with its database name replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map(|(b, q)| (b, format!("?{q}"))).unwrap_or((url, String::new()));
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_part = match base[scheme_end..].find('/') {
        Some(i) => &base[..scheme_end + i],
        None => base,
    };
    format!("{host_part}/{name}{query}")
}

/// The database server: `DATABASE_URL`'s, or a private embedded one.
enum DbServer {
    External { admin_url: String },
    Embedded(parley::database::EmbeddedPostgres),
}

impl DbServer {
    fn open(dir: &Path) -> DbServer {
        match std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()) {
            Some(url) => DbServer::External { admin_url: with_database(&url, "postgres") },
            None => DbServer::Embedded(
                parley::database::EmbeddedPostgres::start(&dir.join("pg"))
                    .expect("a private PostgreSQL for the scale-out test"),
            ),
        }
    }

    fn url(&self, name: &str) -> String {
        match self {
            DbServer::External { admin_url } => with_database(admin_url, name),
            DbServer::Embedded(pg) => pg.url(name),
        }
    }
}

/// Drops the test's database when the test ends, also on a panic (after the children, which
/// are declared later and so dropped first). The working directory, with the children's logs,
/// is removed only when the test passed.
struct Cleanup {
    /// The server's `postgres` database and the test's database name, when on an outside server.
    database: Option<(String, String)>,
    dir: PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some((admin_url, name)) = self.database.take() {
            // Drop runs outside any async context the test could still use: a thread of its own.
            let dropped = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                runtime.block_on(async {
                    let admin: PgPool = PgPool::connect(&admin_url).await?;
                    // The name is this test's own (`parley_scale_<uuid>`), never outside input.
                    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                        .execute(&admin)
                        .await?;
                    admin.close().await;
                    Ok::<(), sqlx::Error>(())
                })
            })
            .join();
            match dropped {
                Ok(Ok(())) => {}
                Ok(Err(e)) => eprintln!("scale-out: could not drop the test database: {e}"),
                Err(_) => eprintln!("scale-out: dropping the test database panicked"),
            }
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

async fn wait_ready(base: &str) {
    // Up to a minute: a debug build loads WordNet for seconds, more on a busy machine.
    for _ in 0..1200 {
        if reqwest::get(format!("{base}/readyz")).await.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the service at {base} did not become ready");
}

/// Waits until `check` holds, polling every 50 ms, for at most `limit`; returns whether it did.
async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// The test's view of one running deployment.
struct Deployment {
    client: reqwest::Client,
    jwt: JwtKeys,
    service: String,
    a: String,
    b: String,
}

impl Deployment {
    /// Registers a personal agent for `user` through `base`; returns (agent id, API key).
    async fn agent(&self, base: &str, user: &str) -> (String, String) {
        let token = self.jwt.mint(user, CallerRole::User, Duration::from_secs(3600)).unwrap();
        let r = self
            .client
            .post(format!("{base}/api/agents"))
            .bearer_auth(token)
            .json(&json!({ "name": "scale agent" }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        let body: Value = r.json().await.unwrap();
        (body["agent"]["id"].as_str().unwrap().to_owned(), body["apiKey"]["key"].as_str().unwrap().to_owned())
    }

    /// Starts a mixed negotiation through `base` whose candidate is `user`; its turn 1 parks for
    /// that user. Returns the negotiation id.
    async fn negotiate(&self, base: &str, user: &str) -> String {
        let mut body = fixtures::good_match();
        body["sourceUser"]["id"] = json!(format!("source-of-{user}"));
        body["candidateUser"]["id"] = json!(user);
        let r = self
            .client
            .post(format!("{base}/api/negotiations"))
            .bearer_auth(&self.service)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        let created: Value = r.json().await.unwrap();
        assert_eq!(created["negotiation"]["status"], "waiting_for_agent", "{created}");
        created["negotiation"]["id"].as_str().unwrap().to_owned()
    }

    /// A pickup through `base`, waiting up to `wait` seconds (0: not at all): the turn, or
    /// `None` on 204.
    async fn pickup(&self, base: &str, agent: &(String, String), wait: u64) -> Option<Value> {
        let query = if wait > 0 { format!("?wait={wait}") } else { String::new() };
        let r = self
            .client
            .post(format!("{base}/api/agents/{}/negotiations/pickup{query}", agent.0))
            .header("x-api-key", &agent.1)
            .send()
            .await
            .unwrap();
        match r.status() {
            StatusCode::NO_CONTENT => None,
            StatusCode::OK => Some(r.json().await.unwrap()),
            s => panic!("pickup: {s} {}", r.text().await.unwrap_or_default()),
        }
    }

    async fn respond(&self, base: &str, agent: &(String, String), turn: &Value, action: &str) -> reqwest::Response {
        let id = turn["negotiationId"].as_str().unwrap();
        let body = json!({
            "claimToken": turn["claimToken"],
            "action": action,
            "message": "Tell me more about how we would work together.",
            "assessment": { "reasoning": "A scale-out test turn", "suggestedRoles": { "ownUser": "peer", "otherUser": "peer" } }
        });
        self.client
            .post(format!("{base}/api/agents/{}/negotiations/{id}/respond", agent.0))
            .header("x-api-key", &agent.1)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// Long-polls waiting in the process at `base`, from its `/metrics`.
    async fn waiters(&self, base: &str) -> f64 {
        let text = self
            .client
            .get(format!("{base}/metrics"))
            .bearer_auth(&self.service)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("parley_long_poll_waiters "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }
}

async fn task_state(pool: &PgPool, task: &str) -> String {
    sqlx::query_scalar::<_, String>("SELECT state::text FROM tasks WHERE task_id = $1::uuid")
        .bind(task)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_api_processes_and_a_worker_behave_as_one_service() {
    let dir: PathBuf = std::env::temp_dir().join(format!("parley-scale-out-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    // Declared first, so dropped last: after the children and the database server.
    let mut cleanup = Cleanup { database: None, dir: dir.clone() };
    let server = DbServer::open(&dir);
    let db_name = format!("parley_scale_{}", uuid::Uuid::now_v7().simple());
    let database_url = server.url(&db_name);
    if let DbServer::External { admin_url } = &server {
        cleanup.database = Some((admin_url.clone(), db_name.clone()));
    }
    parley::database::create_database_if_missing(&database_url).await.unwrap();
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(2).connect(&database_url).await.unwrap();
    // Migrated once here, so the three processes start on a ready schema.
    parley::database::migrate(&pool).await.unwrap();
    let logs = dir.display().to_string();

    let (port_a, port_b) = (free_port(), free_port());
    let mut api_a = Proc::spawn(&["serve", "--no-workers"], &database_url, Some(port_a), &dir, "api-a");
    let mut api_b = Proc::spawn(&["serve", "--no-workers"], &database_url, Some(port_b), &dir, "api-b");
    let mut worker = Proc::spawn(&["worker"], &database_url, None, &dir, "worker");
    let jwt = JwtKeys::new(TEST_SECRET.as_bytes());
    let d = Deployment {
        client: reqwest::Client::new(),
        service: jwt.mint("platform", CallerRole::Service, Duration::from_secs(3600)).unwrap(),
        jwt,
        a: format!("http://127.0.0.1:{port_a}"),
        b: format!("http://127.0.0.1:{port_b}"),
    };
    wait_ready(&d.a).await;
    wait_ready(&d.b).await;
    let (a, b) = (d.a.clone(), d.b.clone());

    // B's event stream, open before anything happens (the service sees every event).
    let mut events_on_b = SseReader::open(&b, &d.service, None).await;

    // (a) A long-poll waiting on B is woken by a turn parked through A.
    let maya = d.agent(&a, "maya").await;
    let waiting = {
        let (d_b, maya, client) = (b.clone(), maya.clone(), d.client.clone());
        tokio::spawn(async move {
            let r = client
                .post(format!("{d_b}/api/agents/{}/negotiations/pickup?wait=10", maya.0))
                .header("x-api-key", &maya.1)
                .send()
                .await
                .unwrap();
            let answered = Instant::now();
            assert_eq!(r.status(), StatusCode::OK, "the long-poll on B was not woken by the park on A");
            (answered, r.json::<Value>().await.unwrap())
        })
    };
    assert!(
        eventually(Duration::from_secs(10), || async { d.waiters(&b).await >= 1.0 }).await,
        "the pickup never started waiting on B (logs in {logs})"
    );
    let first = d.negotiate(&a, "maya").await;
    let parked_on_a = Instant::now();
    let (woken_on_b, turn) = waiting.await.unwrap();
    // The NOTIFY is sent at the park's commit, before A even answers, so B often answers first.
    let wake = woken_on_b.saturating_duration_since(parked_on_a);
    let signed_ms = if woken_on_b >= parked_on_a {
        wake.as_secs_f64()
    } else {
        -parked_on_a.duration_since(woken_on_b).as_secs_f64()
    } * 1e3;
    eprintln!("scale-out: B answered the long-poll {signed_ms:.1} ms after A answered the create that parked the turn");
    assert_eq!(turn["negotiationId"], first.as_str());
    assert_eq!(turn["turn"]["number"], 1);
    assert!(wake < WAKE_BOUND, "the wake-up across processes took {wake:?}");

    // (c) A turn made through A (with the claim B handed out) shows on B's event stream.
    let r = d.respond(&a, &maya, &turn, "counter").await;
    assert_eq!(r.status(), StatusCode::OK, "a claim from B is answered through A");
    let mut seen_on_b = false;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !seen_on_b && Instant::now() < deadline {
        let Some(ev) = events_on_b.next(deadline.saturating_duration_since(Instant::now())).await else {
            break;
        };
        seen_on_b = ev.event == "negotiation.turn"
            && ev.data["negotiationId"] == first.as_str()
            && ev.data["turnNumber"] == 1
            && ev.data["action"] == "counter";
    }
    assert!(seen_on_b, "B's event stream did not show the turn made through A (logs in {logs})");

    // (b) A claim taken on A and never answered lapses; the worker's claim timer parks the turn
    // again and wakes the other agent of that user, waiting on B.
    let (noor, noor_second) = (d.agent(&a, "noor").await, d.agent(&b, "noor").await);
    let second = d.negotiate(&a, "noor").await;
    let claimed = d.pickup(&a, &noor, 0).await.expect("the parked turn is claimed on A");
    assert_eq!(claimed["negotiationId"], second.as_str());
    let claimed_at = Instant::now();
    let again = d.pickup(&b, &noor_second, 10).await.expect("the lapsed claim came back on B");
    let lapsed_after = claimed_at.elapsed();
    eprintln!("scale-out: the claim lapsed and was picked up again on B after {:.2} s", lapsed_after.as_secs_f64());
    assert_eq!(again["negotiationId"], second.as_str());
    assert_eq!(again["turn"]["number"], claimed["turn"]["number"], "the same turn, handed out again");
    assert_ne!(again["claimToken"], claimed["claimToken"]);
    assert!(
        lapsed_after + Duration::from_millis(100) >= CLAIM_TIMEOUT,
        "the claim was taken back early: {lapsed_after:?}"
    );
    // The worker's wake-up reached B: the claim timer fires within a second of the expiry (its
    // time is rounded up to a whole second) plus a poll, and B answers at once. A waiter that
    // only found the turn by looking again on its own would answer 4 s after it started.
    assert!(
        lapsed_after <= CLAIM_TIMEOUT + Duration::from_millis(1800),
        "B's long-poll was not woken by the worker's wake-up: {lapsed_after:?}"
    );
    let stale = d.respond(&a, &noor, &claimed, "counter").await;
    assert_eq!(stale.status(), StatusCode::CONFLICT, "the first claim is stale");

    // (d) The worker killed (SIGKILL) while claim timers are pending: nothing fires until a new
    // worker runs, and then every one of them does.
    let users = ["ines", "omar", "lena", "kofi"];
    let mut pending = Vec::new();
    for (i, user) in users.iter().enumerate() {
        let base = if i % 2 == 0 { &a } else { &b };
        let agent = d.agent(base, user).await;
        let task = d.negotiate(base, user).await;
        let turn = d.pickup(base, &agent, 0).await.expect("claimed");
        assert_eq!(turn["negotiationId"], task.as_str());
        pending.push(task);
    }
    worker.kill9();
    let killed_at = Instant::now();
    // Every claim has lapsed (plus more than a poll interval of the old worker), yet no timer ran.
    tokio::time::sleep((CLAIM_TIMEOUT + Duration::from_millis(1500)).saturating_sub(killed_at.elapsed())).await;
    let overdue: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM tasks WHERE task_id = ANY($1::uuid[]) AND state = 'claimed' AND claim_expires_at < now()",
    )
    .bind(&pending)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(overdue as usize, pending.len(), "with no worker running, no claim timer fired");

    let worker2 = Proc::spawn(&["worker"], &database_url, None, &dir, "worker-2");
    let all_back = eventually(Duration::from_secs(20), || async {
        let mut back = 0;
        for task in &pending {
            if task_state(&pool, task).await == "waiting_for_agent" {
                back += 1;
            }
        }
        back == pending.len()
    })
    .await;
    assert!(all_back, "after a new worker started, every pending claim timer fired (logs in {logs})");
    // Each one fired once: the claim came back, nothing else changed.
    for task in &pending {
        let turns: i64 = sqlx::query_scalar("SELECT count(*) FROM messages WHERE task_id = $1::uuid")
            .bind(task)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(turns, 1, "only the system's opening turn is stored for {task}");
    }

    api_a.kill9();
    api_b.kill9();
    drop(worker2);
    pool.close().await;
}
