//! Assembling and running the service: database, state, router, recovery, graceful shutdown.
//!
//! `main` and the tests both go through [`Application`], so what the tests exercise is exactly
//! what `parley serve` runs.

use std::{fs, io::Write, os::unix::fs::OpenOptionsExt, path::Path, sync::Arc, time::Duration};

use anyhow::Context;
use rand::RngCore;
use secrecy::ExposeSecret;
use sha2::Digest;
use tokio::net::TcpListener;

use crate::{
    auth::JwtKeys,
    config::Config,
    db::{self, Database},
    http::{self, AppState},
    scoring::{self, Calculator},
    services::Services,
};

/// A built service, bound to its port, not yet serving.
pub struct Application {
    listener: TcpListener,
    /// `PARLEY_METRICS_BIND`'s listener, serving only `/metrics`.
    metrics_listener: Option<TcpListener>,
    state: AppState,
    /// The services the workers run (the state shares their engine and delegations): built
    /// once, so that one pusher and one outbox serve the process.
    services: Services,
    stop: tokio::sync::watch::Sender<bool>,
}

/// The JWT secret: `PARLEY_JWT_SECRET`, or the one `parley serve` generated into
/// `data_dir/jwt_secret`. Every command but `serve` only reads it: a secret made anywhere else
/// would sign tokens the running service refuses. Without one the error says how to get it.
pub fn jwt_secret(config: &Config) -> anyhow::Result<String> {
    if let Some(secret) = &config.jwt_secret {
        return Ok(secret.expose_secret().to_owned());
    }
    let path = config.data_dir.join("jwt_secret");
    match fs::read_to_string(&path) {
        Ok(existing) if existing.trim().len() >= 16 => Ok(existing.trim().to_owned()),
        _ => Err(anyhow::Error::new(NoJwtSecret { path: std::path::absolute(&path).unwrap_or(path) })),
    }
}

/// No JWT secret is configured and none was generated in the data directory.
#[derive(Debug, thiserror::Error)]
#[error(
    "no JWT secret: PARLEY_JWT_SECRET is not set and {} does not exist. `parley serve` generates \
     that file on its first start; run this from the directory where `parley serve` runs, set \
     PARLEY_DATA_DIR to its data directory, or set PARLEY_JWT_SECRET to the secret the service \
     uses (at least 16 characters)",
    path.display()
)]
pub struct NoJwtSecret {
    /// Where the generated secret would be.
    pub path: std::path::PathBuf,
}

/// The JWT secret for `parley serve`: configured, read from `data_dir/jwt_secret`, or generated
/// there once (the only place a secret is ever made).
pub fn ensure_jwt_secret(config: &Config) -> anyhow::Result<String> {
    if let Ok(secret) = jwt_secret(config) {
        return Ok(secret);
    }
    let path = config.data_dir.join("jwt_secret");
    fs::create_dir_all(&config.data_dir).with_context(|| format!("creating {}", config.data_dir.display()))?;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    write_private(&path, &secret)?;
    tracing::info!(path = %path.display(), "generated a JWT secret");
    Ok(secret)
}

fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    let mut f = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(contents.as_bytes())?;
    Ok(())
}

/// The hub's skills: the built-in skill plus `PARLEY_SKILLS` files (a bad file stops start-up;
/// a skill without an `id` is kept, named `unknown`, with a warning in the log).
pub fn hub_skills(config: &Config) -> anyhow::Result<Vec<scoring::Skill>> {
    let mut skills = vec![scoring::default_skill()];
    for path in &config.skill_files {
        let loaded = scoring::load_skill_file(path)?;
        for warning in scoring::skill_file_warnings(path, &loaded) {
            tracing::warn!("{warning}");
        }
        skills.extend(loaded);
    }
    Ok(skills)
}

/// What the log says when the system negotiator's lexicon cannot be read.
pub fn lexicon_missing_message(err: &crate::lexicon::wordnet::LoadError) -> String {
    format!(
        "the system negotiator's lexicon is missing ({err}): install WordNet (Debian's wordnet-base: \
         `apt-get install wordnet-base`) or set PARLEY_WORDNET_DIR to its dict folder. Until then the \
         negotiator judges by spelling alone: it knows no synonyms or broader terms (a beekeeper is an \
         apiarist, a chef is a cook), cannot tell a word's senses apart (an orchestra's conductor from a \
         tram's), and turns down more good matches"
    )
}

/// Loads the system negotiator's lexicon from `PARLEY_WORDNET_DIR` once per process, saying in the
/// log how long it took and how much it holds, or that it is missing.
pub fn load_lexicon(config: &Config) {
    if crate::lexicon::installed() {
        return;
    }
    let started = std::time::Instant::now();
    match crate::lexicon::wordnet::load(&config.wordnet_dir) {
        Ok(lexicon) => {
            tracing::info!(
                dir = %config.wordnet_dir.display(),
                senses = lexicon.sense_count(),
                mib = lexicon.approx_bytes() / (1 << 20),
                ms = started.elapsed().as_millis() as u64,
                "loaded WordNet for the system negotiator's word senses"
            );
            crate::lexicon::install(lexicon);
        }
        Err(e) => {
            tracing::warn!("{}", lexicon_missing_message(&e));
            crate::lexicon::install(crate::lexicon::Lexicon::empty());
        }
    }
}

impl Application {
    /// The services alone (the turn engine and the delegations), for processes that run timers
    /// but serve no HTTP.
    pub(crate) fn build_services(config: Config, pool: sqlx::PgPool) -> anyhow::Result<Services> {
        load_lexicon(&config);
        let secret = jwt_secret(&config)?;
        let token_secret = sha2::Sha256::digest(format!("parley claim tokens:{secret}").as_bytes());
        let model = config
            .negotiator_model
            .as_ref()
            .map(crate::delivery::negotiator_model::ModelNegotiator::new)
            .transpose()?;
        Services::new(pool, Arc::new(config), &token_secret, model.map(Arc::new))
    }

    /// Builds the state on an open database and binds the listener.
    pub async fn build(config: Config, pool: sqlx::PgPool) -> anyhow::Result<Application> {
        load_lexicon(&config);
        let secret = jwt_secret(&config)?;
        let skills = hub_skills(&config)?;
        let embeddings = config.embeddings.clone().map(|e| Arc::new(crate::embeddings::Embeddings::new(e, &skills)));
        let calculator = Calculator::new(&skills, None);
        let listener = TcpListener::bind(config.bind).await.with_context(|| format!("binding {}", config.bind))?;
        let jwt = JwtKeys::new(secret.as_bytes()).with_max_ttl(config.jwt_max_ttl);
        let auth_failures = Arc::new(http::auth_limiter::AuthFailureLimiter::new(
            config.auth_failure_burst,
            config.auth_failure_refill,
        ));
        let metrics_listener = match config.metrics_bind {
            Some(addr) => Some(TcpListener::bind(addr).await.with_context(|| format!("binding {addr} for metrics"))?),
            None => None,
        };
        crate::metrics::install(config.metrics);
        let streams = Arc::new(crate::wire::streams::StreamLimits::new(
            config.sse_per_token,
            config.sse_per_user,
            config.sse_max,
        ));
        // A2A task streams: per agent (the "token" of the counts), per user, and in all.
        let a2a_streams = Arc::new(crate::wire::streams::StreamLimits::new(
            config.a2a_streams_per_agent,
            config.a2a_streams_per_user,
            config.sse_max,
        ));
        let services = Self::build_services(config, pool)?;
        let (stop, stopping) = tokio::sync::watch::channel(false);
        let state = AppState {
            engine: services.engine.clone(),
            delegations: services.delegations.clone(),
            jwt: Arc::new(jwt),
            auth_failures,
            calculator: Arc::new(calculator),
            queue_depth: Arc::default(),
            embeddings,
            events: Arc::new(crate::live::EventHub::default()),
            stopping,
            streams,
            a2a_streams,
            card_fetches: http::agent_cards::card_fetch_limiter(),
        };
        Ok(Application { listener, metrics_listener, state, services, stop })
    }

    /// The metrics listener's port, when `PARLEY_METRICS_BIND` is set.
    pub fn metrics_port(&self) -> Option<u16> {
        self.metrics_listener.as_ref().and_then(|l| l.local_addr().ok()).map(|a| a.port())
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// The shared state (tests and the benchmark read it: see `AppState`'s methods).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Resumes stranded negotiations, runs the timer workers (unless configured off), and
    /// serves until `shutdown` resolves.
    pub async fn run_until_stopped(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let stop = self.stop;
        tokio::spawn(async move {
            shutdown.await;
            let _ = stop.send(true);
        });
        let state = self.state.clone();
        let stopped = move || state.stopped();
        let engine = self.state.engine.clone();
        // Every background task ends with the service and is waited for before this returns.
        let mut background = tokio::task::JoinSet::new();
        let workers = if engine.config().workers {
            // History from before the insights rollups, rolled up in the background.
            spawn_until(
                &mut background,
                crate::store::insight_rollups::backfill(engine.pool().clone(), 1000, Duration::from_millis(20)),
                stopped(),
            );
            Some(tokio::spawn(run_workers(self.services, stopped())))
        } else {
            None
        };
        // The listener, the wake-up sender and the event log's reader end with the service.
        if let Some(url) = engine.config().database_url.clone() {
            spawn_until(&mut background, crate::live::listen(url, engine.wakeups().clone()), stopped());
        }
        spawn_until(
            &mut background,
            crate::live::send_wakeups(engine.pool().clone(), engine.wakeups().clone()),
            stopped(),
        );
        spawn_until(
            &mut background,
            crate::live::tail_events(engine.pool().clone(), engine.wakeups().clone(), self.state.events.clone()),
            stopped(),
        );
        let recovering = engine.clone();
        spawn_until(
            &mut background,
            async move {
                if let Err(e) = recovering.recover(Duration::ZERO).await {
                    tracing::error!(error = %e, "the recovery pass failed");
                }
            },
            stopped(),
        );
        let limits = http::serve::ConnectionLimits {
            header: engine.config().http_header_timeout,
            idle: engine.config().http_idle_timeout,
            max: http::serve::connection_cap(engine.config().http_max_connections),
        };
        if let Some(listener) = self.metrics_listener {
            tracing::info!(address = %listener.local_addr()?, "serving /metrics without credentials");
            let metrics = http::metrics::open_router(self.state.clone());
            background.spawn(http::serve::serve(listener, metrics, limits, stopped()));
        }
        let router = router(self.state);
        let address = self.listener.local_addr()?;
        tracing::info!(%address, max_connections = limits.max, "listening on http://{address}");
        http::serve::serve(self.listener, router, limits, stopped()).await;
        if let Some(w) = workers {
            w.await??;
        }
        while let Some(ended) = background.join_next().await {
            if let Err(e) = ended {
                tracing::error!(error = %e, "a background task panicked");
            }
        }
        Ok(())
    }
}

/// Runs `task` in `set` until it ends or `until` resolves.
fn spawn_until(
    set: &mut tokio::task::JoinSet<()>,
    task: impl std::future::Future<Output = ()> + Send + 'static,
    until: impl std::future::Future<Output = ()> + Send + 'static,
) {
    set.spawn(async move {
        tokio::select! {
            () = task => {}
            () = until => {}
        }
    });
}

/// Runs the timer workers on the services' pool until `shutdown` resolves; each due job goes
/// to the service that owns it (`crate::services`).
pub async fn run_workers(
    services: Services,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let runtime = services.runtime().clone();
    let cfg = parley_jobs::WorkerConfig {
        poll_interval: runtime.config().timer_poll,
        housekeeping_every: runtime.config().housekeeping_every,
        outbox_poll: runtime.config().webhooks.poll,
        outbox_concurrency: runtime.config().webhooks.workers as usize,
        ..parley_jobs::WorkerConfig::default()
    };
    let pool = runtime.pool().clone();
    // What the timers change wakes long-polls in the API processes: this process sends its
    // wake-ups too (a no-op when `run_until_stopped` already started the sender).
    let sender = tokio::spawn(crate::live::send_wakeups(pool.clone(), runtime.wakeups().clone()));
    let ran = parley_jobs::run_workers(pool, services, cfg, shutdown).await;
    sender.abort();
    ran?;
    Ok(())
}

/// Opens the configured database (embedded when `DATABASE_URL` is unset).
pub async fn open_database(config: &Config) -> anyhow::Result<Database> {
    db::open(config.database_url.as_deref(), &config.data_dir, config.pool_size).await
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down");
}

/// The whole service's routes: the HTTP API's resources, the MCP endpoint, the A2A endpoint
/// and the OpenAPI document, under the shared layers. Assembled here, above all of them,
/// because no adapter imports another and the OpenAPI document is built on the HTTP modules.
pub fn router(state: http::AppState) -> axum::Router {
    let mcp = crate::mcp::router(crate::mcp::McpState {
        engine: state.engine.clone(),
        delegations: state.delegations.clone(),
        jwt: state.jwt.clone(),
    });
    let a2a = crate::a2a::router(crate::a2a::A2aState {
        engine: state.engine.clone(),
        delegations: state.delegations.clone(),
        jwt: state.jwt.clone(),
        events: state.events.clone(),
        streams: state.a2a_streams.clone(),
        stopping: state.stopping.clone(),
    });
    let routes = http::resources().merge(crate::openapi::router()).merge(mcp).merge(a2a);
    http::layered(routes, state)
}
