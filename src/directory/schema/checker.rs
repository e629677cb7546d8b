//! Where schemas are compiled and checked: a small pool of threads of its own, away from the
//! async workers and the blocking pool, and away from the database (a caller holds no
//! connection while it waits).
//!
//! Who pays: every batch of work is asked for on behalf of a user, the owner of the agent that
//! needs it (the requester whose input is checked, the target whose output is, the agent that
//! registers a schema), so that registering more agents buys nothing, and:
//!
//! - **Turns.** The pool serves the owners that have work waiting in turn, one batch each, so
//!   an owner that queues a thousand batches delays another's by at most one of its own per
//!   thread, not by a thousand.
//! - **Budget.** Each owner may use `PARLEY_SCHEMA_CHECK_BUDGET` of checking time per minute
//!   (a token bucket: that much at once, refilled over the minute). An owner that used it up is
//!   refused with [`CheckError::OverBudget`] (429) until it has some again; what it queued
//!   before runs.
//! - **Time.** A batch has `PARLEY_SCHEMA_CHECK_TIMEOUT` from when it starts running (waiting
//!   for its turn does not count), and stops before its next schema once that is past, or once
//!   its caller stopped waiting; one schema's check is itself bounded
//!   ([`super::MAX_CHECK_WORK`]), so a batch never runs on much past its time. A batch not
//!   started within [`QUEUE_WAIT`] is given up (the service is overloaded).
//!
//! Compiled validators are kept in a [`Cache`] bounded by bytes (`PARLEY_SCHEMA_CACHE_MIB`).

use std::{
    collections::{HashMap, VecDeque},
    panic::AssertUnwindSafe,
    sync::{
        Arc, Condvar, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use super::{Prepared, Refused, Verdict, cache::Cache, units};

/// The longest a batch may wait for its turn before it is given up.
pub const QUEUE_WAIT: Duration = Duration::from_secs(30);

/// How the pool is set up (the `PARLEY_SCHEMA_CHECK_*` and `PARLEY_SCHEMA_CACHE_MIB` settings).
#[derive(Debug, Clone, Copy)]
pub struct CheckerConfig {
    /// Threads that compile and check.
    pub threads: usize,
    /// How long one batch may run.
    pub timeout: Duration,
    /// Checking time one owner may use per minute.
    pub budget: Duration,
    /// Bytes of compiled validators kept.
    pub cache_bytes: usize,
}

/// Why a batch gave no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// It ran longer than its time and stopped.
    #[error("the schema check took longer than {0:?}")]
    TooSlow(Duration),
    /// It did not get a turn in time.
    #[error("the schema checks are overloaded; retry shortly")]
    Busy,
    /// The owner used its checking time; more is available after the duration.
    #[error("the schema-checking time of this agent's owner is used up for now; retry later")]
    OverBudget(Duration),
}

/// What a running batch may ask of the pool.
pub struct Batch<'a> {
    shared: &'a Shared,
    deadline: Instant,
    /// Closed when the caller stopped waiting.
    answer: &'a oneshot::Sender<Result<Box<dyn std::any::Any + Send>, CheckError>>,
}

/// A batch stopped before it finished (out of time, or nobody waits for it).
#[derive(Debug, Clone, Copy)]
pub struct Stopped;

impl Batch<'_> {
    /// `Err` once the batch should stop: its time is up or nobody waits for it.
    pub fn go_on(&self) -> Result<(), Stopped> {
        if Instant::now() >= self.deadline || self.answer.is_closed() { Err(Stopped) } else { Ok(()) }
    }

    /// The compiled form of `schema`, kept or compiled now; `Err` naming why it cannot be used.
    pub fn prepare(&self, schema: &Value) -> Result<Arc<Prepared>, String> {
        self.shared.prepare(schema).map_err(|e| match e {
            Refused::Invalid(m) | Refused::TooComplex(m) => format!("the schema {m}"),
        })
    }
}

type Job = Box<dyn FnOnce(&Shared) + Send>;

/// The work waiting, by owner, and whose turn is next.
#[derive(Default)]
struct Queue {
    waiting: HashMap<String, VecDeque<Job>>,
    turns: VecDeque<String>,
    closed: bool,
}

/// Checking time per owner: a token bucket in seconds.
struct Budgets {
    capacity: f64,
    per_second: f64,
    owners: HashMap<String, (f64, Instant)>,
}

impl Budgets {
    fn level(&mut self, owner: &str, now: Instant) -> &mut (f64, Instant) {
        let (capacity, per_second) = (self.capacity, self.per_second);
        if !self.owners.contains_key(owner) {
            self.owners.insert(owner.to_owned(), (capacity, now));
        }
        let entry = self.owners.get_mut(owner).expect("just inserted");
        entry.0 = (entry.0 + per_second * now.saturating_duration_since(entry.1).as_secs_f64()).min(capacity);
        entry.1 = now;
        entry
    }

    /// `Err` with how long until `owner` has checking time again.
    fn available(&mut self, owner: &str) -> Result<(), Duration> {
        let per_second = self.per_second;
        let (tokens, _) = *self.level(owner, Instant::now());
        if tokens > 0.0 { Ok(()) } else { Err(Duration::from_secs_f64((-tokens + 0.001) / per_second)) }
    }

    fn charge(&mut self, owner: &str, used: Duration) {
        let now = Instant::now();
        self.level(owner, now).0 -= used.as_secs_f64();
        if self.owners.len() > 10_000 {
            let (capacity, per_second) = (self.capacity, self.per_second);
            self.owners
                .retain(|_, (t, at)| *t + per_second * now.saturating_duration_since(*at).as_secs_f64() < capacity);
        }
    }
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    cache: Mutex<Cache>,
    budgets: Mutex<Budgets>,
    running: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn prepare(&self, schema: &Value) -> Result<Arc<Prepared>, Refused> {
        let key: [u8; 32] = Sha256::digest(serde_json::to_vec(schema).unwrap_or_default()).into();
        if let Some(found) = lock(&self.cache).get(&key) {
            return Ok(found);
        }
        let prepared = Arc::new(Prepared::compile(schema)?);
        lock(&self.cache).put(key, prepared.clone());
        Ok(prepared)
    }

    /// The next job, in turn by owner; `None` once closed.
    fn next(&self) -> Option<Job> {
        let mut q = lock(&self.queue);
        loop {
            if q.closed {
                return None;
            }
            if let Some(owner) = q.turns.pop_front() {
                let Some(jobs) = q.waiting.get_mut(&owner) else { continue };
                let job = jobs.pop_front();
                if jobs.is_empty() {
                    q.waiting.remove(&owner);
                } else {
                    q.turns.push_back(owner);
                }
                if let Some(job) = job {
                    return Some(job);
                }
                continue;
            }
            q = self.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn work(&self) {
        while let Some(job) = self.next() {
            self.running.fetch_add(1, Ordering::SeqCst);
            // A panic in a check loses that batch's answer (its caller sees it as given up),
            // never the thread.
            let _ = std::panic::catch_unwind(AssertUnwindSafe(|| job(self)));
            self.running.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The owner's handle: when the last one goes, the threads end.
struct Pool {
    shared: Arc<Shared>,
    timeout: Duration,
}

impl Drop for Pool {
    fn drop(&mut self) {
        lock(&self.shared.queue).closed = true;
        self.shared.ready.notify_all();
    }
}

/// Compiles and checks schemas on a pool of its own (see the module docs).
#[derive(Clone)]
pub struct Checker {
    pool: Arc<Pool>,
}

impl Checker {
    /// A pool as `config` says, its threads started.
    pub fn new(config: CheckerConfig) -> Checker {
        let threads = config.threads.max(1);
        let budget = config.budget.as_secs_f64().max(0.001);
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            cache: Mutex::new(Cache::new(config.cache_bytes, threads)),
            budgets: Mutex::new(Budgets { capacity: budget, per_second: budget / 60.0, owners: HashMap::new() }),
            running: AtomicUsize::new(0),
        });
        for i in 0..threads {
            let shared = shared.clone();
            let spawned = std::thread::Builder::new().name(format!("parley-schema-{i}")).spawn(move || shared.work());
            if let Err(e) = spawned {
                tracing::error!(error = %e, "could not start a schema-checking thread");
            }
        }
        Checker { pool: Arc::new(Pool { shared, timeout: config.timeout }) }
    }

    /// Runs `job` on behalf of `owner` on the pool in its turn, within the batch's time (see the
    /// module docs); its answer, or why there is none.
    pub async fn run<T: Send + 'static>(
        &self,
        owner: &str,
        job: impl FnOnce(&Batch<'_>) -> Result<T, Stopped> + Send + 'static,
    ) -> Result<T, CheckError> {
        let shared = &self.pool.shared;
        lock(&shared.budgets).available(owner).map_err(CheckError::OverBudget)?;
        let payer = owner.to_owned();
        let timeout = self.pool.timeout;
        let (tx, rx) = oneshot::channel::<Result<Box<dyn std::any::Any + Send>, CheckError>>();
        let run: Job = Box::new(move |shared: &Shared| {
            if tx.is_closed() {
                return;
            }
            let started = Instant::now();
            let batch = Batch { shared, deadline: started + timeout, answer: &tx };
            let answer = job(&batch)
                .map(|t| Box::new(t) as Box<dyn std::any::Any + Send>)
                .map_err(|Stopped| CheckError::TooSlow(timeout));
            lock(&shared.budgets).charge(&payer, started.elapsed());
            let _ = tx.send(answer);
        });
        {
            let mut q = lock(&shared.queue);
            let jobs = q.waiting.entry(owner.to_owned()).or_default();
            jobs.push_back(run);
            if jobs.len() == 1 {
                q.turns.push_back(owner.to_owned());
            }
        }
        shared.ready.notify_one();
        match tokio::time::timeout(QUEUE_WAIT + timeout, rx).await {
            Ok(Ok(answer)) => answer.map(|any| *any.downcast::<T>().expect("a batch answers its own type")),
            Ok(Err(_)) | Err(_) => Err(CheckError::Busy),
        }
    }

    /// Checks `value` (named `what` in messages) against each of `schemas`, on behalf of
    /// `owner`, in one batch: one verdict per schema, in order.
    pub async fn check_all(
        &self,
        owner: &str,
        schemas: Vec<Value>,
        value: Arc<Value>,
        what: &'static str,
    ) -> Result<Vec<Verdict>, CheckError> {
        if schemas.is_empty() {
            return Ok(Vec::new());
        }
        self.run(owner, move |batch| {
            let units = units(&value);
            let mut verdicts = Vec::with_capacity(schemas.len());
            for schema in &schemas {
                batch.go_on()?;
                verdicts.push(batch.prepare(schema).and_then(|p| p.check_measured(&value, units, what)));
            }
            Ok(verdicts)
        })
        .await
    }

    /// Checks `value` against one schema, on behalf of `owner`.
    pub async fn check(
        &self,
        owner: &str,
        schema: &Value,
        value: &Value,
        what: &'static str,
    ) -> Result<Verdict, CheckError> {
        let mut verdicts = self.check_all(owner, vec![schema.clone()], Arc::new(value.clone()), what).await?;
        Ok(verdicts.pop().unwrap_or(Ok(())))
    }

    /// Compiles the schemas given at one registration on behalf of `owner`, in one batch (see
    /// [`Prepared::compile`]), and keeps them, so that the first check with them compiles
    /// nothing: one answer per schema, up to the first refused.
    pub async fn compile(&self, owner: &str, schemas: Vec<Value>) -> Result<Vec<Result<(), Refused>>, CheckError> {
        self.run(owner, move |batch| {
            let mut compiled = Vec::with_capacity(schemas.len());
            for schema in &schemas {
                batch.go_on()?;
                let answer = batch.shared.prepare(schema).map(|_| ());
                let refused = answer.is_err();
                compiled.push(answer);
                if refused {
                    break;
                }
            }
            Ok(compiled)
        })
        .await
    }

    /// Batches running now.
    pub fn running(&self) -> usize {
        self.pool.shared.running.load(Ordering::SeqCst)
    }

    /// Bytes of compiled validators kept (their weights), and how many.
    pub fn cached(&self) -> (usize, usize) {
        let cache = lock(&self.pool.shared.cache);
        (cache.held(), cache.len())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn checker(threads: usize, timeout_ms: u64, budget_ms: u64) -> Checker {
        Checker::new(CheckerConfig {
            threads,
            timeout: Duration::from_millis(timeout_ms),
            budget: Duration::from_millis(budget_ms),
            cache_bytes: 64 << 20,
        })
    }

    /// A schema whose check of a long text is slow but allowed: distinct patterns without a
    /// literal to look for, each scanning the whole text.
    fn slow_schema(tag: usize) -> Value {
        let branches: Vec<Value> = (0..8)
            .map(|i| {
                let from = 0x2000 + tag * 16 + i * 2;
                json!({"pattern": format!("\\p{{L}}+[\\x{{{from:x}}}-\\x{{{:x}}}]", from + 1)})
            })
            .collect();
        json!({"anyOf": branches})
    }

    #[tokio::test]
    async fn checks_answer_in_order() {
        let c = checker(2, 5_000, 60_000);
        let agent = "owner-a";
        let schema = json!({"type": "object", "required": ["code"]});
        let verdicts = c
            .check_all(
                agent,
                vec![schema, json!(false), json!({"type": "string"})],
                Arc::new(json!({"code": 1})),
                "input",
            )
            .await
            .unwrap();
        assert!(verdicts[0].is_ok());
        assert!(verdicts[1].is_err());
        assert!(verdicts[2].as_ref().unwrap_err().contains("type"));
        match c.compile(agent, vec![json!(true), json!({"pattern": "(a)\\1"}), json!(true)]).await.unwrap().as_slice() {
            [Ok(()), Err(Refused::Invalid(m))] => assert!(m.contains("backreference"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_batch_out_of_time_stops_before_its_next_schema() {
        let c = checker(1, 150, 600_000);
        let agent = "owner-a";
        let schemas: Vec<Value> = (0..200).map(slow_schema).collect();
        let text = Arc::new(json!("abcdefghijklmnop".repeat(1_000)));
        let started = Instant::now();
        let answer = c.check_all(agent, schemas, text, "input").await;
        assert_eq!(answer.unwrap_err(), CheckError::TooSlow(Duration::from_millis(150)));
        // It answered at its time (plus at most one schema's check), and nothing runs after.
        let answered = started.elapsed();
        assert!(answered < Duration::from_secs(3), "{answered:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        eprintln!(
            "200 slow schemas with a 150 ms time: answered after {answered:?}; batches running 50 ms later: {}",
            c.running()
        );
        assert_eq!(c.running(), 0);
    }

    #[tokio::test]
    async fn owners_take_turns_and_each_has_a_budget() {
        let c = checker(1, 2_000, 400);
        let greedy = "greedy";
        let text = Arc::new(json!("abcdefghijklmnop".repeat(500)));
        // The greedy owner queues many batches at once; another's single batch is served after
        // at most one of them, not after all.
        let mut queued = Vec::new();
        for i in 0..30 {
            let c = c.clone();
            let text = text.clone();
            queued.push(tokio::spawn(async move { c.check_all(greedy, vec![slow_schema(i)], text, "input").await }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let honest = "honest";
        let started = Instant::now();
        let verdict = c.check(honest, &json!({"type": "string"}), &json!("fine"), "input").await.unwrap();
        assert!(verdict.is_ok());
        let waited = started.elapsed();
        for q in queued {
            let _ = q.await.unwrap();
        }
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        // Its budget (400 ms a minute) ran out: later batches were refused, not run.
        let after = c.check_all(greedy, vec![slow_schema(99)], text, "input").await;
        assert!(matches!(after, Err(CheckError::OverBudget(wait)) if wait > Duration::from_millis(100)), "{after:?}");
    }
}
