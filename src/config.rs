//! Configuration: every environment variable (the "Configuration" table of `docs/operations.md`), parsed and
//! validated once at start.
//!
//! A bad value stops start-up with a message naming the variable; nothing reads the environment
//! after [`Config::from_env`], so tests build a [`Config`] directly with durations in seconds.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use secrecy::SecretString;
use thiserror::Error;

/// The longest an agent's `last_seen_at` write is held back: at most one write per agent per
/// this period in each process (the seen-throttle of `crate::runtime::liveness`). A constant, not
/// a setting; here because the liveness window (`PARLEY_AGENT_LIVENESS`) must outlast it plus
/// the longest long-poll, and the configuration is a leaf that imports nothing of the service.
pub const SEEN_WRITE_EVERY: Duration = Duration::from_secs(15);

/// A configuration value that could not be used.
#[derive(Debug, Error)]
#[error("{var}: {message}")]
pub struct ConfigError {
    /// The environment variable at fault.
    pub var: &'static str,
    /// What is wrong with it.
    pub message: String,
}

/// Log output style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable, coloured when on a terminal.
    Pretty,
    /// One JSON object per line.
    Json,
}

/// Turn caps per pairing (0 = unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnCaps {
    /// System negotiator on both sides.
    pub system: u32,
    /// One personal agent, one system negotiator.
    pub mixed: u32,
    /// Personal agents on both sides.
    pub personal: u32,
}

impl Default for TurnCaps {
    fn default() -> Self {
        TurnCaps { system: 6, mixed: 8, personal: 0 }
    }
}

/// The optional OpenAI-compatible embeddings provider for `/agent/negotiation`.
#[derive(Debug, Clone)]
pub struct EmbeddingsConfig {
    /// Base URL; requests go to `{url}/embeddings`.
    pub url: String,
    /// Bearer token, if the provider needs one.
    pub api_key: Option<SecretString>,
    /// Model name.
    pub model: String,
    /// `PARLEY_EMBEDDINGS_ANSWER_MIB`: the most of an answer read, in bytes (a larger one is
    /// refused unread and the request is scored keyword-only).
    pub max_answer: usize,
}

/// The optional model-backed system negotiator: an OpenAI-compatible chat completions endpoint.
#[derive(Debug, Clone)]
pub struct NegotiatorModelConfig {
    /// Base URL; requests go to `{url}/chat/completions`.
    pub url: String,
    /// The model's name.
    pub model: String,
    /// Bearer token, if the endpoint needs one.
    pub api_key: Option<SecretString>,
    /// How long one system turn may wait for the model before the rules decide it.
    pub timeout: Duration,
    /// Model calls in flight at once, in this process.
    pub concurrency: u32,
    /// `PARLEY_NEGOTIATOR_MODEL_ANSWER_MIB`: the most of an answer read, in bytes (a larger one
    /// is refused unread and the rules decide the turn).
    pub max_answer: usize,
}

/// How the outbox delivers: webhooks and A2A push notifications alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookConfig {
    /// `PARLEY_WEBHOOK_TIMEOUT`: the longest one delivery (a POST and its answer) may take.
    pub timeout: Duration,
    /// `PARLEY_WEBHOOK_RETRY_FIRST`: the wait before the first retry; each retry waits about
    /// twice the one before (with jitter), at most 6 hours.
    pub retry_first: Duration,
    /// `PARLEY_WEBHOOK_RETRY_FOR`: how long a failing delivery is retried before it is given up.
    pub retry_for: Duration,
    /// `PARLEY_WEBHOOK_DISABLE_AFTER`: an endpoint whose deliveries all failed for this long is
    /// disabled.
    pub disable_after: Duration,
    /// `PARLEY_WEBHOOK_SECRET_OVERLAP`: how long the secret before a rotation keeps signing
    /// beside the new one.
    pub secret_overlap: Duration,
    /// `PARLEY_WEBHOOK_CONCURRENCY`: deliveries in flight to one endpoint at once, across every
    /// Parley process.
    pub concurrency: u32,
    /// `PARLEY_WEBHOOK_LOG_RETENTION`: how long a finished delivery stays in the delivery log
    /// (and its event, for redelivery).
    pub log_retention: Duration,
    /// `PARLEY_MAX_WEBHOOKS_PER_OWNER`: webhooks one person (or the platform) may register.
    pub max_per_owner: u32,
    /// `PARLEY_OUTBOX_POLL`: how often the job workers look for new deliveries.
    pub poll: Duration,
    /// `PARLEY_OUTBOX_WORKERS`: delivery jobs a worker process runs at once.
    pub workers: u32,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            timeout: Duration::from_secs(15),
            retry_first: Duration::from_secs(5),
            retry_for: Duration::from_secs(3 * 86_400),
            disable_after: Duration::from_secs(5 * 86_400),
            secret_overlap: Duration::from_secs(86_400),
            concurrency: 4,
            log_retention: Duration::from_secs(7 * 86_400),
            max_per_owner: 10,
            poll: Duration::from_millis(100),
            workers: 32,
        }
    }
}

/// Everything Parley needs to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// `DATABASE_URL`; `None` starts the embedded PostgreSQL.
    pub database_url: Option<String>,
    /// `PARLEY_BIND`.
    pub bind: SocketAddr,
    /// `PARLEY_DATA_DIR`: embedded database and generated secret.
    pub data_dir: PathBuf,
    /// `PARLEY_JWT_SECRET`; `None` means "generate once into the data dir".
    pub jwt_secret: Option<SecretString>,
    /// `PARLEY_CLAIM_TIMEOUT`.
    pub claim_timeout: Duration,
    /// `PARLEY_PARK_TIMEOUT`.
    pub park_timeout: Duration,
    /// `PARLEY_PARK_TIMEOUT_OFFLINE`: how long a turn parked for a user with no live agent waits
    /// before the system negotiator takes it (mixed negotiations); zero means at once.
    pub park_timeout_offline: Duration,
    /// `PARLEY_AGENT_LIVENESS`: an agent seen within this is live.
    pub agent_liveness: Duration,
    /// `PARLEY_PVP_TIMEOUT`.
    pub pvp_timeout: Duration,
    /// `PARLEY_PENDING_TTL`.
    pub pending_ttl: Duration,
    /// `PARLEY_ASK_TIMEOUT`: how long a person has to answer their agent's question
    /// (`ask_person`) before the turn goes back to the agent without an answer.
    pub ask_timeout: Duration,
    /// `PARLEY_LONG_POLL_MAX`.
    pub long_poll_max: Duration,
    /// `PARLEY_MAX_TURNS_SYSTEM` / `_MIXED` / `_PERSONAL`.
    pub turn_caps: TurnCaps,
    /// `PARLEY_SKILLS`: extra skill files for `/agent/negotiation`.
    pub skill_files: Vec<PathBuf>,
    /// `PARLEY_WORDNET_DIR`: WordNet's database folder (the `dict` files), read at start for the
    /// system negotiator's word senses.
    pub wordnet_dir: PathBuf,
    /// `PARLEY_EMBEDDINGS_URL` (+ `_API_KEY`, `_MODEL`).
    pub embeddings: Option<EmbeddingsConfig>,
    /// `PARLEY_NEGOTIATOR_MODEL_URL` (+ `_MODEL`, `_API_KEY`, `_TIMEOUT`, `_CONCURRENCY`): system
    /// turns decided by a model, guarded by the rules.
    pub negotiator_model: Option<NegotiatorModelConfig>,
    /// `PARLEY_LOG_FORMAT`.
    pub log_format: LogFormat,
    /// `PARLEY_DB_POOL_SIZE`: connections in the service's pool.
    pub pool_size: u32,
    /// `PARLEY_TIMER_POLL`: how often timer workers look for due timers (the most a due timer
    /// waits; delayed jobs are not woken by NOTIFY).
    pub timer_poll: Duration,
    /// `PARLEY_HOUSEKEEPING_EVERY`: period of the recovery and pruning job.
    pub housekeeping_every: Duration,
    /// `PARLEY_HISTORY_RETENTION`: how long ended negotiations and delegations are kept (their
    /// insights are kept for ever); `None` (`off`, the default) keeps them all.
    pub history_retention: Option<Duration>,
    /// Whether this process runs the timer workers (`serve --no-workers` turns them off).
    pub workers: bool,
    /// `PARLEY_HTTP_HEADER_TIMEOUT`: a request's head must arrive whole within this.
    pub http_header_timeout: Duration,
    /// `PARLEY_HTTP_IDLE_TIMEOUT`: a connection on which nothing moves while no request is being
    /// handled is closed after this.
    pub http_idle_timeout: Duration,
    /// `PARLEY_HTTP_MAX_CONNECTIONS`: connections served at once (lowered to the descriptor
    /// limit less 256); further ones wait in the listen backlog.
    pub http_max_connections: u32,
    /// `PARLEY_HTTP_BODY_TIMEOUT`: each part of a request body must arrive within this of the
    /// one before (408 otherwise).
    pub http_body_timeout: Duration,
    /// `PARLEY_HTTP_BODY_DEADLINE`: a request body must arrive whole within this of the
    /// request's head, however it trickles in (408 otherwise).
    pub http_body_deadline: Duration,
    /// `PARLEY_SSE_PER_TOKEN`: event streams one token may hold open at once.
    pub sse_per_token: u32,
    /// `PARLEY_SSE_PER_USER`: event streams one user (or the service) may hold open at once.
    pub sse_per_user: u32,
    /// `PARLEY_SSE_MAX`: event streams the process holds open at once.
    pub sse_max: u32,
    /// `PARLEY_A2A_STREAMS_PER_AGENT`: A2A task streams (streaming sends and subscriptions) one
    /// agent may hold open at once; the process holds at most `PARLEY_SSE_MAX` of them.
    pub a2a_streams_per_agent: u32,
    /// `PARLEY_A2A_STREAMS_PER_USER`: A2A task streams the agents of one user may hold open at
    /// once, in all.
    pub a2a_streams_per_user: u32,
    /// `PARLEY_PUBLIC_URL`: where clients reach this service (`https://parley.example.com`, no
    /// trailing slash), for the URLs its A2A agent card names; unset, the request's `Host`.
    pub public_url: Option<String>,
    /// `PARLEY_JWT_MAX_TTL`: a token whose `exp` lies further out than this from now is refused.
    pub jwt_max_ttl: Duration,
    /// `PARLEY_AUTH_FAILURE_BURST`: failed authentications a client address may make in a burst.
    pub auth_failure_burst: u32,
    /// `PARLEY_AUTH_FAILURE_REFILL`: one more failed authentication is allowed per this period.
    pub auth_failure_refill: Duration,
    /// `PARLEY_METRICS` (`on`/`off`): whether metrics are recorded and `/metrics` is served.
    pub metrics: bool,
    /// `PARLEY_METRICS_BIND`: a second listener that serves only `/metrics`, without credentials.
    pub metrics_bind: Option<SocketAddr>,
    /// `PARLEY_MIN_TRUST`: the trust percentile (0-100) below which discovery shows no agent.
    pub min_trust: u32,
    /// `PARLEY_ANONYMOUS_ID_TTL`: how long an agent's anonymous id lives before it is replaced.
    pub anonymous_id_ttl: Duration,
    /// `PARLEY_DELEGATION_ACCEPT_TIMEOUT`: how long a delegation attempt waits to be accepted.
    pub delegation_accept_timeout: Duration,
    /// `PARLEY_DELEGATION_MIN_TIMEOUT`: the shortest `timeoutMs` a delegation may ask for.
    pub delegation_min_timeout: Duration,
    /// `PARLEY_OUTBOUND_RATE`: delegations an agent may send per 60 s; a capability may only
    /// declare a lower limit.
    pub outbound_rate: u32,
    /// `PARLEY_INBOUND_RATE`: delegation attempts an agent may receive per 60 s; a capability may
    /// only declare a lower limit, and one requesting owner may use at most half of it.
    pub inbound_rate: u32,
    /// `PARLEY_TRUST_PER_REQUESTER`: how many attempts of one requesting owner count for or
    /// against one target's trust per UTC day.
    pub trust_per_requester: u32,
    /// `PARLEY_SCHEMA_CHECK_TIMEOUT`: the longest a batch of JSON Schema checks (a delegation's
    /// input against its candidates, or an output) may run before it stops and the call is
    /// answered without it.
    pub schema_check_timeout: Duration,
    /// `PARLEY_SCHEMA_CHECK_THREADS`: the threads that compile and check schemas.
    pub schema_check_threads: u32,
    /// `PARLEY_SCHEMA_CHECK_BUDGET`: the checking time the agents of one owner may use per
    /// minute.
    pub schema_check_budget: Duration,
    /// `PARLEY_SCHEMA_CACHE_MIB`: the memory compiled schemas may weigh, MiB.
    pub schema_cache_mib: u32,
    /// `PARLEY_MAX_AGENTS_PER_USER`: agents one user may have.
    pub max_agents_per_user: u32,
    /// `PARLEY_MAX_CAPABILITIES_PER_USER`: capabilities the agents of one user may have in all.
    pub max_capabilities_per_user: u32,
    /// `PARLEY_MAX_KEYS_PER_USER`: live (unrevoked, unexpired) API keys the agents of one user
    /// may have in all.
    pub max_keys_per_user: u32,
    /// `PARLEY_INPUT_FAILURE_BURST`: delegations refused for an input the target's schema
    /// rejects that one requester may make in a burst before it is answered 429.
    pub input_failure_burst: u32,
    /// `PARLEY_INPUT_FAILURE_REFILL`: one more such refusal is allowed per this period.
    pub input_failure_refill: Duration,
    /// `PARLEY_A2A_ALLOW_PRIVATE_TARGETS`: whether agents' AgentCard and interface URLs may lead
    /// to loopback, private, link-local and other non-public addresses (off by default).
    pub a2a_allow_private_targets: bool,
    /// `PARLEY_A2A_CALL_TIMEOUT`: the longest one call to an agent's A2A endpoint may take,
    /// connection and answer included.
    pub a2a_call_timeout: Duration,
    /// `PARLEY_A2A_CALLS_PER_AGENT`: calls this process makes to one agent at once.
    pub a2a_calls_per_agent: u32,
    /// `PARLEY_A2A_CALLS_MAX`: calls this process makes to agents at once, in all.
    pub a2a_calls_max: u32,
    /// `PARLEY_WEBHOOK_*`, `PARLEY_OUTBOX_*`: how webhooks and A2A push notifications are
    /// delivered.
    pub webhooks: WebhookConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            database_url: None,
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./.parley"),
            jwt_secret: None,
            claim_timeout: Duration::from_secs(6 * 3600),
            park_timeout: Duration::from_secs(24 * 3600),
            park_timeout_offline: Duration::from_secs(5 * 60),
            agent_liveness: Duration::from_secs(90),
            pvp_timeout: Duration::from_secs(24 * 3600),
            pending_ttl: Duration::from_secs(14 * 24 * 3600),
            ask_timeout: Duration::from_secs(24 * 3600),
            long_poll_max: Duration::from_secs(30),
            turn_caps: TurnCaps::default(),
            skill_files: Vec::new(),
            // Where Debian's wordnet-base installs the database.
            wordnet_dir: PathBuf::from("/usr/share/wordnet"),
            embeddings: None,
            negotiator_model: None,
            log_format: LogFormat::Pretty,
            pool_size: 16,
            timer_poll: Duration::from_secs(1),
            housekeeping_every: Duration::from_secs(300),
            history_retention: None,
            workers: true,
            http_header_timeout: Duration::from_secs(10),
            http_idle_timeout: Duration::from_secs(60),
            http_max_connections: 8192,
            http_body_timeout: Duration::from_secs(30),
            http_body_deadline: Duration::from_secs(30),
            sse_per_token: 4,
            sse_per_user: 16,
            sse_max: 4096,
            a2a_streams_per_agent: 100,
            a2a_streams_per_user: 200,
            public_url: None,
            jwt_max_ttl: Duration::from_secs(30 * 24 * 3600),
            auth_failure_burst: 30,
            auth_failure_refill: Duration::from_millis(250),
            metrics: true,
            metrics_bind: None,
            min_trust: 0,
            anonymous_id_ttl: Duration::from_secs(24 * 3600),
            delegation_accept_timeout: Duration::from_secs(60),
            delegation_min_timeout: Duration::from_secs(1),
            outbound_rate: 20,
            inbound_rate: 10,
            trust_per_requester: 3,
            schema_check_timeout: Duration::from_secs(1),
            schema_check_threads: 2,
            schema_check_budget: Duration::from_secs(5),
            schema_cache_mib: 64,
            max_agents_per_user: 50,
            max_capabilities_per_user: 200,
            max_keys_per_user: 100,
            input_failure_burst: 20,
            input_failure_refill: Duration::from_secs(3),
            a2a_allow_private_targets: false,
            a2a_call_timeout: Duration::from_secs(10),
            a2a_calls_per_agent: 4,
            a2a_calls_max: 64,
            webhooks: WebhookConfig::default(),
        }
    }
}

/// A public base URL: `http://` or `https://`, a host, an optional port and path, no query,
/// fragment or credentials; a trailing slash is dropped.
fn public_url(var: &'static str, v: &str) -> Result<String, ConfigError> {
    let bad = |message: &str| ConfigError { var, message: format!("{v:?} {message}") };
    let rest = v
        .strip_prefix("https://")
        .or_else(|| v.strip_prefix("http://"))
        .ok_or_else(|| bad("must start with http:// or https://"))?;
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() {
        return Err(bad("names no host"));
    }
    if rest.contains(['?', '#', '@', ' ']) {
        return Err(bad("must hold no query, fragment, credentials or spaces"));
    }
    Ok(v.trim_end_matches('/').to_owned())
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads configuration through `get` (the environment, or a map in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let d = Config::default();
        let var = |name: &'static str| get(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let duration = |name: &'static str, default: Duration| -> Result<Duration, ConfigError> {
            match var(name) {
                None => Ok(default),
                Some(v) => {
                    let parsed = humantime::parse_duration(&v).map_err(|e| ConfigError {
                        var: name,
                        message: format!("{v:?} is not a duration like 30s, 6h or 14d ({e})"),
                    })?;
                    if parsed.is_zero() {
                        return Err(ConfigError { var: name, message: "must be longer than 0s".into() });
                    }
                    Ok(parsed)
                }
            }
        };
        let number = |name: &'static str, default: u32| -> Result<u32, ConfigError> {
            match var(name) {
                None => Ok(default),
                Some(v) => v.parse::<u32>().map_err(|_| ConfigError {
                    var: name,
                    message: format!("{v:?} is not a non-negative whole number"),
                }),
            }
        };

        let at_least = |name: &'static str, default: u32, min: u32| -> Result<u32, ConfigError> {
            let n = number(name, default)?;
            if n < min {
                return Err(ConfigError { var: name, message: format!("must be at least {min}") });
            }
            Ok(n)
        };

        // A size in MiB (1 to 1024), in bytes.
        let mib = |name: &'static str, default: u32| -> Result<usize, ConfigError> {
            let n = number(name, default)?;
            if !(1..=1024).contains(&n) {
                return Err(ConfigError { var: name, message: "must be a whole number of MiB from 1 to 1024".into() });
            }
            Ok(n as usize * 1024 * 1024)
        };

        let history_retention = match var("PARLEY_HISTORY_RETENTION").as_deref() {
            None | Some("off") => None,
            Some(_) => Some(duration("PARLEY_HISTORY_RETENTION", Duration::ZERO)?),
        };
        let bind = match var("PARLEY_BIND") {
            None => d.bind,
            Some(v) => listen_address("PARLEY_BIND", &v, "127.0.0.1:8080")?,
        };
        let metrics_bind = match var("PARLEY_METRICS_BIND") {
            None => None,
            Some(v) => Some(listen_address("PARLEY_METRICS_BIND", &v, "127.0.0.1:9090")?),
        };
        let metrics = match var("PARLEY_METRICS").as_deref() {
            None | Some("on") => true,
            Some("off") => false,
            Some(other) => {
                return Err(ConfigError {
                    var: "PARLEY_METRICS",
                    message: format!("{other:?} is neither \"on\" nor \"off\""),
                });
            }
        };
        let a2a_allow_private_targets = match var("PARLEY_A2A_ALLOW_PRIVATE_TARGETS").as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ConfigError {
                    var: "PARLEY_A2A_ALLOW_PRIVATE_TARGETS",
                    message: format!("{other:?} is neither \"true\" nor \"false\""),
                });
            }
        };
        let log_format = match var("PARLEY_LOG_FORMAT").as_deref() {
            None | Some("pretty") => LogFormat::Pretty,
            Some("json") => LogFormat::Json,
            Some(other) => {
                return Err(ConfigError {
                    var: "PARLEY_LOG_FORMAT",
                    message: format!("{other:?} is neither \"pretty\" nor \"json\""),
                });
            }
        };
        let database_url = var("DATABASE_URL");
        if let Some(url) = &database_url
            && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            return Err(ConfigError {
                var: "DATABASE_URL",
                message: "must be a postgres:// or postgresql:// URL".into(),
            });
        }
        let jwt_secret = var("PARLEY_JWT_SECRET");
        if let Some(s) = &jwt_secret
            && s.len() < 16
        {
            return Err(ConfigError { var: "PARLEY_JWT_SECRET", message: "must be at least 16 characters".into() });
        }
        let embeddings = match var("PARLEY_EMBEDDINGS_URL") {
            None => None,
            Some(url) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(ConfigError {
                        var: "PARLEY_EMBEDDINGS_URL",
                        message: "must be an http:// or https:// URL".into(),
                    });
                }
                Some(EmbeddingsConfig {
                    url: url.trim_end_matches('/').to_owned(),
                    api_key: var("PARLEY_EMBEDDINGS_API_KEY").map(SecretString::from),
                    model: var("PARLEY_EMBEDDINGS_MODEL").unwrap_or_else(|| "text-embedding-3-small".into()),
                    max_answer: mib("PARLEY_EMBEDDINGS_ANSWER_MIB", 16)?,
                })
            }
        };
        let negotiator_model = match var("PARLEY_NEGOTIATOR_MODEL_URL") {
            None => None,
            Some(url) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(ConfigError {
                        var: "PARLEY_NEGOTIATOR_MODEL_URL",
                        message: "must be an http:// or https:// URL".into(),
                    });
                }
                let model = var("PARLEY_NEGOTIATOR_MODEL").ok_or_else(|| ConfigError {
                    var: "PARLEY_NEGOTIATOR_MODEL",
                    message: "must name the model when PARLEY_NEGOTIATOR_MODEL_URL is set".into(),
                })?;
                let timeout = duration("PARLEY_NEGOTIATOR_MODEL_TIMEOUT", Duration::from_secs(20))?;
                if timeout.is_zero() {
                    return Err(ConfigError {
                        var: "PARLEY_NEGOTIATOR_MODEL_TIMEOUT",
                        message: "must be greater than zero".into(),
                    });
                }
                Some(NegotiatorModelConfig {
                    url: url.trim_end_matches('/').to_owned(),
                    model,
                    api_key: var("PARLEY_NEGOTIATOR_MODEL_API_KEY").map(SecretString::from),
                    timeout,
                    concurrency: at_least("PARLEY_NEGOTIATOR_MODEL_CONCURRENCY", 4, 1)?,
                    max_answer: mib("PARLEY_NEGOTIATOR_MODEL_ANSWER_MIB", 1)?,
                })
            }
        };
        let pool_size = at_least("PARLEY_DB_POOL_SIZE", d.pool_size, 2)?;
        let auth_failure_burst = at_least("PARLEY_AUTH_FAILURE_BURST", d.auth_failure_burst, 1)?;
        let input_failure_burst = at_least("PARLEY_INPUT_FAILURE_BURST", d.input_failure_burst, 1)?;
        let trust_per_requester = at_least("PARLEY_TRUST_PER_REQUESTER", d.trust_per_requester, 1)?;
        let delegation_min_timeout = duration("PARLEY_DELEGATION_MIN_TIMEOUT", d.delegation_min_timeout)?;
        if delegation_min_timeout > Duration::from_secs(24 * 3600) {
            return Err(ConfigError { var: "PARLEY_DELEGATION_MIN_TIMEOUT", message: "must be at most 24h".into() });
        }

        let rate = |name: &'static str, default: u32| -> Result<u32, ConfigError> {
            let n = number(name, default)?;
            if n > 10_000 {
                return Err(ConfigError {
                    var: name,
                    message: "must be a whole number from 0 to 10000 (per minute)".into(),
                });
            }
            Ok(n)
        };
        let outbound_rate = rate("PARLEY_OUTBOUND_RATE", d.outbound_rate)?;
        let inbound_rate = rate("PARLEY_INBOUND_RATE", d.inbound_rate)?;

        let within = |name: &'static str, default: u32, min: u32, max: u32| -> Result<u32, ConfigError> {
            let n = number(name, default)?;
            if !(min..=max).contains(&n) {
                return Err(ConfigError { var: name, message: format!("must be a whole number from {min} to {max}") });
            }
            Ok(n)
        };
        let sse_per_token = within("PARLEY_SSE_PER_TOKEN", d.sse_per_token, 1, 100_000)?;
        let sse_per_user = within("PARLEY_SSE_PER_USER", d.sse_per_user, 1, 100_000)?;
        let sse_max = within("PARLEY_SSE_MAX", d.sse_max, 1, 1_000_000)?;
        let a2a_streams_per_agent = within("PARLEY_A2A_STREAMS_PER_AGENT", d.a2a_streams_per_agent, 1, 100_000)?;
        let a2a_streams_per_user = within("PARLEY_A2A_STREAMS_PER_USER", d.a2a_streams_per_user, 1, 100_000)?;
        let public_url = match var("PARLEY_PUBLIC_URL") {
            None => None,
            Some(v) => Some(public_url("PARLEY_PUBLIC_URL", &v)?),
        };
        let a2a_call_timeout = duration("PARLEY_A2A_CALL_TIMEOUT", d.a2a_call_timeout)?;
        if a2a_call_timeout.is_zero() || a2a_call_timeout > Duration::from_secs(300) {
            return Err(ConfigError {
                var: "PARLEY_A2A_CALL_TIMEOUT",
                message: "must be more than 0 and at most 5 minutes".into(),
            });
        }
        let w = d.webhooks;
        let webhooks = WebhookConfig {
            timeout: duration("PARLEY_WEBHOOK_TIMEOUT", w.timeout)?,
            retry_first: duration("PARLEY_WEBHOOK_RETRY_FIRST", w.retry_first)?,
            retry_for: duration("PARLEY_WEBHOOK_RETRY_FOR", w.retry_for)?,
            disable_after: duration("PARLEY_WEBHOOK_DISABLE_AFTER", w.disable_after)?,
            secret_overlap: duration("PARLEY_WEBHOOK_SECRET_OVERLAP", w.secret_overlap)?,
            concurrency: within("PARLEY_WEBHOOK_CONCURRENCY", w.concurrency, 1, 1_000)?,
            log_retention: duration("PARLEY_WEBHOOK_LOG_RETENTION", w.log_retention)?,
            max_per_owner: within("PARLEY_MAX_WEBHOOKS_PER_OWNER", w.max_per_owner, 1, 10_000)?,
            poll: duration("PARLEY_OUTBOX_POLL", w.poll)?,
            workers: within("PARLEY_OUTBOX_WORKERS", w.workers, 1, 10_000)?,
        };
        if webhooks.timeout > Duration::from_secs(300) {
            return Err(ConfigError { var: "PARLEY_WEBHOOK_TIMEOUT", message: "must be at most 5 minutes".into() });
        }
        let a2a_calls_per_agent = within("PARLEY_A2A_CALLS_PER_AGENT", d.a2a_calls_per_agent, 1, 1_000)?;
        let a2a_calls_max = within("PARLEY_A2A_CALLS_MAX", d.a2a_calls_max, 1, 100_000)?;
        let schema_check_threads = within("PARLEY_SCHEMA_CHECK_THREADS", d.schema_check_threads, 1, 64)?;
        let schema_cache_mib = within("PARLEY_SCHEMA_CACHE_MIB", d.schema_cache_mib, 1, 65_536)?;
        let max_agents_per_user = within("PARLEY_MAX_AGENTS_PER_USER", d.max_agents_per_user, 1, 1_000_000)?;
        let max_capabilities_per_user =
            within("PARLEY_MAX_CAPABILITIES_PER_USER", d.max_capabilities_per_user, 1, 1_000_000)?;
        let max_keys_per_user = within("PARLEY_MAX_KEYS_PER_USER", d.max_keys_per_user, 1, 1_000_000)?;
        let min_trust = number("PARLEY_MIN_TRUST", d.min_trust)?;
        if min_trust > 100 {
            return Err(ConfigError { var: "PARLEY_MIN_TRUST", message: "must be a percentile from 0 to 100".into() });
        }
        // `0` is allowed here: the system negotiator takes such a turn at once.
        let park_timeout_offline = match var("PARLEY_PARK_TIMEOUT_OFFLINE") {
            Some(v) if v == "0" || v == "0s" => Duration::ZERO,
            _ => duration("PARLEY_PARK_TIMEOUT_OFFLINE", d.park_timeout_offline)?,
        };
        // An agent that keeps polling is marked seen at least every 15 s (the write throttle) plus
        // one long-poll; the window must be longer than that or a polling agent would look offline.
        let agent_liveness = duration("PARLEY_AGENT_LIVENESS", d.agent_liveness)?;
        let long_poll_max = duration("PARLEY_LONG_POLL_MAX", d.long_poll_max)?;
        if agent_liveness <= SEEN_WRITE_EVERY + long_poll_max {
            return Err(ConfigError {
                var: "PARLEY_AGENT_LIVENESS",
                message: "must be longer than 15s plus PARLEY_LONG_POLL_MAX".into(),
            });
        }
        Ok(Config {
            database_url,
            bind,
            data_dir: var("PARLEY_DATA_DIR").map(PathBuf::from).unwrap_or(d.data_dir),
            jwt_secret: jwt_secret.map(SecretString::from),
            claim_timeout: duration("PARLEY_CLAIM_TIMEOUT", d.claim_timeout)?,
            park_timeout: duration("PARLEY_PARK_TIMEOUT", d.park_timeout)?,
            park_timeout_offline,
            agent_liveness,
            pvp_timeout: duration("PARLEY_PVP_TIMEOUT", d.pvp_timeout)?,
            pending_ttl: duration("PARLEY_PENDING_TTL", d.pending_ttl)?,
            ask_timeout: duration("PARLEY_ASK_TIMEOUT", d.ask_timeout)?,
            long_poll_max,
            turn_caps: TurnCaps {
                system: number("PARLEY_MAX_TURNS_SYSTEM", d.turn_caps.system)?,
                mixed: number("PARLEY_MAX_TURNS_MIXED", d.turn_caps.mixed)?,
                personal: number("PARLEY_MAX_TURNS_PERSONAL", d.turn_caps.personal)?,
            },
            skill_files: var("PARLEY_SKILLS")
                .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(PathBuf::from).collect())
                .unwrap_or_default(),
            wordnet_dir: match var("PARLEY_WORDNET_DIR") {
                Some(v) if v.trim().is_empty() => {
                    return Err(ConfigError { var: "PARLEY_WORDNET_DIR", message: "must name a folder".into() });
                }
                Some(v) => PathBuf::from(v.trim()),
                None => d.wordnet_dir.clone(),
            },
            embeddings,
            negotiator_model,
            log_format,
            pool_size,
            timer_poll: duration("PARLEY_TIMER_POLL", d.timer_poll)?,
            housekeeping_every: duration("PARLEY_HOUSEKEEPING_EVERY", d.housekeeping_every)?,
            history_retention,
            workers: true,
            http_header_timeout: duration("PARLEY_HTTP_HEADER_TIMEOUT", d.http_header_timeout)?,
            http_idle_timeout: duration("PARLEY_HTTP_IDLE_TIMEOUT", d.http_idle_timeout)?,
            http_max_connections: at_least("PARLEY_HTTP_MAX_CONNECTIONS", d.http_max_connections, 1)?,
            http_body_timeout: duration("PARLEY_HTTP_BODY_TIMEOUT", d.http_body_timeout)?,
            http_body_deadline: duration("PARLEY_HTTP_BODY_DEADLINE", d.http_body_deadline)?,
            sse_per_token,
            sse_per_user,
            sse_max,
            a2a_streams_per_agent,
            a2a_streams_per_user,
            public_url,
            jwt_max_ttl: duration("PARLEY_JWT_MAX_TTL", d.jwt_max_ttl)?,
            auth_failure_burst,
            auth_failure_refill: duration("PARLEY_AUTH_FAILURE_REFILL", d.auth_failure_refill)?,
            metrics,
            metrics_bind,
            min_trust,
            anonymous_id_ttl: duration("PARLEY_ANONYMOUS_ID_TTL", d.anonymous_id_ttl)?,
            delegation_accept_timeout: duration("PARLEY_DELEGATION_ACCEPT_TIMEOUT", d.delegation_accept_timeout)?,
            delegation_min_timeout,
            outbound_rate,
            inbound_rate,
            trust_per_requester,
            schema_check_timeout: duration("PARLEY_SCHEMA_CHECK_TIMEOUT", d.schema_check_timeout)?,
            schema_check_threads,
            schema_check_budget: duration("PARLEY_SCHEMA_CHECK_BUDGET", d.schema_check_budget)?,
            schema_cache_mib,
            max_agents_per_user,
            max_capabilities_per_user,
            max_keys_per_user,
            input_failure_burst,
            input_failure_refill: duration("PARLEY_INPUT_FAILURE_REFILL", d.input_failure_refill)?,
            a2a_allow_private_targets,
            a2a_call_timeout,
            a2a_calls_per_agent,
            a2a_calls_max,
            webhooks,
        })
    }
}

/// A duration as people write it and as the variables above accept it: whole days, hours,
/// minutes and seconds (`90d`, `1d 12h`, `45m`, `1h 30m 5s`, `0s`), never the months of 30.44
/// days that `humantime` prints (`90d` would read "2months 29days 2h 52m 48s").
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let parts: Vec<String> = [(secs / 86_400, "d"), (secs / 3600 % 24, "h"), (secs / 60 % 60, "m"), (secs % 60, "s")]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    if parts.is_empty() { "0s".to_owned() } else { parts.join(" ") }
}

/// A listen address: an IP address and port (`127.0.0.1:8080`, `[::1]:8080`), or a host name
/// and port (`localhost:8080`) resolved once, at start; a name with IPv4 addresses listens on
/// the first of them.
fn listen_address(var: &'static str, value: &str, example: &str) -> Result<SocketAddr, ConfigError> {
    if let Ok(address) = value.parse() {
        return Ok(address);
    }
    let bad = |why: String| ConfigError { var, message: format!("{value:?} is not an address like {example}: {why}") };
    let resolved: Vec<SocketAddr> =
        std::net::ToSocketAddrs::to_socket_addrs(value).map_err(|e| bad(e.to_string()))?.collect();
    resolved
        .iter()
        .find(|a| a.is_ipv4())
        .or(resolved.first())
        .copied()
        .ok_or_else(|| bad("the name resolves to no address".to_owned()))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    #[test]
    fn durations_are_written_in_days_hours_minutes_and_seconds() {
        let s = |secs: u64| super::format_duration(Duration::from_secs(secs));
        assert_eq!(s(90 * 86_400), "90d");
        assert_eq!(s(30 * 86_400), "30d");
        assert_eq!(s(36 * 3600), "1d 12h");
        assert_eq!(s(5405), "1h 30m 5s");
        assert_eq!(s(0), "0s");
        // What it prints parses back to the same duration.
        for secs in [1, 59, 3600, 90 * 86_400 + 61] {
            assert_eq!(humantime::parse_duration(&s(secs)).unwrap(), Duration::from_secs(secs));
        }
    }

    use super::*;

    fn load(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_match_the_design() {
        let c = load(&[]).unwrap();
        assert_eq!(c.bind.to_string(), "127.0.0.1:8080");
        assert_eq!(c.claim_timeout, Duration::from_secs(21_600));
        assert_eq!(c.park_timeout, Duration::from_secs(86_400));
        assert_eq!(c.pvp_timeout, Duration::from_secs(86_400));
        assert_eq!(c.pending_ttl, Duration::from_secs(14 * 86_400));
        assert_eq!(c.long_poll_max, Duration::from_secs(30));
        assert_eq!((c.park_timeout_offline, c.agent_liveness), (Duration::from_secs(300), Duration::from_secs(90)));
        assert_eq!(c.turn_caps, TurnCaps { system: 6, mixed: 8, personal: 0 });
        assert_eq!(c.log_format, LogFormat::Pretty);
        assert!(c.database_url.is_none() && c.jwt_secret.is_none() && c.embeddings.is_none());
        assert_eq!(
            (c.http_header_timeout, c.http_idle_timeout, c.http_body_timeout),
            (Duration::from_secs(10), Duration::from_secs(60), Duration::from_secs(30))
        );
        assert_eq!(c.jwt_max_ttl, Duration::from_secs(30 * 86_400));
        assert_eq!((c.auth_failure_burst, c.auth_failure_refill), (30, Duration::from_millis(250)));
        assert_eq!(c.delegation_min_timeout, Duration::from_secs(1));
        assert_eq!((c.outbound_rate, c.inbound_rate, c.trust_per_requester), (20, 10, 3));
        assert_eq!(c.http_body_deadline, Duration::from_secs(30));
        assert_eq!((c.sse_per_token, c.sse_per_user, c.sse_max), (4, 16, 4096));
        assert_eq!(
            (c.schema_check_threads, c.schema_check_budget, c.schema_cache_mib),
            (2, Duration::from_secs(5), 64)
        );
        assert_eq!((c.max_agents_per_user, c.max_capabilities_per_user, c.max_keys_per_user), (50, 200, 100));
        assert!(!c.a2a_allow_private_targets);
        assert!(load(&[("PARLEY_A2A_ALLOW_PRIVATE_TARGETS", "true")]).unwrap().a2a_allow_private_targets);
        let w = c.webhooks;
        assert_eq!((w.timeout, w.retry_first), (Duration::from_secs(15), Duration::from_secs(5)));
        assert_eq!((w.retry_for, w.disable_after), (Duration::from_secs(3 * 86_400), Duration::from_secs(5 * 86_400)));
        assert_eq!((w.secret_overlap, w.concurrency, w.max_per_owner), (Duration::from_secs(86_400), 4, 10));
    }

    #[test]
    fn humantime_durations_and_lists_are_parsed() {
        let c = load(&[
            ("PARLEY_CLAIM_TIMEOUT", "30s"),
            ("PARLEY_PENDING_TTL", "2d"),
            ("PARLEY_SKILLS", "a.yaml, b.json"),
            ("PARLEY_MAX_TURNS_PERSONAL", "12"),
            ("PARLEY_EMBEDDINGS_URL", "http://localhost:9/v1/"),
        ])
        .unwrap();
        assert_eq!(c.claim_timeout, Duration::from_secs(30));
        assert_eq!(c.pending_ttl, Duration::from_secs(172_800));
        assert_eq!(c.skill_files, vec![PathBuf::from("a.yaml"), PathBuf::from("b.json")]);
        assert_eq!(c.turn_caps.personal, 12);
        let e = c.embeddings.unwrap();
        assert_eq!((e.url.as_str(), e.model.as_str()), ("http://localhost:9/v1", "text-embedding-3-small"));
        assert_eq!(e.max_answer, 16 << 20);
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let c = load(&[
            ("PARLEY_JWT_SECRET", "jwt-secret-that-must-not-leak"),
            ("PARLEY_EMBEDDINGS_URL", "http://127.0.0.1:9/v1"),
            ("PARLEY_EMBEDDINGS_API_KEY", "sk-embeddings-must-not-leak"),
            ("PARLEY_NEGOTIATOR_MODEL_URL", "http://127.0.0.1:9/v1"),
            ("PARLEY_NEGOTIATOR_MODEL", "m"),
            ("PARLEY_NEGOTIATOR_MODEL_API_KEY", "sk-model-must-not-leak"),
        ])
        .unwrap();
        let printed = format!("{c:?}");
        assert!(!printed.contains("must-not-leak"), "{printed}");
        assert!(c.jwt_secret.is_some() && c.embeddings.unwrap().api_key.is_some());
    }

    #[test]
    fn history_is_kept_for_ever_unless_a_retention_is_given() {
        assert_eq!(load(&[]).unwrap().history_retention, None);
        assert_eq!(load(&[("PARLEY_HISTORY_RETENTION", "off")]).unwrap().history_retention, None);
        let c = load(&[("PARLEY_HISTORY_RETENTION", "365d")]).unwrap();
        assert_eq!(c.history_retention, Some(Duration::from_secs(365 * 86_400)));
        for bad in ["0s", "a year", "-1d"] {
            let e = load(&[("PARLEY_HISTORY_RETENTION", bad)]).unwrap_err();
            assert_eq!(e.var, "PARLEY_HISTORY_RETENTION", "{bad}");
        }
    }

    #[test]
    fn the_negotiator_model_needs_a_name_and_gets_defaults() {
        assert!(load(&[]).unwrap().negotiator_model.is_none());
        let m =
            load(&[("PARLEY_NEGOTIATOR_MODEL_URL", "http://127.0.0.1:9/v1/"), ("PARLEY_NEGOTIATOR_MODEL", "judge")])
                .unwrap()
                .negotiator_model
                .unwrap();
        assert_eq!(
            (m.url.as_str(), m.model.as_str(), m.timeout, m.concurrency, m.max_answer),
            ("http://127.0.0.1:9/v1", "judge", Duration::from_secs(20), 4, 1 << 20)
        );
        let model = [("PARLEY_NEGOTIATOR_MODEL_URL", "http://127.0.0.1:9/v1"), ("PARLEY_NEGOTIATOR_MODEL", "judge")];
        let sized = load(&[model[0], model[1], ("PARLEY_NEGOTIATOR_MODEL_ANSWER_MIB", "4")]).unwrap();
        assert_eq!(sized.negotiator_model.unwrap().max_answer, 4 << 20);
        for bad in ["0", "1025", "1.5", "lots"] {
            let e = load(&[model[0], model[1], ("PARLEY_NEGOTIATOR_MODEL_ANSWER_MIB", bad)]).unwrap_err();
            assert_eq!(e.var, "PARLEY_NEGOTIATOR_MODEL_ANSWER_MIB", "{bad}");
        }
        let e = load(&[("PARLEY_NEGOTIATOR_MODEL_URL", "http://127.0.0.1:9/v1")]).unwrap_err();
        assert_eq!(e.var, "PARLEY_NEGOTIATOR_MODEL");
        let e =
            load(&[("PARLEY_NEGOTIATOR_MODEL_URL", "127.0.0.1:9"), ("PARLEY_NEGOTIATOR_MODEL", "judge")]).unwrap_err();
        assert_eq!(e.var, "PARLEY_NEGOTIATOR_MODEL_URL");
    }

    #[test]
    fn the_offline_park_window_may_be_zero() {
        assert_eq!(load(&[("PARLEY_PARK_TIMEOUT_OFFLINE", "0")]).unwrap().park_timeout_offline, Duration::ZERO);
        assert_eq!(
            load(&[("PARLEY_PARK_TIMEOUT_OFFLINE", "45s")]).unwrap().park_timeout_offline,
            Duration::from_secs(45)
        );
    }

    #[test]
    fn a_listen_address_may_name_a_host() {
        let c = load(&[("PARLEY_BIND", "localhost:18082"), ("PARLEY_METRICS_BIND", "[::1]:9090")]).unwrap();
        assert!(c.bind.ip().is_loopback() && c.bind.port() == 18082, "{}", c.bind);
        assert_eq!(c.metrics_bind.unwrap().to_string(), "[::1]:9090");
        let err = load(&[("PARLEY_BIND", "no-such-host.invalid:8080")]).unwrap_err();
        assert!(err.to_string().contains("PARLEY_BIND"), "{err}");
    }

    #[test]
    fn a_bad_value_names_its_variable() {
        for (var, value) in [
            ("PARLEY_CLAIM_TIMEOUT", "soon"),
            ("PARLEY_PARK_TIMEOUT", "0s"),
            ("PARLEY_BIND", "localhost"),
            ("PARLEY_MAX_TURNS_MIXED", "-1"),
            ("PARLEY_LOG_FORMAT", "xml"),
            ("DATABASE_URL", "mysql://x"),
            ("PARLEY_JWT_SECRET", "short"),
            ("PARLEY_EMBEDDINGS_URL", "ftp://x"),
            ("PARLEY_DB_POOL_SIZE", "1"),
            ("PARLEY_HTTP_HEADER_TIMEOUT", "0s"),
            ("PARLEY_HTTP_IDLE_TIMEOUT", "later"),
            ("PARLEY_HTTP_BODY_TIMEOUT", "-3s"),
            ("PARLEY_JWT_MAX_TTL", "forever"),
            ("PARLEY_AUTH_FAILURE_BURST", "0"),
            ("PARLEY_AUTH_FAILURE_REFILL", "0s"),
            ("PARLEY_AGENT_LIVENESS", "40s"),
            ("PARLEY_PARK_TIMEOUT_OFFLINE", "-1s"),
            ("PARLEY_TRUST_PER_REQUESTER", "0"),
            ("PARLEY_OUTBOUND_RATE", "lots"),
            ("PARLEY_INBOUND_RATE", "20000"),
            ("PARLEY_DELEGATION_MIN_TIMEOUT", "2d"),
            ("PARLEY_INPUT_FAILURE_BURST", "0"),
            ("PARLEY_HTTP_BODY_DEADLINE", "0s"),
            ("PARLEY_SSE_PER_TOKEN", "0"),
            ("PARLEY_SSE_MAX", "many"),
            ("PARLEY_SCHEMA_CHECK_THREADS", "100"),
            ("PARLEY_SCHEMA_CHECK_BUDGET", "0s"),
            ("PARLEY_SCHEMA_CACHE_MIB", "0"),
            ("PARLEY_MAX_AGENTS_PER_USER", "0"),
            ("PARLEY_MAX_KEYS_PER_USER", "-2"),
            ("PARLEY_A2A_ALLOW_PRIVATE_TARGETS", "yes"),
            ("PARLEY_WEBHOOK_TIMEOUT", "10m"),
            ("PARLEY_WEBHOOK_RETRY_FOR", "0s"),
            ("PARLEY_WEBHOOK_CONCURRENCY", "0"),
            ("PARLEY_OUTBOX_POLL", "often"),
        ] {
            let err = load(&[(var, value)]).unwrap_err();
            assert_eq!(err.var, var);
            assert!(err.to_string().starts_with(var), "{err}");
        }
    }
}
