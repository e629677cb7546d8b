//! End-to-end tests of the durable timers: real PostgreSQL, real apalis workers, second-scale
//! durations. Each test creates its own database (through the server's `postgres` database, or
//! `DATABASE_URL` when set, else the embedded one) and drops it at the end.

use std::{
    str::FromStr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use parley_jobs::{
    ClaimTimeout, HandlerError, NegotiationDeadline, ParkTimeout, PendingExpiry, TimerHandler, TimerKind, WorkerConfig,
    cancel_pending_expiry, cancel_timers_for_task, queues, run_workers, schedule_claim_timeout, schedule_deadline,
    schedule_park_timeout, schedule_pending_expiry, setup,
};
use sqlx::{
    AssertSqlSafe, Connection, Executor, PgConnection, PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use tokio::{sync::oneshot, task::JoinHandle};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// The test server: `DATABASE_URL`'s when set, otherwise the embedded PostgreSQL the API tests
/// share (started once, left running between runs).
fn admin_options() -> PgConnectOptions {
    static URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let url = URL.get_or_init(|| match std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()) {
        Some(url) => url,
        None => {
            let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("test-pg");
            parley::database::EmbeddedPostgres::start_or_attach(&dir)
                .expect("starting the embedded PostgreSQL")
                .url("postgres")
        }
    });
    PgConnectOptions::from_str(url).expect("a valid test database URL")
}

/// A throw-away database; dropped (with FORCE) by [`TestDb::drop_db`] or, failing that, on drop.
struct TestDb {
    name: String,
    options: PgConnectOptions,
    pool: PgPool,
    dropped: bool,
}

impl TestDb {
    /// A fresh database with apalis set up.
    async fn new() -> Self {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let db = Self::empty().await;
        setup(&db.pool).await.expect("apalis setup");
        db
    }

    /// A fresh database without any schema.
    async fn empty() -> Self {
        let name = format!("parley_jobs_test_{}", Uuid::now_v7().simple());
        let mut admin = PgConnection::connect_with(&admin_options())
            .await
            .expect("connect to the admin database (is PostgreSQL running?)");
        admin.execute(AssertSqlSafe(format!("CREATE DATABASE {name}"))).await.expect("create test database");
        let options = admin_options().database(&name);
        let pool = Self::pool_for(&options).await;
        TestDb { name, options, pool, dropped: false }
    }

    async fn pool_for(options: &PgConnectOptions) -> PgPool {
        PgPoolOptions::new().max_connections(12).connect_with(options.clone()).await.expect("connect to test database")
    }

    async fn drop_db(mut self) {
        self.pool.close().await;
        drop_database(&self.name).await;
        self.dropped = true;
    }
}

async fn drop_database(name: &str) {
    if let Ok(mut admin) = PgConnection::connect_with(&admin_options()).await {
        let _ = admin.execute(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))).await;
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() {
                rt.block_on(drop_database(&name));
            }
        })
        .join();
    }
}

/// What a handler saw.
#[derive(Debug, Clone, PartialEq)]
enum Fired {
    Park(ParkTimeout),
    Claim(ClaimTimeout),
    Deadline(NegotiationDeadline),
    Expiry(PendingExpiry),
    Housekeeping,
}

/// Every handler call with the time it happened.
type FiredLog = Vec<(Fired, DateTime<Utc>)>;

/// A [`TimerHandler`] that records every call, and can be told to fail a park timer N times.
#[derive(Clone, Default)]
struct Recorder {
    fired: Arc<Mutex<FiredLog>>,
    fail_park_times: Arc<Mutex<u32>>,
}

impl Recorder {
    fn record(&self, f: Fired) {
        self.fired.lock().expect("lock").push((f, Utc::now()));
    }

    fn all(&self) -> FiredLog {
        self.fired.lock().expect("lock").clone()
    }

    fn count(&self, pred: impl Fn(&Fired) -> bool) -> usize {
        self.all().iter().filter(|(f, _)| pred(f)).count()
    }

    fn times_of(&self, want: &Fired) -> Vec<DateTime<Utc>> {
        self.all().into_iter().filter(|(f, _)| f == want).map(|(_, at)| at).collect()
    }

    fn timers(&self) -> Vec<Fired> {
        self.all().into_iter().map(|(f, _)| f).filter(|f| *f != Fired::Housekeeping).collect()
    }
}

impl TimerHandler for Recorder {
    async fn park_timeout(&self, t: ParkTimeout) -> Result<(), HandlerError> {
        self.record(Fired::Park(t));
        let mut left = self.fail_park_times.lock().expect("lock");
        if *left > 0 {
            *left -= 1;
            return Err(HandlerError::msg("injected failure"));
        }
        Ok(())
    }
    async fn claim_timeout(&self, t: ClaimTimeout) -> Result<(), HandlerError> {
        self.record(Fired::Claim(t));
        Ok(())
    }
    async fn negotiation_deadline(&self, t: NegotiationDeadline) -> Result<(), HandlerError> {
        self.record(Fired::Deadline(t));
        Ok(())
    }
    async fn pending_expiry(&self, t: PendingExpiry) -> Result<(), HandlerError> {
        self.record(Fired::Expiry(t));
        Ok(())
    }
    async fn delegation_timeout(&self, _t: parley_jobs::DelegationTimeout) -> Result<(), HandlerError> {
        Ok(())
    }
    async fn system_turn(&self, _t: parley_jobs::SystemTurn) -> Result<(), HandlerError> {
        Ok(())
    }
    async fn a2a_call(&self, _t: parley_jobs::A2aCall) -> Result<(), HandlerError> {
        Ok(())
    }
    async fn outbox_delivery(&self, _t: parley_jobs::OutboxDelivery) -> Result<(), HandlerError> {
        Ok(())
    }
    async fn housekeeping(&self) -> Result<(), HandlerError> {
        self.record(Fired::Housekeeping);
        Ok(())
    }
}

fn cfg(housekeeping_every: Duration) -> WorkerConfig {
    WorkerConfig { poll_interval: Duration::from_millis(200), housekeeping_every, concurrency: 4, ..Default::default() }
}

/// Running workers plus the way to stop them.
struct Workers {
    stop: oneshot::Sender<()>,
    handle: JoinHandle<Result<(), parley_jobs::JobsError>>,
}

impl Workers {
    fn start(pool: &PgPool, rec: &Recorder, config: WorkerConfig) -> Self {
        let (stop, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(run_workers(pool.clone(), rec.clone(), config, async move {
            let _ = rx.await;
        }));
        Workers { stop, handle }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let res = tokio::time::timeout(Duration::from_secs(15), self.handle)
            .await
            .expect("workers stop in time")
            .expect("runner task not panicked");
        res.expect("runner ended cleanly");
    }
}

fn in_secs(s: f64) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::milliseconds((s * 1000.0) as i64)
}

async fn wait_for(what: &str, timeout: Duration, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Recorder {
    /// Waits (at most `timeout`) until at least `n` timers, housekeeping aside, have fired.
    async fn wait_for_timers(&self, what: &str, n: usize, timeout: Duration) {
        wait_for(what, timeout, || self.timers().len() >= n).await;
    }

    /// Waits (at most `timeout`) until `timer` has fired exactly once.
    async fn wait_for_once(&self, what: &str, timer: &Fired, timeout: Duration) {
        wait_for(what, timeout, || self.count(|f| f == timer) == 1).await;
    }

    /// Asserts that the timers fired, housekeeping aside, are exactly `want`, in any order.
    fn assert_fired_exactly(&self, want: &[Fired], why: &str) {
        let sorted = |mut timers: Vec<Fired>| {
            timers.sort_by_key(|f| format!("{f:?}"));
            timers
        };
        assert_eq!(sorted(self.timers()), sorted(want.to_vec()), "{why}");
    }
}

/// The park timer of `task_id`'s turn 3 with `generation`, as its handler receives it.
fn park(task_id: Uuid, generation: i64) -> Fired {
    Fired::Park(ParkTimeout { task_id, turn_number: 3, generation })
}

/// A claim timer of a task of its own (a task's own claim timer would take its park timer's
/// place: a task waits on one turn timer at a time, see the hand-over test).
fn claim_of_another_task(generation: i64) -> Fired {
    Fired::Claim(ClaimTimeout { task_id: Uuid::now_v7(), generation })
}

/// Schedules `timer` in `conn` (a transaction the caller ends) to run at `run_at`.
async fn schedule(conn: &mut PgConnection, timer: &Fired, run_at: DateTime<Utc>) {
    match timer {
        Fired::Park(t) => schedule_park_timeout(conn, t, run_at).await.expect("park"),
        Fired::Claim(t) => schedule_claim_timeout(conn, t, run_at).await.expect("claim"),
        Fired::Deadline(t) => schedule_deadline(conn, t, run_at).await.expect("deadline"),
        Fired::Expiry(t) => schedule_pending_expiry(conn, t, run_at).await.expect("expiry"),
        Fired::Housekeeping => panic!("housekeeping arms itself"),
    }
}

/// Schedules `timers` to run at `run_at`, all in one committed transaction.
async fn arm(pool: &PgPool, timers: &[Fired], run_at: DateTime<Utc>) {
    let mut tx = pool.begin().await.expect("begin");
    for timer in timers {
        schedule(&mut tx, timer, run_at).await;
    }
    tx.commit().await.expect("commit");
}

/// Workers for a test about timers: housekeeping runs once at start, and its next run is due
/// only after the test.
fn start_workers(db: &TestDb, rec: &Recorder) -> Workers {
    Workers::start(&db.pool, rec, cfg(Duration::from_secs(60)))
}

/// Stops `workers` (each must end cleanly), then drops the test's database.
async fn finish(db: TestDb, workers: impl IntoIterator<Item = Workers>) {
    for w in workers {
        w.stop().await;
    }
    db.drop_db().await;
}

async fn wait_for_rows(pool: &PgPool, sql: &'static str, want: i64, timeout: Duration) {
    let start = Instant::now();
    loop {
        let n = count_rows(pool, sql).await;
        if n == want {
            return;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {want} rows of `{sql}` (have {n})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn count_rows(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar::<_, i64>(sql).fetch_one(pool).await.expect("count query")
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// Every kind scheduled in a committed transaction (before any worker ran) fires exactly once,
/// not before its `run_at`, with its payload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_timers_fire_once_with_their_payload() {
    let (db, rec) = (TestDb::new().await, Recorder::default());
    let task = Uuid::now_v7();
    let run_at = in_secs(1.0);
    let timers = [
        park(task, 7),
        claim_of_another_task(8),
        Fired::Deadline(NegotiationDeadline { task_id: task }),
        Fired::Expiry(PendingExpiry { opportunity_id: Uuid::now_v7() }),
    ];
    arm(&db.pool, &timers, run_at).await;

    let workers = start_workers(&db, &rec);
    rec.wait_for_timers("all four timers", 4, Duration::from_secs(6)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    rec.assert_fired_exactly(&timers, "each timer fires exactly once with its payload");
    for (f, at) in rec.all() {
        if f != Fired::Housekeeping {
            assert!(at >= run_at, "{f:?} fired at {at}, before its run_at {run_at}");
        }
    }
    let done = count_rows(
        &db.pool,
        "SELECT count(*) FROM apalis.jobs WHERE status = 'Done' AND job_type <> 'parley.housekeeping'",
    )
    .await;
    assert_eq!(done, 4);
    finish(db, [workers]).await;
}

/// A rolled-back schedule leaves no job; an uncommitted one is invisible to workers even when
/// due, and fires once its transaction commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_committed_schedules_fire() {
    let (db, rec) = (TestDb::new().await, Recorder::default());
    let workers = start_workers(&db, &rec);
    let (rolled_back, held, sentinel) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());

    let mut tx = db.pool.begin().await.expect("begin");
    schedule(&mut tx, &park(rolled_back, 1), in_secs(0.0)).await;
    tx.rollback().await.expect("rollback");
    let rows = count_rows(&db.pool, "SELECT count(*) FROM apalis.jobs WHERE job_type = 'parley.park_timeout'").await;
    assert_eq!(rows, 0, "a rolled-back schedule leaves no job");

    // Due at once, but its transaction stays open for a while.
    let mut held_tx = db.pool.begin().await.expect("begin");
    schedule(&mut held_tx, &park(held, 1), in_secs(0.0)).await;
    arm(&db.pool, &[park(sentinel, 1)], in_secs(0.0)).await;
    rec.wait_for_once("the sentinel", &park(sentinel, 1), Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(rec.timers(), vec![park(sentinel, 1)]);

    held_tx.commit().await.expect("commit");
    rec.wait_for_once("the held timer after commit", &park(held, 1), Duration::from_secs(5)).await;
    assert_eq!(rec.count(|f| *f == park(rolled_back, 1)), 0);
    finish(db, [workers]).await;
}

/// Cancelled timers never fire; cancel reports what it deleted and is a no-op the second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_timers_never_fire() {
    let (db, rec) = (TestDb::new().await, Recorder::default());
    let (task, claimed_task, opp, sentinel) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let run_at = in_secs(1.0);
    let timers = [
        park(task, 1),
        Fired::Claim(ClaimTimeout { task_id: claimed_task, generation: 1 }),
        Fired::Deadline(NegotiationDeadline { task_id: task }),
        Fired::Expiry(PendingExpiry { opportunity_id: opp }),
        park(sentinel, 1),
    ];
    arm(&db.pool, &timers, run_at).await;

    let mut tx = db.pool.begin().await.expect("begin");
    let n = cancel_timers_for_task(&mut tx, task, &TimerKind::ALL).await.expect("cancel");
    assert_eq!(n, 2, "the park timer and the deadline");
    let n = cancel_timers_for_task(&mut tx, claimed_task, &TimerKind::ALL).await.expect("cancel");
    assert_eq!(n, 1, "the claim timer");
    assert_eq!(cancel_pending_expiry(&mut tx, opp).await.expect("cancel"), 1);
    tx.commit().await.expect("commit");
    let mut tx = db.pool.begin().await.expect("begin");
    let again = cancel_timers_for_task(&mut tx, task, &TimerKind::ALL).await.expect("cancel")
        + cancel_timers_for_task(&mut tx, claimed_task, &TimerKind::ALL).await.expect("cancel");
    assert_eq!(again, 0, "nothing left to cancel");
    tx.commit().await.expect("commit");

    // A cancel that rolls back leaves the timer armed.
    let kept = Uuid::now_v7();
    arm(&db.pool, &[park(kept, 1)], run_at).await;
    let mut tx = db.pool.begin().await.expect("begin");
    let n = cancel_timers_for_task(&mut tx, kept, &[TimerKind::Park]).await.expect("cancel");
    assert_eq!(n, 1);
    tx.rollback().await.expect("rollback");

    let workers = start_workers(&db, &rec);
    rec.wait_for_timers("the sentinel and the kept timer", 2, Duration::from_secs(6)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    rec.assert_fired_exactly(&[park(sentinel, 1), park(kept, 1)], "only the timers not cancelled");
    finish(db, [workers]).await;
}

/// Re-arming a key (cancel + schedule, or schedule alone) fires only the newest timer, and a key
/// whose timer already fired can be armed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rearming_fires_only_the_new_timer() {
    let (db, rec) = (TestDb::new().await, Recorder::default());
    let task = Uuid::now_v7();

    arm(&db.pool, &[park(task, 1)], in_secs(1.0)).await;
    let mut tx = db.pool.begin().await.expect("begin");
    let n = cancel_timers_for_task(&mut tx, task, &[TimerKind::Park]).await.expect("cancel");
    assert_eq!(n, 1);
    schedule(&mut tx, &park(task, 2), in_secs(1.0)).await;
    tx.commit().await.expect("commit");
    arm(&db.pool, &[park(task, 3)], in_secs(1.0)).await;
    let pending = count_rows(
        &db.pool,
        "SELECT count(*) FROM apalis.jobs WHERE job_type = 'parley.park_timeout' AND status = 'Pending'",
    )
    .await;
    assert_eq!(pending, 1, "one pending timer per key");

    let workers = start_workers(&db, &rec);
    rec.wait_for_timers("generation 3", 1, Duration::from_secs(6)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(rec.timers(), vec![park(task, 3)]);

    // The fired row still holds history; arming the same key again must work and fire.
    arm(&db.pool, &[park(task, 4)], in_secs(0.0)).await;
    rec.wait_for_timers("generation 4", 2, Duration::from_secs(5)).await;
    assert_eq!(rec.timers(), vec![park(task, 3), park(task, 4)]);
    finish(db, [workers]).await;
}

/// Rows whose payload cannot be decoded fail alone, are not retried, and valid timers in the same
/// and other queues still fire (also ones scheduled after the bad rows were seen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_payloads_do_not_stop_other_timers() {
    let (db, rec) = (TestDb::new().await, Recorder::default());
    let insert_raw = |queue: &'static str, bytes: Vec<u8>| {
        let pool = db.pool.clone();
        async move {
            sqlx::query(
                "INSERT INTO apalis.jobs (job, id, job_type, status, attempts, max_attempts, run_at, priority) \
                 VALUES ($1, $2, $3, 'Pending', 0, 20, now() - interval '1 second', 10)",
            )
            .bind(bytes)
            .bind(ulid::Ulid::generate().to_string())
            .bind(queue)
            .execute(&pool)
            .await
            .expect("insert garbage row");
        }
    };
    // Not JSON at all, JSON of the wrong shape, and an empty payload; high priority so they are
    // fetched first, in the same batch as the valid timer.
    insert_raw(queues::PARK_TIMEOUT, vec![0xff, 0x00, 0x13]).await;
    insert_raw(queues::PARK_TIMEOUT, br#"{"taskId": 5}"#.to_vec()).await;
    insert_raw(queues::CLAIM_TIMEOUT, Vec::new()).await;
    arm(&db.pool, &[park(Uuid::now_v7(), 1), claim_of_another_task(1)], in_secs(0.0)).await;

    let workers = start_workers(&db, &rec);
    rec.wait_for_timers("the valid timers", 2, Duration::from_secs(5)).await;
    wait_for_rows(
        &db.pool,
        "SELECT count(*) FROM apalis.jobs WHERE status = 'Failed' AND attempts >= max_attempts",
        3,
        Duration::from_secs(5),
    )
    .await;

    // The workers are still alive and serving both queues.
    let later = Uuid::now_v7();
    arm(&db.pool, &[park(later, 1)], in_secs(0.0)).await;
    rec.wait_for_once("a timer scheduled after the bad rows", &park(later, 1), Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let attempts: Vec<i32> = sqlx::query_scalar("SELECT attempts FROM apalis.jobs WHERE status = 'Failed' ORDER BY id")
        .fetch_all(&db.pool)
        .await
        .expect("attempts");
    assert_eq!(attempts, vec![1, 1, 1], "bad rows are tried once, never retried");
    assert_eq!(rec.timers().len(), 3);
    finish(db, [workers]).await;
}

/// A timer survives its worker runtime being dropped without any shutdown, and fires once
/// workers run again on the same database; one scheduled while no worker ran fires too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_survive_a_dropped_worker_runtime() {
    let db = TestDb::new().await;
    let task = Uuid::now_v7();
    arm(&db.pool, &[park(task, 1)], in_secs(2.0)).await;

    // First "process": its own runtime and pool, killed abruptly before the timer is due.
    let first = Recorder::default();
    {
        let options = db.options.clone();
        let first = first.clone();
        std::thread::spawn(move || {
            let rt =
                tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
            rt.block_on(async {
                let pool = TestDb::pool_for(&options).await;
                tokio::spawn(run_workers(pool, first, cfg(Duration::from_secs(60)), std::future::pending::<()>()));
                tokio::time::sleep(Duration::from_millis(700)).await;
            });
            rt.shutdown_background();
        })
        .join()
        .expect("first process");
    }
    assert!(first.timers().is_empty(), "not due while the first process ran");

    // While no worker runs, another timer is armed.
    let other = Uuid::now_v7();
    arm(&db.pool, &[park(other, 1)], in_secs(0.0)).await;
    tokio::time::sleep(Duration::from_millis(1800)).await;

    let rec = Recorder::default();
    let workers = start_workers(&db, &rec);
    rec.wait_for_timers("both timers after the restart", 2, Duration::from_secs(5)).await;
    rec.assert_fired_exactly(&[park(task, 1), park(other, 1)], "both timers, once each");
    finish(db, [workers]).await;
}

/// Housekeeping runs periodically as one chain even with two runners on the database, and
/// prunes finished rows older than a day (only those).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn housekeeping_runs_periodically_as_one_chain() {
    let db = TestDb::new().await;
    for (age, status) in [("2 days", "Done"), ("1 minute", "Done"), ("2 days", "Pending")] {
        sqlx::query(
            "INSERT INTO apalis.jobs (job, id, job_type, status, attempts, max_attempts, run_at, done_at, priority) \
             VALUES ('{}'::bytea, $1, 'parley.claim_timeout', $2, 1, 20, now() + interval '1 day', \
                     CASE WHEN $2 = 'Done' THEN now() - $3::interval END, 0)",
        )
        .bind(ulid::Ulid::generate().to_string())
        .bind(status)
        .bind(age)
        .execute(&db.pool)
        .await
        .expect("insert old row");
    }

    let (a, b) = (Recorder::default(), Recorder::default());
    let every = Duration::from_secs(1);
    let wa = Workers::start(&db.pool, &a, cfg(every));
    let wb = Workers::start(&db.pool, &b, cfg(every));
    let started = Instant::now();
    let runs = || a.count(|f| *f == Fired::Housekeeping) + b.count(|f| *f == Fired::Housekeeping);
    wait_for("three housekeeping runs", Duration::from_secs(8), || runs() >= 3).await;
    let elapsed = started.elapsed();
    // One chain: exactly one next run armed, and at most that one plus the run in progress.
    let armed = count_rows(
        &db.pool,
        "SELECT count(*) FROM apalis.jobs WHERE job_type = 'parley.housekeeping' \
         AND idempotency_key = 'housekeeping' AND status = 'Pending'",
    )
    .await;
    assert_eq!(armed, 1, "one housekeeping chain");
    let live = count_rows(
        &db.pool,
        "SELECT count(*) FROM apalis.jobs WHERE job_type = 'parley.housekeeping' \
         AND status IN ('Pending', 'Queued', 'Running')",
    )
    .await;
    assert!(live <= 2, "{live} live housekeeping jobs");
    // Runs are spaced by the period (whole-second run_at), not back to back.
    let mut times: Vec<_> =
        a.times_of(&Fired::Housekeeping).into_iter().chain(b.times_of(&Fired::Housekeeping)).collect();
    times.sort();
    for pair in times.windows(2) {
        assert!(
            pair[1] - pair[0] >= chrono::Duration::milliseconds(500),
            "housekeeping runs too close together: {times:?}"
        );
    }
    assert!(elapsed >= Duration::from_millis(1500), "three runs took {elapsed:?}");

    let claims: Vec<String> = sqlx::query_scalar(
        "SELECT status || coalesce(':' || (now() - done_at < interval '1 hour')::text, '') \
         FROM apalis.jobs WHERE job_type = 'parley.claim_timeout' ORDER BY status",
    )
    .fetch_all(&db.pool)
    .await
    .expect("claims");
    assert_eq!(claims, vec!["Done:true".to_owned(), "Pending".to_owned()]);
    finish(db, [wa, wb]).await;
}

/// A handler error is retried after a backoff, and the timer then completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_handler_is_retried_with_backoff() {
    let (db, rec) = (TestDb::new().await, Recorder::default());
    *rec.fail_park_times.lock().expect("lock") = 1;
    let task = Uuid::now_v7();
    arm(&db.pool, &[park(task, 1)], in_secs(0.0)).await;

    let workers = start_workers(&db, &rec);
    rec.wait_for_timers("the retry", 2, Duration::from_secs(6)).await;
    let times = rec.times_of(&park(task, 1));
    assert_eq!(times.len(), 2);
    assert!(times[1] - times[0] >= chrono::Duration::milliseconds(900), "{times:?}");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let status: String = sqlx::query_scalar("SELECT status FROM apalis.jobs WHERE job_type = 'parley.park_timeout'")
        .fetch_one(&db.pool)
        .await
        .expect("status");
    assert_eq!(status, "Done");
    assert_eq!(rec.timers().len(), 2);
    finish(db, [workers]).await;
}

/// apalis's migrator and an application's own sqlx migrator share one database in either order,
/// without `set_ignore_missing`: their histories live in different tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apalis_setup_coexists_with_the_service_migrator() {
    let db = TestDb::empty().await;
    let dir = std::env::temp_dir().join(format!("parley_jobs_migrations_{}", Uuid::now_v7()));
    std::fs::create_dir_all(&dir).expect("migrations dir");
    std::fs::write(dir.join("20260101000001_service.sql"), "CREATE TABLE service_table (id BIGINT PRIMARY KEY);")
        .expect("migration file");
    let service = sqlx::migrate::Migrator::new(dir.as_path()).await.expect("migrator");

    service.run(&db.pool).await.expect("service first");
    setup(&db.pool).await.expect("apalis second");
    service.run(&db.pool).await.expect("service again");
    setup(&db.pool).await.expect("apalis again");

    let service_versions = count_rows(&db.pool, "SELECT count(*) FROM public._sqlx_migrations").await;
    assert_eq!(service_versions, 1, "the service's history holds only its own migrations");
    let apalis_versions = count_rows(&db.pool, "SELECT count(*) FROM apalis._sqlx_migrations").await;
    assert!(apalis_versions > 10, "apalis keeps its own history");

    // And the other order, on a second fresh database.
    let db2 = TestDb::empty().await;
    setup(&db2.pool).await.expect("apalis first");
    service.run(&db2.pool).await.expect("service second");
    setup(&db2.pool).await.expect("apalis again");
    let _ = std::fs::remove_dir_all(&dir);
    db.drop_db().await;
    db2.drop_db().await;
}

/// Workers whose fetch fails (here: apalis's fetch function is briefly missing) end with an
/// error, are rebuilt by the monitor under new names, and timers keep firing afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_workers_are_rebuilt_by_the_monitor() {
    let (db, rec) = (TestDb::new().await, Recorder::default());
    let workers = start_workers(&db, &rec);
    tokio::time::sleep(Duration::from_millis(500)).await;

    sqlx::query("ALTER FUNCTION apalis.get_jobs(text, text, integer) RENAME TO get_jobs_offline")
        .execute(&db.pool)
        .await
        .expect("hide get_jobs");
    tokio::time::sleep(Duration::from_millis(800)).await;
    sqlx::query("ALTER FUNCTION apalis.get_jobs_offline(text, text, integer) RENAME TO get_jobs")
        .execute(&db.pool)
        .await
        .expect("restore get_jobs");

    // Every worker failed its fetch and was rebuilt as `...#1` (after the restart backoff).
    wait_for_rows(
        &db.pool,
        "SELECT count(*) FROM apalis.workers WHERE id LIKE '%#1'",
        parley_jobs::queues::ALL.len() as i64,
        Duration::from_secs(8),
    )
    .await;

    let task = Uuid::now_v7();
    arm(&db.pool, &[park(task, 1)], in_secs(0.0)).await;
    rec.wait_for_once("a timer after the restart", &park(task, 1), Duration::from_secs(5)).await;
    finish(db, [workers]).await;
}

/// A task waits on one turn timer at a time: arming its claim timer moves the pending park
/// timer into it (pickup), and arming its park timer moves the pending claim timer (respond),
/// each with the payload and time it was armed with. Only the last one armed fires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_waits_on_one_turn_timer_handed_over_in_place() {
    let (db, rec) = (TestDb::new().await, Recorder::default());
    let task = Uuid::now_v7();
    let rows = |pool: PgPool| async move {
        sqlx::query_as::<_, (String, String, String)>(
            "SELECT id, job_type, idempotency_key FROM apalis.jobs WHERE idempotency_key LIKE '%' || $1 AND status = 'Pending'",
        )
        .bind(task.to_string())
        .fetch_all(&pool)
        .await
        .expect("timer rows")
    };

    arm(&db.pool, &[park(task, 1)], in_secs(30.0)).await;
    let parked = rows(db.pool.clone()).await;
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].1, queues::PARK_TIMEOUT);

    // Pickup: the park timer becomes the claim timer, the same row.
    arm(&db.pool, &[Fired::Claim(ClaimTimeout { task_id: task, generation: 2 })], in_secs(30.0)).await;
    let claimed = rows(db.pool.clone()).await;
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!((claimed[0].0.as_str(), claimed[0].1.as_str()), (parked[0].0.as_str(), queues::CLAIM_TIMEOUT));
    assert_eq!(claimed[0].2, format!("claim:{task}"));

    // Respond: the claim timer becomes the next turn's park timer, due now.
    arm(&db.pool, &[park(task, 3)], in_secs(0.0)).await;
    let parked_again = rows(db.pool.clone()).await;
    assert_eq!(parked_again.len(), 1, "{parked_again:?}");
    assert_eq!(parked_again[0].1, queues::PARK_TIMEOUT);

    let workers = start_workers(&db, &rec);
    rec.wait_for_timers("the park timer", 1, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(rec.timers(), vec![park(task, 3)], "only the last timer armed fires, with its payload");
    finish(db, [workers]).await;
}
