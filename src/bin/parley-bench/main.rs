//! `parley-bench`: measures a real Parley, started in this process, against baselines measured
//! in the same run on the same machine. See BENCHMARKS.md for what each figure
//! means and for the numbers of a full run.
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres parley-bench [--quick] [--json]
//! ```
//!
//! It creates (and drops at the end) its own scratch databases `parley_bench_<pid>` and
//! `parley_bench_<pid>_pgbench` on that server; without `DATABASE_URL` it starts the embedded
//! PostgreSQL in a temporary directory. Everything runs over loopback; every loop is bounded in
//! count and in time.
//!
//! This file holds the command line, the sizes of a run and the order of its phases. Each phase
//! has a module of its own (`cycles`, `floors`, `wakeups`, `svs`, `assessment`, `longpolls`,
//! `directory`, `delegation`, `metrics`, `liveness`, `decisions`, `webhooks`, `history`); the pieces they share are the started
//! service and its calls (`harness`, `agent`), the database server (`server`), the measurement
//! windows (`timing`), the arithmetic on samples (`stats`), what a phase costs (`cost`) and the
//! results with their table (`report`).

mod agent;
mod assessment;
mod cost;
mod cycles;
mod decisions;
mod delegation;
mod directory;
mod floors;
mod harness;
mod history;
mod liveness;
mod longpolls;
mod metrics;
mod report;
mod server;
mod stats;
mod svs;
mod timing;
mod wakeups;
mod webhooks;

use std::{sync::Arc, time::Instant};

use clap::Parser;

use crate::{
    delegation::DELEGATION_SECS,
    harness::Bench,
    report::{Results, note, print_table},
    server::Server,
};

/// Command line.
#[derive(Debug, Parser)]
#[command(name = "parley-bench", about = "Benchmarks a Parley started in process")]
struct Args {
    /// Short run (under a minute on 2 cores): fewer turns, wakes and seconds per phase.
    #[arg(long)]
    quick: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Connections in Parley's pool (PARLEY_DB_POOL_SIZE).
    #[arg(long, default_value_t = 16)]
    pool_size: u32,
    /// Concurrent agents (and pgbench clients) of the turn-cycle phase.
    #[arg(long, default_value_t = 32)]
    agents: usize,
    /// Run only these phases (comma-separated: cycles,pgbench,wake,svs,assess,longpoll,directory;
    /// `delegation` (request, accept, complete round trips over HTTP, the same round trips asked over A2A, then the same work's SQL
    /// under pgbench); `metrics` (recording flipped on and off every half second within one 90 s
    /// turn-cycle phase) and `liveness` (the agents' `last_seen_at` writes off and on, round by
    /// round), never part of a default run, compare the turn cycle with and without them;
    /// `history`, never part of a default run, seeds a year of finished
    /// negotiations and delegations at each size of `--history` and measures the reads beside
    /// it; `webhooks`, never part of a default run, delivers every event of system-vs-system
    /// negotiations to a webhook on loopback (event-to-delivery latency) and then a backlog of
    /// them (deliveries per second); `decisions`, never part of a default run, plays the people
    /// of the labelled scenario sets twice and reads what each decision of the system
    /// negotiator took; `floor` is the SQL floor alone
    /// (also part of `pgbench`); `floor-variants`, never part of a default run, measures the floor
    /// with timer-row moves and with a NOTIFY added).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Seconds the delegation phase measures (after its warm-up). Its rate windows span 60 s,
    /// so only a run longer than that shows their cost at a steady rate.
    #[arg(long, default_value_t = DELEGATION_SECS)]
    delegation_secs: u64,
    /// Sizes of the history phase: finished negotiations (and as many finished delegations)
    /// seeded before its measurements, each size on a scratch database of its own.
    #[arg(long, value_delimiter = ',', default_values_t = [0u64, 100_000])]
    history: Vec<u64>,
    /// Keep each size's history database after the phase, renamed `parley_history_<N>` (it is
    /// dropped and made afresh by the next kept run), and skip the pruning, so that the year as
    /// seeded can be looked at by hand (`EXPLAIN ANALYZE` on the very rows measured).
    #[arg(long)]
    history_keep: bool,
}

/// Sizes of one run.
struct Plan {
    negotiations_per_agent: usize,
    cycle_secs: u64,
    pgbench_secs: u64,
    pgbench_scale: u32,
    wakes: usize,
    svs_secs: u64,
    assess_inprocess_secs: u64,
    http_secs: u64,
    longpolls: usize,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                negotiations_per_agent: 40,
                cycle_secs: 5,
                pgbench_secs: 5,
                pgbench_scale: 10,
                wakes: 300,
                svs_secs: 3,
                assess_inprocess_secs: 1,
                http_secs: 3,
                longpolls: 1000,
            }
        } else {
            Plan {
                negotiations_per_agent: 150,
                cycle_secs: 30,
                pgbench_secs: 30,
                pgbench_scale: 10,
                wakes: 2000,
                svs_secs: 15,
                assess_inprocess_secs: 5,
                http_secs: 10,
                longpolls: 1000,
            }
        }
    }
}

/// Runs the phases `args` asks for, in a fixed order, and returns what they measured.
async fn run(args: Args) -> anyhow::Result<Results> {
    let plan = Plan::new(args.quick);
    // A default phase runs unless `--only` leaves it out; the others only when `--only` names them.
    let named = |name: &str| args.only.iter().any(|o| o == name);
    let phase = |name: &str| args.only.is_empty() || named(name);
    let mut r = Results::new();
    r.set("mode", if args.quick { "quick" } else { "full" });
    r.set("load_before", cost::load_average());
    r.set("cores", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0));
    r.set("pool_size", args.pool_size);
    let began = Instant::now();
    let server = Server::open().await?;
    let outcome = async {
        let bench = Arc::new(Bench::start(&server.url(&server.app_db)?, args.pool_size).await?);
        let result = async {
            if phase("cycles") {
                cycles::turn_cycles(&bench, &plan, args.agents, &mut r).await?;
            }
            if phase("pgbench") {
                floors::pgbench(&server, &plan, args.agents, &mut r)?;
            }
            if phase("pgbench") || phase("floor") {
                floors::sql_floor(&server, &plan, args.agents, &[("sql_floor_tps", false, false)], &mut r).await?;
            }
            if named("floor-variants") {
                let variants = [
                    ("sql_floor_tps", false, false),
                    ("sql_floor_timers_tps", true, false),
                    ("sql_floor_timers_notify_tps", true, true),
                ];
                floors::sql_floor(&server, &plan, args.agents, &variants, &mut r).await?;
            }
            if let (Some(c), Some(p)) = (r.number("turn_cycles_per_s"), r.number("pgbench_tps")) {
                r.set_rounded("turn_cycle_ratio", c / p, 3);
            }
            if phase("wake") {
                wakeups::wake_latency(&bench, &plan, &mut r).await?;
            }
            if phase("svs") {
                svs::svs(&bench, &plan, &mut r).await?;
            }
            if phase("assess") {
                assessment::assess(&bench, &plan, &mut r).await?;
            }
            if phase("longpoll") {
                longpolls::longpolls(&bench, &plan, &mut r).await?;
            }
            if phase("directory") {
                directory::directory(&bench, &plan, &mut r).await?;
            }
            if named("delegation") {
                delegation::delegation(&bench, &mut r, args.delegation_secs).await?;
                delegation::a2a_delegation(&bench, &mut r, args.delegation_secs).await?;
                floors::delegation_floor(&server, &bench, args.delegation_secs, &mut r).await?;
            }
            if named("metrics") {
                metrics::metrics_overhead(&bench, args.agents, &mut r).await?;
            }
            if named("liveness") {
                liveness::liveness_overhead(&bench, &plan, args.agents, &mut r).await?;
            }
            if named("decisions") {
                decisions::decisions(&bench, &mut r).await?;
            }
            if named("webhooks") {
                webhooks::webhooks(&bench, if args.quick { 5 } else { 20 }, &mut r).await?;
            }
            if named("history") {
                history::history(&server, &args.history, args.history_keep, args.pool_size, args.agents, &mut r)
                    .await?;
            }
            anyhow::Ok(())
        }
        .await;
        match Arc::try_unwrap(bench) {
            Ok(b) => b.shutdown().await,
            Err(_) => note("the service is still referenced; not waiting for its shutdown"),
        }
        result
    }
    .await;
    server.drop_databases().await;
    outcome?;
    r.set("load_after", cost::load_average());
    r.set_rounded("elapsed_s", began.elapsed().as_secs_f64(), 1);
    Ok(r)
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let json_out = args.json;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    match runtime.block_on(run(args)) {
        Ok(r) => {
            if json_out {
                println!("{}", serde_json::to_string(&r).unwrap_or_default());
            } else {
                print_table(&r);
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("parley-bench: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
