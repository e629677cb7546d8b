//! The history phase (`--only history`, never in a default run): what a year of finished work
//! costs the reads and the maintenance that run beside new work. For each size N of
//! `--history` (finished negotiations, and as many finished delegations), on a scratch database
//! of its own:
//!
//! 1. Templates: a service with short timers (started here, stopped after) makes a small set of
//!    negotiations and delegations through its real API, one of every kind of ending (agents
//!    accepting or rejecting, the turn cap, the deadline, a cancel, the system negotiator on
//!    one side or both, a fallback; people accepting and declining, an opportunity left to
//!    expire; delegations completed, failed, rejected, timed out, retried on a second target).
//! 2. Clones: `history_seed.sql` copies the templates N times with new ids over the 365 days
//!    before today (users, agents, capabilities, anonymous ids and trust counters in
//!    proportion). Only raw rows are written: whatever the service derives from history
//!    (trust records; summaries of any kind) it derives itself, through its own SQL functions.
//! 3. A check: for a sample of clones, the service's reads (`GET` of the negotiation and of the
//!    opportunity) answer the same shape and the same ending as for their template; the phase
//!    fails otherwise.
//! 4. Measurements with the service started as the bench starts it: its start-up, the reads of
//!    insights, trust, metrics and per-user lists, agent deletion, discovery on a new UTC day
//!    (made by ageing the trust records a day: the service has no clock of its own to move) and
//!    after a directory change, and turn cycles on top of the history; and, beside the API's
//!    agent deletion (which keeps the row), the deletion of an agent's row in SQL.
//!
//! Every figure is `history_<N>_<path>_p50_ms` / `_p95_ms` (or `_per_s`, `_s`, `_bytes`).

use std::{
    future::Future,
    time::{Duration, Instant},
};

use anyhow::{Context, bail, ensure};
use chrono::Utc;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};

use crate::{
    Plan,
    agent::{AgentClient, candidate_user, negotiation_body, source_user},
    cycles,
    delegation::{DelegationAgent, delegation_agent},
    harness::{Bench, call},
    report::{Results, note},
    server::Server,
    stats::ms_since,
};

/// The clone SQL, run once per size with its parameters as `parley_bench.*` settings.
const SEED_SQL: &str = include_str!("history_seed.sql");

/// The heavy user (in about one negotiation in ten) and the user with three negotiations.
const HEAVY_USER: &str = "hist-heavy";
const THREE_USER: &str = "hist-three";
/// A few more users in about one negotiation in a hundred each.
const BIG_USERS: usize = 5;

/// Most samples of one path, and the time after which a path stops sampling (at least 3).
const MAX_SAMPLES: usize = 9;
const SAMPLE_BUDGET: Duration = Duration::from_secs(45);

/// Runs the phase for each size of `sizes`, on a database of its own that is dropped after it
/// (with `keep`, renamed `parley_history_<N>` instead, and not pruned). When 0 comes before a
/// larger size, the empty database stays up to the end: each larger size's turn cycles are also
/// measured in windows that alternate with the empty database's ([`paired_cycles`]).
pub async fn history(
    server: &Server,
    sizes: &[u64],
    keep: bool,
    pool_size: u32,
    agents: usize,
    r: &mut Results,
) -> anyhow::Result<()> {
    let pairing = sizes.iter().skip_while(|&&n| n != 0).any(|&n| n > 0);
    let mut baseline: Option<String> = None;
    let mut outcome = Ok(());
    for &n in sizes {
        let db = server.create_scratch(&format!("h{n}")).await?;
        let base = baseline.as_deref().map(|b| server.url(b)).transpose()?;
        let run = one_size(&server.url(&db)?, n, keep, base.as_deref(), pool_size, agents, r).await;
        if keep && run.is_ok() {
            let kept = format!("parley_history_{n}");
            server.rename_scratch(&db, &kept).await?;
            note(format!("history {n}: kept as database {kept}"));
        } else if n == 0 && pairing && run.is_ok() && baseline.is_none() {
            baseline = Some(db);
        } else {
            server.drop_scratch(&db).await;
        }
        outcome = run.with_context(|| format!("history phase at {n}"));
        if outcome.is_err() {
            break;
        }
    }
    if let Some(b) = baseline {
        server.drop_scratch(&b).await;
    }
    outcome
}

async fn one_size(
    url: &str,
    n: u64,
    keep: bool,
    baseline: Option<&str>,
    pool_size: u32,
    agents: usize,
    r: &mut Results,
) -> anyhow::Result<()> {
    let key = |path: &str| format!("history_{n}_{path}");
    note(format!("history {n}: making the templates through the API"));
    let templates = Bench::start_with(url, pool_size, |c| {
        c.pvp_timeout = Duration::from_secs(3);
        c.park_timeout = Duration::from_secs(1);
        c.park_timeout_offline = Duration::from_secs(1);
        c.pending_ttl = Duration::from_secs(3);
        c.delegation_accept_timeout = Duration::from_secs(2);
        c.timer_poll = Duration::from_millis(100);
        c.turn_caps.personal = 4;
    })
    .await?;
    let made = make_templates(&templates).await;
    templates.shutdown().await;
    let specials = made?;

    note(format!("history {n}: cloning {n} negotiations and {n} delegations in SQL"));
    let began = Instant::now();
    let mut conn = PgConnection::connect(url).await?;
    seed(&mut conn, n).await?;
    let seed_s = began.elapsed().as_secs_f64();
    let bytes: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())").fetch_one(&mut conn).await?;
    let counts: (i64, i64, i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM messages), (SELECT count(*) FROM delegations),
                (SELECT count(*) FROM agents), (SELECT count(*) FROM capabilities), (SELECT count(*) FROM anonymous_ids)",
    )
    .fetch_one(&mut conn)
    .await?;
    note(format!(
        "history {n}: seeded in {seed_s:.1} s, database {:.2} GB (tasks {}, messages {}, delegations {}, agents {}, capabilities {}, anonymous ids {})",
        bytes as f64 / 1e9,
        counts.0,
        counts.1,
        counts.2,
        counts.3,
        counts.4,
        counts.5
    ));
    r.set_rounded(key("seed_s"), seed_s, 1);
    r.set(key("db_bytes"), bytes);
    r.set(key("tasks"), counts.0);
    r.set(key("delegations"), counts.2);
    r.set(key("agents"), counts.3);
    r.set(key("capabilities"), counts.4);
    // The history predates the insights rollups, as in a database upgraded to them: nothing is
    // rolled up yet (the templates' live counts go too) and every backfill cursor is at its
    // start, so the service's own backfill rolls the seeded rows up after start.
    sqlx::raw_sql(
        "DELETE FROM insight_days; DELETE FROM insight_counts;
         UPDATE insight_backfill SET cutoff = now(), after_at = NULL, after_id = NULL, done_at = NULL",
    )
    .execute(&mut conn)
    .await?;

    // Start-up: what `parley serve` does before it answers (migrations, definitions, the
    // application), three times; the last instance stays up for the measurements.
    let mut startups = Vec::new();
    let mut bench = None;
    let began_serving = Instant::now();
    for _ in 0..3 {
        if let Some(b) = bench.take() {
            Bench::shutdown(b).await;
        }
        let t = Instant::now();
        bench = Some(Bench::start_with(url, pool_size, hold_parked_turns).await?);
        // `Bench::start` waits 300 ms after the service is ready; that is not start-up.
        startups.push(ms_since(t) - 300.0);
    }
    let bench = std::sync::Arc::new(bench.context("a started service")?);
    r.set_rounded(key("startup_ms"), startups[startups.len() - 1], 0);
    r.set_percentile(key("startup_p50_ms"), &startups, 50.0, 0);
    // The backfill runs in the background from the first start on; the reads are measured once
    // it is done (the figures of a year are whole only then).
    let backfill_s = began_serving.elapsed().as_secs_f64();
    let backfill_s = backfill_s + wait_for_backfill(&mut conn, n).await?;
    r.set_rounded(key("backfill_s"), backfill_s, 1);

    let outcome = async {
        check_clones(&bench, &mut conn).await?;
        measure(&bench, &mut conn, &specials, n, r).await?;
        // Turn cycles on top of the history, as the cycles phase measures them (shorter).
        let plan = Plan { negotiations_per_agent: 100, cycle_secs: 8, ..Plan::new(true) };
        let mut cyc = Results::new();
        cycles::turn_cycles(&bench, &plan, agents, &mut cyc).await?;
        for k in ["turn_cycles_per_s", "pickup_p50_ms", "pickup_p99_ms", "respond_p50_ms", "respond_p99_ms"] {
            if let Some(v) = cyc.get(k) {
                r.set(key(k), v.clone());
            }
        }
        if let Some(base) = baseline {
            paired_cycles(&bench, base, pool_size, &plan, agents, n, r).await?;
        }
        if !keep {
            prune_beside_cycles(&bench, &plan, agents, n, r).await?;
        }
        anyhow::Ok(())
    }
    .await;
    match std::sync::Arc::try_unwrap(bench) {
        Ok(b) => b.shutdown().await,
        Err(_) => note("the service is still referenced; not waiting for its shutdown"),
    }
    outcome
}

/// The one setting the phase's service differs in from `parley serve`'s defaults: a turn parked
/// for an agent not yet seen waits as long as any other (a day) before the system negotiator
/// takes it. Each turn-cycle window creates its negotiations before its agents first poll, and
/// leaves some unfinished; with the offline window (5 minutes) those would all fall back at once
/// in a later window, and that window would measure them instead of its own cycles.
fn hold_parked_turns(c: &mut parley::Config) {
    c.park_timeout_offline = c.park_timeout;
}

/// Waits until the service's insights backfill has rolled up every source; returns the seconds
/// waited.
async fn wait_for_backfill(conn: &mut PgConnection, n: u64) -> anyhow::Result<f64> {
    let t = Instant::now();
    loop {
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM insight_backfill WHERE done_at IS NULL")
            .fetch_one(&mut *conn)
            .await?;
        if left == 0 {
            note(format!("history {n}: the insights backfill is done"));
            return Ok(t.elapsed().as_secs_f64());
        }
        ensure!(t.elapsed() < Duration::from_secs(3600), "the insights backfill did not finish within an hour");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Windows of paired turn cycles: the empty database's (`baseline`, its own service started
/// beside this one for the pairs) and this size's, alternating 0, N, N, 0, 0, N, N, 0, so that
/// a drift of the machine during the pairs weighs on both sides alike. Each pair gives the
/// ratio N / 0 of its two windows; the median of the four is the figure
/// (`history_<N>_paired_cycles_ratio`), beside every window's rate.
async fn paired_cycles(
    bench: &std::sync::Arc<Bench>,
    baseline: &str,
    pool_size: u32,
    plan: &Plan,
    agents: usize,
    n: u64,
    r: &mut Results,
) -> anyhow::Result<()> {
    let key = |path: &str| format!("history_{n}_{path}");
    let empty = std::sync::Arc::new(Bench::start_with(baseline, pool_size, hold_parked_turns).await?);
    let rate = |b: &std::sync::Arc<Bench>| {
        let b = b.clone();
        async move {
            let mut cyc = Results::new();
            cycles::turn_cycles(&b, plan, agents, &mut cyc).await?;
            cyc.get("turn_cycles_per_s").and_then(|v| v.as_f64()).context("a turn-cycle rate")
        }
    };
    // (0, N) per pair, each pair measured in its own order.
    let mut rates: Vec<(f64, f64)> = Vec::new();
    let outcome = async {
        for pair in 0..4 {
            let (zero, full) = if pair % 2 == 0 {
                let zero = rate(&empty).await?;
                (zero, rate(bench).await?)
            } else {
                let full = rate(bench).await?;
                (rate(&empty).await?, full)
            };
            note(format!("history {n}: paired turn cycles, pair {pair}: 0 -> {zero:.1}/s, {n} -> {full:.1}/s"));
            rates.push((zero, full));
        }
        anyhow::Ok(())
    }
    .await;
    match std::sync::Arc::try_unwrap(empty) {
        Ok(b) => b.shutdown().await,
        Err(_) => note("the empty database's service is still referenced; not waiting for its shutdown"),
    }
    outcome?;
    let ratios: Vec<f64> = rates.iter().map(|(zero, full)| full / zero).collect();
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    let median = (sorted[1] + sorted[2]) / 2.0;
    r.set_rounded(key("paired_cycles_ratio"), median, 3);
    r.set(key("paired_cycles_ratios"), ratios.iter().map(|x| (x * 1000.0).round() / 1000.0).collect::<Vec<_>>());
    r.set(key("paired_cycles_empty_per_s"), rates.iter().map(|p| p.0.round()).collect::<Vec<_>>());
    r.set(key("paired_cycles_full_per_s"), rates.iter().map(|p| p.1.round()).collect::<Vec<_>>());
    note(format!("history {n}: paired turn cycles: N / 0 per pair {ratios:.3?}, median {median:.3}"));
    Ok(())
}

/// Prunes the history down to a 30-day retention, as housekeeping does (batches of 1 000, each
/// its own transaction), while agents keep cycling turns: how long the year takes to prune, and
/// the turn cycles per second during it.
async fn prune_beside_cycles(
    b: &std::sync::Arc<Bench>,
    plan: &Plan,
    agents: usize,
    n: u64,
    r: &mut Results,
) -> anyhow::Result<()> {
    let key = |path: &str| format!("history_{n}_{path}");
    let pool = b.pool.clone();
    let pruning = tokio::spawn(async move {
        let t = Instant::now();
        let month = Duration::from_secs(30 * 86_400);
        let pruned = parley::retention::prune(&pool, Some(month), Utc::now(), 1000, Duration::from_secs(3600)).await;
        (pruned, t.elapsed().as_secs_f64())
    });
    let mut cyc = Results::new();
    cycles::turn_cycles(b, plan, agents, &mut cyc).await?;
    if let Some(v) = cyc.get("turn_cycles_per_s") {
        r.set(key("turn_cycles_while_pruning_per_s"), v.clone());
    }
    let (pruned, secs) = pruning.await?;
    let pruned = pruned?;
    note(format!("history {n}: pruned to 30 days in {secs:.1} s: {pruned:?}"));
    r.set_rounded(key("prune_s"), secs, 1);
    r.set(key("pruned_opportunities"), pruned.opportunities);
    r.set(key("pruned_delegations"), pruned.delegations);
    Ok(())
}

/// The agents the API registered for the users the measurements read as.
struct Specials {
    heavy_agent: String,
    three_agent: String,
}

/// A user token for `user`.
fn user_token(b: &Bench, user: &str) -> anyhow::Result<String> {
    b.state.jwt().mint(user, parley::CallerRole::User, Duration::from_secs(6 * 3600))
}

/// A template user: `hist-tpl-<k>-s` or `-c`, fixed width so that no name is a prefix of another
/// (the clone SQL replaces them inside JSON text).
fn tpl_user(k: usize, side: char) -> String {
    format!("hist-tpl-{k:03}-{side}")
}

/// A create body for template `k`: the bench's source and candidate with the template's users.
fn tpl_body(k: usize, terse: bool) -> Value {
    let mut source = source_user(k);
    source["id"] = json!(tpl_user(k, 's'));
    let mut candidate = candidate_user(&tpl_user(k, 'c'));
    if terse {
        candidate["profile"] = json!({"bio": "Backend engineer", "skills": ["rust"], "interests": ["startups"]});
    }
    negotiation_body(source, candidate)
}

/// Plays `actions` in a negotiation between two personal agents, the source at even turns.
async fn play(src: &AgentClient, cand: &AgentClient, actions: &[&str]) -> anyhow::Result<Value> {
    let mut last = Value::Null;
    for (i, action) in actions.iter().enumerate() {
        let agent = if i % 2 == 0 { src } else { cand };
        let turn = agent.pickup(Some(5)).await?.with_context(|| format!("no parked turn {i} for {action}"))?;
        last = agent.respond(&turn, action).await?;
    }
    Ok(last)
}

/// Decides opportunity `id` as `user`.
async fn decide(b: &Bench, id: &str, user: &str, decision: &str) -> anyhow::Result<()> {
    let req = b.client.post(format!("{}/api/opportunities/{id}/decision", b.base)).bearer_auth(user_token(b, user)?);
    call(req.json(&json!({ "decision": decision })), StatusCode::OK, "deciding an opportunity").await?;
    Ok(())
}

/// Registers an agent for `user` and returns its client.
async fn personal(b: &Bench, user: &str) -> anyhow::Result<AgentClient> {
    let (id, key) = b.register_agent(user).await?;
    Ok(AgentClient::new(&b.client, &b.base, &id, &key))
}

/// Makes the template negotiations and delegations, waits until every one of them has ended,
/// and registers the agents of the users the measurements read as.
async fn make_templates(b: &Bench) -> anyhow::Result<Specials> {
    let mut k = 0;
    let mut next = || {
        k += 1;
        k
    };
    // The system negotiator on both sides, with a full and a terse candidate.
    for terse in [false, true] {
        b.create(&tpl_body(next(), terse)).await?;
    }
    // A personal agent against the system: it counters until the system ends it.
    {
        let k = next();
        let cand = personal(b, &tpl_user(k, 'c')).await?;
        b.create(&tpl_body(k, true)).await?;
        for _ in 0..10 {
            let Some(turn) = cand.pickup(Some(2)).await? else { break };
            let answer = cand.respond(&turn, "counter").await?;
            if answer["status"] == "completed" {
                break;
            }
        }
    }
    // A personal agent that never answers: the system plays its seat (a fallback).
    {
        let k = next();
        personal(b, &tpl_user(k, 'c')).await?;
        b.create(&tpl_body(k, false)).await?;
    }
    // Personal agents on both sides.
    let pvp = |k: usize| async move {
        let src = personal(b, &tpl_user(k, 's')).await?;
        let cand = personal(b, &tpl_user(k, 'c')).await?;
        let created = b.create(&tpl_body(k, false)).await?;
        let opp = created["opportunity"]["id"].as_str().context("opportunity.id")?.to_owned();
        let id = created["negotiation"]["id"].as_str().context("negotiation.id")?.to_owned();
        anyhow::Ok((src, cand, opp, id))
    };
    // Accepted by the agents, then by both people / declined by one / left to expire.
    for decisions in [&[("s", "accept"), ("c", "accept")][..], &[("c", "decline")][..], &[][..]] {
        let k = next();
        let (src, cand, opp, _) = pvp(k).await?;
        play(&src, &cand, &["propose", "accept"]).await?;
        for (side, d) in decisions {
            decide(b, &opp, &tpl_user(k, side.chars().next().unwrap_or('s')), d).await?;
        }
    }
    // A question, a counter and an accept, accepted by both people.
    {
        let k = next();
        let (src, cand, opp, _) = pvp(k).await?;
        play(&src, &cand, &["propose", "question", "counter", "accept"]).await?;
        decide(b, &opp, &tpl_user(k, 's'), "accept").await?;
        decide(b, &opp, &tpl_user(k, 'c'), "accept").await?;
    }
    // Rejected by an agent.
    {
        let (src, cand, _, _) = pvp(next()).await?;
        play(&src, &cand, &["propose", "reject"]).await?;
    }
    // The turn cap (4 turns between personal agents here).
    {
        let (src, cand, _, _) = pvp(next()).await?;
        play(&src, &cand, &["propose", "counter", "counter", "counter"]).await?;
    }
    // The deadline passes after the opening.
    {
        let (src, cand, _, _) = pvp(next()).await?;
        play(&src, &cand, &["propose"]).await?;
    }
    // Canceled by the platform after the opening.
    {
        let (src, cand, _, id) = pvp(next()).await?;
        play(&src, &cand, &["propose"]).await?;
        let req = b.client.delete(format!("{}/api/negotiations/{id}", b.base)).bearer_auth(&b.service);
        call(req, StatusCode::OK, "canceling a negotiation").await?;
    }
    delegation_templates(b).await?;

    // Every template must have ended before it is cloned.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let open: (i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM tasks WHERE state NOT IN ('completed', 'canceled', 'failed')),
                    (SELECT count(*) FROM opportunities WHERE status IN ('negotiating', 'pending')),
                    (SELECT count(*) FROM delegations WHERE ended_at IS NULL)",
        )
        .fetch_one(&b.pool)
        .await?;
        if open == (0, 0, 0) {
            break;
        }
        if Instant::now() > deadline {
            bail!("templates still open after 30 s (tasks, opportunities, delegations): {open:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (heavy_agent, _) = b.register_agent(HEAVY_USER).await?;
    let (three_agent, _) = b.register_agent(THREE_USER).await?;
    for i in 0..BIG_USERS {
        b.register_agent(&format!("hist-big-{i}")).await?;
    }
    Ok(Specials { heavy_agent, three_agent })
}

/// Sends a delegation from `requester` without waiting for its result (`?wait=0`: 202 at once).
async fn delegate(
    b: &Bench,
    requester: &DelegationAgent,
    target: Option<&str>,
    extra: Value,
) -> anyhow::Result<String> {
    let request_id = uuid::Uuid::new_v4().to_string();
    let mut body = json!({
        "requestId": request_id, "agentId": requester.id, "taskType": "code-review",
        "input": {"code": "fn main() {}"}, "timeoutMs": 60000, "fallbackEnabled": false,
    });
    if let Some(t) = target {
        body["targetAnonymousId"] = json!(t);
    }
    if let (Some(o), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    let r = b
        .client
        .post(format!("{}/api/agents/delegate?wait=0", b.base))
        .header("x-api-key", &requester.key)
        .json(&body)
        .send()
        .await?;
    let status = r.status();
    ensure!(status == StatusCode::ACCEPTED, "delegating: {status} {}", r.text().await.unwrap_or_default());
    Ok(request_id)
}

/// `target` ends the delegation `request_id` as `how` (`complete`, `fail`, `reject`, `accept`).
async fn end(b: &Bench, target: &DelegationAgent, request_id: &str, how: &str) -> anyhow::Result<()> {
    let path = format!("/api/agents/{}/delegations/{request_id}", target.id);
    if how == "reject" {
        b.keyed(&target.key, Method::POST, &format!("{path}/reject"), Some(&json!({"reason": "busy"})), StatusCode::OK)
            .await?;
        return Ok(());
    }
    let accepted = b.keyed(&target.key, Method::POST, &format!("{path}/accept"), None, StatusCode::OK).await?;
    let token = accepted["claimToken"].as_str().context("claimToken")?;
    match how {
        "complete" => {
            let body = json!({"output": {"feedback": "looks fine"}, "claimToken": token});
            b.keyed(&target.key, Method::POST, &format!("{path}/complete"), Some(&body), StatusCode::OK).await?;
        }
        "fail" => {
            let body = json!({"error": "the reviewer crashed", "claimToken": token});
            b.keyed(&target.key, Method::POST, &format!("{path}/fail"), Some(&body), StatusCode::OK).await?;
        }
        _ => {}
    }
    Ok(())
}

/// The template delegations: completed, failed, rejected, not accepted in time, accepted and
/// not finished in time, and one retried on a second target after the first refused it.
async fn delegation_templates(b: &Bench) -> anyhow::Result<()> {
    let requester = delegation_agent(b, "hist-tpl-d-r", "testing").await?;
    let t1 = delegation_agent(b, "hist-tpl-d-t1", "code-review").await?;
    let t2 = delegation_agent(b, "hist-tpl-d-t2", "code-review").await?;
    for how in ["complete", "fail", "reject"] {
        let id = delegate(b, &requester, Some(&t1.anonymous_id), json!({})).await?;
        end(b, &t1, &id, how).await.with_context(|| format!("{how} of a delegation"))?;
    }
    delegate(b, &requester, Some(&t2.anonymous_id), json!({})).await?;
    let id = delegate(b, &requester, Some(&t2.anonymous_id), json!({"timeoutMs": 1500})).await?;
    end(b, &t2, &id, "accept").await.context("accepting a delegation left to time out")?;
    // Retried: whichever target it reaches first refuses it, the other completes it.
    let id = delegate(b, &requester, None, json!({"fallbackEnabled": true, "maxRetries": 2})).await?;
    let first = addressed(b, [&t1, &t2], &id).await.context("the retried delegation's first target")?;
    end(b, first, &id, "reject").await.context("refusing the retried delegation")?;
    let second = if std::ptr::eq(first, &t1) { &t2 } else { &t1 };
    addressed(b, [second, second], &id).await.context("the retried delegation's second target")?;
    end(b, second, &id, "complete").await.context("completing the retried delegation")?;
    Ok(())
}

/// The one of `targets` whose inbox holds `request_id`, waiting up to 5 s for it to arrive.
async fn addressed<'a>(
    b: &Bench,
    targets: [&'a DelegationAgent; 2],
    request_id: &str,
) -> anyhow::Result<&'a DelegationAgent> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        for t in targets {
            if inbox_has(b, t, request_id).await? {
                return Ok(t);
            }
        }
        ensure!(Instant::now() < deadline, "the delegation reached no inbox");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn inbox_has(b: &Bench, target: &DelegationAgent, request_id: &str) -> anyhow::Result<bool> {
    let inbox = format!("/api/agents/{}/delegations/inbox", target.id);
    let answer = b.keyed(&target.key, Method::GET, &inbox, None, StatusCode::OK).await?;
    Ok(answer["requests"].as_array().context("requests")?.iter().any(|i| i["requestId"] == request_id))
}

/// Clones the templates `n` times ([`SEED_SQL`]), then vacuums and analyzes what it wrote, as
/// a database a year old would have been.
async fn seed(conn: &mut PgConnection, n: u64) -> anyhow::Result<()> {
    let agents = (n / 10).clamp(100, 100_000);
    let capabilities = (agents / 10).max(10);
    for (name, value) in [("n", n), ("agents", agents), ("capabilities", capabilities)] {
        sqlx::query("SELECT set_config($1, $2, false)")
            .bind(format!("parley_bench.{name}"))
            .bind(value.to_string())
            .execute(&mut *conn)
            .await?;
    }
    for (name, value) in [("heavy", HEAVY_USER), ("three", THREE_USER)] {
        sqlx::query("SELECT set_config($1, $2, false)")
            .bind(format!("parley_bench.{name}"))
            .bind(value)
            .execute(&mut *conn)
            .await?;
    }
    sqlx::raw_sql(sqlx::AssertSqlSafe(SEED_SQL)).execute(&mut *conn).await.context("history_seed.sql")?;
    let t = Instant::now();
    sqlx::raw_sql("VACUUM (ANALYZE)").execute(&mut *conn).await?;
    note(format!("history {n}: VACUUM (ANALYZE) took {:.1} s", t.elapsed().as_secs_f64()));
    Ok(())
}

/// A JSON value's shape: the same value with every string, number and boolean replaced by its
/// type, so that two answers about different rows compare equal when they have the same fields.
/// `decisions` is keyed by user id: its shape is its values (`accept`, `decline`) in order.
fn shape(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("decisions", Value::Object(d)) => {
                        let mut values: Vec<String> = d.values().map(Value::to_string).collect();
                        values.sort();
                        (k.clone(), json!(values))
                    }
                    _ => (k.clone(), shape(v)),
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(shape).collect()),
        Value::String(_) => json!("string"),
        Value::Number(_) => json!("number"),
        Value::Bool(_) => json!("bool"),
        Value::Null => Value::Null,
    }
}

/// The parts of an answer that say how it ended, which a clone must repeat exactly.
fn ending(v: &Value) -> Value {
    json!([
        v["status"],
        v["outcome"]["hasOpportunity"],
        v["outcome"]["reason"],
        v["turnCount"],
        v["turns"].as_array().map(|t| t.iter().map(|t| t["action"].clone()).collect::<Vec<_>>())
    ])
}

/// For the sample of clones the seed SQL listed (`parley_bench_samples`), the service's reads
/// of the clone and of its template answer the same shape and the same ending.
async fn check_clones(b: &Bench, conn: &mut PgConnection) -> anyhow::Result<()> {
    let samples: Vec<(uuid::Uuid, uuid::Uuid, uuid::Uuid, uuid::Uuid)> = sqlx::query_as(
        "SELECT clone_task, template_task, clone_opportunity, template_opportunity FROM parley_bench_samples",
    )
    .fetch_all(&mut *conn)
    .await?;
    let get = |path: String| async move {
        let req = b.client.get(format!("{}{path}", b.base)).bearer_auth(&b.service);
        call(req, StatusCode::OK, &path).await
    };
    for (clone_task, tpl_task, clone_opp, tpl_opp) in &samples {
        let (c, t) = (
            get(format!("/api/negotiations/{clone_task}")).await?,
            get(format!("/api/negotiations/{tpl_task}")).await?,
        );
        ensure!(
            shape(&c) == shape(&t) && ending(&c) == ending(&t),
            "a cloned negotiation does not read like its template:\nclone {c}\ntemplate {t}"
        );
        let (c, t) = (
            get(format!("/api/opportunities/{clone_opp}")).await?,
            get(format!("/api/opportunities/{tpl_opp}")).await?,
        );
        ensure!(
            shape(&c) == shape(&t) && c["status"] == t["status"],
            "a cloned opportunity does not read like its template:\nclone {c}\ntemplate {t}"
        );
    }
    ensure!(
        !samples.is_empty()
            || sqlx::query_scalar::<_, i64>("SELECT count(*) FROM tasks").fetch_one(&mut *conn).await? < 100
    );
    note(format!("history: {} cloned negotiations read like their templates", samples.len()));
    sqlx::raw_sql("DROP TABLE parley_bench_samples").execute(&mut *conn).await?;
    Ok(())
}

/// Times `f` up to [`MAX_SAMPLES`] times (at least 3, fewer after [`SAMPLE_BUDGET`]) and
/// records its median and 95th percentile as `history_<n>_<path>_p50_ms` / `_p95_ms`.
async fn sample<F, Fut>(r: &mut Results, n: u64, path: &str, mut f: F) -> anyhow::Result<()>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<Option<f64>>>,
{
    let began = Instant::now();
    let mut samples = Vec::new();
    for i in 0..MAX_SAMPLES {
        if i >= 3 && began.elapsed() > SAMPLE_BUDGET {
            break;
        }
        let t = Instant::now();
        let timed = f(i).await?;
        samples.push(timed.unwrap_or_else(|| ms_since(t)));
    }
    r.set_percentile(format!("history_{n}_{path}_p50_ms"), &samples, 50.0, 1);
    r.set_percentile(format!("history_{n}_{path}_p95_ms"), &samples, 95.0, 1);
    r.set(format!("history_{n}_{path}_samples"), samples.len());
    note(format!("history {n}: {path}: {:?} ms", samples.iter().map(|s| s.round()).collect::<Vec<_>>()));
    Ok(())
}

/// A GET with `token` that must answer 200.
async fn get_ok(b: &Bench, token: &str, path: impl AsRef<str>) -> anyhow::Result<Option<f64>> {
    let path = path.as_ref();
    let req = b.client.get(format!("{}{path}", b.base)).bearer_auth(token);
    crate::harness::send_expecting(req, StatusCode::OK, path).await?;
    Ok(None)
}

/// Makes the next discovery rebuild the process's snapshot, as a commit that changed the
/// directory does; with `new_day`, also ages every trust record a day first, so that the rebuild
/// rolls them over as the first discovery of a UTC day does.
async fn directory_change(conn: &mut PgConnection, new_day: bool) -> anyhow::Result<()> {
    if new_day {
        sqlx::query("UPDATE trust_records SET as_of = as_of - 1").execute(&mut *conn).await?;
    }
    sqlx::query("UPDATE directory_version SET n = nextval('directory_version_seq')").execute(&mut *conn).await?;
    Ok(())
}

/// The paths of the issue's table.
async fn measure(b: &Bench, conn: &mut PgConnection, sp: &Specials, n: u64, r: &mut Results) -> anyhow::Result<()> {
    let service = b.service.clone();
    let today = Utc::now().date_naive();
    let year = format!("from={}&to={today}", today - chrono::Days::new(365));
    note(format!("history {n}: measuring the reads"));
    let (s, y) = (&service, &year);
    sample(r, n, "insights_year", |_| get_ok(b, s, format!("/api/insights?{y}"))).await?;
    sample(r, n, "insights_30d", |_| get_ok(b, s, "/api/insights")).await?;
    sample(r, n, "insights_heavy_year", |_| get_ok(b, s, format!("/api/insights?{y}&userId={HEAVY_USER}"))).await?;
    // Trust of the seeded agents with most history, one after the other.
    let busy: Vec<uuid::Uuid> = sqlx::query_scalar(
        "SELECT agent_id FROM agent_trust_days GROUP BY agent_id ORDER BY sum(attempts_completed + attempts_unfinished) DESC LIMIT $1",
    )
    .bind(MAX_SAMPLES as i64)
    .fetch_all(&mut *conn)
    .await?;
    let trust_of =
        if busy.is_empty() { vec![sp.heavy_agent.clone()] } else { busy.iter().map(|a| a.to_string()).collect() };
    sample(r, n, "trust", |i| get_ok(b, s, format!("/api/trust/{}", trust_of[i % trust_of.len()]))).await?;
    sample(r, n, "metrics", |_| get_ok(b, s, "/metrics")).await?;
    let heavy = user_token(b, HEAVY_USER)?;
    let three = user_token(b, THREE_USER)?;
    let (h, ha) = (&heavy, &sp.heavy_agent);
    sample(r, n, "list_active_heavy", |_| get_ok(b, h, format!("/api/agents/{ha}/negotiations?status=active"))).await?;
    let (t, ta) = (&three, &sp.three_agent);
    sample(r, n, "list_active_three", |_| get_ok(b, t, format!("/api/agents/{ta}/negotiations?status=active"))).await?;
    let discover = "/api/agents/discover?taskType=code-review";
    // The first discovery of a day (trust rolled over inside it), then later ones (the snapshot
    // held), then rebuilds after a directory change (trust current).
    let mut firsts = Vec::new();
    for _ in 0..3 {
        directory_change(conn, true).await?;
        let t = Instant::now();
        get_ok(b, s, discover).await?;
        firsts.push(ms_since(t));
    }
    r.set_percentile(format!("history_{n}_discovery_first_of_day_p50_ms"), &firsts, 50.0, 1);
    r.set_percentile(format!("history_{n}_discovery_first_of_day_p95_ms"), &firsts, 95.0, 1);
    note(format!("history {n}: discovery_first_of_day: {:?} ms", firsts.iter().map(|s| s.round()).collect::<Vec<_>>()));
    sample(r, n, "discovery_later", |_| get_ok(b, s, discover)).await?;
    let c = &mut *conn;
    let mut rebuilds = Vec::new();
    for _ in 0..MAX_SAMPLES {
        directory_change(c, false).await?;
        let t = Instant::now();
        get_ok(b, s, discover).await?;
        rebuilds.push(ms_since(t));
    }
    r.set_percentile(format!("history_{n}_discovery_rebuild_p50_ms"), &rebuilds, 50.0, 1);
    r.set_percentile(format!("history_{n}_discovery_rebuild_p95_ms"), &rebuilds, 95.0, 1);
    note(format!("history {n}: discovery_rebuild: {:?} ms", rebuilds.iter().map(|s| s.round()).collect::<Vec<_>>()));
    // Agent deletion: the seeded agents that did the most negotiation turns, one per sample.
    let doomed: Vec<(uuid::Uuid, String)> = sqlx::query_as(
        "SELECT a.agent_id, a.owner_user_id FROM agents a
          WHERE a.owner_user_id LIKE 'hist-u-%' AND a.deleted_at IS NULL
          ORDER BY a.agent_id LIMIT $1",
    )
    .bind(MAX_SAMPLES as i64)
    .fetch_all(&mut *conn)
    .await?;
    if !doomed.is_empty() {
        let doomed = &doomed;
        sample(r, n, "delete_agent", |i| async move {
            let (id, owner) = &doomed[i % doomed.len()];
            let req = b.client.delete(format!("{}/api/agents/{id}", b.base)).bearer_auth(user_token(b, owner)?);
            crate::harness::send_expecting(req, StatusCode::NO_CONTENT, "deleting an agent").await?;
            Ok(None)
        })
        .await?;
        // The service keeps a deleted agent's row; deleting the row itself (by hand, or by a
        // retention that prunes agents) runs every `ON DELETE` rule of the keys that name it.
        let c = &mut *conn;
        let mut rows = Vec::new();
        for (id, _) in doomed {
            let t = Instant::now();
            sqlx::query("DELETE FROM agents WHERE agent_id = $1").bind(id).execute(&mut *c).await?;
            rows.push(ms_since(t));
        }
        r.set_percentile(format!("history_{n}_delete_agent_row_p50_ms"), &rows, 50.0, 1);
        r.set_percentile(format!("history_{n}_delete_agent_row_p95_ms"), &rows, 95.0, 1);
        note(format!("history {n}: delete_agent_row: {:?} ms", rows.iter().map(|s| s.round()).collect::<Vec<_>>()));
    }
    Ok(())
}
