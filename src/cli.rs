//! The command line: `serve`, `worker`, `migrate`, `token`, `assess`, `openapi`, `agent`. Thin:
//! parse, load config, call the library.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};

use crate::{
    app::{self, Application},
    auth::{CallerRole, JwtKeys},
    config::Config,
    scoring,
};

/// Parley: bilateral agent negotiation with polling turn delivery.
#[derive(Debug, Parser)]
#[command(name = "parley", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP API and the timer workers. Without DATABASE_URL, starts a private
    /// PostgreSQL in PARLEY_DATA_DIR and stops it on exit.
    Serve {
        /// Serve the API only; run timer workers elsewhere (`parley worker`).
        #[arg(long)]
        no_workers: bool,
    },
    /// Run the timer workers only (no HTTP) on the API's database (DATABASE_URL, required);
    /// any number may share it.
    Worker,
    /// Create the database if missing and run the migrations, then exit.
    Migrate,
    /// Print a JWT signed with the service's secret (PARLEY_JWT_SECRET, or the one `parley serve`
    /// generated in PARLEY_DATA_DIR; this command never makes one).
    Token {
        /// The subject (user id, or the platform's name for a service token).
        #[arg(long)]
        sub: String,
        /// `user`, `service` or `admin`.
        #[arg(long, default_value = "user")]
        role: String,
        /// How long the token is valid (humantime, e.g. 1h, 30d); at most PARLEY_JWT_MAX_TTL.
        #[arg(long, default_value = "1h")]
        ttl: String,
    },
    /// Assess a task against a skills file offline; prints the `/agent/negotiation` JSON.
    Assess {
        /// Skill file (JSON or YAML; one skill or a list).
        #[arg(long)]
        skills: PathBuf,
        /// Request file (the `/agent/negotiation` body).
        #[arg(long)]
        request: PathBuf,
        /// Tasks in the agent's queue; unknown when omitted.
        #[arg(long)]
        queue_depth: Option<i64>,
        /// The agent's price (turns pricing on, like Bindu's x402 amount).
        #[arg(long)]
        price: Option<String>,
    },
    /// Print the OpenAPI 3.1 description of the HTTP API (what `api-spec/openapi.json` holds).
    Openapi,
    /// Run a personal agent: play the user's turns (and, with --delegations, serve the agent's
    /// delegation inbox) with a program (--exec) or an OpenAI-compatible model (--llm).
    Agent(AgentArgs),
}

/// The arguments of `parley agent`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("worker").required(true).args(["exec", "llm"]))]
pub struct AgentArgs {
    /// The Parley service's base URL (`http://127.0.0.1:8080`; a trailing `/api` is allowed).
    #[arg(long, env = "PARLEY_URL")]
    pub url: Option<String>,
    /// The agent's API key (`pk_...`); it alone names the agent. Prefer the environment
    /// variable: a command line is visible to other users of the machine (the runner takes the
    /// key out of its environment at once, see `agent::secrets`).
    #[arg(long, env = "PARLEY_AGENT_KEY", hide_env_values = true)]
    pub key: Option<String>,
    /// A shell command run once per item: the item as JSON on stdin, one JSON answer on stdout.
    #[arg(long, value_name = "CMD")]
    pub exec: Option<String>,
    /// An OpenAI-compatible API's base URL (`URL/chat/completions` is asked); its key, if it
    /// needs one, in PARLEY_LLM_API_KEY.
    #[arg(long, value_name = "URL", requires = "model")]
    pub llm: Option<String>,
    /// The model to ask (with --llm).
    #[arg(long, value_name = "NAME", requires = "llm")]
    pub model: Option<String>,
    /// The model's API key (never sent anywhere but the model's URL).
    #[arg(long = "llm-api-key", env = "PARLEY_LLM_API_KEY", hide = true, hide_env_values = true)]
    pub llm_api_key: Option<String>,
    /// Play the user's turns (the default when neither --turns nor --delegations is given).
    #[arg(long)]
    pub turns: bool,
    /// Serve the agent's delegation inbox (add --turns to play turns as well).
    #[arg(long)]
    pub delegations: bool,
    /// Most delegations worked on at once (turns come one at a time besides).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
    /// On SIGTERM or Ctrl-C, how long the items in hand may take to finish before they are given back.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub grace: Duration,
    /// The longest the program or model may take on one item (a delegation also stops at its
    /// attempt's deadline).
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Log one JSON object per line instead of text.
    #[arg(long)]
    pub json_logs: bool,
}

/// Runs the parsed command; the exit code is 2 for bad input, 1 for failures.
pub async fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Assess { skills, request, queue_depth, price } => assess(&skills, &request, queue_depth, price),
        Command::Openapi => {
            print!("{}", crate::openapi::spec_text());
            ExitCode::SUCCESS
        }
        Command::Agent(args) => agent(args).await,
        command => {
            let config = match Config::from_env() {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("parley: configuration error: {e}");
                    return ExitCode::from(2);
                }
            };
            crate::telemetry::init(config.log_format);
            match run_with_config(command, config).await {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("parley: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

async fn run_with_config(command: Command, config: Config) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve { no_workers } => {
            // A bad skill file stops the start before anything else happens.
            app::hub_skills(&config)?;
            // The lexicon next: the log says at once whether the negotiator has word senses.
            app::load_lexicon(&config);
            // The secret first: `parley token` can mint tokens while the database starts.
            app::ensure_jwt_secret(&config)?;
            let database = app::open_database(&config).await?;
            tracing::info!("database: {}", database.describe());
            if let Some(files) = crate::http::serve::raise_open_file_limit() {
                tracing::info!(open_files = files, "open-file limit");
            }
            let config = Config { database_url: Some(database.url.clone()), workers: !no_workers, ..config };
            let app = Application::build(config, database.pool.clone()).await?;
            tracing::info!("mint a token: {}", token_command(app.state().engine.config()));
            app.run_until_stopped(app::shutdown_signal()).await?;
            database.pool.close().await;
            drop(database);
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker => {
            if config.database_url.is_none() {
                eprintln!(
                    "parley: `parley worker` needs DATABASE_URL: its timers live in the database the API \
                     uses, and a private embedded one would share nothing with it. Set DATABASE_URL to \
                     that database (`parley serve` logs which one it uses at start), or run the timers \
                     inside `parley serve` (without --no-workers)"
                );
                return Ok(ExitCode::from(2));
            }
            if let Err(e) = app::jwt_secret(&config) {
                eprintln!("parley: {e}");
                return Ok(ExitCode::from(2));
            }
            let database = app::open_database(&config).await?;
            tracing::info!("database: {}", database.describe());
            let config = Config { database_url: Some(database.url.clone()), ..config };
            let services = Application::build_services(config, database.pool.clone())?;
            services.engine.recover(Duration::ZERO).await?;
            app::run_workers(services, app::shutdown_signal()).await?;
            database.pool.close().await;
            drop(database);
            Ok(ExitCode::SUCCESS)
        }
        Command::Migrate => {
            let database = app::open_database(&config).await?;
            database.pool.close().await;
            eprintln!("parley: migrations applied");
            Ok(ExitCode::SUCCESS)
        }
        Command::Token { sub, role, ttl } => {
            let Some(role) = CallerRole::parse(&role) else {
                eprintln!("parley: --role must be user, service or admin");
                return Ok(ExitCode::from(2));
            };
            let ttl: Duration = match humantime::parse_duration(&ttl) {
                Ok(d) if !d.is_zero() => d,
                _ => {
                    eprintln!(
                        "parley: --ttl {ttl:?} is not a lifetime: give one such as 1h, 30m or 7d (at most {}, \
                         PARLEY_JWT_MAX_TTL; tokens always expire)",
                        crate::config::format_duration(config.jwt_max_ttl)
                    );
                    return Ok(ExitCode::from(2));
                }
            };
            if ttl > config.jwt_max_ttl {
                eprintln!(
                    "parley: --ttl {} is longer than the longest token lifetime the service accepts \
                     ({}, PARLEY_JWT_MAX_TTL)",
                    crate::config::format_duration(ttl),
                    crate::config::format_duration(config.jwt_max_ttl)
                );
                return Ok(ExitCode::from(2));
            }
            if sub.trim().is_empty() {
                eprintln!("parley: --sub must not be empty");
                return Ok(ExitCode::from(2));
            }
            // Only `serve` makes a secret: one made here would sign tokens the service refuses.
            let secret = match app::jwt_secret(&config) {
                Ok(secret) => secret,
                Err(e) => {
                    eprintln!("parley: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            println!("{}", JwtKeys::new(secret.as_bytes()).mint(&sub, role, ttl)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Assess { .. } | Command::Openapi | Command::Agent(_) => unreachable!("handled without configuration"),
    }
}

/// The `parley token` command line that mints tokens this service accepts: run with the same
/// secret, i.e. the same `PARLEY_JWT_SECRET`, or the data directory the secret was generated in.
/// A service started by `cargo run` (which sets `CARGO` for what it runs) is told the same way
/// back: `cargo run -q -- token ...`, as the README's tour mints them.
fn token_command(config: &Config) -> String {
    let parley = if std::env::var_os("CARGO").is_some() { "cargo run -q --" } else { "parley" };
    let args = format!("{parley} token --sub <user id> [--role user|service|admin] [--ttl 1h]");
    if config.jwt_secret.is_some() {
        format!("{args} (with the same PARLEY_JWT_SECRET)")
    } else {
        let dir = config.data_dir.canonicalize().unwrap_or_else(|_| config.data_dir.clone());
        format!("PARLEY_DATA_DIR={} {args}", dir.display())
    }
}

/// `parley agent`: runs until SIGTERM or Ctrl-C (exit 0), or until the service refuses the key
/// (exit 1); 2 for arguments that cannot work.
async fn agent(args: AgentArgs) -> ExitCode {
    use crate::agent::secrets;
    // Keys in the environment: start again without them (this returns only on failure).
    if let Err(e) = secrets::hide_from_proc() {
        eprintln!("parley: could not take the keys out of the environment: {e}");
        return ExitCode::from(1);
    }
    let handed = match secrets::handed_over() {
        Ok(keys) => keys.unwrap_or_default(),
        Err(e) => {
            eprintln!("parley: could not read the keys handed over: {e}");
            return ExitCode::from(1);
        }
    };
    secrets::not_dumpable();
    crate::telemetry::init_runner(args.json_logs);
    // Both are needed; say how to give each, the environment first (a key on a command line is
    // visible to the machine's other users).
    let key = args.key.or(handed.agent);
    let missing: Vec<&str> = [
        (args.url.is_none(), "the service's URL: PARLEY_URL=http://127.0.0.1:8080 (or --url)"),
        (key.is_none(), "the agent's API key: PARLEY_AGENT_KEY=pk_... (or --key)"),
    ]
    .into_iter()
    .filter_map(|(absent, what)| absent.then_some(what))
    .collect();
    let (Some(url), Some(key)) = (args.url, key) else {
        eprintln!("parley agent needs {}", missing.join("; and "));
        return ExitCode::from(2);
    };
    let worker = match (args.exec, args.llm, args.model) {
        (Some(command), _, _) => crate::agent::WorkerSpec::Exec { command },
        (None, Some(url), Some(model)) => {
            crate::agent::WorkerSpec::Llm { url, model, api_key: args.llm_api_key.or(handed.llm) }
        }
        _ => unreachable!("clap requires --exec, or --llm with --model"),
    };
    let options = crate::agent::Options {
        url,
        key,
        worker,
        turns: args.turns || !args.delegations,
        delegations: args.delegations,
        concurrency: usize::from(args.concurrency),
        grace: args.grace,
        timeout: args.timeout,
    };
    match crate::agent::run(options, app::shutdown_signal()).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e @ crate::agent::RunError::Setup(_)) => {
            eprintln!("parley: {e}");
            ExitCode::from(2)
        }
        Err(e @ crate::agent::RunError::KeyRefused(_)) => {
            eprintln!("parley: {e}");
            ExitCode::from(1)
        }
    }
}

fn assess(
    skills_path: &std::path::Path,
    request: &std::path::Path,
    queue_depth: Option<i64>,
    price: Option<String>,
) -> ExitCode {
    let skills = match scoring::load_skill_file(skills_path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("parley: {e}");
            return ExitCode::from(2);
        }
    };
    for warning in scoring::skill_file_warnings(skills_path, &skills) {
        eprintln!("parley: warning: {warning}");
    }
    let body = match std::fs::read(request) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("parley: reading {}: {e}", request.display());
            return ExitCode::from(2);
        }
    };
    let request = match scoring::parse_request(&body) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("parley: {}: {e}", request.display());
            return ExitCode::from(2);
        }
    };
    if queue_depth.is_some_and(|q| q < 0) {
        eprintln!("parley: --queue-depth must not be negative");
        return ExitCode::from(2);
    }
    let calculator = scoring::Calculator::new(skills, price);
    println!("{}", scoring::assessment_json(&calculator.assess(&request, queue_depth, None)));
    ExitCode::SUCCESS
}
