//! The delegation phase (`--only delegation`, never in a default run): request, accept and
//! complete round trips over HTTP between pairs of agents, with what each costs (`main.rs` then
//! measures the same work's SQL floor under pgbench, `floors::delegation_floor`); then the same
//! round trips asked over A2A (`SendMessage` on `POST /a2a`, blocking, as the official SDK sends
//! it: A2A 1.0, numbers as doubles), in the same run, so that the two read as a ratio. Also
//! registers the agent pairs both halves use.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};
use std::time::{Duration, Instant};

use anyhow::Context;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::{
    cost::CostMeter,
    harness::{BENCH_RATE_LIMIT, Bench, send_expecting},
    report::{Results, note},
    stats::ms_since,
    timing::{Window, join_all},
};

/// Requester/target pairs of the delegation phase.
pub const DELEGATION_PAIRS: usize = 16;
/// Seconds the delegation phase measures (after the warm-up), unless `--delegation-secs` says.
pub const DELEGATION_SECS: u64 = 10;

/// An agent registered with one capability.
pub struct DelegationAgent {
    pub id: String,
    pub key: String,
    pub anonymous_id: String,
}

/// Registers an agent with one capability of `task_type` and the rate limits at their maximum
/// (the bench measures the flow, not the limiter).
pub async fn delegation_agent(bench: &Bench, user: &str, task_type: &str) -> anyhow::Result<DelegationAgent> {
    let (id, key) = bench.register_agent(user).await?;
    let capability = json!({
        "taskType": task_type,
        "inputSchema": {"type": "object", "required": ["code"], "properties": {"code": {"type": "string"}}},
        "outputSchema": {"type": "object", "required": ["feedback"], "properties": {"feedback": {"type": "string"}}},
        "estimatedCostUsd": 1.0,
    });
    let base = format!("/api/agents/{id}/capabilities");
    let put = bench.keyed(&key, Method::PUT, &base, Some(&capability), StatusCode::CREATED).await?;
    let anonymous_id = put["anonymousAgentId"].as_str().context("anonymousAgentId")?.to_owned();
    let cap = put["capability"]["id"].as_str().context("capability id")?;
    let limits = json!({"inboundRateLimit": BENCH_RATE_LIMIT, "outboundRateLimit": BENCH_RATE_LIMIT});
    let permissions = format!("{base}/{cap}/permissions");
    bench.keyed(&key, Method::PUT, &permissions, Some(&limits), StatusCode::OK).await?;
    Ok(DelegationAgent { id, key, anonymous_id })
}

/// [`DELEGATION_PAIRS`] pairs, one after the other: a requester (user `<prefix>-requester-<n>`,
/// offering `testing`) and its target (`<prefix>-target-<n>`, offering `code-review`).
pub async fn register_pairs(bench: &Bench, prefix: &str) -> anyhow::Result<Vec<(DelegationAgent, DelegationAgent)>> {
    let mut pairs = Vec::new();
    for n in 0..DELEGATION_PAIRS {
        let requester = delegation_agent(bench, &format!("{prefix}-requester-{n}"), "testing").await?;
        let target = delegation_agent(bench, &format!("{prefix}-target-{n}"), "code-review").await?;
        pairs.push((requester, target));
    }
    Ok(pairs)
}

/// A target's loop: long-poll the inbox, accept and complete each request, until `done`.
async fn serve_target(b: Arc<Bench>, target: DelegationAgent, done: Arc<AtomicBool>) -> anyhow::Result<u64> {
    let (tid, tkey) = (&target.id, &target.key);
    let inbox = format!("/api/agents/{tid}/delegations/inbox?wait=5");
    let mut served = 0u64;
    while !done.load(Ordering::Relaxed) {
        let answer = b.keyed(tkey, Method::GET, &inbox, None, StatusCode::OK).await?;
        for item in answer["requests"].as_array().context("requests")? {
            let id = item["requestId"].as_str().context("requestId")?;
            let path = format!("/api/agents/{tid}/delegations/{id}");
            let accepted = b.keyed(tkey, Method::POST, &format!("{path}/accept"), None, StatusCode::OK).await?;
            let token = accepted["claimToken"].as_str().context("claimToken")?;
            let output = json!({"output": {"feedback": "looks fine"}, "claimToken": token});
            b.keyed(tkey, Method::POST, &format!("{path}/complete"), Some(&output), StatusCode::OK).await?;
            served += 1;
        }
    }
    Ok(served)
}

/// A requester's loop: delegate to its target by anonymous id and wait for the result, until the
/// window closes; returns the round trips started in the window (ms) and all it made.
async fn delegate_until(
    b: Arc<Bench>,
    requester: DelegationAgent,
    target_anonymous_id: String,
    window: Window,
) -> anyhow::Result<(Vec<f64>, u64)> {
    let (mut samples, mut total) = (Vec::new(), 0u64);
    while window.open() {
        let body = json!({
            "requestId": uuid::Uuid::new_v4(), "agentId": requester.id, "taskType": "code-review",
            "targetAnonymousId": target_anonymous_id, "input": {"code": "fn main() {}"}, "timeoutMs": 60000,
        });
        let t = Instant::now();
        let path = "/api/agents/delegate?wait=10";
        let answer: Value = b.keyed(&requester.key, Method::POST, path, Some(&body), StatusCode::OK).await?;
        anyhow::ensure!(
            answer["result"]["status"] == "success" && answer["delegation"]["status"] == "completed",
            "{answer}"
        );
        total += 1;
        if window.started_in(t) {
            samples.push(ms_since(t));
        }
    }
    Ok((samples, total))
}

/// A requester's loop over A2A: a blocking `SendMessage` whose data part delegates to its target,
/// answered with the completed task, until the window closes; returns the sends started in the
/// window (ms, send to completed) and all it made.
async fn send_until(
    b: Arc<Bench>,
    requester: DelegationAgent,
    target_anonymous_id: String,
    window: Window,
) -> anyhow::Result<(Vec<f64>, u64)> {
    let (mut samples, mut total) = (Vec::new(), 0u64);
    while window.open() {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                "parts": [{"data": {"taskType": "code-review", "targetAnonymousId": target_anonymous_id,
                                    "input": {"code": "fn main() {}"}, "timeoutMs": 60000.0}}]}},
        });
        let t = Instant::now();
        let req = b
            .client
            .post(format!("{}/a2a", b.base))
            .bearer_auth(&requester.key)
            .header("A2A-Version", "1.0")
            .json(&body);
        let answer: Value = serde_json::from_slice(&send_expecting(req, StatusCode::OK, "/a2a").await?)?;
        anyhow::ensure!(answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", "{answer}");
        total += 1;
        if window.started_in(t) {
            samples.push(ms_since(t));
        }
    }
    Ok((samples, total))
}

/// How the requesters ask for the work.
#[derive(Clone, Copy)]
enum Ask {
    /// The delegate call, `?wait=` long-polled ([`delegate_until`]).
    DelegateCall,
    /// A blocking A2A `SendMessage` ([`send_until`]).
    A2aSend,
}

/// [`DELEGATION_PAIRS`] fresh pairs (users `<prefix>-...`) play round trips for `secs` after the
/// warm-up, each requester asking its own target as `ask` says; what they cost is reported under
/// `label`. Answers the round trips started in the window (ms) and the window's length (s).
async fn round_trips(
    bench: &Arc<Bench>,
    r: &mut Results,
    secs: u64,
    ask: Ask,
    prefix: &str,
    label: &str,
) -> anyhow::Result<(Vec<f64>, f64)> {
    let pairs = register_pairs(bench, prefix).await?;
    // As for the turn cycles: what one round trip costs the service's process and PostgreSQL's
    // backends, and how many transactions the service's pool runs for it (warm-up included).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let meter = CostMeter::start(&bench.pool).await?;
    let window = Window::after_warmup(secs);
    let done = Arc::new(AtomicBool::new(false));
    let (mut targets, mut requesters) = (JoinSet::new(), JoinSet::new());
    for (requester, target) in pairs {
        let anonymous_id = target.anonymous_id.clone();
        targets.spawn(serve_target(bench.clone(), target, done.clone()));
        match ask {
            Ask::DelegateCall => requesters.spawn(delegate_until(bench.clone(), requester, anonymous_id, window)),
            Ask::A2aSend => requesters.spawn(send_until(bench.clone(), requester, anonymous_id, window)),
        };
    }
    let (mut all, mut total) = (Vec::new(), 0u64);
    let mut failed = None;
    while let Some(res) = requesters.join_next().await {
        match res? {
            Ok((s, n)) => {
                all.extend(s);
                total += n;
            }
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    let elapsed = window.elapsed_secs();
    done.store(true, Ordering::Relaxed);
    join_all(targets).await?;
    if let Some(e) = failed {
        return Err(e);
    }
    meter.report_per(&bench.pool, r, label, total, Duration::ZERO).await?;
    Ok((all, elapsed))
}

/// The round trips of [`delegation`], asked over A2A: the same kind of pairs, targets and work,
/// a blocking `SendMessage` instead of the delegate call.
pub async fn a2a_delegation(bench: &Arc<Bench>, r: &mut Results, secs: u64) -> anyhow::Result<()> {
    note(format!("delegation over A2A: {DELEGATION_PAIRS} pairs, {secs} s"));
    let (all, elapsed) = round_trips(bench, r, secs, Ask::A2aSend, "bench-a2a", "a2a_delegation").await?;
    r.set_rounded("a2a_delegations_per_s", all.len() as f64 / elapsed, 1);
    r.set_p50_p99("a2a_delegation_rtt", &all, 2);
    Ok(())
}

/// Delegation round trips over HTTP: 16 requesters each delegate (`?wait=` long-poll) to their
/// own target by anonymous id; each target long-polls its inbox, accepts and completes. The round
/// trip is from the delegate call sent to the requester's wait answered with the result.
pub async fn delegation(bench: &Arc<Bench>, r: &mut Results, secs: u64) -> anyhow::Result<()> {
    note(format!("delegation: {DELEGATION_PAIRS} pairs, {secs} s"));
    let (all, elapsed) = round_trips(bench, r, secs, Ask::DelegateCall, "bench-delegation", "delegation").await?;
    r.set("delegation_pairs", DELEGATION_PAIRS);
    r.set("delegation_secs", secs);
    r.set_rounded("delegations_per_s", all.len() as f64 / elapsed, 1);
    r.set_p50_p99("delegation_rtt", &all, 2);
    Ok(())
}
