//! Trust: computed from the daily counters with exact components and percentile, provisional
//! until enough owners' attempts count, written by the end of each claim, and stored so that
//! discovery and ranking read it without recomputing: every stored record equals what a full
//! recomputation over the agent's history gives.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;
use uuid::Uuid;

use crate::{
    directory_calls::{capability, discover, put_capability, record, record_attempts, record_requesters, trust},
    fixtures,
    helpers::{Answer, TestAgent, TestApp, answer},
};

#[tokio::test]
async fn trust_is_computed_from_the_record_with_exact_components_and_percentile() {
    let app = TestApp::spawn().await;
    let [a, b, c] = app.register_agents(["user-a", "user-b", "user-c"]).await;
    // A: today 3 of 4 answered, yesterday 1 of 2: health (75 + 50) / 2 = 62.5; a day 40 days
    // ago counts as events only, and days without claims are not averaged.
    record(&app, &a, 0, 3, 1).await;
    record(&app, &a, 1, 1, 1).await;
    record(&app, &a, 2, 0, 0).await;
    record(&app, &a, 40, 0, 5).await;
    // B: 9 of 9: health 100, 9 events.
    record(&app, &b, 0, 9, 0).await;
    // C: only a capability: health 50.
    put_capability(&app, &c, &capability("documentation", None, None)).await;

    let ta = trust(&app, &a).await;
    assert_eq!(ta["agentId"], a.id.as_str());
    assert_eq!(ta["healthComponent"], 62.5);
    assert_eq!(ta["delegationComponent"], 50.0);
    assert_eq!(ta["rawScore"], 57.5); // 0.6 * 62.5 + 0.4 * 50
    assert_eq!(ta["percentile"], 50); // one of the other two is lower
    assert_eq!(ta["otherAgents"], 2); // B and C
    assert_eq!(ta["provisional"], true); // 11 events, but no delegation attempt
    assert_eq!(ta["totalDelegations"], 0);
    assert_eq!(ta["successfulDelegations"], 0);
    assert!(ta["updatedAt"].is_string());

    let tb = trust(&app, &b).await;
    assert_eq!((tb["healthComponent"].as_f64(), tb["rawScore"].as_f64()), (Some(100.0), Some(80.0)));
    assert_eq!((tb["percentile"].as_i64(), tb["provisional"].as_bool()), (Some(100), Some(true)));
    let tc = trust(&app, &c).await;
    assert_eq!(
        (tc["rawScore"].as_f64(), tc["percentile"].as_i64(), tc["provisional"].as_bool()),
        (Some(50.0), Some(0), Some(true))
    );
    assert!(tc["updatedAt"].is_null());

    // Claims alone never make a score more than provisional.
    record(&app, &b, 1, 1, 0).await;
    assert_eq!(trust(&app, &b).await["provisional"], true);

    // The owner and the service may read it too.
    let by_owner = app.get(&format!("/api/trust/{}", a.id), &app.user_token("user-a")).await;
    assert_eq!(by_owner.body, ta);
    assert_eq!(app.get(&format!("/api/trust/{}", a.id), &app.service_token()).await.status, StatusCode::OK);

    // D works for others. Today: 5 attempts ended, 3 completed; it had accepted 4 of them and
    // completed 3 in time, so the day's share is 3 / 4. Yesterday: 1 of 1 claims answered.
    // 40 days ago: 5 attempts ended unfinished (outside the health window, inside the
    // delegation one).
    let d = app.register_agent("user-d").await;
    record_attempts(&app, &d, 0, (3, 2), (3, 1)).await;
    record(&app, &d, 1, 1, 0).await;
    record_attempts(&app, &d, 40, (0, 5), (0, 5)).await;
    let td = trust(&app, &d).await;
    assert_eq!(td["healthComponent"], 87.5); // (75 + 100) / 2
    assert_eq!(td["delegationComponent"], 30.0); // 100 * 3 / 10
    assert_eq!(td["rawScore"], 64.5); // 0.6 * 87.5 + 0.4 * 30
    assert_eq!(td["totalDelegations"], 10);
    assert_eq!(td["successfulDelegations"], 3);
    assert_eq!(td["provisional"], true); // 10 attempts, but from no other owner on record
    record_requesters(&app, &d, &["owner-1", "owner-2"]).await;
    assert_eq!(trust(&app, &d).await["provisional"], true, "10 attempts from 2 other owners");
    record_requesters(&app, &d, &["owner-3"]).await;
    assert_eq!(trust(&app, &d).await["provisional"], false, "10 attempts from 3 other owners");
    // Among A 57.5, B 80, C 50, D 64.5: D is above two of the three others, A above one.
    assert_eq!(td["percentile"], 67);
    assert_eq!(trust(&app, &a).await["percentile"], 33);
    assert_eq!(trust(&app, &b).await["percentile"], 100);
    // Attempts addressed to it that end make up the whole delegation component, whatever the
    // claims say.
    let e = app.register_agent("user-e").await;
    record_attempts(&app, &e, 2, (1, 0), (0, 0)).await;
    let te = trust(&app, &e).await;
    assert_eq!((te["healthComponent"].as_f64(), te["delegationComponent"].as_f64()), (Some(50.0), Some(100.0)));
    assert_eq!((te["rawScore"].as_f64(), te["provisional"].as_bool()), (Some(70.0), Some(true)));
}

/// Alone, an agent is at the 100th percentile by convention, and the answer says it is compared
/// with nobody (`otherAgents` 0), so that nobody reads it as better than everyone.
#[tokio::test]
async fn an_agent_alone_is_at_the_100th_percentile_compared_with_no_other() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let t = trust(&app, &agent).await;
    assert_eq!(
        (t["percentile"].as_i64(), t["rawScore"].as_f64(), t["provisional"].as_bool(), t["otherAgents"].as_i64()),
        (Some(100), Some(50.0), Some(true), Some(0))
    );
    put_capability(&app, &agent, &capability("testing", None, None)).await;
    let t = trust(&app, &agent).await;
    assert_eq!((t["percentile"].as_i64(), t["otherAgents"].as_i64()), (Some(100), Some(0)));
    // A second agent with the same score: the first is above none of the one other.
    let second = app.register_agent("user-maya").await;
    put_capability(&app, &second, &capability("testing", None, None)).await;
    let t = trust(&app, &agent).await;
    assert_eq!((t["percentile"].as_i64(), t["otherAgents"].as_i64()), (Some(0), Some(1)));
}

async fn counters(app: &TestApp, agent: &TestAgent) -> (i32, i32, i32) {
    sqlx::query_as("SELECT claims_answered, claims_expired, claims_released FROM agent_trust_days WHERE agent_id = $1")
        .bind(agent.id.parse::<Uuid>().unwrap())
        .fetch_optional(&app.pool)
        .await
        .unwrap()
        .unwrap_or((0, 0, 0))
}

#[tokio::test]
async fn the_end_of_each_claim_writes_the_holders_daily_counters() {
    let app = TestApp::spawn_with(|c| c.claim_timeout = Duration::from_secs(2)).await;
    let agent = app.register_agent("user-tomas").await;
    let n1 = app.start(&fixtures::good_match()).await["negotiation"]["id"].as_str().unwrap().to_owned();
    let n2 = app.start(&fixtures::good_match()).await["negotiation"]["id"].as_str().unwrap().to_owned();

    // Answered before the claim expired.
    let picked = app.pickup(&agent, None).await;
    assert_eq!(picked.body["negotiationId"], n1.as_str());
    let responded = app.respond(&agent, &n1, &answer("accept", picked.body["claimToken"].as_str())).await;
    assert_eq!(responded.status, StatusCode::OK, "{}", responded.text);
    assert_eq!(counters(&app, &agent).await, (1, 0, 0));

    // Given back.
    let picked = app.pickup(&agent, None).await;
    assert_eq!(picked.body["negotiationId"], n2.as_str());
    let claim = json!({ "claimToken": picked.body["claimToken"] });
    assert_eq!(
        app.agent_call(&agent, Method::POST, &format!("/negotiations/{n2}/release"), Some(&claim)).await.status,
        StatusCode::OK
    );
    assert_eq!(counters(&app, &agent).await, (1, 0, 1));

    // Left to expire: the claim timer parks it again and counts it against the agent.
    assert_eq!(app.pickup(&agent, None).await.status, StatusCode::OK);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while app.snapshot(&n2).await.0 != "waiting_for_agent" {
        assert!(tokio::time::Instant::now() < deadline, "the claim never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(counters(&app, &agent).await, (1, 1, 1));
    let t = trust(&app, &agent).await;
    assert_eq!((t["healthComponent"].as_f64(), t["provisional"].as_bool()), (Some(50.0), Some(true)));
}

/// Every agent's (raw score, percentile, events, provisional) as the whole-population function
/// computes them from history, and as discovery and ranking read them from the stored rows.
type TrustRow = (Uuid, f64, i32, i64, bool);

async fn both_trusts(app: &TestApp) -> (Vec<TrustRow>, Vec<TrustRow>) {
    one_by_one_as_all_at_once(app).await;
    assert_score_counts_exact(app).await;
    let full = sqlx::query_as(
        "SELECT agent_id, raw::float8, percentile, events, provisional FROM parley_trust_scores(NULL) ORDER BY agent_id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let stored = sqlx::query_as(
        "SELECT agent_id, raw::float8, percentile, events, provisional FROM trust_percentiles ORDER BY agent_id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    (full, stored)
}

/// The trust route's computation for one agent (`parley_trust_of`: its own counters, its rank
/// among the stored records) gives every agent, in the population or not, exactly the row the
/// whole-population computation gives it.
async fn one_by_one_as_all_at_once(app: &TestApp) {
    let agents: Vec<Uuid> =
        sqlx::query_scalar("SELECT agent_id FROM agents ORDER BY agent_id").fetch_all(&app.pool).await.unwrap();
    for agent in agents {
        let row = |function: &str| {
            format!(
                "SELECT agent_id, health::text, delegation::text, raw::text, percentile, events, total_delegations,
                        successful_delegations, updated_at::text, provisional
                   FROM {function}($1) WHERE agent_id = $1"
            )
        };
        type Row = (Uuid, String, String, String, i32, i64, i64, i64, Option<String>, bool);
        let all: Row = sqlx::query_as(sqlx::AssertSqlSafe(row("parley_trust_scores")))
            .bind(agent)
            .fetch_one(&app.pool)
            .await
            .unwrap();
        let one: Row =
            sqlx::query_as(sqlx::AssertSqlSafe(row("parley_trust_of"))).bind(agent).fetch_one(&app.pool).await.unwrap();
        assert_eq!(one, all, "agent {agent}");
    }
}

#[tokio::test]
async fn stored_trust_follows_counters_and_capabilities_exactly() {
    // No timer workers: the housekeeping they run at start would race the one run below.
    let app = TestApp::spawn_with(|c| c.workers = false).await;
    let [a, b, c, d, e] = app.register_agents(["user-a", "user-b", "user-c", "user-d", "user-e"]).await;
    put_capability(&app, &a, &capability("testing", None, None)).await;
    record(&app, &a, 0, 3, 1).await;
    record(&app, &a, 1, 1, 1).await;
    record(&app, &a, 40, 0, 5).await;
    // A record only, no capability.
    record(&app, &b, 0, 9, 0).await;
    // A capability only.
    put_capability(&app, &c, &capability("analysis", None, None)).await;
    // A record older than 90 days only: outside the population.
    record(&app, &d, 95, 2, 2).await;
    record_attempts(&app, &d, 95, (1, 1), (1, 1)).await;
    // Delegation ends: C's today (ten of them, from three other owners: not provisional), A's
    // 40 days ago and today.
    record_requesters(&app, &c, &["owner-1", "owner-2", "owner-3"]).await;
    record_attempts(&app, &c, 0, (2, 1), (2, 0)).await;
    record_attempts(&app, &c, 1, (7, 0), (0, 0)).await;
    record_attempts(&app, &a, 40, (0, 3), (0, 3)).await;
    record_attempts(&app, &a, 0, (1, 0), (1, 0)).await;
    // A capability, then none: outside it again.
    let gone = put_capability(&app, &e, &capability("analysis", None, None)).await.body["capability"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (full, stored) = both_trusts(&app).await;
    assert_eq!(full.len(), 4);
    assert_eq!(stored, full);
    app.agent_call(&e, Method::DELETE, &format!("/capabilities/{gone}"), None).await;
    // Counters changed by an update, as the end of a claim changes them.
    sqlx::query("UPDATE agent_trust_days SET claims_expired = claims_expired + 3 WHERE agent_id = $1")
        .bind(b.id.parse::<Uuid>().unwrap())
        .execute(&app.pool)
        .await
        .unwrap();
    let (full, stored) = both_trusts(&app).await;
    assert_eq!(full.len(), 3);
    assert_eq!(stored, full);
    // An attempt's end, as the end of an attempt writes it.
    record_attempts(&app, &b, 0, (0, 1), (0, 1)).await;
    let (full, stored) = both_trusts(&app).await;
    assert_eq!(stored, full);
    // The delegation record moved the raw scores: A (health (80 + 50) / 2, today's share being
    // (3 + 1) / (4 + 1); delegation 1 of 4) and C (health 2 of 2, delegation 2 of 3).
    let raw = |id: &str| full.iter().find(|r| r.0.to_string() == id).unwrap().1;
    assert_eq!(raw(&a.id), 49.0); // 0.6 * 65 + 0.4 * 25
    assert_eq!(raw(&c.id), 96.0); // 0.6 * 100 + 0.4 * 90
    let provisional = |id: &str| full.iter().find(|r| r.0.to_string() == id).unwrap().4;
    assert!(!provisional(&c.id) && provisional(&a.id));

    // A row computed on an earlier day (the windows have moved since) is recomputed by
    // housekeeping, never by a request: a discovery reads it as it is.
    sqlx::query("UPDATE trust_records SET as_of = as_of - 1, raw = 0 WHERE agent_id = $1")
        .bind(a.id.parse::<Uuid>().unwrap())
        .execute(&app.pool)
        .await
        .unwrap();
    let stale = stored_trusts(&app).await;
    assert_ne!(stale, full);
    assert_eq!(discover(&app, "taskType=testing").await.status, StatusCode::OK);
    assert_eq!(stored_trusts(&app).await, stale, "a discovery does not roll trust over");
    let upkeep = run_upkeep(&app).await;
    assert_eq!(upkeep.trust_rolled, 1);
    assert_eq!(both_trusts(&app).await.1, full);
    assert_eq!(run_upkeep(&app).await.trust_rolled, 0, "nothing left to roll");
}

/// What discovery and ranking read of every stored record.
/// The directory's upkeep, as housekeeping runs it.
async fn run_upkeep(app: &TestApp) -> parley::upkeep::Upkeep {
    parley::upkeep::run(app.state.pool(), app.state.config().anonymous_id_ttl).await.unwrap()
}

async fn stored_trusts(app: &TestApp) -> Vec<TrustRow> {
    sqlx::query_as(
        "SELECT agent_id, raw::float8, percentile, events, provisional FROM trust_percentiles ORDER BY agent_id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

/// Housekeeping rolls every stale record over, a batch at a time, and the records it leaves are
/// those a full recomputation gives.
#[tokio::test]
async fn housekeeping_rolls_every_stale_record_over_in_batches() {
    // No timer workers: the housekeeping they run at start would race the one run below.
    let app = TestApp::spawn_with(|c| c.workers = false).await;
    let mut agents = Vec::new();
    for i in 0..3 {
        let agent = app.register_agent(&format!("user-{i}")).await;
        put_capability(&app, &agent, &capability("analysis", None, None)).await;
        record(&app, &agent, 29, 2 + i, 1).await;
        agents.push(agent);
    }
    let (full, stored) = both_trusts(&app).await;
    assert_eq!(stored, full);
    // 1 200 agents more in the population, then every record computed a day ago, from numbers
    // that no longer hold.
    sqlx::query("INSERT INTO agents (agent_id, owner_user_id, name) SELECT gen_random_uuid(), 'bulk-' || i, 'bulk' FROM generate_series(1, 1200) i")
        .execute(&app.pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO agent_trust_days (agent_id, day, claims_answered, claims_expired)
         SELECT agent_id, (now() AT TIME ZONE 'UTC')::date - 3, 1, (agent_id::text < '8')::int FROM agents WHERE owner_user_id LIKE 'bulk-%'",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query("UPDATE trust_records SET as_of = as_of - 1, health = 0, raw = 0, events = 0")
        .execute(&app.pool)
        .await
        .unwrap();
    assert!(stored_trusts(&app).await.iter().all(|r| r.1 == 0.0));
    let upkeep = run_upkeep(&app).await;
    assert_eq!(upkeep.trust_rolled, 1203);
    let (full, stored) = both_trusts(&app).await;
    assert_eq!(full.len(), 1203);
    assert_eq!(stored, full);
}

#[tokio::test]
async fn discovery_and_ranking_never_run_the_full_trust_computation() {
    let app = TestApp::spawn().await;
    let mut agents = Vec::new();
    for (i, answered) in [1, 3, 9].into_iter().enumerate() {
        let agent = app.register_agent(&format!("user-{i}")).await;
        put_capability(&app, &agent, &capability("code-review", None, None)).await;
        record(&app, &agent, 0, answered, 3).await;
        agents.push(agent);
    }
    let mut expected = Vec::new();
    for agent in &agents {
        expected.push(trust(&app, agent).await["percentile"].as_i64().unwrap());
    }
    assert_eq!(expected, [0, 50, 100]);

    // From here on, computing trust from history fails: only the trust route still does.
    sqlx::query(
        "CREATE OR REPLACE FUNCTION parley_trust_scores(p_agent uuid)
         RETURNS TABLE (agent_id uuid, health numeric, delegation numeric, raw numeric, percentile integer,
                        events bigint, total_delegations bigint, successful_delegations bigint,
                        updated_at timestamptz, provisional boolean)
         LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'trust recomputed from history'; END $$",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let tripped = sqlx::query("SELECT * FROM parley_trust_scores(NULL)").execute(&app.pool).await;
    assert!(tripped.is_err(), "the trip wire is armed");
    // The trust route does not run it either: it reads the agent's own counters.
    for (agent, percentile) in agents.iter().zip(&expected) {
        assert_eq!(trust(&app, agent).await["percentile"].as_i64(), Some(*percentile));
    }

    let percentiles = |answer: &Answer, list: &str| -> Vec<i64> {
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        let mut p: Vec<i64> =
            answer.body[list].as_array().unwrap().iter().map(|r| r["trustScorePercentile"].as_i64().unwrap()).collect();
        p.sort();
        p
    };
    let found = discover(&app, "taskType=code-review").await;
    assert_eq!(percentiles(&found, "results"), expected);
    let best = found.body["results"].as_array().unwrap().iter().find(|r| r["trustScorePercentile"] == 100).unwrap()["anonymousAgentId"].clone();
    let ranked = app
        .post("/api/agents/rank", &app.service_token(), &json!({"task_summary": "review", "taskType": "code-review"}))
        .await;
    assert_eq!(ranked.status, StatusCode::OK, "{}", ranked.text);
    let assessed =
        ranked.body["candidates"].as_array().unwrap().len() + ranked.body["rejected"].as_array().unwrap().len();
    assert_eq!(assessed, 3, "{}", ranked.text);

    // New counters still reach discovery at once: the best agent's day turns very bad.
    sqlx::query("UPDATE agent_trust_days SET claims_expired = claims_expired + 100 WHERE agent_id = $1")
        .bind(agents[2].id.parse::<Uuid>().unwrap())
        .execute(&app.pool)
        .await
        .unwrap();
    let found = discover(&app, "taskType=code-review").await;
    assert_eq!(percentiles(&found, "results"), [0, 50, 100]);
    let worst = found.body["results"].as_array().unwrap().iter().find(|r| r["trustScorePercentile"] == 0).unwrap()["anonymousAgentId"].clone();
    assert_eq!(worst, best, "{}", found.text);
}

/// The trust record each counter write leaves (one row trigger per counter row) is the record
/// the full recomputation over the agent's whole 90-day history gives, whatever mix of claims,
/// attempts, days and statements wrote the counters.
#[tokio::test]
async fn each_counter_write_leaves_the_record_a_full_recomputation_gives() {
    let app = TestApp::spawn().await;
    let agents =
        [app.register_agent("user-a").await, app.register_agent("user-b").await, app.register_agent("user-c").await];
    let records = || async {
        sqlx::query_as::<_, (Uuid, String, String, i64, String)>(
            "SELECT agent_id, health::text, raw::text, events, updated_at::text FROM trust_records ORDER BY agent_id",
        )
        .fetch_all(&app.pool)
        .await
        .unwrap()
    };
    // Claims answered and expired over several days (one in the 30-day window only, one outside
    // the 90-day window), attempts finished and accepted, and one statement writing two agents.
    record(&app, &agents[0], 0, 7, 2).await;
    record(&app, &agents[0], 12, 3, 3).await;
    record(&app, &agents[0], 45, 1, 4).await;
    record(&app, &agents[0], 120, 9, 0).await;
    record_attempts(&app, &agents[0], 0, (4, 1), (3, 1)).await;
    record_attempts(&app, &agents[1], 3, (0, 2), (0, 1)).await;
    record(&app, &agents[2], 200, 5, 5).await;
    sqlx::query(
        "UPDATE agent_trust_days SET claims_expired = claims_expired + 1, updated_at = now()
          WHERE agent_id = ANY($1)",
    )
    .bind(agents[..2].iter().map(|a| a.id.parse::<Uuid>().unwrap()).collect::<Vec<_>>())
    .execute(&app.pool)
    .await
    .unwrap();
    let incremental = records().await;
    // Agent c's only record is 200 days old: it is in no population.
    let ids: Vec<Uuid> = incremental.iter().map(|r| r.0).collect();
    assert_eq!(ids.len(), 2, "{incremental:?}");
    assert!(!ids.contains(&agents[2].id.parse().unwrap()));

    sqlx::query("SELECT parley_refresh_trust_records(ARRAY(SELECT agent_id FROM agents ORDER BY agent_id))")
        .execute(&app.pool)
        .await
        .unwrap();
    assert_eq!(records().await, incremental);
    // And the record reads as the trust route defines it (health to 2 decimals), from the same
    // counters.
    let health: String = sqlx::query_scalar("SELECT health::text FROM parley_trust_scores($1) WHERE agent_id = $1")
        .bind(agents[0].id.parse::<Uuid>().unwrap())
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let stored = incremental.iter().find(|r| r.0 == agents[0].id.parse::<Uuid>().unwrap()).unwrap();
    assert_eq!(health.parse::<f64>().unwrap(), (stored.1.parse::<f64>().unwrap() * 100.0).round() / 100.0);
}

/// The counts per raw score that every percentile is read from (`trust_score_counts`) are the
/// records' own: what counting them gives, with no score counted below zero.
async fn assert_score_counts_exact(app: &TestApp) {
    let kept: Vec<(f64, i64)> =
        sqlx::query_as("SELECT raw::float8, n FROM trust_score_counts WHERE n <> 0 ORDER BY raw")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    let counted: Vec<(f64, i64)> =
        sqlx::query_as("SELECT raw::float8, count(*) FROM trust_records GROUP BY raw ORDER BY raw")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(kept, counted);
}

/// Transactions that move records between scores at once (several statements each, taking
/// the scores in any order; each its own agents, so only the counts are shared) all commit:
/// the counts add no lock that two of them could take in opposite orders. The counts are
/// exact after, and so are the percentiles read from them.
#[tokio::test]
async fn counts_per_score_stay_exact_when_records_move_at_once() {
    let app = TestApp::spawn_with(|c| c.workers = false).await;
    const WRITERS: usize = 8;
    const AGENTS_EACH: usize = 4;
    sqlx::query(
        "INSERT INTO agents (agent_id, owner_user_id, name)
         SELECT gen_random_uuid(), 'mover-' || i, 'mover' FROM generate_series(1, $1) i",
    )
    .bind((WRITERS * AGENTS_EACH) as i32)
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO trust_records (agent_id, health, raw, events, as_of, provisional)
         SELECT agent_id, 50, 50.00, 0, (now() AT TIME ZONE 'UTC')::date, true FROM agents
          WHERE owner_user_id LIKE 'mover-%'",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let movers: Vec<Uuid> =
        sqlx::query_scalar("SELECT agent_id FROM agents WHERE owner_user_id LIKE 'mover-%' ORDER BY agent_id")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    let writers = movers.chunks(AGENTS_EACH).enumerate().map(|(w, own)| {
        let (pool, own) = (app.pool.clone(), own.to_vec());
        tokio::spawn(async move {
            for round in 0..25usize {
                let mut tx = pool.begin().await?;
                for (i, agent) in own.iter().enumerate() {
                    // Scores from a handful, so that writers share them, in an order that
                    // differs between writers and rounds.
                    let raw = ((w * 7 + round * 3 + i * 5) % 6) as f64 * 10.0 + 0.25;
                    sqlx::query("UPDATE trust_records SET raw = $2 WHERE agent_id = $1")
                        .bind(agent)
                        .bind(raw)
                        .execute(&mut *tx)
                        .await?;
                }
                if round % 5 == 0 {
                    // A record leaves the population and comes back at another score.
                    sqlx::query("DELETE FROM trust_records WHERE agent_id = $1").bind(own[0]).execute(&mut *tx).await?;
                    sqlx::query(
                        "INSERT INTO trust_records (agent_id, health, raw, events, as_of, provisional)
                         VALUES ($1, 50, $2, 0, (now() AT TIME ZONE 'UTC')::date, true)",
                    )
                    .bind(own[0])
                    .bind(((w + round) % 6) as f64 * 10.0 + 0.5)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    });
    for writer in futures::future::join_all(writers).await {
        writer.unwrap().expect("every moving transaction commits");
    }
    assert_score_counts_exact(&app).await;
    let percentiles: Vec<(Uuid, i32)> =
        sqlx::query_as("SELECT agent_id, percentile FROM trust_percentiles ORDER BY agent_id")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    let ranked: Vec<(Uuid, i32)> = sqlx::query_as(
        "SELECT agent_id,
                CASE WHEN count(*) OVER () <= 1 THEN 100
                     ELSE round(100.0 * (rank() OVER (ORDER BY raw) - 1) / (count(*) OVER () - 1))::integer END
           FROM trust_records ORDER BY agent_id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(percentiles, ranked);
}
