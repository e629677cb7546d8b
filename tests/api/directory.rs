//! The agent directory: capabilities and their permissions, anonymous ids, and discovery and its
//! ranking, each read right after every kind of write.

use std::time::Duration;

use parley::anonymity::{self, AnonymousId};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    directory_calls::{capability, discover, put_capability, ranking, record, trust, with_an_expired_anonymous_id},
    helpers::{Answer, TestAgent, TestApp},
};

#[tokio::test]
async fn a_capability_is_created_replaced_listed_and_deleted_by_its_agent_or_owner() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let created = put_capability(&app, &agent, &capability("code-review", Some(0.05), Some(5000))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let id = created.body["capability"]["id"].as_str().unwrap().to_owned();
    let anonymous = created.body["anonymousAgentId"].as_str().unwrap().to_owned();
    assert_eq!(
        created.body["capability"]["permissions"],
        json!({"enabled": true, "acceptDelegations": true, "inboundRateLimit": 10, "outboundRateLimit": 20})
    );

    // The owner's token replaces it: same id, new estimates.
    let owner = app.user_token("user-tomas");
    let replaced = app
        .call(
            Method::PUT,
            &format!("/api/agents/{}/capabilities", agent.id),
            Some(&owner),
            Some(&capability("code-review", Some(1.0), None)),
        )
        .await;
    assert_eq!(replaced.status, StatusCode::OK, "{}", replaced.text);
    assert_eq!(replaced.body["capability"]["id"], id.as_str());
    assert_eq!(replaced.body["capability"]["estimatedCostUsd"], 1.0);
    assert!(replaced.body["capability"].get("estimatedLatencyMs").is_none());
    assert_eq!(replaced.body["anonymousAgentId"], anonymous.as_str());

    // A custom one is another capability; two custom types are two more.
    let mut custom = capability("custom", None, None);
    custom["customType"] = json!("legal-review");
    assert_eq!(put_capability(&app, &agent, &custom).await.status, StatusCode::CREATED);
    custom["customType"] = json!("contract-drafting");
    assert_eq!(put_capability(&app, &agent, &custom).await.status, StatusCode::CREATED);
    let listed = app.agent_call(&agent, Method::GET, "/capabilities", None).await;
    assert_eq!(listed.body["capabilities"].as_array().unwrap().len(), 3, "{}", listed.text);
    assert_eq!(listed.body["anonymousAgentId"], anonymous.as_str());

    // Permissions change only what is given.
    let p = app
        .agent_call(
            &agent,
            Method::PUT,
            &format!("/capabilities/{id}/permissions"),
            Some(&json!({"enabled": false, "inboundRateLimit": 3})),
        )
        .await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.text);
    assert_eq!(
        p.body["capability"]["permissions"],
        json!({"enabled": false, "acceptDelegations": true, "inboundRateLimit": 3, "outboundRateLimit": 20})
    );

    let deleted = app.agent_call(&agent, Method::DELETE, &format!("/capabilities/{id}"), None).await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(deleted.body, json!({"deleted": true}));
    app.agent_call(&agent, Method::DELETE, &format!("/capabilities/{id}"), None)
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    assert_eq!(app.count("capabilities").await, 2);
}

#[tokio::test]
async fn capability_routes_refuse_other_callers_and_unknown_agents() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    let eve = app.register_agent("user-eve").await;
    let path = format!("/api/agents/{}/capabilities", tomas.id);
    let body = capability("testing", None, None);
    let eve_jwt = app.user_token("user-eve");
    // Another user's agent is as unknown as one that does not exist.
    app.call(Method::PUT, &path, Some(&eve_jwt), Some(&body)).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    app.call(Method::PUT, &path, Some(&app.service_token()), Some(&body))
        .await
        .assert_error(StatusCode::FORBIDDEN, "forbidden");
    let with_eve_key =
        app.client.put(format!("{}{path}", app.base)).header("x-api-key", &eve.key).json(&body).send().await.unwrap();
    assert_eq!(with_eve_key.status(), StatusCode::FORBIDDEN);
    let unknown = format!("/api/agents/{}/capabilities", Uuid::now_v7());
    app.call(Method::PUT, &unknown, Some(&app.user_token("user-tomas")), Some(&body))
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    app.call(Method::GET, &format!("/api/trust/{}", Uuid::now_v7()), Some(&app.service_token()), None)
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    app.call(Method::GET, &format!("/api/trust/{}", tomas.id), Some(&eve_jwt), None)
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    assert_eq!(app.count("capabilities").await, 0);
}

#[tokio::test]
async fn bad_capabilities_are_refused_naming_the_field_and_store_nothing() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let good = capability("code-review", Some(0.05), Some(5000));
    let with = |key: &str, value: Value| {
        let mut b = good.clone();
        b[key] = value;
        b
    };
    let cases = [
        (with("inputSchema", json!({"type": "no-such-type"})), "inputSchema"),
        (with("outputSchema", json!({"properties": {"a": {"minimum": "five"}}})), "outputSchema"),
        (with("inputSchema", json!("not a schema")), "inputSchema"),
        (with("taskType", json!("cooking")), "taskType"),
        (with("taskType", json!("custom")), "customType"),
        (with("customType", json!("legal")), "customType"),
        (with("estimatedCostUsd", json!(-0.01)), "estimatedCostUsd"),
        (with("estimatedCostUsd", json!("cheap")), "estimatedCostUsd"),
        (with("estimatedLatencyMs", json!(-1)), "estimatedLatencyMs"),
        (with("estimatedLatencyMs", json!(1.5)), "estimatedLatencyMs"),
        (with("skill", json!({"tags": "not a list"})), "skill"),
        (with("tags", json!([""])), "tags"),
        (with("unknownField", json!(1)), "unknownField"),
        (json!({"taskType": "testing", "outputSchema": {}}), "inputSchema"),
    ];
    for (body, field) in cases {
        let a = put_capability(&app, &agent, &body).await;
        a.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
        assert!(a.body["error"].as_str().unwrap().contains(field), "{field}: {}", a.text);
    }
    assert_eq!(app.count("capabilities").await, 0);
    assert_eq!(app.count("anonymous_ids").await, 0);

    // Bad permissions and unknown capabilities change nothing either.
    let id = put_capability(&app, &agent, &good).await.body["capability"]["id"].as_str().unwrap().to_owned();
    for (body, field) in [
        (json!({"inboundRateLimit": -1}), "inboundRateLimit"),
        (json!({"outboundRateLimit": 10001}), "outboundRateLimit"),
        (json!({"outboundRateLimit": "many"}), "outboundRateLimit"),
        (json!({"enabled": false, "inboundRateLimit": 2.5}), "inboundRateLimit"),
        (json!({"enabled": "no"}), "enabled"),
    ] {
        let a = app.agent_call(&agent, Method::PUT, &format!("/capabilities/{id}/permissions"), Some(&body)).await;
        a.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
        assert!(a.text.contains(field) || field == "enabled", "{field}: {}", a.text);
    }
    let unknown = Uuid::now_v7();
    app.agent_call(
        &agent,
        Method::PUT,
        &format!("/capabilities/{unknown}/permissions"),
        Some(&json!({"enabled": false})),
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "not_found");
    let listed = app.agent_call(&agent, Method::GET, "/capabilities", None).await;
    assert_eq!(listed.body["capabilities"][0]["permissions"]["enabled"], true);
    assert_eq!(listed.body["capabilities"][0]["permissions"]["inboundRateLimit"], 10);
}

/// Six agents whose records put their trust at the percentiles 0, 20, 40, 60, 80 and 100, each
/// with a code-review capability; returns them with their anonymous ids.
async fn ranked_six(app: &TestApp) -> Vec<(TestAgent, String)> {
    // (answered, expired) -> health 0, 25, 50, 75, 90, 100 -> raw 20, 35, 50, 65, 74, 80.
    let records = [(0, 1), (1, 3), (2, 2), (3, 1), (9, 1), (1, 0)];
    // (cost, latency) of each one's capability.
    let estimates = [
        (Some(1.0), Some(300)),
        (Some(50.0), Some(15_000)),
        (Some(200.0), Some(60_000)),
        (Some(0.0), Some(0)),
        (Some(5.0), Some(3000)),
        (None, None),
    ];
    let mut agents = Vec::new();
    for (i, ((answered, expired), (cost, latency))) in records.into_iter().zip(estimates).enumerate() {
        let agent = app.register_agent(&format!("user-{i}")).await;
        record(app, &agent, 0, answered, expired).await;
        let a = put_capability(app, &agent, &capability("code-review", cost, latency)).await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
        let anonymous = a.body["anonymousAgentId"].as_str().unwrap().to_owned();
        agents.push((agent, anonymous));
    }
    agents
}

#[tokio::test]
async fn discovery_ranks_by_the_composite_of_trust_cost_and_latency() {
    let app = TestApp::spawn().await;
    let six = ranked_six(&app).await;
    let anon = |i: usize| six[i].1.clone();
    let percentiles: Vec<i64> = {
        let mut p = Vec::new();
        for (agent, _) in &six {
            p.push(trust(&app, agent).await["percentile"].as_i64().unwrap());
        }
        p
    };
    assert_eq!(percentiles, [0, 20, 40, 60, 80, 100]);

    // 80/100 at cost 5 of 100 and latency 3 000 of 30 000: 0.4 + 0.285 + 0.18.
    // Unknown cost and latency count 0.5 each: 0.5 + 0.15 + 0.1. Costs above the cap score 0.
    let all = discover(&app, "taskType=code-review").await;
    assert_eq!(
        ranking(&all),
        [(anon(4), 0.865), (anon(3), 0.8), (anon(5), 0.75), (anon(0), 0.495), (anon(1), 0.35), (anon(2), 0.2)]
    );
    let top = &all.body["results"][0];
    assert_eq!(top["trustScorePercentile"], 80);
    assert_eq!(top["provisional"], true, "claims alone leave a score provisional");
    assert_eq!(top["estimatedCostUsd"], 5.0);
    assert_eq!(top["estimatedLatencyMs"], 3000);
    assert_eq!(top["taskType"], "code-review");
    assert_eq!(top["qualityMetrics"], json!({"completedTasks": 0}));
    assert_eq!(all.body["results"][2]["provisional"], true);
    assert!(all.body["results"][2].get("estimatedCostUsd").is_none());

    // The caps filter where known and scale the scores.
    assert_eq!(
        ranking(&discover(&app, "taskType=code-review&maxCostUsd=10").await),
        [(anon(3), 0.8), (anon(5), 0.75), (anon(4), 0.73), (anon(0), 0.468)]
    );
    assert_eq!(
        ranking(&discover(&app, "taskType=code-review&maxLatencyMs=3000").await),
        [(anon(3), 0.8), (anon(5), 0.75), (anon(4), 0.685), (anon(0), 0.477)]
    );
    assert_eq!(
        ranking(&discover(&app, "taskType=code-review&minTrustScore=60").await),
        [(anon(4), 0.865), (anon(3), 0.8), (anon(5), 0.75)]
    );
    assert_eq!(ranking(&discover(&app, "taskType=code-review&limit=2").await), [(anon(4), 0.865), (anon(3), 0.8)]);
    assert_eq!(ranking(&discover(&app, "taskType=code-review&limit=500").await).len(), 6);
    assert_eq!(ranking(&discover(&app, "taskType=testing").await), []);

    // A disabled capability and an inactive agent are not shown.
    let (agent3, _) = &six[3];
    let id = app.agent_call(agent3, Method::GET, "/capabilities", None).await.body["capabilities"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.agent_call(agent3, Method::PUT, &format!("/capabilities/{id}/permissions"), Some(&json!({"enabled": false})))
        .await;
    let (agent4, _) = &six[4];
    app.call(
        Method::PATCH,
        &format!("/api/agents/{}", agent4.id),
        Some(&app.user_token("user-4")),
        Some(&json!({"status": "inactive"})),
    )
    .await;
    let shown: Vec<String> = ranking(&discover(&app, "taskType=code-review").await).into_iter().map(|r| r.0).collect();
    assert_eq!(shown, [anon(5), anon(0), anon(1), anon(2)]);
}

#[tokio::test]
async fn the_configured_trust_floor_applies_with_the_callers_minimum() {
    let app = TestApp::spawn_with(|c| c.min_trust = 80).await;
    let six = ranked_six(&app).await;
    let shown = |a: &Answer| ranking(a).into_iter().map(|r| r.0).collect::<Vec<_>>();
    assert_eq!(shown(&discover(&app, "taskType=code-review").await), [six[4].1.clone(), six[5].1.clone()]);
    assert_eq!(
        shown(&discover(&app, "taskType=code-review&minTrustScore=10").await),
        [six[4].1.clone(), six[5].1.clone()]
    );
    assert_eq!(shown(&discover(&app, "taskType=code-review&minTrustScore=90").await), [six[5].1.clone()]);
}

#[tokio::test]
async fn discovery_filters_custom_types_and_breaks_ties_by_anonymous_id() {
    let app = TestApp::spawn().await;
    let mut legal = Vec::new();
    for i in 0..4 {
        let agent = app.register_agent(&format!("user-{i}")).await;
        let mut body = capability("custom", Some(10.0), Some(1000));
        body["customType"] = json!(if i < 3 { "legal" } else { "medical" });
        let a = put_capability(&app, &agent, &body).await;
        if i < 3 {
            legal.push(a.body["anonymousAgentId"].as_str().unwrap().to_owned());
        }
    }
    legal.sort();
    // No records: every agent has the same trust, every capability the same estimates.
    let found = ranking(&discover(&app, "taskType=custom&customType=legal").await);
    let ids: Vec<String> = found.iter().map(|r| r.0.clone()).collect();
    assert_eq!(ids, legal);
    assert!(found.iter().all(|r| r.1 == found[0].1));
    assert_eq!(ranking(&discover(&app, "taskType=custom&customType=medical").await).len(), 1);
    assert_eq!(ranking(&discover(&app, "taskType=custom").await).len(), 4);
}

#[tokio::test]
async fn discovery_answers_show_neither_agent_ids_nor_owners() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let mut body = capability("analysis", Some(1.0), Some(100));
    body["description"] = json!("Reads your data");
    put_capability(&app, &agent, &body).await;
    let by_key = app.keyed(&agent, Method::GET, "/api/agents/discover?taskType=analysis", None).await;
    for answer in [discover(&app, "taskType=analysis").await, by_key] {
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        assert!(!answer.text.contains(&agent.id), "{}", answer.text);
        assert!(!answer.text.contains("user-tomas"), "{}", answer.text);
        let keys: Vec<&String> = answer.body["results"][0].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "anonymousAgentId",
                "capabilityId",
                "taskType",
                "inputSchema",
                "outputSchema",
                "trustScorePercentile",
                "provisional",
                "estimatedLatencyMs",
                "estimatedCostUsd",
                "compositeScore",
                "qualityMetrics"
            ]
        );
    }
}

#[tokio::test]
async fn bad_discovery_queries_are_refused_and_change_nothing() {
    let app = with_an_expired_anonymous_id().await;
    for query in [
        "",
        "taskType=",
        "taskType=cooking",
        "taskType=testing&minTrustScore=high",
        "taskType=testing&minTrustScore=101",
        "taskType=testing&maxCostUsd=-1",
        "taskType=testing&maxCostUsd=0",
        "taskType=testing&maxLatencyMs=soon",
        "taskType=testing&limit=0",
        "taskType=testing&limit=ten",
        "taskType=testing&customType=x",
    ] {
        discover(&app, query).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    }
    let no_credentials = app.call(Method::GET, "/api/agents/discover?taskType=testing", None, None).await;
    no_credentials.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    // Not even the expired anonymous id was replaced.
    assert_eq!(app.count("anonymous_ids").await, 1);
}

/// The published spec documents discovery's bounds (`taskType` required, `minTrustScore` 0-100,
/// the caps above 0, `limit` from 1, `customType` up to 100 characters): a value at each edge
/// is served, and the next one past it refused.
#[tokio::test]
async fn discovery_serves_the_edges_its_spec_documents_and_refuses_past_them() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let longest = "x".repeat(100);
    let mut body = capability("custom", Some(1.0), Some(100));
    body["customType"] = json!(longest);
    put_capability(&app, &agent, &body).await;
    for query in [
        "taskType=testing&minTrustScore=0".to_owned(),
        "taskType=testing&minTrustScore=100".to_owned(),
        "taskType=testing&maxCostUsd=0.0001&maxLatencyMs=0.5".to_owned(),
        "taskType=testing&limit=1".to_owned(),
        format!("taskType=custom&customType={longest}&limit=9223372036854775807"),
    ] {
        let answer = discover(&app, &query).await;
        assert_eq!(answer.status, StatusCode::OK, "{query}: {}", answer.text);
    }
    assert_eq!(ranking(&discover(&app, &format!("taskType=custom&customType={longest}")).await).len(), 1);
    for query in [
        "taskType=testing&minTrustScore=-0.5".to_owned(),
        "taskType=testing&minTrustScore=100.5".to_owned(),
        "taskType=testing&maxLatencyMs=0".to_owned(),
        format!("taskType=custom&customType={longest}x"),
    ] {
        discover(&app, &query).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    }
    let spec = parley::openapi_spec();
    let params = spec["paths"]["/api/agents/discover"]["get"]["parameters"].as_array().unwrap().clone();
    let param = |name: &str| params.iter().find(|p| p["name"] == name).unwrap().clone();
    assert_eq!(param("taskType")["required"], true);
    assert_eq!(param("minTrustScore")["schema"]["minimum"], 0);
    assert_eq!(param("minTrustScore")["schema"]["maximum"], 100);
    assert_eq!(param("maxCostUsd")["schema"]["exclusiveMinimum"], 0);
    assert_eq!(param("maxLatencyMs")["schema"]["exclusiveMinimum"], 0);
    assert_eq!(param("limit")["schema"]["minimum"], 1);
    assert_eq!(param("customType")["schema"]["maxLength"], 100);
}

#[tokio::test]
async fn an_expired_anonymous_id_is_replaced_on_the_next_discovery_and_still_resolves() {
    let app = TestApp::spawn_with(|c| c.anonymous_id_ttl = Duration::from_secs(1)).await;
    let agent = app.register_agent("user-tomas").await;
    let first = put_capability(&app, &agent, &capability("translation", None, None)).await.body["anonymousAgentId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(ranking(&discover(&app, "taskType=translation").await)[0].0, first);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let second = ranking(&discover(&app, "taskType=translation").await)[0].0.clone();
    assert_ne!(second, first);
    let listed = app.agent_call(&agent, Method::GET, "/capabilities", None).await;
    assert_eq!(listed.body["anonymousAgentId"], second.as_str());
    assert_eq!(app.count("anonymous_ids").await, 2);

    let mut conn = app.pool.acquire().await.unwrap();
    let old = anonymity::resolve(&mut conn, AnonymousId(first.parse().unwrap())).await.unwrap().unwrap();
    assert_eq!(old.agent_id.0.to_string(), agent.id);
    assert!(!old.live);
    let new = anonymity::resolve(&mut conn, AnonymousId(second.parse().unwrap())).await.unwrap().unwrap();
    assert!(new.live);
    assert!(anonymity::resolve(&mut conn, AnonymousId(Uuid::new_v4())).await.unwrap().is_none());
}

#[tokio::test]
async fn concurrent_discoveries_replacing_expired_ids_all_answer() {
    let app = TestApp::spawn().await;
    for i in 0..120 {
        let agent = app.register_agent(&format!("user-many-{i}")).await;
        let a = put_capability(&app, &agent, &capability("code-review", Some(i as f64), Some(100 * i))).await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
    }
    // Every id expired at once: the next discoveries all replace them, at the same time.
    sqlx::query("UPDATE anonymous_ids SET expires_at = now() - interval '1 second'").execute(&app.pool).await.unwrap();
    let mut running = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let base = app.base.clone();
        let client = app.client.clone();
        let token = app.service_token();
        running.spawn(async move {
            let answer = client
                .get(format!("{base}/api/agents/discover?taskType=code-review&limit=20"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            (answer.status(), answer.text().await.unwrap())
        });
    }
    while let Some(done) = running.join_next().await {
        let (status, text) = done.unwrap();
        assert_eq!(status, StatusCode::OK, "{text}");
    }
    let (agents, current): (i64, i64) = sqlx::query_as(
        "SELECT count(DISTINCT agent_id), count(*) FILTER (WHERE current AND expires_at > now()) FROM anonymous_ids",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!((agents, current), (120, 120), "each agent has exactly one live id");
}

#[tokio::test]
async fn a_discovery_replaces_only_the_expired_ids_it_may_show_and_writes_nothing_otherwise() {
    let app = TestApp::spawn().await;
    let translator = app.register_agent("user-translator").await;
    let tester = app.register_agent("user-tester").await;
    let old = put_capability(&app, &translator, &capability("translation", None, None)).await.body["anonymousAgentId"]
        .as_str()
        .unwrap()
        .to_owned();
    put_capability(&app, &tester, &capability("testing", None, None)).await;
    assert_eq!(app.count("anonymous_ids").await, 2);
    sqlx::query("UPDATE anonymous_ids SET expires_at = now() - interval '1 second' WHERE anonymous_id = $1")
        .bind(old.parse::<Uuid>().unwrap())
        .execute(&app.pool)
        .await
        .unwrap();

    // Another kind: the expired id is not one this discovery may show, so it stays.
    assert_eq!(ranking(&discover(&app, "taskType=testing").await).len(), 1);
    assert_eq!(app.count("anonymous_ids").await, 2);
    // Its kind: replaced once, then left alone.
    let new = ranking(&discover(&app, "taskType=translation").await)[0].0.clone();
    assert_ne!(new, old);
    assert_eq!(ranking(&discover(&app, "taskType=translation").await)[0].0, new);
    assert_eq!(app.count("anonymous_ids").await, 3);
    let mut conn = app.pool.acquire().await.unwrap();
    let resolved = anonymity::resolve(&mut conn, AnonymousId(old.parse().unwrap())).await.unwrap().unwrap();
    assert_eq!((resolved.agent_id.0.to_string(), resolved.live), (translator.id.clone(), false));
    drop(conn);

    // A capability written without an id (straight into the table) still gets one, on the next
    // discovery of its kind.
    let quiet = app.register_agent("user-quiet").await;
    sqlx::query(
        "INSERT INTO capabilities (capability_id, agent_id, task_type, input_schema, output_schema)
         VALUES ($1, $2, 'testing', '{}', '{}')",
    )
    .bind(Uuid::now_v7())
    .bind(quiet.id.parse::<Uuid>().unwrap())
    .execute(&app.pool)
    .await
    .unwrap();
    let shown = ranking(&discover(&app, "taskType=testing").await);
    assert_eq!(shown.len(), 2);
    let live: i64 =
        sqlx::query_scalar("SELECT count(*) FROM anonymous_ids WHERE agent_id = $1 AND current AND expires_at > now()")
            .bind(quiet.id.parse::<Uuid>().unwrap())
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(live, 1);
    for (id, _) in &shown {
        assert_ne!(id, &quiet.id);
    }
}

#[tokio::test]
async fn every_kind_of_write_shows_in_the_very_next_discovery_and_ranking() {
    let app = TestApp::spawn().await;
    let a = app.register_agent("user-a").await;
    let b = app.register_agent("user-b").await;
    let put = put_capability(&app, &a, &capability("testing", Some(5.0), Some(3000))).await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    let id = put.body["capability"]["id"].as_str().unwrap().to_owned();
    let anon_a = put.body["anonymousAgentId"].as_str().unwrap().to_owned();
    let scores = |answer: &Answer| ranking(answer).into_iter().map(|r| r.1).collect::<Vec<_>>();
    let ranked = |answer: &Answer| {
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        answer.body["candidates"].as_array().unwrap().len() + answer.body["rejected"].as_array().unwrap().len()
    };
    let rank_body = json!({"task_summary": "run the tests", "taskType": "testing"});
    // Alone: percentile 100; 0.5 + 0.285 + 0.18.
    assert_eq!(ranking(&discover(&app, "taskType=testing").await), [(anon_a.clone(), 0.965)]);
    assert_eq!(ranked(&app.post("/api/agents/rank", &app.service_token(), &rank_body).await), 1);

    // A capability put: a new one appears, a replaced one shows its new estimates.
    assert_eq!(put_capability(&app, &b, &capability("testing", None, None)).await.status, StatusCode::CREATED);
    assert_eq!(ranking(&discover(&app, "taskType=testing").await).len(), 2);
    assert_eq!(ranked(&app.post("/api/agents/rank", &app.service_token(), &rank_body).await), 2);
    assert_eq!(put_capability(&app, &a, &capability("testing", Some(50.0), Some(3000))).await.status, StatusCode::OK);
    // Both at percentile 0 (equal raw scores): a is 0 + 0.15 + 0.18, b is 0 + 0.15 + 0.1.
    assert_eq!(scores(&discover(&app, "taskType=testing").await), [0.33, 0.25]);

    // A trust counter: b's record lifts it above a.
    record(&app, &b, 0, 5, 0).await;
    assert_eq!(scores(&discover(&app, "taskType=testing").await), [0.75, 0.33]);

    // An anonymous id that expires is replaced before the answer.
    sqlx::query("UPDATE anonymous_ids SET expires_at = now() - interval '1 second' WHERE anonymous_id = $1")
        .bind(anon_a.parse::<Uuid>().unwrap())
        .execute(&app.pool)
        .await
        .unwrap();
    let shown = ranking(&discover(&app, "taskType=testing").await);
    assert_eq!(shown.len(), 2);
    assert!(shown.iter().all(|(anon, _)| anon != &anon_a), "{shown:?}");

    // A permissions change: disabled, it is gone; enabled again, it is back.
    let off = app
        .agent_call(&a, Method::PUT, &format!("/capabilities/{id}/permissions"), Some(&json!({"enabled": false})))
        .await;
    assert_eq!(off.status, StatusCode::OK, "{}", off.text);
    assert_eq!(scores(&discover(&app, "taskType=testing").await), [0.75]);
    assert_eq!(ranked(&app.post("/api/agents/rank", &app.service_token(), &rank_body).await), 1);
    app.agent_call(&a, Method::PUT, &format!("/capabilities/{id}/permissions"), Some(&json!({"enabled": true}))).await;
    assert_eq!(scores(&discover(&app, "taskType=testing").await), [0.75, 0.33]);

    // An inactive agent is gone (its record still counts in the percentiles).
    app.call(
        Method::PATCH,
        &format!("/api/agents/{}", b.id),
        Some(&app.user_token("user-b")),
        Some(&json!({"status": "inactive"})),
    )
    .await;
    assert_eq!(scores(&discover(&app, "taskType=testing").await), [0.33]);

    // A delete.
    let deleted = app.agent_call(&a, Method::DELETE, &format!("/capabilities/{id}"), None).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text);
    assert_eq!(ranking(&discover(&app, "taskType=testing").await), []);
    assert_eq!(ranked(&app.post("/api/agents/rank", &app.service_token(), &rank_body).await), 0);
}
