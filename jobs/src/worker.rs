//! The worker runner: one apalis worker per queue under one monitor, dispatching to the service's
//! [`TimerHandler`], plus the self-re-arming housekeeping job.
//!
//! What this module decides, and why:
//! - **Polling, not NOTIFY.** Timers are delayed jobs; apalis-postgres's insert trigger only
//!   notifies jobs that are due at insert time, so each worker polls its queue every
//!   [`WorkerConfig::poll_interval`]. That interval is the most a due timer can be late (plus up
//!   to one second, because apalis stores `run_at` in whole seconds, rounded up here). No
//!   listener connection is held. The tick comes from a small strategy of ours (`Ticker`) and
//!   not apalis's `IntervalStrategy`: that one does not re-arm its timer when a tick lands while
//!   a fetch is in flight, and the worker then sleeps until its next heartbeat (seen in tests as
//!   due timers sitting `Pending` for many seconds).
//! - **Undecodable payloads never stop the queue.** The backend is given a pass-through codec, so
//!   apalis always hands over the raw bytes; decoding happens here. A row that does not decode is
//!   logged, made non-retryable (`max_attempts = 0`) and recorded as `Failed` with the decode
//!   error in `last_result`, and the worker goes on with the next timer. (With apalis's JSON codec
//!   a decode error is a backend error that ends the worker.)
//! - **Handler errors are retried with backoff.** A failing handler's job gets `run_at` pushed to
//!   `now + min(2^(attempt-1) s, 5 min)` and is re-fetched by apalis as `Failed` until
//!   [`MAX_ATTEMPTS`](crate::schedule::MAX_ATTEMPTS). Panics are caught and count as errors.
//! - **The monitor restarts workers.** A worker that ends with an error (database unreachable, ...)
//!   is rebuilt by the apalis monitor after a short backoff, under a *new* worker name: the old
//!   name stops heartbeating, so the rows it had fetched are re-enqueued as orphans after
//!   [`HEARTBEAT_INTERVAL`] x [`MISSED_HEARTBEATS`]. The same recovery applies to a process
//!   killed with timers in flight (delivery is at-least-once; handlers are idempotent).
//! - **Housekeeping is a durable job, not an in-memory interval.** Each run first re-arms the next
//!   one (same key, so the chain stays single across any number of instances), then prunes
//!   finished rows of this crate's queues older than a day and dead worker rows, then calls
//!   [`TimerHandler::housekeeping`]. [`run_workers`] seeds the chain (due at once) when none is
//!   pending, and pulls it forward if its next run is further away than `housekeeping_every`.

use std::{
    fmt,
    future::Future,
    task::{Context, Poll},
    time::Duration,
};

use apalis::prelude::{
    Attempt, BackendExt, BoxDynError, Codec, Event, Monitor, PollSnapshot, PollStrategy, TaskId, WorkerBuilder,
    WorkerBuilderExt,
};
use apalis_postgres::{Config, PostgresStorage};
use chrono::Utc;
use serde::de::DeserializeOwned;
use sqlx::PgPool;
use tracing::{Instrument, debug, error, info_span, warn};
use ulid::Ulid;

use crate::JobsError;
use crate::payload::{
    A2aCall, ClaimTimeout, DelegationTimeout, HOUSEKEEPING_KEY, Housekeeping, NegotiationDeadline, OutboxDelivery,
    ParkTimeout, PendingExpiry, SystemTurn, queues,
};
use crate::schedule::arm;

/// How often each worker records that it is alive.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(15);
/// Missed heartbeats after which a worker's fetched-but-unfinished timers are re-enqueued.
pub const MISSED_HEARTBEATS: usize = 4;
/// Finished apalis rows (and dead worker rows) older than this are pruned by housekeeping.
pub const FINISHED_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);
/// Finished outbox jobs older than this are pruned by housekeeping: there is one per event that
/// has deliveries, and what they did is in the deliveries' own rows.
pub const OUTBOX_FINISHED_RETENTION: Duration = Duration::from_secs(15 * 60);
/// How long [`run_workers`] waits for in-flight handlers after the shutdown signal.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Longest delay between two attempts of a failing timer.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);
/// Longest delay before a crashed worker is rebuilt.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(30);

/// The service's side of the timers. Each method is called at least once per timer that came due
/// (possibly more: retries, orphan re-runs, a stale timer that was already in flight when it was
/// cancelled), so each must be idempotent and guarded by state + generation, returning `Ok(())`
/// when the timer turned out to be stale. An `Err` is logged and the timer retried with backoff.
pub trait TimerHandler: Clone + Send + Sync + 'static {
    /// A parked turn's park timeout came due.
    fn park_timeout(&self, t: ParkTimeout) -> impl Future<Output = Result<(), HandlerError>> + Send;
    /// A claim's expiry came due.
    fn claim_timeout(&self, t: ClaimTimeout) -> impl Future<Output = Result<(), HandlerError>> + Send;
    /// A personal-vs-personal negotiation's deadline came due.
    fn negotiation_deadline(&self, t: NegotiationDeadline) -> impl Future<Output = Result<(), HandlerError>> + Send;
    /// A pending opportunity's TTL came due.
    fn pending_expiry(&self, t: PendingExpiry) -> impl Future<Output = Result<(), HandlerError>> + Send;
    /// A delegation attempt's deadline came due.
    fn delegation_timeout(&self, t: DelegationTimeout) -> impl Future<Output = Result<(), HandlerError>> + Send;
    /// A system turn a model decides came due.
    fn system_turn(&self, t: SystemTurn) -> impl Future<Output = Result<(), HandlerError>> + Send;
    /// A step of a call to an agent registered by its AgentCard came due.
    fn a2a_call(&self, t: A2aCall) -> impl Future<Output = Result<(), HandlerError>> + Send;
    /// Outbox deliveries may be due (an event with deliveries was written, a retry's time came).
    fn outbox_delivery(&self, t: OutboxDelivery) -> impl Future<Output = Result<(), HandlerError>> + Send;
    /// The periodic housekeeping run (resume stale `working` tasks, ...). Apalis rows are already
    /// pruned by this crate before it is called.
    fn housekeeping(&self) -> impl Future<Output = Result<(), HandlerError>> + Send;
}

/// The error a [`TimerHandler`] method returns: anything that made the handler fail *now* and may
/// succeed on a retry. `?` converts any `std::error::Error`; use [`HandlerError::new`] for
/// `anyhow::Error` and other boxable errors, [`HandlerError::msg`] for a plain message.
pub struct HandlerError(BoxDynError);

impl HandlerError {
    /// Wraps any error that can be boxed (including `anyhow::Error` and `String`).
    pub fn new(error: impl Into<BoxDynError>) -> Self {
        Self(error.into())
    }

    /// An error carrying only a message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Self(message.to_string().into())
    }

    /// The underlying error.
    pub fn into_inner(self) -> BoxDynError {
        self.0
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for HandlerError {
    fn from(error: E) -> Self {
        Self(Box::new(error))
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// How the workers run. All durations come from configuration, so tests use seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerConfig {
    /// How often each queue is polled for due timers: the most a due timer waits. Explicit
    /// because delayed jobs are not woken by NOTIFY.
    pub poll_interval: Duration,
    /// Period of the housekeeping job.
    pub housekeeping_every: Duration,
    /// Timers handled at once per queue (also the fetch batch size); at least 1.
    pub concurrency: usize,
    /// How often the outbox's queue is polled: the most a new event's delivery waits to start.
    pub outbox_poll: Duration,
    /// Outbox jobs handled at once (each sends to one event's targets, and may wait on a slow
    /// receiver for its timeout); at least 1.
    pub outbox_concurrency: usize,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(1),
            housekeeping_every: Duration::from_secs(300),
            concurrency: 8,
            outbox_poll: Duration::from_millis(100),
            outbox_concurrency: 32,
        }
    }
}

/// Creates or upgrades apalis-postgres's tables (schema `apalis`, and the `hstore` extension).
///
/// apalis-postgres 1.0 keeps its migration history in `apalis._sqlx_migrations`, not in the
/// service's `public._sqlx_migrations`, so the two migrators never see each other's versions and
/// neither needs `set_ignore_missing`. Safe to call on every start and from several processes
/// (sqlx serializes migrators with an advisory lock). A database created by apalis-postgres < 1.0
/// needs apalis's one-time manual upgrade first; that case is reported as an error.
///
/// Then it installs this crate's SQL functions (`jobs/sql/timers.sql`: schema `parley_jobs`),
/// the one implementation of arming and disarming a timer, with `CREATE OR REPLACE` under an
/// advisory lock so that processes starting together do not collide.
pub async fn setup(pool: &PgPool) -> Result<(), JobsError> {
    PostgresStorage::setup(pool).await?;
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('parley_jobs.setup'))").execute(&mut *tx).await?;
    sqlx::raw_sql(TIMERS_SQL).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

/// The SQL functions that arm and disarm timers, as [`setup`] installs them.
pub const TIMERS_SQL: &str = include_str!("../sql/timers.sql");

/// Runs one worker per queue until `shutdown` completes, then stops fetching, gives in-flight
/// handlers up to [`SHUTDOWN_GRACE`], and returns. Workers that fail are restarted by the
/// monitor; this returns an error only for an invalid `cfg` or when the housekeeping chain cannot
/// be seeded (database unreachable at start). Call [`setup`] first. Several processes may run
/// workers against one database.
pub async fn run_workers<H: TimerHandler>(
    pool: PgPool,
    handler: H,
    cfg: WorkerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), JobsError> {
    if cfg.poll_interval.is_zero() {
        return Err(JobsError::Config("poll_interval must be greater than zero".into()));
    }
    if cfg.housekeeping_every.is_zero() {
        return Err(JobsError::Config("housekeeping_every must be greater than zero".into()));
    }
    if cfg.concurrency == 0 || cfg.outbox_concurrency == 0 {
        return Err(JobsError::Config("concurrency must be at least 1".into()));
    }
    if cfg.outbox_poll.is_zero() {
        return Err(JobsError::Config("outbox_poll must be greater than zero".into()));
    }
    ensure_housekeeping(&pool, cfg.housekeeping_every).await?;

    let instance = Ulid::generate();
    let mut monitor = Monitor::new()
        .should_restart(|worker, error| {
            warn!(worker = worker.name(), %error, "timer worker failed; restarting");
            true
        })
        .on_event(|worker, event| {
            if let Event::Error(error) = event {
                warn!(worker = worker.name(), %error, "timer failed");
            }
        })
        .shutdown_timeout(SHUTDOWN_GRACE);
    for kind in QueueKind::ALL {
        let dispatch =
            Dispatch { handler: handler.clone(), pool: pool.clone(), kind, housekeeping_every: cfg.housekeeping_every };
        monitor = register(monitor, dispatch, instance, cfg);
    }
    monitor
        .run_with_signal(async move {
            shutdown.await;
            Ok(())
        })
        .await
        .map_err(|e| JobsError::Workers(e.to_string()))
}

/// The queues a worker runs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QueueKind {
    Park,
    Claim,
    Deadline,
    Expiry,
    Housekeeping,
    Delegation,
    SystemTurn,
    A2aCall,
    Outbox,
}

impl QueueKind {
    const ALL: [QueueKind; 9] = [
        QueueKind::Park,
        QueueKind::Claim,
        QueueKind::Deadline,
        QueueKind::Expiry,
        QueueKind::Housekeeping,
        QueueKind::Delegation,
        QueueKind::SystemTurn,
        QueueKind::A2aCall,
        QueueKind::Outbox,
    ];

    fn queue(self) -> &'static str {
        match self {
            QueueKind::Park => queues::PARK_TIMEOUT,
            QueueKind::Claim => queues::CLAIM_TIMEOUT,
            QueueKind::Deadline => queues::NEGOTIATION_DEADLINE,
            QueueKind::Expiry => queues::PENDING_EXPIRY,
            QueueKind::Housekeeping => queues::HOUSEKEEPING,
            QueueKind::Delegation => queues::DELEGATION_TIMEOUT,
            QueueKind::SystemTurn => queues::SYSTEM_TURN,
            QueueKind::A2aCall => queues::A2A_CALL,
            QueueKind::Outbox => queues::OUTBOX,
        }
    }

    /// How often the queue is polled, and how many of its jobs run at once.
    fn polling(self, cfg: WorkerConfig) -> (Duration, usize) {
        match self {
            QueueKind::Outbox => (cfg.outbox_poll, cfg.outbox_concurrency),
            _ => (cfg.poll_interval, cfg.concurrency),
        }
    }
}

/// A job's argument bytes, untouched: decoding is [`dispatch`]'s job, so a bad payload fails one
/// timer and not the worker.
#[derive(Debug, Clone)]
struct RawPayload(Vec<u8>);

/// The pass-through codec that yields [`RawPayload`]s.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl Codec<RawPayload> for RawCodec {
    type Error = std::convert::Infallible;
    type Compact = Vec<u8>;

    fn encode(&self, val: &RawPayload) -> Result<Vec<u8>, Self::Error> {
        Ok(val.0.clone())
    }

    fn decode(&self, val: &Vec<u8>) -> Result<RawPayload, Self::Error> {
        Ok(RawPayload(val.clone()))
    }
}

/// Everything a worker needs to run one queue's timers.
#[derive(Clone)]
struct Dispatch<H> {
    handler: H,
    pool: PgPool,
    kind: QueueKind,
    housekeeping_every: Duration,
}

/// Adds the worker of `dispatch.kind`'s queue to `monitor`. Each (re)start gets a fresh name.
fn register<H: TimerHandler>(monitor: Monitor, dispatch: Dispatch<H>, instance: Ulid, cfg: WorkerConfig) -> Monitor {
    monitor.register(move |restarts| {
        let queue = dispatch.kind.queue();
        let (poll, concurrency) = dispatch.kind.polling(cfg);
        let config = Config::default()
            .queue(queue)
            .batch_size(concurrency)
            .heartbeat_interval(HEARTBEAT_INTERVAL)
            .missed_heartbeats(MISSED_HEARTBEATS)
            .lock_tasks(true)
            .persist_results(true);
        let delay = restart_delay(restarts);
        let backend = PostgresStorage::<RawPayload>::new(&dispatch.pool)
            .with_config(config)
            .before_start(move |_| async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                Ok::<(), apalis_postgres::Error>(())
            })
            .poll_with_strategy(Ticker::new(queue, poll))
            .with_codec(RawCodec);
        let dispatch = dispatch.clone();
        WorkerBuilder::new(format!("{queue}@{instance}#{restarts}"))
            .backend(backend)
            .catch_panic()
            .concurrency(concurrency)
            .build(move |raw: RawPayload, id: TaskId, attempt: Attempt| run_one(dispatch.clone(), raw, id, attempt))
    })
}

/// Wakes a worker every poll interval so it fetches due timers.
///
/// Unlike apalis's `IntervalStrategy`, it always leaves the timer registered with the current
/// waker (it polls the interval until it is pending), so no tick is ever lost.
struct Ticker {
    queue: &'static str,
    interval: tokio::time::Interval,
}

impl Ticker {
    fn new(queue: &'static str, every: Duration) -> Self {
        let mut interval = tokio::time::interval(every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self { queue, interval }
    }
}

impl PollStrategy for Ticker {
    fn poll_drive(&mut self, cx: &mut Context<'_>, _: &PollSnapshot) -> Poll<Option<()>> {
        let mut ticked = false;
        while self.interval.poll_tick(cx).is_ready() {
            ticked = true;
        }
        tracing::trace!(queue = self.queue, ticked, "poll tick");
        if ticked { Poll::Ready(Some(())) } else { Poll::Pending }
    }
}

/// Delay before the `restarts`-th rebuild of a worker: 0, then 2 s, 4 s, ... up to 30 s.
fn restart_delay(restarts: usize) -> Duration {
    if restarts == 0 {
        return Duration::ZERO;
    }
    let secs = 1u64 << restarts.min(5);
    Duration::from_secs(secs).min(MAX_RESTART_DELAY)
}

/// Delay before retrying a timer whose handler failed on `attempt` (1-based).
fn retry_delay(attempt: usize) -> Duration {
    let exp = u32::try_from(attempt.saturating_sub(1)).unwrap_or(u32::MAX).min(16);
    Duration::from_secs(1u64 << exp).min(MAX_RETRY_DELAY)
}

/// Runs one timer inside a span naming its queue and job id.
async fn run_one<H: TimerHandler>(
    d: Dispatch<H>,
    raw: RawPayload,
    id: TaskId,
    attempt: Attempt,
) -> Result<(), BoxDynError> {
    let job_id = id.to_string();
    let span = info_span!("timer", queue = d.kind.queue(), job_id = %job_id);
    dispatch(d, raw, job_id, attempt.current()).instrument(span).await
}

/// Decodes the payload for `d.kind` and calls the matching handler method.
async fn dispatch<H: TimerHandler>(
    d: Dispatch<H>,
    raw: RawPayload,
    job_id: String,
    attempt: usize,
) -> Result<(), BoxDynError> {
    let h = &d.handler;
    // A payload that does not decode is rejected for good; a handler's failure is retried.
    let handled = async {
        Ok::<_, serde_json::Error>(match d.kind {
            QueueKind::Park => h.park_timeout(decode(&raw)?).await,
            QueueKind::Claim => h.claim_timeout(decode(&raw)?).await,
            QueueKind::Deadline => h.negotiation_deadline(decode(&raw)?).await,
            QueueKind::Expiry => h.pending_expiry(decode(&raw)?).await,
            QueueKind::Delegation => h.delegation_timeout(decode(&raw)?).await,
            QueueKind::SystemTurn => h.system_turn(decode(&raw)?).await,
            QueueKind::A2aCall => h.a2a_call(decode::<A2aCall>(&raw)?).await,
            QueueKind::Outbox => h.outbox_delivery(decode::<OutboxDelivery>(&raw)?).await,
            QueueKind::Housekeeping => {
                decode::<Housekeeping>(&raw)?;
                housekeeping(&d).await
            }
        })
    };
    let outcome = match handled.await {
        Ok(outcome) => outcome,
        Err(e) => return reject(&d.pool, &job_id, e).await,
    };
    match outcome {
        Ok(()) => {
            debug!(attempt, "timer handled");
            Ok(())
        }
        Err(e) => {
            let delay = retry_delay(attempt);
            // What failed may quote what a server or an agent said: the log line and the job's
            // stored result keep a short prefix of it.
            let error = short(&e.to_string());
            warn!(attempt, %error, retry_in = ?delay, "timer handler failed");
            if let Err(db) = postpone(&d.pool, &job_id, delay).await {
                warn!(error = %db, "could not delay the retry of a failed timer");
            }
            Err(error.into())
        }
    }
}

/// The characters of a handler's error that are logged and kept.
const MAX_ERROR_CHARS: usize = 500;

/// `text` on one line (control characters escaped), cut to [`MAX_ERROR_CHARS`] characters.
fn short(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(MAX_ERROR_CHARS)
        .flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] })
        .collect();
    if text.chars().nth(MAX_ERROR_CHARS).is_some() {
        out.push('…');
    }
    out
}

fn decode<P: DeserializeOwned>(raw: &RawPayload) -> Result<P, serde_json::Error> {
    serde_json::from_slice(&raw.0)
}

/// Gives up on a job whose payload does not decode: no retries, error kept in `last_result`.
async fn reject(pool: &PgPool, job_id: &str, e: serde_json::Error) -> Result<(), BoxDynError> {
    error!(error = %e, "timer payload does not decode; dropping this timer");
    if let Err(db) =
        sqlx::query("UPDATE apalis.jobs SET max_attempts = 0 WHERE id = $1").bind(job_id).execute(pool).await
    {
        warn!(error = %db, "could not mark an undecodable timer as final");
    }
    Err(format!("undecodable timer payload: {e}").into())
}

/// Moves a failed job's next attempt `delay` into the future.
async fn postpone(pool: &PgPool, job_id: &str, delay: Duration) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE apalis.jobs SET run_at = now() + make_interval(secs => $2) WHERE id = $1")
        .bind(job_id)
        .bind(delay.as_secs_f64())
        .execute(pool)
        .await?;
    Ok(())
}

/// Serializes every arming of the housekeeping chain across processes.
const HOUSEKEEPING_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtext('parley.housekeeping'))";

/// One housekeeping run: re-arm the next run, prune, then the service's part.
async fn housekeeping<H: TimerHandler>(d: &Dispatch<H>) -> Result<(), HandlerError> {
    let next = Utc::now() + chrono::Duration::from_std(d.housekeeping_every)?;
    let mut tx = d.pool.begin().await?;
    sqlx::query(HOUSEKEEPING_LOCK).execute(&mut *tx).await?;
    arm(&mut tx, queues::HOUSEKEEPING, HOUSEKEEPING_KEY, &Housekeeping {}, next).await.map_err(HandlerError::new)?;
    tx.commit().await?;

    let (jobs, workers) = prune(&d.pool).await?;
    if jobs > 0 || workers > 0 {
        debug!(jobs, workers, "pruned finished timer rows");
    }
    d.handler.housekeeping().await
}

/// Deletes finished rows of this crate's queues older than [`FINISHED_RETENTION`] (the
/// outbox's older than [`OUTBOX_FINISHED_RETENTION`]), and worker rows of those queues older than
/// [`FINISHED_RETENTION`]; returns (jobs, workers) deleted.
async fn prune(pool: &PgPool) -> Result<(u64, u64), sqlx::Error> {
    let queues: Vec<String> = queues::ALL.iter().map(|q| (*q).to_owned()).collect();
    let keep = FINISHED_RETENTION.as_secs_f64();
    let finished = "DELETE FROM apalis.jobs \
         WHERE job_type = ANY($1) AND done_at < now() - make_interval(secs => $2) \
           AND (status IN ('Done', 'Killed') OR (status = 'Failed' AND attempts >= max_attempts))";
    let mut jobs = 0;
    for (queues, keep) in
        [(queues.clone(), keep), (vec![queues::OUTBOX.to_owned()], OUTBOX_FINISHED_RETENTION.as_secs_f64())]
    {
        jobs += sqlx::query(finished).bind(&queues).bind(keep).execute(pool).await?.rows_affected();
    }
    let workers = sqlx::query(
        "DELETE FROM apalis.workers w \
         WHERE w.worker_type = ANY($1) AND w.last_seen < now() - make_interval(secs => $2) \
           AND NOT EXISTS (SELECT 1 FROM apalis.jobs j WHERE j.lock_by = w.id)",
    )
    .bind(&queues)
    .bind(keep)
    .execute(pool)
    .await?
    .rows_affected();
    Ok((jobs, workers))
}

/// Makes sure the housekeeping chain exists and its next run is at most `every` away.
async fn ensure_housekeeping(pool: &PgPool, every: Duration) -> Result<(), JobsError> {
    let mut tx = pool.begin().await?;
    sqlx::query(HOUSEKEEPING_LOCK).execute(&mut *tx).await?;
    let live: Option<bool> = sqlx::query_scalar(
        "SELECT bool_or(status <> 'Pending' OR run_at <= now() + make_interval(secs => $3)) \
         FROM apalis.jobs \
         WHERE job_type = $1 AND idempotency_key = $2 \
           AND (status IN ('Pending', 'Queued', 'Running') \
                OR (status = 'Failed' AND attempts < max_attempts))",
    )
    .bind(queues::HOUSEKEEPING)
    .bind(HOUSEKEEPING_KEY)
    .bind(every.as_secs_f64())
    .fetch_one(&mut *tx)
    .await?;
    if live != Some(true) {
        arm(&mut tx, queues::HOUSEKEEPING, HOUSEKEEPING_KEY, &Housekeeping {}, Utc::now()).await?;
    }
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_and_restart_delays_grow_and_cap() {
        assert_eq!(retry_delay(1), Duration::from_secs(1));
        assert_eq!(retry_delay(2), Duration::from_secs(2));
        assert_eq!(retry_delay(4), Duration::from_secs(8));
        assert_eq!(retry_delay(100), MAX_RETRY_DELAY);
        assert_eq!(restart_delay(0), Duration::ZERO);
        assert_eq!(restart_delay(1), Duration::from_secs(2));
        assert_eq!(restart_delay(50), MAX_RESTART_DELAY);
    }

    #[test]
    fn a_handlers_error_is_logged_short_and_on_one_line() {
        assert_eq!(short("the agent could not be reached"), "the agent could not be reached");
        let long = short(&format!("said: {}", "x\n".repeat(400_000)));
        assert!(long.ends_with('…') && !long.contains('\n') && long.len() < 1_000, "{long}");
    }

    #[test]
    fn raw_codec_passes_bytes_through() {
        let bytes = b"\x00not json".to_vec();
        let raw = RawCodec.decode(&bytes).expect("infallible");
        assert_eq!(raw.0, bytes);
        assert_eq!(RawCodec.encode(&raw).expect("infallible"), bytes);
    }

    #[test]
    fn handler_error_converts_from_std_errors_and_messages() {
        let io = std::io::Error::other("boom");
        let e: HandlerError = io.into();
        assert_eq!(e.to_string(), "boom");
        assert_eq!(HandlerError::msg("plain").to_string(), "plain");
        assert_eq!(HandlerError::new("boxed").to_string(), "boxed");
        let from_anyhow = HandlerError::new(anyhow::anyhow!("context: cause"));
        assert_eq!(from_anyhow.to_string(), "context: cause");
    }
}
