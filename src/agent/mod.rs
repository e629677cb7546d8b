//! `parley agent`: the runner that makes any program, or any model behind an OpenAI-compatible
//! endpoint, a personal agent that plays its user's turns and a worker that serves delegations,
//! with the guarantees the service offers (fenced claims, extends, release, hand-back) used
//! for it.
//!
//! The runner is a client of the HTTP API and nothing more: it holds the agent's key, long-polls
//! pickup (turns) and the inbox (delegations), and for each item asks the worker once: a program
//! run with the item as JSON on stdin ([`program`]) or a chat completion ([`llm`]). The worker
//! never sees the key or the claim token; the runner checks its answer ([`answer`]) and makes
//! the calls. While the worker works the runner extends the turn's claim; when the worker fails
//! the item goes back at once with the failure as the reason, and the runner holds back from it
//! for a while ([`backoff`]) while it serves the others.
//!
//! Stopping (SIGTERM, Ctrl-C): nothing new is taken, the items in hand have the grace period to
//! finish, then what is left is given back (a turn released, a delegation declined) and [`run`]
//! returns. A refused key (unknown, revoked, expired, or the agent made inactive) stops the runner
//! at once with an error; network errors and 5xx answers are retried with backoff and jitter.
//!
//! - [`client`]: the calls, and what a failed call means (stop, retry, refused).
//! - [`turns`] and [`delegations`]: the two loops, one item at a time for turns (the service
//!   gives an agent one claim at a time), up to `concurrency` delegations at once.
//! - [`report`]: the log line of each item and the summary.
//! - [`secrets`]: the keys kept out of the program's reach, `/proc` included.

pub mod answer;
pub mod backoff;
pub mod client;
mod delegations;
pub mod llm;
pub mod program;
pub mod report;
pub mod secrets;
mod turns;

use std::{
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::{sync::watch, task::JoinSet, time::Instant};
use uuid::Uuid;

use self::{
    answer::DelegationAnswer,
    backoff::Backoff,
    client::{CallError, Client},
    llm::Model,
    program::{Failure, Program},
    report::{Summary, Tally},
};
use crate::directory::schema::prepare as compile;

/// What does the work.
#[derive(Debug, Clone)]
pub enum WorkerSpec {
    /// A shell command line, run once per item.
    Exec {
        /// The command line.
        command: String,
    },
    /// A model behind an OpenAI-compatible chat completions endpoint.
    Llm {
        /// The API's base URL (`{url}/chat/completions` is asked).
        url: String,
        /// The model's name.
        model: String,
        /// The model's API key, sent to `url` only.
        api_key: Option<String>,
    },
}

/// How the runner runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The service's base URL.
    pub url: String,
    /// The agent's API key: it alone names the agent.
    pub key: String,
    /// What does the work.
    pub worker: WorkerSpec,
    /// Play the user's turns.
    pub turns: bool,
    /// Serve the delegation inbox.
    pub delegations: bool,
    /// Most delegations worked on at once (turns come one at a time besides).
    pub concurrency: usize,
    /// How long items in hand may take to finish once the runner is told to stop.
    pub grace: Duration,
    /// The longest the worker may take on one item (a delegation also stops at its deadline).
    pub timeout: Duration,
}

/// Why the runner stopped other than by being told to.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The configuration cannot work (a bad URL).
    #[error("{0}")]
    Setup(String),
    /// The service refused the agent's key (unknown, revoked or expired), or the agent may not
    /// act (inactive).
    #[error("the service refused the agent's key: {0}")]
    KeyRefused(String),
}

/// How long one long-poll asks to wait (the service caps it at its own maximum).
const POLL_WAIT: Duration = Duration::from_secs(25);
/// How often the runner tells the service the agent is alive, whatever it is doing.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(30);
/// Once the grace period is over, how long a last call (a give-back) may keep trying.
const LAST_WORDS: Duration = Duration::from_secs(5);

/// The worker, built from its spec.
enum Worker {
    Program(Program),
    Model(Model),
}

impl Worker {
    fn new(spec: &WorkerSpec) -> Result<Worker, RunError> {
        Ok(match spec {
            WorkerSpec::Exec { command } => {
                if command.trim().is_empty() {
                    return Err(RunError::Setup("the program's command line is empty".into()));
                }
                Worker::Program(Program::new(command))
            }
            WorkerSpec::Llm { url, model, api_key } => {
                Worker::Model(Model::new(url, model, api_key.clone()).map_err(|e| RunError::Setup(e.to_string()))?)
            }
        })
    }

    fn describe(spec: &WorkerSpec) -> String {
        match spec {
            WorkerSpec::Exec { command } => format!("the program `{command}`"),
            WorkerSpec::Llm { url, model, .. } => format!("the model {model} at {url}"),
        }
    }

    /// A checked respond body for turn `number` (without the claim token).
    async fn turn(&self, view: &Value, number: u32, is_final: bool, deadline: Instant) -> Result<Value, Failure> {
        match self {
            Worker::Program(program) => {
                let answer = program.run(view, deadline).await?;
                answer::check_turn(&answer, number)
                    .map_err(|e| Failure(format!("the program's answer cannot be sent: {e}")))
            }
            Worker::Model(model) => model.turn(view, number, is_final, deadline).await,
        }
    }

    /// A checked delegation answer, its output valid under `output_schema`.
    async fn delegation(
        &self,
        view: &Value,
        output_schema: &Value,
        deadline: Instant,
    ) -> Result<DelegationAnswer, Failure> {
        match self {
            Worker::Program(program) => {
                let output = compile(output_schema).map_err(Failure)?;
                let answer = program.run(view, deadline).await?;
                answer::check_delegation(&answer, &output)
                    .map_err(|e| Failure(format!("the program's answer cannot be sent: {e}")))
            }
            Worker::Model(model) => model.delegation(view, output_schema, deadline).await,
        }
    }
}

/// What the loops and items share.
struct Ctx {
    client: Client,
    worker: Worker,
    /// The agent the key belongs to.
    agent: Uuid,
    options: Options,
    tally: Tally,
    /// Set when the runner takes nothing new.
    stopping: watch::Sender<bool>,
    /// Set when the items in hand must be given back now.
    give_up: watch::Sender<bool>,
    /// Why the runner must stop, when the service refused its key.
    fatal: Mutex<Option<String>>,
}

impl Ctx {
    fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    fn giving_up(&self) -> bool {
        *self.give_up.borrow()
    }

    async fn until_stopping(&self) {
        until_set(&self.stopping).await
    }

    async fn until_give_up(&self) {
        until_set(&self.give_up).await
    }

    /// The service refused the key: stop taking items and drop the ones in hand (nothing can be
    /// sent for them any more).
    fn fatal(&self, message: String) {
        self.fatal.lock().expect("not poisoned").get_or_insert(message);
        self.stopping.send_replace(true);
        self.give_up.send_replace(true);
    }

    /// Calls `call` until it answers or is refused; transient failures are retried with backoff
    /// until `until` (or, once the runner gives items back, for a few seconds at most).
    async fn persist<T, F, Fut>(&self, until: Instant, mut call: F) -> Result<T, CallError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, CallError>>,
    {
        let last_words = self.giving_up();
        let until = if last_words { until.min(Instant::now() + LAST_WORDS) } else { until };
        let mut backoff = Backoff::calls();
        loop {
            let error = match call().await {
                Err(e @ CallError::Transient { .. }) => e,
                other => return other,
            };
            let CallError::Transient { retry_after, .. } = &error else { unreachable!("matched above") };
            let wait = retry_after.unwrap_or_else(|| backoff.after_failure());
            if Instant::now() + wait >= until {
                return Err(error);
            }
            tracing::warn!(error = %error, "a call to the service failed; trying again in {}", report::took(wait));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.until_give_up(), if !last_words => return Err(error),
            }
        }
    }

    /// After a failed poll (`what`): logs it and waits as long as the service asked, or as
    /// `backoff` says; returns whether the runner is stopping.
    async fn pause_after(&self, what: &str, error: &CallError, backoff: &mut Backoff) -> bool {
        let grown = backoff.after_failure();
        let wait = match error {
            CallError::Transient { retry_after: Some(after), .. } => *after,
            _ => grown,
        };
        tracing::warn!(error = %error, "{what} failed; trying again in {}", report::took(wait));
        self.pause(wait).await
    }

    /// After a poll (`what`) that worked: says so when the ones before it had failed (the
    /// service restarted, the network came back), so that the log shows the runner serving again.
    fn answered(&self, what: &str, backoff: &mut Backoff) {
        let failed = backoff.reset();
        if failed > 0 {
            tracing::info!(failures = failed, "{what} works again: the service answers; serving again");
        }
    }

    /// Waits `wait`, or less if the runner stops meanwhile; returns whether it is stopping.
    async fn pause(&self, wait: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(wait) => self.is_stopping(),
            () = self.until_stopping() => true,
        }
    }
}

async fn until_set(flag: &watch::Sender<bool>) {
    let mut rx = flag.subscribe();
    if rx.wait_for(|set| *set).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The runner's clock reading of a deadline the service gave.
fn instant_of(at: DateTime<Utc>) -> Instant {
    Instant::now() + (at - Utc::now()).to_std().unwrap_or_default()
}

/// Runs the agent until `stop` completes (then gives back what it could not finish within the
/// grace period) or the service refuses its key. Returns what it did.
pub async fn run(options: Options, stop: impl Future<Output = ()>) -> Result<Summary, RunError> {
    check_key(&options.key)?;
    let client = Client::new(&options.url, &options.key).map_err(|e| RunError::Setup(e.to_string()))?;
    let worker = Worker::new(&options.worker)?;
    if options.concurrency == 0 {
        return Err(RunError::Setup("concurrency must be at least 1".into()));
    }
    // A model that does not answer now would fail every item: say so at once.
    if let Worker::Model(model) = &worker {
        model.check().await.map_err(RunError::Setup)?;
    }
    tokio::pin!(stop);
    // The key alone names the agent; the service may still be starting.
    let mut backoff = Backoff::calls();
    let me = loop {
        let asked = tokio::select! {
            asked = client.me() => asked,
            () = &mut stop => return Ok(Summary::default()),
        };
        match asked {
            Ok(me) => break me,
            Err(CallError::KeyRefused(message)) => return Err(RunError::KeyRefused(message)),
            Err(e @ CallError::Refused { .. }) => {
                return Err(RunError::Setup(format!("the service refused to name the agent: {e}")));
            }
            Err(e) => {
                let wait = backoff.after_failure();
                tracing::warn!(error = %e, "the service did not answer; trying again in {}", report::took(wait));
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = &mut stop => return Ok(Summary::default()),
                }
            }
        }
    };
    let serving = match (options.turns, options.delegations) {
        (true, true) => "turns and delegations",
        (false, true) => "delegations",
        _ => "turns",
    };
    tracing::info!(agent.id = %me.id, agent.owner = %me.owner, service = %options.url,
        "agent {:?} serving {serving} with {}", me.name, Worker::describe(&options.worker));

    let ctx = Arc::new(Ctx {
        client,
        worker,
        agent: me.id,
        tally: Tally::default(),
        stopping: watch::Sender::new(false),
        give_up: watch::Sender::new(false),
        fatal: Mutex::new(None),
        options,
    });
    let mut loops = JoinSet::new();
    if ctx.options.turns || !ctx.options.delegations {
        loops.spawn(turns::serve(ctx.clone()));
    }
    if ctx.options.delegations {
        loops.spawn(delegations::serve(ctx.clone()));
    }
    loops.spawn(heartbeat(ctx.clone()));

    tokio::select! {
        () = &mut stop => {
            tracing::info!("stopping: taking nothing new; the items in hand have {} to finish", report::took(ctx.options.grace));
            ctx.stopping.send_replace(true);
        }
        () = ctx.until_stopping() => {}
    }
    let grace = tokio::time::sleep(ctx.options.grace);
    tokio::pin!(grace);
    loop {
        tokio::select! {
            done = loops.join_next() => match done {
                None => break,
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    tracing::error!(error = %e, "a part of the runner failed");
                    ctx.give_up.send_replace(true);
                }
            },
            () = &mut grace, if !ctx.giving_up() => {
                tracing::info!("the grace period is over: giving back what is still in hand");
                ctx.give_up.send_replace(true);
            }
        }
    }
    let summary = ctx.tally.summary();
    let fatal = ctx.fatal.lock().expect("not poisoned").take();
    match fatal {
        Some(message) => {
            tracing::error!("stopped: the service refused the agent's key: {message}; {summary}");
            Err(RunError::KeyRefused(message))
        }
        None => {
            tracing::info!("stopped: {summary}");
            Ok(summary)
        }
    }
}

/// Refuses, before anything is sent, a key that cannot be an agent's: a person's token (a JWT),
/// which people try first since it is what they were given, or anything else without the keys'
/// prefix.
fn check_key(key: &str) -> Result<(), RunError> {
    let key = key.trim();
    if key.starts_with(crate::auth::KEY_PREFIX) {
        return Ok(());
    }
    Err(RunError::Setup(if crate::auth::credentials::looks_like_jwt(key) {
        "the key given (PARLEY_AGENT_KEY or --key) is a user token (a JWT), not an agent's API key: register \
         an agent with that token (POST /api/agents, or \"My agents\" on the service's web page) and use the \
         pk_... key it shows"
            .to_owned()
    } else {
        format!(
            "the key given (PARLEY_AGENT_KEY or --key) is not an agent's API key: those start with {}, as \
             POST /api/agents (or \"My agents\" on the service's web page) shows them",
            crate::auth::KEY_PREFIX
        )
    }))
}

/// Tells the service every [`HEARTBEAT_EVERY`] that the agent is alive, so that it counts as
/// live (and its user's parked turns wait the long window) while the worker is busy.
async fn heartbeat(ctx: Arc<Ctx>) {
    loop {
        if ctx.pause(HEARTBEAT_EVERY).await {
            return;
        }
        match ctx.client.heartbeat(ctx.agent).await {
            Ok(()) => {}
            Err(CallError::KeyRefused(message)) => return ctx.fatal(message),
            Err(e) => tracing::debug!(error = %e, "heartbeat failed"),
        }
    }
}
