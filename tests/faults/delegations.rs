//! The delegations of the fault run: requesters keep delegating code reviews, each with its own
//! `requestId` (a POST that got no answer is sent again with the same id and body; now and then
//! the same request goes twice at once), while targets long-poll their inboxes and accept (now
//! and then twice at once), then complete, reject, fail or vanish, so that the accept and
//! execution timers end what nobody answers. All of it runs through the same kills, restarts and
//! terminated connections as the negotiations.
//!
//! Afterwards [`check`] holds what the clients were told against the database and against the
//! requester's HTTP view: every acknowledged delegation exists once; every delegation and every
//! attempt ended; attempts are numbered 1..n, each target at most once, at most one completed
//! and only the last; every acknowledged accept, complete, reject and fail stands (a completed
//! delegation carries the acknowledged output); `retriesUsed` and the trust counts match the
//! attempts.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use parley::{CallerRole, JwtKeys};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{Lcg, Report};
use crate::helpers::post_for_json;

/// An agent: its id and API key.
pub type Agent = (String, String);

/// The agents that delegate and the ones that take the work.
pub struct Cast {
    pub requesters: Vec<Agent>,
    pub targets: Vec<Agent>,
}

/// Registers `n` agents (one user each), each with `capability(i)` and the permissions given.
async fn register(
    client: &reqwest::Client,
    base: &str,
    jwt: &JwtKeys,
    prefix: &str,
    n: usize,
    capability: impl Fn(usize) -> Value,
    permissions: &Value,
) -> Vec<Agent> {
    let mut agents = Vec::new();
    for i in 0..n {
        let token = jwt.mint(&format!("{prefix}-{i}"), CallerRole::User, Duration::from_secs(3600)).unwrap();
        let r = post_for_json(client, &format!("{base}/api/agents"), &token, &json!({ "name": prefix })).await;
        let (id, key) =
            (r["agent"]["id"].as_str().unwrap().to_owned(), r["apiKey"]["key"].as_str().unwrap().to_owned());
        offer(client, base, (&id, &key), &capability(i), permissions).await;
        agents.push((id, key));
    }
    agents
}

/// Puts `capability` on the agent (`id`, `key`), then sets its `permissions`.
pub async fn offer(
    client: &reqwest::Client,
    base: &str,
    (id, key): (&str, &str),
    capability: &Value,
    permissions: &Value,
) {
    let put = client
        .put(format!("{base}/api/agents/{id}/capabilities"))
        .header("x-api-key", key)
        .json(capability)
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "capability refused: {}", put.text().await.unwrap_or_default());
    let put: Value = put.json().await.unwrap();
    let capability_id = put["capability"]["id"].as_str().unwrap();
    let changed = client
        .put(format!("{base}/api/agents/{id}/capabilities/{capability_id}/permissions"))
        .header("x-api-key", key)
        .json(permissions)
        .send()
        .await
        .unwrap();
    assert!(changed.status().is_success(), "permissions refused: {}", changed.text().await.unwrap_or_default());
}

/// Targets with a code-review capability, ranked by cost; requesters with a capability of their
/// own. The service runs with its limits at the top (a capability may only lower them) and the
/// capabilities declare the same, so that the run measures faults, not rate limits.
pub async fn cast(client: &reqwest::Client, base: &str, jwt: &JwtKeys, requesters: usize, targets: usize) -> Cast {
    let summarize =
        |_| json!({"taskType": "summarization", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}});
    let requesters = register(
        client,
        base,
        jwt,
        "delegation-requester",
        requesters,
        summarize,
        &json!({"outboundRateLimit": 10000}),
    )
    .await;
    let targets = register(
        client,
        base,
        jwt,
        "delegation-target",
        targets,
        |i| crate::fixtures::review_capability(Some(1.0 + i as f64)),
        &json!({"inboundRateLimit": 10000}),
    )
    .await;
    Cast { requesters, targets }
}

/// (request id, attempt) -> the status an acknowledged end gave the attempt, and its output.
type Ended = HashMap<(Uuid, i64), (&'static str, Option<Value>)>;

/// What the requesters and targets were told.
#[derive(Default)]
pub struct Ledger {
    /// Request id -> the requester's index, for every delegate answered 202 or 200.
    acknowledged: Mutex<HashMap<Uuid, usize>>,
    /// Delegates never answered 2xx (given up after 30 s of retries).
    unanswered: AtomicU64,
    /// Delegates acknowledged only after being sent again with the same request id.
    resent: AtomicU64,
    /// (request id, attempt) -> accepts of it answered 200.
    accepted: Mutex<HashMap<(Uuid, i64), u32>>,
    /// (request id, attempt) -> the status (and output) an acknowledged complete, reject or fail
    /// gave it.
    ended: Mutex<Ended>,
    /// 5xx answers (other than 503) and answers that broke the contract.
    pub unexpected: AtomicU64,
    /// Requests that failed to connect or got 503 during a fault.
    pub refused: AtomicU64,
    /// The first unexpected answers, for the report.
    surprises: Mutex<Vec<String>>,
}

impl Ledger {
    fn surprise(&self, what: String) {
        self.unexpected.fetch_add(1, Ordering::Relaxed);
        let mut s = self.surprises.lock().unwrap();
        if s.len() < 10 {
            s.push(what);
        }
    }
}

/// Sends `req`: `None` when the service or its database was down (no answer, or 503), or on
/// another 5xx (counted unexpected); else the status and the body.
async fn send(ledger: &Ledger, what: &str, req: reqwest::RequestBuilder) -> Option<(u16, Value)> {
    let Ok(r) = req.send().await else {
        ledger.refused.fetch_add(1, Ordering::Relaxed);
        return None;
    };
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    if status == 503 {
        ledger.refused.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    if status >= 500 {
        ledger.surprise(format!("{what}: {status} {text}"));
        return None;
    }
    Some((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap()
}

/// One requester: delegates until `stop`, every request retried with the same id and body until
/// it is acknowledged.
pub async fn requester_loop(
    base: Arc<Mutex<String>>,
    index: usize,
    agent: Agent,
    ledger: Arc<Ledger>,
    stop: Arc<AtomicBool>,
    seed: u64,
) {
    let client = client();
    let mut rng = Lcg(seed);
    let (agent_id, key) = agent;
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let rid = Uuid::new_v4();
        let body = json!({
            "requestId": rid,
            "agentId": agent_id,
            "taskType": "code-review",
            "input": {"code": format!("fn task_{index}_{n}() {{}}")},
            "timeoutMs": 1500 + rng.below(1501),
            "maxRetries": rng.below(4),
            "fallbackEnabled": rng.below(6) != 0,
        });
        let twice = rng.below(10) == 0;
        let give_up = Instant::now() + Duration::from_secs(30);
        for sent in 0.. {
            let url = base.lock().unwrap().clone();
            let post = || {
                let req = client
                    .post(format!("{url}/api/agents/delegate"))
                    .header("x-api-key", &key)
                    .header("prefer", "respond-async")
                    .json(&body);
                send(&ledger, "delegate", req)
            };
            let answers = if twice && sent == 0 { tokio::join!(post(), post()).into() } else { [post().await, None] };
            let mut acknowledged = false;
            for (status, answer) in answers.into_iter().flatten() {
                match status {
                    // (The body may be cut short when the service is killed while answering.)
                    200 | 202 if answer["delegation"]["requestId"] == json!(rid) || answer.is_null() => {
                        acknowledged = true;
                    }
                    429 => {
                        ledger.refused.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => ledger.surprise(format!("delegate {rid}: {status} {answer}")),
                }
            }
            if acknowledged {
                ledger.acknowledged.lock().unwrap().insert(rid, index);
                if sent > 0 {
                    ledger.resent.fetch_add(1, Ordering::Relaxed);
                }
                break;
            }
            if Instant::now() > give_up {
                ledger.unanswered.fetch_add(1, Ordering::Relaxed);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(250 + rng.below(500))).await;
    }
}

/// One target: long-polls its inbox until `stop`, handling each attempt offered once, at once.
pub async fn target_loop(
    base: Arc<Mutex<String>>,
    agent: Agent,
    ledger: Arc<Ledger>,
    stop: Arc<AtomicBool>,
    seed: u64,
) {
    let client = client();
    let mut rng = Lcg(seed);
    let mut seen = HashSet::new();
    let mut work = tokio::task::JoinSet::new();
    while !stop.load(Ordering::Relaxed) {
        let url = base.lock().unwrap().clone();
        let inbox =
            client.get(format!("{url}/api/agents/{}/delegations/inbox?wait=1", agent.0)).header("x-api-key", &agent.1);
        let mut fresh = 0;
        match send(&ledger, "inbox", inbox).await {
            Some((200, body)) => {
                for item in body["requests"].as_array().into_iter().flatten() {
                    let offer =
                        (item["requestId"].as_str().and_then(|s| s.parse::<Uuid>().ok()), item["attempt"].as_i64());
                    let (Some(rid), Some(attempt), Some(timeout_ms)) = (offer.0, offer.1, item["timeoutMs"].as_u64())
                    else {
                        ledger.surprise(format!("inbox item {item}"));
                        continue;
                    };
                    if seen.insert((rid, attempt)) {
                        fresh += 1;
                        let offer = (rid, attempt, timeout_ms);
                        work.spawn(handle(
                            client.clone(),
                            url.clone(),
                            agent.clone(),
                            ledger.clone(),
                            offer,
                            rng.next(),
                        ));
                    }
                }
            }
            Some((status, body)) if status != 200 => ledger.surprise(format!("inbox: {status} {body}")),
            _ => {}
        }
        while work.try_join_next().is_some() {}
        if fresh == 0 {
            // Only attempts already being handled (or left to time out): the inbox answers at
            // once while it holds any, so wait a little before asking again.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    while work.join_next().await.is_some() {}
}

/// What a target does with one attempt offered to it; behaves badly on purpose.
async fn handle(
    client: reqwest::Client,
    url: String,
    agent: Agent,
    ledger: Arc<Ledger>,
    offer: (Uuid, i64, u64),
    seed: u64,
) {
    let mut rng = Lcg(seed);
    let (rid, attempt, timeout_ms) = offer;
    let (id, key) = agent;
    let at = |verb: &str| format!("{url}/api/agents/{id}/delegations/{rid}/{verb}");
    let choice = rng.below(100);
    if choice < 8 {
        return; // vanish before accepting: the accept timeout ends the attempt
    }
    if choice < 16 {
        end(&client, &ledger, &at("reject"), &key, &json!({"reason": "busy"}), (rid, attempt), "rejected", None).await;
        return;
    }
    let accept = || send(&ledger, "accept", client.post(at("accept")).header("x-api-key", &key));
    // Impatient: two accepts at once; exactly one may be answered 200.
    let answers = if rng.below(8) == 0 { tokio::join!(accept(), accept()).into() } else { [accept().await, None] };
    let mut token = None;
    for (status, body) in answers.into_iter().flatten() {
        match status {
            200 => {
                *ledger.accepted.lock().unwrap().entry((rid, attempt)).or_default() += 1;
                token = body["claimToken"].as_str().map(str::to_owned);
            }
            409 => {} // the other accept, or the accept timeout, came first
            _ => ledger.surprise(format!("accept {rid}: {status} {body}")),
        }
    }
    let Some(token) = token else { return };
    let then = rng.below(100);
    if then < 12 {
        return; // vanish holding it: the execution timeout ends the attempt
    }
    if then < 24 {
        let rejected = json!({"reason": "changed my mind"});
        end(&client, &ledger, &at("reject"), &key, &rejected, (rid, attempt), "rejected", None).await;
        return;
    }
    if then < 40 {
        let failed = json!({"error": "the review crashed", "claimToken": token});
        end(&client, &ledger, &at("fail"), &key, &failed, (rid, attempt), "error", None).await;
        return;
    }
    // Complete: sometimes late (around or after the execution deadline), sometimes first with
    // an output the schema refuses, which must change nothing.
    let pause = if rng.below(4) == 0 { rng.below(timeout_ms + 1000) } else { rng.below(200) };
    tokio::time::sleep(Duration::from_millis(pause)).await;
    if rng.below(5) == 0 {
        let bad = json!({"output": {"feedback": 5}, "claimToken": token});
        let answer = send(&ledger, "complete", client.post(at("complete")).header("x-api-key", &key).json(&bad)).await;
        if let Some((status, body)) = answer
            && status != 400
            && status != 409
        {
            ledger.surprise(format!("complete with a refused output {rid}: {status} {body}"));
        }
    }
    let output = json!({"feedback": format!("reviewed {rid}, attempt {attempt}, by {id}")});
    let done = json!({"output": output, "claimToken": token});
    end(&client, &ledger, &at("complete"), &key, &done, (rid, attempt), "completed", Some(output)).await;
}

/// Sends a complete, reject or fail, again while the service is down (a few seconds); records
/// it when answered 200.
#[allow(clippy::too_many_arguments)]
async fn end(
    client: &reqwest::Client,
    ledger: &Ledger,
    url: &str,
    key: &str,
    body: &Value,
    attempt: (Uuid, i64),
    status: &'static str,
    output: Option<Value>,
) {
    for _ in 0..20 {
        match send(ledger, status, client.post(url).header("x-api-key", key).json(body)).await {
            Some((200, _)) => {
                ledger.ended.lock().unwrap().insert(attempt, (status, output));
                return;
            }
            // Ended already: by its timer, or by this same call whose answer was lost.
            Some((409, _)) => return,
            Some((s, answer)) => {
                ledger.surprise(format!("{status} {}: {s} {answer}", attempt.0));
                return;
            }
            None => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The delegations not ended yet.
pub async fn in_flight(pool: &sqlx::PgPool) -> HashSet<Uuid> {
    sqlx::query_scalar("SELECT delegation_id FROM delegations WHERE ended_at IS NULL")
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// Waits (at most `limit`) until every delegation ended.
pub async fn wait_all_ended(pool: &sqlx::PgPool, limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && !in_flight(pool).await.is_empty() {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What the delegations did, for the summary line.
#[derive(Debug, Default)]
pub struct Counts {
    pub delegations: i64,
    pub completed: i64,
    pub rejected: i64,
    pub timeout: i64,
    pub error: i64,
    pub attempts: i64,
    pub acknowledged: usize,
    pub resent: u64,
    pub unanswered: u64,
    pub accepts: usize,
    pub ends: usize,
    pub refused: u64,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} delegations ({} acknowledged, {} of them after a resend, {} never answered), {} attempts; \
             ended completed {}, rejected {}, timeout {}, error {}; {} acknowledged accepts, {} acknowledged \
             completes/rejects/fails; {} refused requests during faults",
            self.delegations,
            self.acknowledged,
            self.resent,
            self.unanswered,
            self.attempts,
            self.completed,
            self.rejected,
            self.timeout,
            self.error,
            self.accepts,
            self.ends,
            self.refused,
        )
    }
}

/// The attempts of every delegation, as stored: delegation id -> (request id, status,
/// retries_used, output) and its attempts (number, target, status, output, accepted).
type Stored = HashMap<Uuid, ((Uuid, String, i32, Option<Value>), Vec<(i32, Uuid, String, Option<Value>, bool)>)>;

async fn stored(pool: &sqlx::PgPool) -> Stored {
    let mut all: Stored = HashMap::new();
    let rows: Vec<(Uuid, Uuid, String, i32, Option<Value>)> =
        sqlx::query_as("SELECT delegation_id, request_id, status, retries_used, output FROM delegations")
            .fetch_all(pool)
            .await
            .unwrap();
    for (id, rid, status, retries, output) in rows {
        all.insert(id, ((rid, status, retries, output), Vec::new()));
    }
    let attempts: Vec<(Uuid, i32, Uuid, String, Option<Value>, bool)> = sqlx::query_as(
        "SELECT delegation_id, attempt, target_agent_id, status, output, accepted_at IS NOT NULL
         FROM delegation_attempts ORDER BY delegation_id, attempt",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for (id, n, target, status, output, accepted) in attempts {
        all.get_mut(&id).expect("an attempt of a stored delegation").1.push((n, target, status, output, accepted));
    }
    all
}

/// Every invariant, in SQL and over HTTP (the requester's view), against what the clients were
/// told. Prints the first few failures.
pub async fn check(
    pool: &sqlx::PgPool,
    base: &str,
    cast: &Cast,
    ledger: &Ledger,
    in_flight_at_faults: &HashSet<Uuid>,
) -> (Report, Counts) {
    let mut report = Report::default();
    let mut failures = Vec::new();
    let mut fail = |counter: &mut u64, what: String| {
        *counter += 1;
        if failures.len() < 20 {
            failures.push(what);
        }
    };
    let all = stored(pool).await;
    let mut by_request: HashMap<Uuid, Vec<Uuid>> = HashMap::new();
    for (id, ((rid, ..), _)) in &all {
        by_request.entry(*rid).or_default().push(*id);
    }
    // Duplicated: two delegations for one request id.
    for (rid, ids) in &by_request {
        if ids.len() > 1 {
            fail(&mut report.duplicated, format!("{} delegations for request {rid}", ids.len()));
        }
    }
    // Lost: acknowledged, but not stored.
    let acknowledged = ledger.acknowledged.lock().unwrap().clone();
    for rid in acknowledged.keys() {
        if !by_request.contains_key(rid) {
            fail(&mut report.lost, format!("acknowledged request {rid} is not stored"));
        }
    }
    for ((rid, status, retries, output), attempts) in all.values() {
        let terminal = |s: &str| ["completed", "rejected", "timeout", "error"].contains(&s);
        if !terminal(status) {
            fail(&mut report.lost, format!("delegation {rid} never ended ({status})"));
        }
        for (n, _, s, _, _) in attempts {
            if !terminal(s) {
                fail(&mut report.lost, format!("attempt {n} of {rid} never ended ({s})"));
            }
        }
        let numbers: Vec<i32> = attempts.iter().map(|a| a.0).collect();
        if numbers != (1..=attempts.len() as i32).collect::<Vec<_>>() {
            fail(&mut report.lost, format!("attempts of {rid} numbered {numbers:?}"));
        }
        let targets: HashSet<Uuid> = attempts.iter().map(|a| a.1).collect();
        if targets.len() != attempts.len() {
            fail(&mut report.duplicated, format!("a target offered {rid} twice"));
        }
        let completed: Vec<_> = attempts.iter().filter(|a| a.2 == "completed").collect();
        if completed.len() > 1 {
            fail(&mut report.duplicated, format!("{} completed attempts of {rid}", completed.len()));
        }
        if completed.first().is_some_and(|c| c.0 != attempts.len() as i32) {
            fail(&mut report.unexpected, format!("a completed attempt of {rid} is not its last"));
        }
        if *retries != attempts.len() as i32 - 1 {
            fail(&mut report.unexpected, format!("{rid}: retriesUsed {retries} with {} attempts", attempts.len()));
        }
        if attempts.last().map(|a| a.2.as_str()) != Some(status.as_str()) {
            fail(&mut report.unexpected, format!("{rid} is {status}, its last attempt is not"));
        }
        if output.as_ref() != completed.first().and_then(|c| c.3.as_ref()) {
            fail(&mut report.unexpected, format!("{rid}'s output is not its completed attempt's"));
        }
    }
    // Every acknowledged accept and end stands.
    let find = |rid: &Uuid, n: i64| {
        let id = by_request.get(rid)?.first()?;
        let (d, attempts) = all.get(id)?;
        Some((d, attempts.iter().find(|a| i64::from(a.0) == n)?))
    };
    for ((rid, n), times) in ledger.accepted.lock().unwrap().iter() {
        if *times > 1 {
            fail(&mut report.duplicated, format!("attempt {n} of {rid} accepted {times} times"));
        }
        if !find(rid, *n).is_some_and(|(_, a)| a.4) {
            fail(&mut report.lost, format!("acknowledged accept of attempt {n} of {rid} not stored"));
        }
    }
    let ended = ledger.ended.lock().unwrap().clone();
    for ((rid, n), (status, output)) in &ended {
        let Some(((_, d_status, _, d_output), a)) = find(rid, *n) else {
            fail(&mut report.lost, format!("acknowledged {status} of attempt {n} of {rid}: no such attempt"));
            continue;
        };
        if a.2 != *status || a.3 != *output {
            fail(&mut report.lost, format!("acknowledged {status} of attempt {n} of {rid} stored as {}", a.2));
        }
        if *status == "completed" && (d_status != "completed" || d_output != output) {
            fail(&mut report.lost, format!("acknowledged complete of {rid}: the delegation is {d_status}"));
        }
    }
    // The trust counts: each ended attempt that counted (its verdict is on its row) is in the
    // counters once, and no other is: never one between agents of one owner, never a rate-limited
    // skip, never more than the per-requester allowance of one owner for one target on one day.
    let counted: (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT coalesce(sum(attempts_completed), 0), coalesce(sum(attempts_unfinished), 0),
                coalesce(sum(accepted_completed), 0), coalesce(sum(accepted_unfinished), 0) FROM agent_trust_days",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let ended_attempts: (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE status = 'completed'),
                count(*) FILTER (WHERE status IN ('rejected', 'timeout', 'error')),
                count(*) FILTER (WHERE status = 'completed' AND accepted_at IS NOT NULL),
                count(*) FILTER (WHERE status IN ('rejected', 'timeout', 'error') AND accepted_at IS NOT NULL)
         FROM delegation_attempts WHERE counted",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    if counted != ended_attempts {
        let over = counted.0 + counted.1 > ended_attempts.0 + ended_attempts.1;
        let counter = if over { &mut report.duplicated } else { &mut report.lost };
        fail(counter, format!("trust counts {counted:?} for counted attempts {ended_attempts:?}"));
    }
    let (unjudged, own_owner, skipped, over_allowance): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM delegation_attempts WHERE (counted IS NULL) <> (ended_at IS NULL)),
                (SELECT count(*) FROM delegation_attempts a
                   JOIN delegations d ON d.delegation_id = a.delegation_id
                   JOIN agents r ON r.agent_id = d.requester_agent_id
                   JOIN agents t ON t.agent_id = a.target_agent_id
                  WHERE a.counted AND r.owner_user_id = t.owner_user_id),
                (SELECT count(*) FROM delegation_attempts WHERE counted AND reason = 'rate_limited'),
                (SELECT count(*) FROM (
                    SELECT a.target_agent_id, r.owner_user_id, (a.ended_at AT TIME ZONE 'UTC')::date AS day, count(*) AS n
                      FROM delegation_attempts a
                      JOIN delegations d ON d.delegation_id = a.delegation_id
                      JOIN agents r ON r.agent_id = d.requester_agent_id
                     WHERE a.counted GROUP BY 1, 2, 3) per
                  LEFT JOIN trust_requester_days q
                    ON q.target_agent_id = per.target_agent_id AND q.requester_owner_id = per.owner_user_id
                   AND q.day = per.day
                  WHERE q.counted IS DISTINCT FROM per.n OR per.n > $1)",
    )
    .bind(i64::from(parley::Config::default().trust_per_requester))
    .fetch_one(pool)
    .await
    .unwrap();
    if (unjudged, own_owner, skipped, over_allowance) != (0, 0, 0, 0) {
        fail(
            &mut report.duplicated,
            format!(
                "trust rules: {unjudged} attempts without a verdict (or live with one), {own_owner} counted between \
                 agents of one owner, {skipped} rate-limited skips counted, {over_allowance} (target, owner, day) \
                 allowances exceeded or miscounted"
            ),
        );
    }
    // The requester's view over HTTP agrees.
    let client = client();
    for (rid, requester) in &acknowledged {
        let url = format!("{base}/api/delegations/{rid}");
        let r = client.get(&url).header("x-api-key", &cast.requesters[*requester].1).send().await.unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        let d = &body["delegation"];
        let attempts = d["attempts"].as_array().cloned().unwrap_or_default();
        let numbers: Vec<i64> = attempts.iter().filter_map(|a| a["attempt"].as_i64()).collect();
        let completed: Vec<&Value> = attempts.iter().filter(|a| a["status"] == "completed").collect();
        let ok = status.as_u16() == 200
            // The result speaks AgentLens's words: `success` for a completed delegation.
            && body["result"]["status"] == if d["status"] == "completed" { json!("success") } else { d["status"].clone() }
            && ["completed", "rejected", "timeout", "error"].contains(&d["status"].as_str().unwrap_or(""))
            && numbers == (1..=attempts.len() as i64).collect::<Vec<_>>()
            && d["retriesUsed"].as_i64() == Some(attempts.len() as i64 - 1)
            && body["result"]["retriesUsed"] == d["retriesUsed"]
            && completed.len() == usize::from(d["status"] == "completed")
            && attempts.last().map(|a| &a["status"]) == Some(&d["status"]);
        if !ok {
            fail(&mut report.unexpected, format!("GET {rid}: {status} {body}"));
        }
        let acknowledged_output =
            ended.iter().find(|((r, _), (s, _))| r == rid && *s == "completed").map(|(_, (_, o))| o);
        if let Some(Some(output)) = acknowledged_output
            && (d["status"] != "completed" || &body["result"]["output"] != output)
        {
            fail(&mut report.lost, format!("GET {rid}: the acknowledged output is not the result: {body}"));
        }
    }
    report.unexpected += ledger.unexpected.load(Ordering::Relaxed);
    for s in ledger.surprises.lock().unwrap().iter() {
        eprintln!("delegation: unexpected answer: {s}");
    }
    for f in &failures {
        eprintln!("delegation: {f}");
    }
    // Recovered: delegations in flight at a fault that still ended.
    let still = in_flight(pool).await;
    report.recovered =
        in_flight_at_faults.iter().filter(|d| all.contains_key(*d) && !still.contains(*d)).count() as u64;
    let count = |s: &str| all.values().filter(|((_, status, ..), _)| status == s).count() as i64;
    let counts = Counts {
        delegations: all.len() as i64,
        completed: count("completed"),
        rejected: count("rejected"),
        timeout: count("timeout"),
        error: count("error"),
        attempts: all.values().map(|(_, a)| a.len() as i64).sum(),
        acknowledged: acknowledged.len(),
        resent: ledger.resent.load(Ordering::Relaxed),
        unanswered: ledger.unanswered.load(Ordering::Relaxed),
        accepts: ledger.accepted.lock().unwrap().len(),
        ends: ended.len(),
        refused: ledger.refused.load(Ordering::Relaxed),
    };
    (report, counts)
}
