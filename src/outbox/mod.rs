//! The outbox: every event reaches the webhooks and A2A push notification configurations that
//! want it, at least once, signed, whatever crashes and receivers' outages happen meanwhile.
//!
//! How an event travels:
//! 1. The change that makes it writes it to the event log, in its own transaction
//!    (`crate::store::events`); a trigger there writes one delivery row per target that wants it
//!    and arms a `parley_jobs::OutboxDelivery` job, still in that transaction. So an event is
//!    delivered if and only if its change commits, and a kill -9 after the commit loses nothing:
//!    the rows and the job are in PostgreSQL.
//! 2. The job queue runs the job ([`Outbox::run`]): for each target of the event, the sender
//!    takes the target's due deliveries ([`crate::store::outbox::claim`]: at most
//!    `PARLEY_WEBHOOK_CONCURRENCY` in flight to one target, across every process, each leased for
//!    its attempt's time), POSTs each ([`post`]; the body and headers of each kind of target in
//!    [`body`], the signatures in [`sign`]), and records what came of it in one transaction with
//!    the retry's job, when there is one ([`retry`] says when, and when to give up or disable).
//!    It goes on taking that target's due deliveries while it has some, for at most
//!    [`DRAIN_BUDGET`], then leaves the rest to a job of its own.
//! 3. A sender killed mid-attempt holds its leases until they lapse; the delivery is then due
//!    again, and is sent again under the same `webhook-id` (receivers deduplicate by it). Jobs
//!    the queue lost or gave up are found by housekeeping ([`Outbox::housekeeping`]), which also
//!    gives up what a disabled target never took and prunes the delivery log.
//!
//! Registration and the rules of each kind of target are in [`targets`]; the HTTP routes of
//! webhooks in `crate::http::webhooks`; the A2A methods of push configurations in
//! `crate::a2a::push_config`. Every attempt is counted in `/metrics` by target kind and outcome.

pub mod body;
pub mod post;
pub mod retry;
pub mod sign;
pub mod targets;

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use chrono::Utc;
use parley_jobs::{HandlerError, OutboxDelivery};
use sqlx::PgPool;
use uuid::Uuid;

use crate::{
    config::{Config, WebhookConfig},
    directory::delegation::{DelegationError, Delegations},
    metrics,
    store::outbox::{self as deliveries, Attempted, Claimed, Target},
};

/// The longest one job keeps sending to one target before it leaves the rest to another job.
pub const DRAIN_BUDGET: Duration = Duration::from_secs(30);
/// How long a drain uses the target it read before reading it again.
const TARGET_FRESH: Duration = Duration::from_secs(1);
/// What a lease holds beyond the attempt's timeout (writing its outcome included).
const LEASE_MARGIN: Duration = Duration::from_secs(10);
/// A delivery due this long with no attempt in flight has lost its job: housekeeping arms one.
const STRANDED_AFTER: Duration = Duration::from_secs(30);
/// Finished deliveries housekeeping prunes per transaction.
const PRUNE_BATCH: i64 = 5000;

/// The sender of the outbox's deliveries. Cheap to clone.
#[derive(Clone)]
pub struct Outbox {
    pool: PgPool,
    config: WebhookConfig,
    delegations: Delegations,
    poster: post::Poster,
    /// The targets this process is draining now ([`Outbox::run`]).
    drains: Drains,
}

/// The targets this process is draining now, so that a job for a target already being drained
/// only asks that drain to look again instead of claiming in vain beside it.
#[derive(Clone)]
struct Drains {
    running: Arc<Mutex<HashMap<Uuid, Draining>>>,
    /// How long a drain can live at most (its budget, then its last attempts); one older is
    /// presumed stuck, and the next job for its target drains beside it.
    stale_after: Duration,
}

/// A drain in progress in this process.
struct Draining {
    /// Which drain (a target may be drained again once this one has left).
    id: u64,
    /// Whether a job asked it to look again since it last looked.
    again: bool,
    /// When it began.
    since: Instant,
}

/// A drain's place in [`Drains`]. Dropping it leaves, whatever ended the drain: done, failed, or
/// its job's future dropped (the job queue drops the jobs in flight of a worker it restarts, as
/// it does when the database's connections are cut). A place that outlived its drain would
/// swallow every later job for the target in this process: nothing would send to it again.
struct Mark {
    drains: Drains,
    target_id: Uuid,
    id: u64,
}

/// The ids of drains.
static DRAINS: AtomicU64 = AtomicU64::new(0);

impl Drains {
    fn new(stale_after: Duration) -> Drains {
        Drains { running: Arc::default(), stale_after }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Draining>> {
        self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A place to drain `target_id`, or `None` when a live drain has it already (that drain is
    /// told to look again before it ends).
    fn enter(&self, target_id: Uuid) -> Option<Mark> {
        let mut running = self.lock();
        match running.get_mut(&target_id) {
            Some(drain) if drain.since.elapsed() < self.stale_after => {
                drain.again = true;
                None
            }
            _ => {
                let id = DRAINS.fetch_add(1, Ordering::Relaxed);
                running.insert(target_id, Draining { id, again: false, since: Instant::now() });
                Some(Mark { drains: self.clone(), target_id, id })
            }
        }
    }
}

impl Mark {
    /// Leaves, unless a job asked this drain to look again since it last looked: then it stays,
    /// told to look (the answer is false). One step under the lock, so that no job's asking
    /// falls between a last look and the leaving.
    fn leave_unless_asked(&self) -> bool {
        let mut running = self.drains.lock();
        match running.get_mut(&self.target_id) {
            Some(drain) if drain.id == self.id => {
                if drain.again {
                    drain.again = false;
                    return false;
                }
                running.remove(&self.target_id);
                true
            }
            _ => true,
        }
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        let mut running = self.drains.lock();
        if running.get(&self.target_id).is_some_and(|drain| drain.id == self.id) {
            running.remove(&self.target_id);
        }
    }
}

impl Outbox {
    /// The sender over `delegations` (an A2A push notification reads its task there), bounded as
    /// `config` says.
    pub fn new(delegations: Delegations, config: &Config) -> anyhow::Result<Outbox> {
        let poster = post::Poster::new(config.webhooks.timeout, config.a2a_allow_private_targets)?;
        Ok(Outbox {
            pool: delegations.pool().clone(),
            config: config.webhooks,
            delegations,
            poster,
            drains: Drains::new(DRAIN_BUDGET + 2 * (config.webhooks.timeout + LEASE_MARGIN)),
        })
    }

    /// Runs one job: sends the due deliveries of the targets it names (those of its event, or
    /// its one target), each target's in turn with its own concurrency, all targets at once. A
    /// target this process is draining already is only told to look again (the drain does so
    /// before it ends), so that a busy endpoint's events do not each claim in vain.
    pub async fn run(&self, job: OutboxDelivery) -> Result<(), HandlerError> {
        let targets = match (job.target_id, job.event_id) {
            (Some(target), _) => vec![target],
            (None, Some(event)) => {
                let mut conn = self.pool.acquire().await?;
                deliveries::targets_of_event(&mut conn, event).await?
            }
            (None, None) => Vec::new(),
        };
        let marks: Vec<Mark> = targets.into_iter().filter_map(|t| self.drains.enter(t)).collect();
        let drained = futures::future::join_all(marks.into_iter().map(|mark| self.drain(mark))).await;
        drained.into_iter().collect::<anyhow::Result<Vec<()>>>().map_err(HandlerError::new)?;
        Ok(())
    }

    /// Sends the due deliveries of `mark`'s target, at most its concurrency at once, until none
    /// is due or [`DRAIN_BUDGET`] has passed (then a job of its own takes the rest).
    async fn drain(&self, mark: Mark) -> anyhow::Result<()> {
        let target_id = mark.target_id;
        let started = Instant::now();
        let lease = self.config.timeout + LEASE_MARGIN;
        let concurrency = i64::from(self.config.concurrency);
        let mut in_flight = tokio::task::JoinSet::new();
        let mut look = true;
        // The target as last read, and when: read again at most every [`TARGET_FRESH`] (a
        // rotation or a disabling counts from then), and the claim checks it is enabled anyway.
        let mut read: Option<(Arc<Target>, Instant)> = None;
        loop {
            if look && started.elapsed() < DRAIN_BUDGET {
                look = false;
                let claimed = {
                    let mut conn = self.pool.acquire().await?;
                    if read.as_ref().is_none_or(|(_, at)| at.elapsed() > TARGET_FRESH) {
                        read = deliveries::target(&mut conn, target_id).await?.map(|t| (Arc::new(t), Instant::now()));
                    }
                    match &read {
                        Some((target, _)) if target.status == "enabled" => {
                            let claimed = deliveries::claim(&mut conn, target_id, concurrency, lease).await?;
                            Some((target.clone(), claimed))
                        }
                        _ => None,
                    }
                };
                if let Some((target, claimed)) = claimed {
                    for event in claimed {
                        let (outbox, target) = (self.clone(), target.clone());
                        in_flight.spawn(async move { outbox.attempt(&target, event).await });
                    }
                }
            }
            match in_flight.join_next().await {
                // Nothing due and nothing in flight: done, unless a job asked meanwhile.
                None if !look && !mark.leave_unless_asked() => look = true,
                None => break,
                Some(done) => {
                    if let Err(e) = done.map_err(anyhow::Error::new).and_then(|r| r) {
                        tracing::warn!(target.id = %target_id, error = format!("{e:#}"), "a delivery's outcome was not recorded");
                    }
                    look = true; // a place is free: more may be due
                }
            }
        }
        if look {
            // The budget ran out while deliveries were still being taken: a job of its own goes
            // on (this drain leaves first, so that the job is not taken for one of its asks).
            drop(mark);
            let mut conn = self.pool.acquire().await?;
            let next = OutboxDelivery { event_id: None, target_id: Some(target_id) };
            parley_jobs::schedule_outbox(&mut conn, &next, Utc::now()).await?;
        }
        Ok(())
    }

    /// One attempt of `event` to `target`, and its outcome recorded (with the retry's job).
    async fn attempt(&self, target: &Target, event: Claimed) -> anyhow::Result<()> {
        let now = Utc::now();
        let request = match target.kind.as_str() {
            "a2a_push" if target.route_task_id.is_some() => body::routed_push(target, &event),
            "a2a_push" => match self.task_of(target).await? {
                Some(record) => body::push(target, &record),
                None => {
                    let a = attempted(target, &event, None, Some("the task no longer exists"), Duration::ZERO);
                    let mut conn = self.pool.acquire().await?;
                    deliveries::give_up(&mut conn, &a, &event.kind).await?;
                    return Ok(());
                }
            },
            _ => body::webhook(target, &event, now),
        };
        let (answer, took) = self.poster.post(&target.url, &request.headers, request.body).await;
        metrics::outbox_attempt(kind_label(target), answer.outcome(), took);
        let error = answer.error().map(|e| e.chars().take(300).collect::<String>());
        let a = attempted(target, &event, answer.status(), error.as_deref(), took);
        let mut tx = self.pool.begin().await?;
        // Not waited for on disk: the delivery itself was made durable by the event's own
        // commit, and an outcome lost to a crash only means the delivery is sent again under its
        // id once its lease lapses (a retry's lost job: housekeeping arms another).
        sqlx::query("SET LOCAL synchronous_commit = off").execute(&mut *tx).await?;
        match &answer {
            post::Answer::Delivered { .. } => {
                if deliveries::delivered(&mut tx, &a, &event.kind).await? {
                    let waited = (Utc::now() - event.created_at).to_std().unwrap_or_default();
                    metrics::outbox_delivered(kind_label(target), waited);
                }
            }
            post::Answer::Status { status, .. } if post::is_gone(*status) => {
                deliveries::give_up(&mut tx, &a, &event.kind).await?;
                if deliveries::disable(&mut tx, target.target_id, retry::GONE).await? {
                    metrics::outbox_disabled(kind_label(target), "gone");
                    tracing::info!(target.id = %target.target_id, "a push target answered 410 and is disabled");
                }
            }
            post::Answer::TooLarge => {
                deliveries::give_up(&mut tx, &a, &event.kind).await?;
            }
            failed => {
                let retry_after = match failed {
                    post::Answer::Status { retry_after: Some(v), .. } => retry::retry_after(v, now),
                    _ => None,
                };
                let next = retry::next_attempt(
                    &self.config,
                    Utc::now(),
                    event.queued_at,
                    a.attempt,
                    retry_after,
                    rand::random(),
                );
                match next {
                    Some(at) => {
                        deliveries::retry(&mut tx, &a, &event.kind, at).await?;
                        let job = OutboxDelivery { event_id: None, target_id: Some(target.target_id) };
                        parley_jobs::schedule_outbox(&mut tx, &job, at).await?;
                    }
                    None => {
                        deliveries::give_up(&mut tx, &a, &event.kind).await?;
                    }
                }
                let failing_since = target.failing_since.unwrap_or(now);
                if let Some(reason) = retry::disable_reason(&self.config, Utc::now(), failing_since)
                    && deliveries::disable(&mut tx, target.target_id, &reason).await?
                {
                    metrics::outbox_disabled(kind_label(target), "failing");
                    tracing::info!(target.id = %target.target_id, %reason, "a push target is disabled");
                }
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// The delegation a push configuration follows, as it stands now; `None` when it is gone.
    async fn task_of(&self, target: &Target) -> anyhow::Result<Option<crate::directory::delegation::Record>> {
        let Some(request_id) = target.request_id else { return Ok(None) };
        match self.delegations.read_delegation(request_id, None).await {
            Ok(record) => Ok(Some(record)),
            Err(DelegationError::NotFound) => Ok(None),
            Err(e) => Err(anyhow::Error::new(e)),
        }
    }

    /// Housekeeping's share: jobs armed again for targets whose due deliveries lost theirs,
    /// deliveries past their retry window given up (a disabled target's), and the delivery log
    /// pruned past `PARLEY_WEBHOOK_LOG_RETENTION`.
    pub async fn housekeeping(&self) -> anyhow::Result<()> {
        let mut conn = self.pool.acquire().await?;
        for target in deliveries::stranded(&mut conn, STRANDED_AFTER).await? {
            let job = OutboxDelivery { event_id: None, target_id: Some(target) };
            parley_jobs::schedule_outbox(&mut conn, &job, Utc::now()).await?;
        }
        deliveries::give_up_expired(&mut conn, self.config.retry_for).await?;
        let before = Utc::now() - chrono::Duration::from_std(self.config.log_retention)?;
        let started = Instant::now();
        while deliveries::prune(&mut conn, before, PRUNE_BATCH).await? == PRUNE_BATCH as u64
            && started.elapsed() < DRAIN_BUDGET
        {}
        Ok(())
    }
}

/// An attempt's outcome for the log.
fn attempted<'a>(
    target: &Target,
    event: &Claimed,
    status: Option<u16>,
    error: Option<&'a str>,
    took: Duration,
) -> Attempted<'a> {
    Attempted {
        target_id: target.target_id,
        event_id: event.event_id,
        attempt: event.attempts,
        status_code: status.map(i32::from),
        error,
        response_ms: i32::try_from(took.as_millis()).unwrap_or(i32::MAX),
    }
}

/// The metrics' label of a target's kind (a closed set).
fn kind_label(target: &Target) -> &'static str {
    match target.kind.as_str() {
        "a2a_push" => "a2a_push",
        _ => "webhook",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_for_a_target_being_drained_asks_that_drain_to_look_again() {
        let drains = Drains::new(DRAIN_BUDGET);
        let target = Uuid::new_v4();
        let mark = drains.enter(target).expect("the first job drains");
        assert!(drains.enter(target).is_none(), "a second job leaves it to the drain");
        assert!(!mark.leave_unless_asked(), "the drain was asked, so it looks again instead of leaving");
        assert!(mark.leave_unless_asked(), "not asked since: it leaves");
        assert!(drains.enter(target).is_some(), "once it left, the next job drains");
    }

    #[test]
    fn a_drain_whose_job_was_dropped_frees_its_target() {
        let drains = Drains::new(DRAIN_BUDGET);
        let target = Uuid::new_v4();
        let mark = drains.enter(target).expect("the first job drains");
        assert!(drains.enter(target).is_none());
        // The job queue restarting a worker drops the futures of its jobs in flight.
        drop(mark);
        assert!(drains.enter(target).is_some(), "a later job must not be swallowed by the gone drain");
    }

    #[test]
    fn a_drain_that_outlived_every_budget_is_presumed_stuck() {
        let drains = Drains::new(Duration::ZERO);
        let target = Uuid::new_v4();
        let stuck = drains.enter(target).expect("the first job drains");
        let next = drains.enter(target).expect("a job drains beside a drain older than its limit");
        drop(stuck);
        assert_eq!(
            drains.lock().get(&target).map(|d| d.id),
            Some(next.id),
            "the stuck drain's end leaves the new one be"
        );
        drop(next);
        assert!(drains.lock().is_empty());
    }
}
