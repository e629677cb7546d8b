//! Durable timers for Parley, on apalis 1.x with apalis-postgres 1.0 (sqlx 0.9), in the service's
//! own database and pool.
//!
//! This crate owns everything about timers that is not negotiation logic: the payloads and their
//! queue names ([`payload`]), arming and cancelling them inside the caller's transaction
//! ([`schedule`]), and running the workers that deliver them to the service's [`TimerHandler`]
//! ([`worker`]). The service owns what a timer *does*, guarded by state + generation.
//!
//! # Using it
//! ```text
//! parley_jobs::setup(&pool).await?;                   // apalis tables, once per start
//! let mut tx = pool.begin().await?;
//! // ... park the turn ...
//! parley_jobs::schedule_park_timeout(&mut tx, &ParkTimeout { task_id, turn_number, generation },
//!     first_parked_at + park_timeout).await?;
//! tx.commit().await?;                                 // the timer exists iff this commits
//! parley_jobs::run_workers(pool, handler, cfg, shutdown_signal).await?;
//! ```
//!
//! # Migrations: no conflict with the service's migrator
//! apalis-postgres 1.0 embeds its migrations with `sqlx::migrate!` and a `sqlx.toml` that sets
//! the bookkeeping table to **`apalis._sqlx_migrations`** (and creates schema `apalis` first).
//! The service's `sqlx::migrate!("./migrations")` keeps using `public._sqlx_migrations`. The two
//! histories never mix, so neither migrator reports "previously applied but missing", in either
//! order, and **the service needs no `set_ignore_missing(true)`** and no other change: run the
//! service's migrator and [`setup`] (order does not matter). This is checked by a test that runs
//! a second, unrelated migrator on the same database before and after [`setup`].
//! Both migrators take sqlx's per-database advisory lock, so they simply run one after the other.
//! [`setup`] also creates the `hstore` extension (apalis stores job metadata in it).
//!
//! Build note: apalis-postgres uses sqlx's compile-time macros with offline data shipped in its
//! crate. Build with `SQLX_OFFLINE=true` (the workspace's `.cargo/config.toml` does), otherwise a
//! `DATABASE_URL` present at build time makes those macros check against that database.
//!
//! # Delivery guarantees
//! At-least-once. A timer can be delivered more than once (handler error and retry, a worker or
//! process dying mid-handler, a cancel that came after a worker had fetched the timer), and
//! never before its `run_at`. Due timers are picked up within
//! [`WorkerConfig::poll_interval`] (plus under a second of `run_at` rounding).

pub mod payload;
pub mod schedule;
pub mod worker;

pub use payload::{
    A2aCall, A2aSubject, ClaimTimeout, DelegationTimeout, Housekeeping, NegotiationDeadline, OutboxDelivery,
    ParkTimeout, PendingExpiry, SystemTurn, TimerKind, delegation_timeout_key, pending_expiry_key, queues,
    system_turn_key,
};
pub use schedule::{
    MAX_ATTEMPTS, cancel_a2a_call, cancel_delegation_timeout, cancel_pending_expiry, cancel_timers_for_task,
    hurry_a2a_call, new_timer_id, pending_timer_at, schedule_a2a_call, schedule_claim_timeout, schedule_deadline,
    schedule_delegation_timeout, schedule_outbox, schedule_park_timeout, schedule_pending_expiry, schedule_system_turn,
    turn_timer_at,
};
pub use worker::{HandlerError, TIMERS_SQL, TimerHandler, WorkerConfig, run_workers, setup};

/// Errors of this crate's scheduling, setup and runner functions.
#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    /// A query on the caller's connection or the pool failed.
    #[error("timer database error: {0}")]
    Database(#[from] sqlx::Error),
    /// apalis-postgres failed (pushing a job, or running its migrations).
    #[error("timer storage error: {0}")]
    Storage(#[from] apalis_postgres::Error),
    /// A payload could not be serialized.
    #[error("timer payload could not be encoded: {0}")]
    Encode(#[from] serde_json::Error),
    /// The [`WorkerConfig`] is unusable.
    #[error("invalid timer worker configuration: {0}")]
    Config(String),
    /// The worker monitor stopped with an error.
    #[error("timer workers stopped: {0}")]
    Workers(String),
}
