//! What a capability's schema may cost the service, over real HTTP: patterns that would eat
//! memory or backtrack for ever are refused at registration; the checks of one owner's
//! delegations never starve another's delegations and completes; a check holds no pooled
//! connection; a repeated request id is answered without checking its input again. (The
//! memory a compiled schema holds, measured from a process of its own, is in
//! `tests/schema_memory.rs`.)

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    directory_calls::{offer, put_capability},
    helpers::{TestAgent, TestApp},
};

fn capability(task_type: &str, input_schema: Value) -> Value {
    json!({
        "taskType": task_type,
        "inputSchema": input_schema,
        "outputSchema": {"type": "object", "required": ["feedback"], "properties": {"feedback": {"type": "string"}}},
    })
}

fn asked(target: &str, task_type: &str, input: Value) -> Value {
    json!({"requestId": Uuid::new_v4(), "taskType": task_type, "input": input, "maxRetries": 0, "targetAnonymousId": target})
}

/// An input schema whose check of a long text is as slow as the bounds allow: 120 distinct
/// patterns with no literal to look for, each scanning the whole text.
fn slow_schema() -> Value {
    let branches: Vec<Value> = (0..120)
        .map(|i| {
            let from = 0x2000 + i * 2;
            json!({"type": "string", "pattern": format!("[a-p]+[\\x{{{from:x}}}-\\x{{{:x}}}]", from + 1)})
        })
        .collect();
    json!({"anyOf": branches})
}

/// A long text for `slow_schema`: each of its patterns scans all of it.
fn slow_text() -> Value {
    json!("abcdefghijklmnop".repeat(1_000))
}

#[tokio::test]
async fn patterns_with_backreferences_or_look_around_are_refused_by_name() {
    let app = TestApp::spawn().await;
    let target = app.register_agent("user-target").await;
    // The probe's pattern, 990 times over in 33 KB: refused on the first.
    let branches: Vec<Value> = (0..990).map(|i| json!({"pattern": format!("^(.|.)*\\1Q{i}$")})).collect();
    let started = Instant::now();
    let refused = app
        .agent_call(&target, Method::PUT, "/capabilities", Some(&capability("analysis", json!({"anyOf": branches}))))
        .await;
    refused.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    let message = refused.body["error"].as_str().unwrap();
    assert!(message.starts_with("inputSchema") && message.contains("backreference"), "{message}");
    assert!(refused.text.len() < 400, "the refusal quotes a short prefix: {}", refused.text);
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    for look in ["^(?=a)a$", "^(?!x).*$", "(?<=a)b", "(?<!a)b"] {
        let body = capability("analysis", json!({"type": "string", "pattern": look}));
        let refused = app.agent_call(&target, Method::PUT, "/capabilities", Some(&body)).await;
        refused.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
        assert!(refused.text.contains("look-around"), "{look}: {}", refused.text);
    }
    let as_output =
        json!({"taskType": "analysis", "inputSchema": {}, "outputSchema": {"patternProperties": {"^(a)\\1$": {}}}});
    let refused = app.agent_call(&target, Method::PUT, "/capabilities", Some(&as_output)).await;
    refused.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    assert!(refused.text.contains("outputSchema") && refused.text.contains("backreference"), "{}", refused.text);
    assert_eq!(app.count("capabilities").await, 0, "nothing stored");
}

#[tokio::test]
async fn a_regex_heavy_schema_is_refused_at_once_and_the_compiled_cache_keeps_to_its_budget() {
    let app = TestApp::spawn_with(|c| c.schema_cache_mib = 8).await;
    let target = app.register_agent("user-target").await;
    // The probe's schema: distinct `\p{L}{100}` .. patterns in a few KB, some 1.2 GB once
    // compiled. Refused on its first pattern, in milliseconds.
    let props: serde_json::Map<String, Value> = (100..220)
        .map(|n| (format!("p{n}"), json!({"type": "string", "pattern": format!("\\p{{L}}{{{n}}}")})))
        .collect();
    let heavy = json!({"type": "object", "properties": props});
    assert!(serde_json::to_string(&heavy).unwrap().len() < 8_000);
    let started = Instant::now();
    let refused = app.agent_call(&target, Method::PUT, "/capabilities", Some(&capability("analysis", heavy))).await;
    refused.assert_error(StatusCode::BAD_REQUEST, "schema_too_complex");
    assert!(refused.text.contains("KiB"), "{}", refused.text);
    eprintln!("the probe's regex-heavy schema was refused in {:?}: {}", started.elapsed(), refused.text);
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());

    // Schemas as heavy as accepted, each delegated to: the cache's weight stays in its budget.
    let requester = app.register_agent("user-requester").await;
    let mut kinds = Vec::new();
    for i in 0..6 {
        let agent = app.register_agent(&format!("user-heavy-{i}")).await;
        let props: serde_json::Map<String, Value> = (0..3)
            .map(|j| (format!("p{j}"), json!({"type": "string", "pattern": format!("\\p{{L}}{{9}}{i}{j}")})))
            .collect();
        let anon = offer(&app, &agent, &capability("analysis", json!({"type": "object", "properties": props}))).await;
        kinds.push(anon);
    }
    let (held_after_registering, _) = app.state.cached_schemas();
    assert!(held_after_registering <= 8 << 20, "{held_after_registering}");
    for (i, anon) in kinds.iter().enumerate() {
        let a = app
            .delegate(&requester, &asked(anon, "analysis", json!({"p0": format!("{}{i}0", "é".repeat(20_000))})))
            .await;
        assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    }
    let (held, kept) = app.state.cached_schemas();
    eprintln!(
        "after 6 heavy schemas were checked: the cache holds {kept} validators weighing {} KiB (budget 8 MiB)",
        held >> 10
    );
    assert!(held <= 8 << 20 && kept < 12, "{held} bytes in {kept} validators");
}

/// Offers the slowest schema allowed, as [`offer`] does. Its compile is held to the same limit
/// as a batch of checks (1 s here, which the flood below relies on), and on a busy machine one
/// compile can pass it: the registration is this test's premise, not its subject, so a refusal
/// for time is tried again, a few times.
async fn offer_slow(app: &TestApp, target: &crate::helpers::TestAgent) -> String {
    for _ in 0..5 {
        let put = put_capability(app, target, &capability("analysis", slow_schema())).await;
        if put.status.is_success() {
            return put.body["anonymousAgentId"].as_str().unwrap().to_owned();
        }
        assert_eq!(put.body["code"], "schema_too_complex", "{}", put.text);
    }
    panic!("the slowest schema allowed was refused for time five times");
}

#[tokio::test]
async fn a_flood_of_slow_checks_leaves_honest_delegations_and_completes_served() {
    let app = TestApp::spawn_with(|c| {
        c.pool_size = 4;
        c.schema_check_threads = 2;
        c.schema_check_budget = Duration::from_secs(1);
        c.outbound_rate = 1_000;
        c.inbound_rate = 1_000;
    })
    .await;
    // The attackers: three owners, each a requester and a target with the slowest schema allowed.
    let mut attackers = Vec::new();
    for i in 0..3 {
        let target = app.register_agent(&format!("user-slow-{i}")).await;
        let anon = offer_slow(&app, &target).await;
        let requester = app.register_agent(&format!("user-slow-{i}")).await;
        attackers.push((requester, anon));
    }
    let honest_target = app.register_agent("user-honest-target").await;
    let honest_anon = offer(&app, &honest_target, &capability("code-review", json!({"type": "object"}))).await;
    let honest = app.register_agent("user-honest").await;

    // Each attacker keeps 16 delegates in flight until told to stop.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (mut floods, text) = (Vec::new(), slow_text());
    for (requester, anon) in &attackers {
        for _ in 0..16 {
            let (app_base, client, stop, text) = (app.base.clone(), app.client.clone(), stop.clone(), text.clone());
            let (requester, anon) = (requester.clone(), anon.clone());
            floods.push(tokio::spawn(async move {
                let mut answers = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let r = client
                        .post(format!("{app_base}/api/agents/delegate?wait=0"))
                        .header("x-api-key", &requester.key)
                        .json(&asked(&anon, "analysis", text.clone()))
                        .send()
                        .await
                        .unwrap();
                    answers.push(r.status());
                }
                answers
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Meanwhile: an honest delegation, its accept and its complete, and another user's read.
    let started = Instant::now();
    let asked_honestly = app.delegate(&honest, &asked(&honest_anon, "code-review", json!({"code": "x"}))).await;
    assert_eq!(asked_honestly.status, StatusCode::ACCEPTED, "{}", asked_honestly.text);
    let rid = asked_honestly.body["delegation"]["requestId"].as_str().unwrap().to_owned();
    app.act(&honest_target, &rid, "accept", None).await;
    let done = app.act(&honest_target, &rid, "complete", Some(&json!({"output": {"feedback": "fine"}}))).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    let honest_took = started.elapsed();
    let read_started = Instant::now();
    let agents = app.get("/api/agents", &app.user_token("user-honest")).await;
    assert_eq!(agents.status, StatusCode::OK);
    let read_took = read_started.elapsed();

    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut statuses = Vec::new();
    for f in floods {
        statuses.extend(f.await.unwrap());
    }
    let limited = statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
    eprintln!(
        "during the flood: the honest delegation, accept and complete took {honest_took:?}, another user's read \
         {read_took:?}; the attackers' {} delegates were answered 429 {limited} times",
        statuses.len()
    );
    assert!(!statuses.iter().any(|s| s.is_server_error()), "{statuses:?}");
    assert!(limited > 0, "the attackers ran out of checking time: {statuses:?}");
    assert!(honest_took < Duration::from_secs(5), "the honest delegation took {honest_took:?}");
    assert!(read_took < Duration::from_secs(1), "another user's read took {read_took:?}");
    let record = app.until_ended(&honest, &rid, Duration::from_secs(5)).await;
    assert_eq!(record.body["delegation"]["status"], "completed", "{}", record.text);
}

#[tokio::test]
async fn a_repeated_request_id_is_answered_without_checking_its_input_again() {
    // The slow schema must be registered however busy the machine is (this test is about what
    // a repeat costs, not about the compile's time limit), so the limit is generous here.
    let app = TestApp::spawn_with(|c| {
        c.schema_check_budget = Duration::from_secs(2);
        c.schema_check_timeout = Duration::from_secs(30);
    })
    .await;
    let target = app.register_agent("user-target").await;
    let anon = offer(&app, &target, &capability("analysis", json!({"type": "string"}))).await;
    let requester: TestAgent = app.register_agent("user-requester").await;
    let body = asked(&anon, "analysis", slow_text());
    let first = app.delegate(&requester, &body).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.text);
    // The target swaps in the slowest schema allowed; the requester repeats its request 40 times.
    offer(&app, &target, &capability("analysis", slow_schema())).await;
    let (_, kept_before) = app.state.cached_schemas();
    for _ in 0..40 {
        let again = app.delegate(&requester, &body).await;
        assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text);
        assert_eq!(again.body["delegation"]["requestId"], first.body["delegation"]["requestId"]);
    }
    // Nothing was checked: the slow schema was compiled once, at its registration, never for a
    // check (each would have taken some of the requester's two seconds a minute).
    let (_, kept_after) = app.state.cached_schemas();
    assert_eq!(kept_before, kept_after);
    // A new request is checked, and refused by the new schema: not answered 429.
    let fresh = app.delegate(&requester, &asked(&anon, "analysis", json!("short"))).await;
    fresh.assert_error(StatusCode::BAD_REQUEST, "input_invalid");
}
