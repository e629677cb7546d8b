//! Ranking: every discoverable capability assessed by the capability calculator with its
//! agent's live queue depth and declared latency and cost, ranked by
//! `0.7 * score + 0.3 * trust/100`; anonymous like discovery; bad bodies refused.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    directory_calls::{capability, offer, record, with_an_expired_anonymous_id},
    fixtures,
    helpers::{Answer, TestApp},
};

async fn rank(app: &TestApp, body: &Value) -> Answer {
    app.post("/api/agents/rank", &app.service_token(), body).await
}

fn task() -> Value {
    json!({
        "task_summary": "review rust code for security",
        "max_cost_amount": "$1.00",
        "max_latency_ms": 4000,
        "taskType": "code-review",
    })
}

#[tokio::test]
async fn capabilities_are_assessed_with_live_queue_depth_and_ranked_by_score_and_trust() {
    let app = TestApp::spawn().await;
    // A: a derived skill (taskType, tags), $0.50, 2 s, and two delegations in its queue (one
    // offered, one accepted).
    let a = app.register_agent("user-tomas").await;
    let mut body = capability("code-review", Some(0.5), Some(2000));
    body["tags"] = json!(["rust", "security"]);
    let anon_a = offer(&app, &a, &body).await;
    let requester = app.register_agent("user-requester").await;
    for _ in 0..2 {
        let asked = app.delegate_to(&requester, &anon_a, "code-review", json!({"code": "fn main() {}"})).await;
        assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.text);
    }
    let inbox = app.agent_call(&a, Method::GET, "/delegations/inbox", None).await;
    let first = inbox.body["requests"][0]["requestId"].as_str().unwrap().to_owned();
    let accepted = app.agent_call(&a, Method::POST, &format!("/delegations/{first}/accept"), None).await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.text);
    // Its user's negotiation turns are not its directory work: they do not count.
    app.start(&fixtures::good_match()).await;
    // B: its own skill (1 s), free, and the best record.
    let b = app.register_agent("user-b").await;
    let mut body = capability("code-review", None, None);
    body["skill"] = json!({
        "id": "sec-audit", "name": "Security Audit", "tags": ["security"],
        "input_modes": ["application/json"], "output_modes": ["application/json"],
        "performance": {"avg_processing_time_ms": 1000}
    });
    let anon_b = offer(&app, &b, &body).await;
    record(&app, &b, 0, 1, 0).await;
    // C: over the budget. D: another kind of work.
    let c = app.register_agent("user-c").await;
    let mut body = capability("code-review", Some(5.0), Some(100));
    body["description"] = json!("Rust security review");
    let anon_c = offer(&app, &c, &body).await;
    let d = app.register_agent("user-d").await;
    let anon_d = offer(&app, &d, &capability("testing", None, None)).await;

    let answer = rank(&app, &task()).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let candidates = answer.body["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 2, "{}", answer.text);

    // Task keywords {review, rust, code, for, security}.
    // B: skill keywords {security, audit}: Jaccard 1/6 = 0.1667; io 1, load 1 (no queue), cost 1
    // (no price), performance 1 - 1000/4000 = 0.75:
    // 0.55*0.1667 + 0.2 + 0.05 + 0.05 + 0.15*0.75 = 0.5042; confidence 0.5+0.1+0.1+0.1 = 0.8;
    // trust percentile 100: rankScore 0.7*0.5042 + 0.3 = 0.6529.
    assert_eq!(candidates[0]["anonymousAgentId"], anon_b.as_str());
    assert_eq!(candidates[0]["trustScorePercentile"], 100);
    assert_eq!(candidates[0]["rankScore"], 0.6529);
    assert_eq!(
        candidates[0]["assessment"],
        json!({
            "accepted": true, "score": 0.5042, "confidence": 0.8,
            "skill_matches": [{"skill_id": "sec-audit", "skill_name": "Security Audit", "score": 0.1667, "reasons": ["tags: security"]}],
            "matched_tags": ["security"], "latency_estimate_ms": 1000, "queue_depth": 0,
            "subscores": {"skill_match": 0.1667, "io_compatibility": 1.0, "load": 1.0, "cost": 1.0, "performance": 0.75}
        })
    );
    // A: derived keywords {code, review, rust, security}: Jaccard 4/5 = 0.8; queue 2 -> load
    // round(1/3, 4) = 0.3333; cost 1 - 0.5/1*0.5 = 0.75; performance 1 - 2000/4000 = 0.5:
    // 0.44 + 0.2 + 0.05*0.3333 + 0.05*0.75 + 0.15*0.5 = 0.7692; confidence 0.5+0.2+0.1+0.1 = 0.9;
    // trust percentile 0: rankScore 0.7*0.7692 = 0.5384.
    assert_eq!(candidates[1]["anonymousAgentId"], anon_a.as_str());
    assert_eq!(candidates[1]["trustScorePercentile"], 0);
    assert_eq!(candidates[1]["provisional"], true);
    assert_eq!(candidates[1]["rankScore"], 0.5384);
    assert_eq!(
        candidates[1]["assessment"],
        json!({
            "accepted": true, "score": 0.7692, "confidence": 0.9,
            "skill_matches": [{"skill_id": "code-review", "skill_name": "code-review", "score": 0.8, "reasons": ["tags: rust, security"]}],
            "matched_tags": ["rust", "security"], "latency_estimate_ms": 2000, "queue_depth": 2,
            "subscores": {"skill_match": 0.8, "io_compatibility": 1.0, "load": 0.3333, "cost": 0.75, "performance": 0.5}
        })
    );
    // C is over the budget; D is of another kind and not assessed.
    let rejected = answer.body["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 1, "{}", answer.text);
    assert_eq!(rejected[0]["anonymousAgentId"], anon_c.as_str());
    assert_eq!(
        rejected[0]["assessment"],
        json!({"accepted": false, "score": 0.0, "confidence": 0.9, "rejection_reason": "cost_exceeds_budget"})
    );

    // Without a taskType every kind is assessed: D matches nothing; limit 1 shows one of each.
    let mut all = task();
    all.as_object_mut().unwrap().remove("taskType");
    all["limit"] = json!(1);
    let answer = rank(&app, &all).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(answer.body["candidates"].as_array().unwrap().len(), 1);
    assert_eq!(answer.body["candidates"][0]["anonymousAgentId"], anon_b.as_str());
    let rejected = answer.body["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 1);
    // D scores above C's hard rejection (0.0), so it comes first.
    assert_eq!(rejected[0]["anonymousAgentId"], anon_d.as_str());
    assert_eq!(rejected[0]["assessment"]["rejection_reason"], "score_below_threshold");
}

#[tokio::test]
async fn the_configured_trust_floor_and_disabled_capabilities_keep_agents_out() {
    let app = TestApp::spawn_with(|c| c.min_trust = 50).await;
    let good = app.register_agent("user-good").await;
    let anon_good = offer(&app, &good, &capability("analysis", None, None)).await;
    record(&app, &good, 0, 1, 0).await;
    let poor = app.register_agent("user-poor").await;
    offer(&app, &poor, &capability("analysis", None, None)).await;
    let body = json!({"task_summary": "analysis of sales data", "taskType": "analysis"});
    let answer = rank(&app, &body).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let shown: Vec<&Value> = answer.body["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .chain(answer.body["rejected"].as_array().unwrap())
        .collect();
    assert_eq!(shown.len(), 1, "{}", answer.text);
    assert_eq!(shown[0]["anonymousAgentId"], anon_good.as_str());

    let listed = app.agent_call(&good, Method::GET, "/capabilities", None).await;
    let id = listed.body["capabilities"][0]["id"].as_str().unwrap().to_owned();
    let off = app
        .agent_call(&good, Method::PUT, &format!("/capabilities/{id}/permissions"), Some(&json!({"enabled": false})))
        .await;
    assert_eq!(off.status, StatusCode::OK, "{}", off.text);
    let answer = rank(&app, &body).await;
    assert_eq!(answer.body, json!({"candidates": [], "rejected": []}));
}

#[tokio::test]
async fn ranking_answers_show_neither_agent_ids_nor_owners() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let mut body = capability("code-review", Some(0.1), Some(100));
    body["tags"] = json!(["rust"]);
    offer(&app, &agent, &body).await;
    let mut other = capability("code-review", Some(9.0), None);
    other["tags"] = json!(["rust"]);
    let second = app.register_agent("user-maya").await;
    offer(&app, &second, &other).await;
    // A service token, a user's token and an agent's key may all rank.
    let by_key = app.keyed(&agent, Method::POST, "/api/agents/rank", Some(&task())).await;
    let by_user = app.post("/api/agents/rank", &app.user_token("user-lea"), &task()).await;
    for answer in [rank(&app, &task()).await, by_key, by_user] {
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        for secret in [&agent.id, &second.id, "user-tomas", "user-maya"] {
            assert!(!answer.text.contains(secret), "{}", answer.text);
        }
        let keys: Vec<&String> = answer.body["candidates"][0].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "anonymousAgentId",
                "capabilityId",
                "taskType",
                "assessment",
                "trustScorePercentile",
                "provisional",
                "rankScore"
            ]
        );
        let keys: Vec<&String> = answer.body["rejected"][0].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["anonymousAgentId", "capabilityId", "taskType", "assessment"]);
    }
}

#[tokio::test]
async fn bad_ranking_bodies_are_refused_naming_the_field_and_change_nothing() {
    let app = with_an_expired_anonymous_id().await;
    for (body, names) in [
        (json!({}), "task_summary"),
        (json!({"task_summary": ""}), "task_summary"),
        (json!({"task_summary": 5}), "task_summary"),
        (json!({"task_summary": "x".repeat(10_001)}), "task_summary"),
        (json!({"task_summary": "tests", "taskType": "cooking"}), "taskType"),
        (json!({"task_summary": "tests", "taskType": ["testing"]}), "taskType"),
        (json!({"task_summary": "tests", "taskType": "custom"}), "ok"),
        (json!({"task_summary": "tests", "customType": "legal"}), "customType"),
        (json!({"task_summary": "tests", "taskType": "testing", "customType": "legal"}), "customType"),
        (json!({"task_summary": "tests", "limit": 0}), "limit"),
        (json!({"task_summary": "tests", "limit": "ten"}), "limit"),
        (json!({"task_summary": "tests", "max_latency_ms": -1}), "max_latency_ms"),
        (json!({"task_summary": "tests", "min_score": "high"}), "min_score"),
        (json!({"task_summary": "tests", "input_mime_types": "text/plain"}), "input_mime_types"),
        (json!({"task_summary": "tests", "weights": {"load": -1}}), "load"),
        (json!([1, 2]), "body"),
    ] {
        let answer = rank(&app, &body).await;
        if names == "ok" {
            // Every custom capability (there are none, so no id is refreshed).
            assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
            continue;
        }
        answer.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
        assert!(answer.body["error"].as_str().unwrap().contains(names), "{names}: {}", answer.text);
    }
    let not_json = app.call_raw(Method::POST, "/api/agents/rank", Some(&app.service_token()), "{not json").await;
    not_json.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    let no_credentials = app.call(Method::POST, "/api/agents/rank", None, Some(&task())).await;
    no_credentials.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    // Not even the expired anonymous id was replaced.
    assert_eq!(app.count("anonymous_ids").await, 1);
}

#[tokio::test]
async fn a_replaced_capability_is_assessed_as_it_now_reads() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let mut body = capability("code-review", None, None);
    body["tags"] = json!(["python"]);
    offer(&app, &agent, &body).await;
    let score = |answer: &Answer| -> f64 {
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        let entry = answer.body["candidates"].get(0).or_else(|| answer.body["rejected"].get(0)).unwrap().clone();
        entry["assessment"]["score"].as_f64().unwrap()
    };
    let before = score(&rank(&app, &task()).await);
    assert_eq!(score(&rank(&app, &task()).await), before, "the same capability is assessed the same way");
    // Replaced in place (same id): the next ranking reads the new tags, not the prepared old ones.
    body["tags"] = json!(["rust", "security"]);
    let replaced = app.agent_call(&agent, Method::PUT, "/capabilities", Some(&body)).await;
    assert_eq!(replaced.status, StatusCode::OK, "{}", replaced.text);
    let after = score(&rank(&app, &task()).await);
    assert!(after > before, "{after} > {before}");
}
