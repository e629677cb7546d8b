//! Delegation end to end over HTTP: request, accept, execute, return; long-polls on both sides;
//! fallback through reject, fail, accept timeout and execution timeout; races; stale timers; and
//! every refusal leaving nothing changed.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    fixtures,
    helpers::{SseReader, TestAgent, TestApp},
};

/// A target agent and its anonymous id.
pub struct Target {
    pub agent: TestAgent,
    pub anon: String,
}

/// A requester and `n` targets offering code review, ranked in order by cost (the first is
/// discovery's best).
pub async fn setup(app: &TestApp, n: usize) -> (TestAgent, Vec<Target>) {
    let requester = app.register_agent("requester").await;
    let mut targets = Vec::new();
    for i in 0..n {
        let agent = app.register_agent(&format!("target-{i}")).await;
        let put = app
            .agent_call(
                &agent,
                Method::PUT,
                "/capabilities",
                Some(&fixtures::review_capability(Some(1.0 + i as f64 * 10.0))),
            )
            .await;
        assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
        let anon = put.body["anonymousAgentId"].as_str().unwrap().to_owned();
        targets.push(Target { agent, anon });
    }
    (requester, targets)
}

pub fn body(requester: &TestAgent, request_id: &str, target: Option<&str>) -> Value {
    let mut b = json!({
        "requestId": request_id,
        "agentId": requester.id,
        "taskType": "code-review",
        "input": {"code": "fn main() {}"},
    });
    if let Some(t) = target {
        b["targetAnonymousId"] = json!(t);
    }
    b
}

/// Delegates a new request of `requester` to whichever target discovery ranks first, its body
/// first changed by `adjust`; asserts it is accepted (202) and returns its request id.
pub async fn delegated(app: &TestApp, requester: &TestAgent, adjust: impl FnOnce(&mut Value)) -> String {
    let rid = Uuid::new_v4().to_string();
    let mut b = body(requester, &rid, None);
    adjust(&mut b);
    assert_eq!(app.delegate(requester, &b).await.status, StatusCode::ACCEPTED);
    rid
}

/// Waits (at most 5 s) for the delegation to end; asserts the output its requester is given.
async fn assert_output(app: &TestApp, requester: &TestAgent, request_id: &str, output: Value) {
    let ended = app.until_ended(requester, request_id, Duration::from_secs(5)).await;
    assert_eq!(ended.body["result"]["output"], output, "{}", ended.text);
}

pub async fn spawn() -> TestApp {
    TestApp::spawn_with(|c| c.delegation_accept_timeout = Duration::from_secs(2)).await
}

/// Two instances on one database, each configured as [`spawn`] configures one.
pub async fn spawn_two() -> (TestApp, TestApp) {
    let first = spawn().await;
    let second = TestApp::spawn_on(&first.database_url, |c| c.delegation_accept_timeout = Duration::from_secs(2)).await;
    (first, second)
}

#[tokio::test]
async fn request_accept_execute_return_with_waits_on_both_sides() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 1).await;
    let target = &targets[0];
    let rid = Uuid::new_v4().to_string();

    // The target waits on its inbox before anything is there; the request wakes it.
    let waiting_inbox = {
        let (client, base, agent) = (app.client.clone(), app.base.clone(), target.agent.clone());
        tokio::spawn(async move {
            let r = client
                .get(format!("{base}/api/agents/{}/delegations/inbox?wait=5", agent.id))
                .header("x-api-key", &agent.key)
                .send()
                .await
                .unwrap();
            r.json::<Value>().await.unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = app.delegate(&requester, &body(&requester, &rid, Some(&target.anon))).await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.text);
    let d = &asked.body["delegation"];
    assert_eq!(d["status"], "request");
    assert_eq!(d["retriesUsed"], 0);
    assert_eq!(d["attempts"][0]["targetAnonymousId"], target.anon.as_str());
    assert!(!asked.text.contains(&target.agent.id), "the requester sees the target only by anonymous id");

    let inbox = waiting_inbox.await.unwrap();
    assert_eq!(inbox["total"], 1, "{inbox}");
    let item = &inbox["requests"][0];
    assert_eq!(item["requestId"], rid.as_str());
    assert_eq!(item["input"], json!({"code": "fn main() {}"}));
    assert_eq!(item["timeoutMs"], 30000);
    let requester_anon = item["requesterAnonymousId"].as_str().unwrap();
    assert_ne!(requester_anon, requester.id);
    assert!(!inbox.to_string().contains(&requester.id), "the target sees the requester only by anonymous id");

    // The requester waits for the result.
    let waiting_result = {
        let (client, base, agent, rid) = (app.client.clone(), app.base.clone(), requester.clone(), rid.clone());
        tokio::spawn(async move {
            let r = client
                .get(format!("{base}/api/delegations/{rid}?wait=5"))
                .header("x-api-key", &agent.key)
                .send()
                .await
                .unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        })
    };

    let accepted = app.act(&target.agent, &rid, "accept", None).await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.text);
    assert_eq!(accepted.body["accepted"], true);
    let token = accepted.body["claimToken"].as_str().unwrap().to_owned();
    assert!(accepted.body["deadline"].is_string());
    assert_eq!(app.inbox(&target.agent, None).await.body["total"], 0, "an accepted request leaves the inbox");

    // A wrong output is refused and the attempt stays accepted, so it can be fixed.
    let wrong =
        app.act(&target.agent, &rid, "complete", Some(&json!({"output": {"feedback": 5}, "claimToken": token}))).await;
    wrong.assert_error(StatusCode::BAD_REQUEST, "output_invalid");
    assert!(wrong.text.contains("feedback"), "{}", wrong.text);
    assert_eq!(app.stored(&rid).await.0, "accepted");

    let done = app
        .act(&target.agent, &rid, "complete", Some(&json!({"output": {"feedback": "fine"}, "claimToken": token})))
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    assert_eq!(done.body, json!({"completed": true}));

    let (status, waited) = tokio::time::timeout(Duration::from_secs(10), waiting_result).await.unwrap().unwrap();
    assert_eq!(status, StatusCode::OK, "{waited}");
    assert_eq!(waited["result"]["status"], "success", "AgentLens's word for completed");
    assert_eq!(waited["delegation"]["status"], "completed", "the record keeps the phase");
    assert_eq!(waited["result"]["output"], json!({"feedback": "fine"}));
    assert_eq!(waited["result"]["retriesUsed"], 0);
    assert!(waited["result"]["executionTimeMs"].as_i64().unwrap() >= 0);
    assert_eq!(waited["delegation"]["attempts"][0]["status"], "completed");

    // Both sides' listings; the owner and the service read it too.
    let out = app.agent_call(&requester, Method::GET, "/delegations?direction=outbound", None).await;
    assert_eq!(out.body["delegations"][0]["requestId"], rid.as_str(), "{}", out.text);
    let inbound =
        app.agent_call(&target.agent, Method::GET, "/delegations?direction=inbound&status=completed", None).await;
    assert_eq!(inbound.body["requests"][0]["requestId"], rid.as_str(), "{}", inbound.text);
    assert_eq!(inbound.body["requests"][0]["output"], json!({"feedback": "fine"}));
    assert!(!inbound.text.contains(&requester.id));
    // The owners' console reads both listings with their user tokens; another user may not.
    let outbound = format!("/api/agents/{}/delegations?direction=outbound&limit=5", requester.id);
    let owner_out = app.get(&outbound, &app.user_token("requester")).await;
    assert_eq!(owner_out.status, StatusCode::OK, "{}", owner_out.text);
    assert_eq!(owner_out.body["delegations"][0]["requestId"], rid.as_str());
    assert_eq!(owner_out.body["delegations"][0]["attempts"][0]["targetAnonymousId"], target.anon.as_str());
    assert!(!owner_out.text.contains(&target.agent.id), "the owner sees the target only by anonymous id");
    let inbound_path = format!("/api/agents/{}/delegations?direction=inbound&limit=5", target.agent.id);
    let owner_in = app.get(&inbound_path, &app.user_token("target-0")).await;
    assert_eq!(owner_in.status, StatusCode::OK, "{}", owner_in.text);
    assert_eq!(owner_in.body["requests"][0]["requestId"], rid.as_str());
    assert_eq!(owner_in.body["requests"][0]["status"], "completed");
    assert!(!owner_in.text.contains(&requester.id), "the owner sees the requester only by anonymous id");
    // Another user's agent is as unknown as an agent that does not exist.
    app.get(&inbound_path, &app.user_token("requester")).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    let by_owner = app.get(&format!("/api/delegations/{rid}"), &app.user_token("requester")).await;
    assert_eq!(by_owner.status, StatusCode::OK, "{}", by_owner.text);
    let by_service = app.get(&format!("/api/delegations/{rid}"), &app.service_token()).await;
    assert_eq!(by_service.status, StatusCode::OK, "{}", by_service.text);

    // Its end counted for the target.
    let counted: i64 = sqlx::query_scalar(
        "SELECT sum(attempts_completed + accepted_completed)::bigint FROM agent_trust_days WHERE agent_id = $1",
    )
    .bind(target.agent.id.parse::<Uuid>().unwrap())
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(counted, 2);
}

/// A process that accepted an attempt completes it without reading it first, and one that did
/// not reads it: both give the same answers. Here the requester waits on one instance, the
/// target accepts through the other and completes through the first; and a second attempt,
/// accepted and then refused a forged token and a wrong output through the accepting instance,
/// is completed there.
#[tokio::test]
async fn a_complete_answers_alike_through_the_instance_that_accepted_and_through_another() {
    let (first, second) = spawn_two().await;
    let (requester, targets) = setup(&first, 1).await;
    let target = &targets[0];
    let rid = Uuid::new_v4().to_string();
    let waiting = {
        let (client, base, b) = (first.client.clone(), first.base.clone(), body(&requester, &rid, Some(&target.anon)));
        let key = requester.key.clone();
        tokio::spawn(async move {
            let r = client
                .post(format!("{base}/api/agents/delegate?wait=10"))
                .header("x-api-key", key)
                .json(&b)
                .send()
                .await
                .unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        })
    };
    second.until_offered(&target.agent, &rid, Duration::from_secs(5)).await;
    let accepted = second.act(&target.agent, &rid, "accept", None).await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.text);
    let token = accepted.body["claimToken"].as_str().unwrap().to_owned();
    let wrong = first
        .act(&target.agent, &rid, "complete", Some(&json!({"output": {"feedback": 5}, "claimToken": token})))
        .await;
    wrong.assert_error(StatusCode::BAD_REQUEST, "output_invalid");
    let done = first
        .act(&target.agent, &rid, "complete", Some(&json!({"output": {"feedback": "read first"}, "claimToken": token})))
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    let (status, waited) = tokio::time::timeout(Duration::from_secs(10), waiting).await.unwrap().unwrap();
    assert_eq!(status, StatusCode::OK, "{waited}");
    assert_eq!(waited["result"]["output"], json!({"feedback": "read first"}));
    assert_eq!(waited["delegation"]["attempts"][0]["status"], "completed");

    let again = Uuid::new_v4().to_string();
    let asked = second.delegate(&requester, &body(&requester, &again, Some(&target.anon))).await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.text);
    let accepted = second.act(&target.agent, &again, "accept", None).await;
    let token = accepted.body["claimToken"].as_str().unwrap().to_owned();
    let forged = second
        .act(&target.agent, &again, "complete", Some(&json!({"output": {"feedback": "x"}, "claimToken": "ct_forged"})))
        .await;
    forged.assert_error(StatusCode::CONFLICT, "claim_stale");
    let wrong = second.act(&target.agent, &again, "complete", Some(&json!({"output": {}, "claimToken": token}))).await;
    wrong.assert_error(StatusCode::BAD_REQUEST, "output_invalid");
    assert_eq!(second.stored(&again).await.0, "accepted");
    let done = second
        .act(
            &target.agent,
            &again,
            "complete",
            Some(&json!({"output": {"feedback": "as accepted"}, "claimToken": token})),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    let twice = second
        .act(&target.agent, &again, "complete", Some(&json!({"output": {"feedback": "again"}, "claimToken": token})))
        .await;
    twice.assert_error(StatusCode::CONFLICT, "invalid_state");
    assert_output(&second, &requester, &again, json!({"feedback": "as accepted"})).await;
}

/// A request id belongs to its first requester. Another requester using it is refused 409
/// `request_id_taken` (told nothing else about the first), and the first delegation stays as it
/// was: still addressed to its target, accepted and completed by it, readable only by its own
/// requester. (Before, both existed; the target's calls addressed the newer, so the first could
/// never be taken and timed out against the target's trust.)
#[tokio::test]
async fn a_request_id_belongs_to_its_first_requester() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 1).await;
    let target = &targets[0];
    let other = app.register_agent("other-requester").await;
    let rid = Uuid::new_v4().to_string();

    let first = app.delegate(&requester, &body(&requester, &rid, Some(&target.anon))).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.text);
    let before = app.stored(&rid).await;

    let mut shadow = body(&other, &rid, Some(&target.anon));
    shadow["input"] = json!({"code": "something else"});
    let taken = app.delegate(&other, &shadow).await;
    taken.assert_error(StatusCode::CONFLICT, "request_id_taken");
    assert!(!taken.text.contains(&requester.id) && !taken.text.contains("fn main"), "reveals nothing: {}", taken.text);
    // The same body as the first's, too: the id is the first requester's, whatever the body.
    let same = app.delegate(&other, &body(&other, &rid, Some(&target.anon))).await;
    same.assert_error(StatusCode::CONFLICT, "request_id_taken");
    assert_eq!(app.stored(&rid).await, before, "the first delegation is untouched");
    assert_eq!(app.count("delegations").await, 1);
    let unseen = app.keyed(&other, Method::GET, &format!("/api/delegations/{rid}"), None).await;
    unseen.assert_error(StatusCode::NOT_FOUND, "not_found");

    // The target takes and completes the first requester's delegation.
    assert_eq!(app.act(&target.agent, &rid, "accept", None).await.status, StatusCode::OK);
    let done = app.act(&target.agent, &rid, "complete", Some(&json!({"output": {"feedback": "ok"}}))).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    assert_output(&app, &requester, &rid, json!({"feedback": "ok"})).await;
}

#[tokio::test]
async fn a_request_id_is_idempotent_for_the_same_body_and_refused_for_another() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 1).await;
    let rid = Uuid::new_v4().to_string();
    let b = body(&requester, &rid, Some(&targets[0].anon));
    let first = app.delegate(&requester, &b).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.text);
    let again = app.delegate(&requester, &b).await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text);
    assert_eq!(again.body["delegation"]["createdAt"], first.body["delegation"]["createdAt"]);
    assert_eq!((app.count("delegations").await, app.count("delegation_attempts").await), (1, 1));
    let mut other = b.clone();
    other["input"] = json!({"code": "something else"});
    app.delegate(&requester, &other).await.assert_error(StatusCode::CONFLICT, "request_id_reused");
    assert_eq!((app.count("delegations").await, app.count("delegation_attempts").await), (1, 1));
}

#[tokio::test]
async fn every_refusal_is_the_documented_4xx_and_changes_nothing() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 2).await;
    let stranger = app.register_agent("stranger").await;
    let rid = Uuid::new_v4().to_string();

    // Asking: another agent's id, bad input, an unknown target, an ineligible target, bad fields.
    let mut b = body(&requester, &rid, Some(&targets[0].anon));
    b["agentId"] = json!(stranger.id);
    app.delegate(&requester, &b).await.assert_error(StatusCode::FORBIDDEN, "forbidden");
    let mut b = body(&requester, &rid, Some(&targets[0].anon));
    b["input"] = json!({"code": 42});
    let bad = app.delegate(&requester, &b).await;
    bad.assert_error(StatusCode::BAD_REQUEST, "input_invalid");
    assert!(bad.text.contains("/code"), "names the field: {}", bad.text);
    let b = body(&requester, &rid, Some(&Uuid::new_v4().to_string()));
    app.delegate(&requester, &b).await.assert_error(StatusCode::NOT_FOUND, "unknown_target");
    let caps = app.agent_call(&targets[1].agent, Method::GET, "/capabilities", None).await;
    let cap_id = caps.body["capabilities"][0]["id"].as_str().unwrap().to_owned();
    let off = app
        .agent_call(
            &targets[1].agent,
            Method::PUT,
            &format!("/capabilities/{cap_id}/permissions"),
            Some(&json!({"acceptDelegations": false})),
        )
        .await;
    assert_eq!(off.status, StatusCode::OK, "{}", off.text);
    let not_eligible = app.delegate(&requester, &body(&requester, &rid, Some(&targets[1].anon))).await;
    not_eligible.assert_error(StatusCode::BAD_REQUEST, "target_not_eligible");
    assert!(not_eligible.text.contains("does not accept delegations"), "{}", not_eligible.text);
    let mine =
        app.agent_call(&requester, Method::PUT, "/capabilities", Some(&fixtures::review_capability(Some(0.5)))).await;
    let own_anon = mine.body["anonymousAgentId"].as_str().unwrap().to_owned();
    app.delegate(&requester, &body(&requester, &rid, Some(&own_anon)))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "target_not_eligible");
    let mut b = body(&requester, &rid, None);
    b["maxRetries"] = json!(11);
    app.delegate(&requester, &b).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    let mut b = body(&requester, &rid, None);
    b["timeoutMs"] = json!(86_400_001);
    app.delegate(&requester, &b).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    let no_key = app.call(Method::POST, "/api/agents/delegate", None, Some(&body(&requester, &rid, None))).await;
    no_key.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    assert_eq!((app.count("delegations").await, app.count("delegation_attempts").await), (0, 0));

    // One real delegation to target 0.
    let asked = app.delegate(&requester, &body(&requester, &rid, Some(&targets[0].anon))).await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.text);
    let before = app.stored(&rid).await;

    // Someone else's: the stranger can neither act on it nor read it.
    app.act(&stranger, &rid, "accept", None).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    app.keyed(&stranger, Method::GET, &format!("/api/delegations/{rid}"), None)
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    app.get(&format!("/api/delegations/{rid}"), &app.user_token("stranger"))
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    // Another agent's path with the target's key.
    let path = format!("/api/agents/{}/delegations/{rid}/accept", stranger.id);
    app.keyed(&targets[0].agent, Method::POST, &path, None).await.assert_error(StatusCode::FORBIDDEN, "forbidden");
    // Wrong state: fail and complete before accepting.
    app.act(&targets[0].agent, &rid, "fail", Some(&json!({"error": "x"})))
        .await
        .assert_error(StatusCode::CONFLICT, "invalid_state");
    app.act(&targets[0].agent, &rid, "complete", Some(&json!({"output": {"feedback": "x"}})))
        .await
        .assert_error(StatusCode::CONFLICT, "invalid_state");
    // Bad bodies.
    app.act(&targets[0].agent, &rid, "fail", Some(&json!({})))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    assert_eq!(app.stored(&rid).await, before);

    // Accepted: a second accept and a stale token are refused.
    assert_eq!(app.act(&targets[0].agent, &rid, "accept", None).await.status, StatusCode::OK);
    app.act(&targets[0].agent, &rid, "accept", None).await.assert_error(StatusCode::CONFLICT, "invalid_state");
    let stale =
        json!({"output": {"feedback": "x"}, "claimToken": "ct_AAAAAAAAAAEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"});
    app.act(&targets[0].agent, &rid, "complete", Some(&stale)).await.assert_error(StatusCode::CONFLICT, "claim_stale");
    let after = app.stored(&rid).await;
    assert_eq!((after.0.as_str(), after.2[0].0.as_str()), ("accepted", "accepted"));
}

#[tokio::test]
async fn fallback_moves_through_reject_fail_and_accept_timeout_until_exhausted() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 3).await;
    let rid = Uuid::new_v4().to_string();
    // No target named: discovery's best (target 0) gets it first.
    let asked = app.delegate(&requester, &body(&requester, &rid, None)).await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.text);
    assert_eq!(asked.body["delegation"]["attempts"][0]["targetAnonymousId"], targets[0].anon.as_str());

    // Target 0 rejects: target 1 is offered it in the same transaction.
    let r = app.act(&targets[0].agent, &rid, "reject", Some(&json!({"reason": "busy"}))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(app.inbox(&targets[1].agent, None).await.body["total"], 1);
    // A late call of the rejecting target is refused: it is addressed elsewhere now.
    app.act(&targets[0].agent, &rid, "accept", None).await.assert_error(StatusCode::CONFLICT, "not_addressed");

    // Target 1 accepts, then fails: target 2 is offered it.
    let acc = app.act(&targets[1].agent, &rid, "accept", None).await;
    let token = acc.body["claimToken"].as_str().unwrap().to_owned();
    let f = app.act(&targets[1].agent, &rid, "fail", Some(&json!({"error": "crashed", "claimToken": token}))).await;
    assert_eq!(f.status, StatusCode::OK, "{}", f.text);
    assert_eq!(app.inbox(&targets[2].agent, None).await.body["total"], 1);

    // Target 2 never accepts: the accept timeout (2 s here) ends it, nobody is left.
    let ended = app.until_ended(&requester, &rid, Duration::from_secs(20)).await;
    assert_eq!(ended.status, StatusCode::OK, "{}", ended.text);
    assert_eq!(ended.body["result"]["status"], "timeout");
    assert_eq!(ended.body["result"]["retriesUsed"], 2);
    let attempts = ended.body["delegation"]["attempts"].as_array().unwrap();
    let seen: Vec<(&str, &str)> =
        attempts.iter().map(|a| (a["targetAnonymousId"].as_str().unwrap(), a["status"].as_str().unwrap())).collect();
    assert_eq!(
        seen,
        vec![
            (targets[0].anon.as_str(), "rejected"),
            (targets[1].anon.as_str(), "error"),
            (targets[2].anon.as_str(), "timeout")
        ]
    );
    assert_eq!(attempts[0]["reason"], "busy");
    assert_eq!(attempts[1]["reason"], "crashed");
    assert_eq!(attempts[2]["reason"], "not accepted in time");
    assert_eq!(app.inbox(&targets[2].agent, None).await.body["total"], 0);
}

#[tokio::test]
async fn an_execution_timeout_moves_to_the_next_target_within_max_retries() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 3).await;
    let rid = delegated(&app, &requester, |b| {
        b["timeoutMs"] = json!(1500);
        b["maxRetries"] = json!(1);
    })
    .await;
    assert_eq!(app.act(&targets[0].agent, &rid, "accept", None).await.status, StatusCode::OK);
    // Not finished in time: target 1 gets it (the one retry).
    app.until_offered(&targets[1].agent, &rid, Duration::from_secs(20)).await;
    let (status, retries, attempts) = app.stored(&rid).await;
    assert_eq!((status.as_str(), retries), ("request", 1));
    assert_eq!(attempts[0], ("timeout".to_owned(), Some("not finished in time".to_owned())));
    // It rejects: retries are used up, so the delegation ends rejected though target 2 is left.
    assert_eq!(app.act(&targets[1].agent, &rid, "reject", None).await.status, StatusCode::OK);
    let (status, retries, attempts) = app.stored(&rid).await;
    assert_eq!((status.as_str(), retries, attempts.len()), ("rejected", 1, 2));
    assert_eq!(app.inbox(&targets[2].agent, None).await.body["total"], 0);
}

#[tokio::test]
async fn without_fallback_the_first_end_is_final() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 2).await;
    let rid = delegated(&app, &requester, |b| b["fallbackEnabled"] = json!(false)).await;
    assert_eq!(app.act(&targets[0].agent, &rid, "reject", None).await.status, StatusCode::OK);
    let (status, retries, attempts) = app.stored(&rid).await;
    assert_eq!((status.as_str(), retries, attempts.len()), ("rejected", 0, 1));
}

#[tokio::test]
async fn sixteen_concurrent_accepts_of_one_attempt_have_one_winner() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 1).await;
    let rid = delegated(&app, &requester, |_| {}).await;
    let calls = (0..16).map(|_| {
        let (client, base, agent, rid) = (app.client.clone(), app.base.clone(), targets[0].agent.clone(), rid.clone());
        tokio::spawn(async move {
            client
                .post(format!("{base}/api/agents/{}/delegations/{rid}/accept", agent.id))
                .header("x-api-key", &agent.key)
                .send()
                .await
                .unwrap()
                .status()
        })
    });
    let statuses: Vec<StatusCode> = futures::future::join_all(calls).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::OK).count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::CONFLICT).count(), 15, "{statuses:?}");
    assert_eq!(app.stored(&rid).await.0, "accepted");
}

#[tokio::test]
async fn a_complete_after_the_deadline_loses_to_the_timeout_and_one_before_wins() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 1).await;

    // Before the deadline: completed, and the timer that comes due later changes nothing.
    let won = delegated(&app, &requester, |b| b["timeoutMs"] = json!(1000)).await;
    assert_eq!(app.act(&targets[0].agent, &won, "accept", None).await.status, StatusCode::OK);
    let done = app.act(&targets[0].agent, &won, "complete", Some(&json!({"output": {"feedback": "quick"}}))).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);

    // After the deadline: the timeout is the one outcome, the complete is 409.
    let lost = delegated(&app, &requester, |b| b["timeoutMs"] = json!(1000)).await;
    assert_eq!(app.act(&targets[0].agent, &lost, "accept", None).await.status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let late = app.act(&targets[0].agent, &lost, "complete", Some(&json!({"output": {"feedback": "slow"}}))).await;
    assert_eq!(late.status, StatusCode::CONFLICT, "{}", late.text);
    let ended = app.until_ended(&requester, &lost, Duration::from_secs(20)).await;
    assert_eq!(ended.body["result"]["status"], "timeout", "{}", ended.text);
    assert!(ended.body["result"].get("output").is_none());

    // By now the first one's timer has come due as well: still completed.
    let (status, _, attempts) = app.stored(&won).await;
    assert_eq!((status.as_str(), attempts[0].0.as_str()), ("completed", "completed"));
}

#[tokio::test]
async fn duplicate_early_and_stale_timer_deliveries_change_nothing() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 2).await;
    let rid = delegated(&app, &requester, |_| {}).await;
    let id = app.delegation_id(&rid).await;
    let state = &app.state;
    let timer = |attempt| parley_jobs::DelegationTimeout { delegation_id: id, attempt };

    // Early: the attempt is not due yet.
    assert!(!state.time_out_delegation(timer(1)).await.unwrap());
    // For an attempt that does not exist (yet).
    assert!(!state.time_out_delegation(timer(2)).await.unwrap());
    assert_eq!(app.stored(&rid).await.0, "request");

    // Target 0 rejects; a late timer of attempt 1 does nothing to attempt 2.
    assert_eq!(app.act(&targets[0].agent, &rid, "reject", None).await.status, StatusCode::OK);
    let before = app.stored(&rid).await;
    assert!(!state.time_out_delegation(timer(1)).await.unwrap());
    assert_eq!(app.stored(&rid).await, before);

    // Completed: every delivery, again and again, does nothing.
    assert_eq!(app.act(&targets[1].agent, &rid, "accept", None).await.status, StatusCode::OK);
    let done = app.act(&targets[1].agent, &rid, "complete", Some(&json!({"output": {"feedback": "ok"}}))).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    let finished = app.stored(&rid).await;
    for _ in 0..2 {
        assert!(!state.time_out_delegation(timer(2)).await.unwrap());
        assert!(!state.time_out_delegation(timer(1)).await.unwrap());
    }
    assert_eq!(app.stored(&rid).await, finished);
    // No pending timer is left for it.
    let pending: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM apalis.jobs WHERE job_type = 'parley.delegation_timeout' AND status = 'Pending'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(pending, 0);
}

/// The `(attempt, status)` of the next `n` events of a stream, each a `delegation.status` of
/// `rid` naming both sides only by anonymous id and its attempt by the A2A task id in
/// `task_ids` (attempt 1 first).
async fn delegation_events(
    stream: &mut SseReader,
    n: usize,
    rid: &str,
    hidden: &[&str],
    task_ids: &[String],
) -> Vec<(i64, String)> {
    let mut seen = Vec::new();
    while seen.len() < n {
        let e = stream.next(Duration::from_secs(10)).await.unwrap_or_else(|| panic!("only {seen:?} arrived"));
        assert_eq!(e.event, "delegation.status", "{e:?}");
        assert_eq!(e.data["requestId"], rid, "{e:?}");
        assert!(e.data["requesterAnonymousId"].is_string() && e.data["targetAnonymousId"].is_string(), "{e:?}");
        for h in hidden {
            assert!(!e.data.to_string().contains(h), "{h} shows in {e:?}");
        }
        let attempt = e.data["attempt"].as_i64().unwrap();
        assert_eq!(e.data["taskId"], task_ids[attempt as usize - 1].as_str(), "{e:?}");
        seen.push((attempt, e.data["status"].as_str().unwrap().to_owned()));
    }
    seen
}

#[tokio::test]
async fn every_attempt_status_reaches_both_owners_over_sse_by_anonymous_id_only() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 2).await;
    let mut requester_owner = SseReader::open(&app.base, &app.user_token("requester"), None).await;
    let mut first_owner = SseReader::open(&app.base, &app.user_token("target-0"), None).await;
    let mut second_owner = SseReader::open(&app.base, &app.user_token("target-1"), None).await;
    let mut outsider = SseReader::open(&app.base, &app.user_token("someone-else"), None).await;

    let rid = Uuid::new_v4().to_string();
    let asked = app.delegate(&requester, &body(&requester, &rid, None)).await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.text);
    let r = app.act(&targets[0].agent, &rid, "reject", Some(&json!({"reason": "busy"}))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let acc = app.act(&targets[1].agent, &rid, "accept", None).await;
    assert_eq!(acc.status, StatusCode::OK, "{}", acc.text);
    let done = app.act(&targets[1].agent, &rid, "complete", Some(&json!({"output": {"feedback": "fine"}}))).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);

    let ids = [requester.id.as_str(), targets[0].agent.id.as_str(), targets[1].agent.id.as_str()];
    let owners = ["\"requester\"", "target-0", "target-1"];
    let hidden: Vec<&str> = ids.iter().chain(owners.iter()).copied().collect();
    let status = |a: i64, s: &str| (a, s.to_owned());
    // The attempts' A2A task ids, as the requester's view of the delegation shows them.
    let record = app.keyed(&requester, Method::GET, &format!("/api/delegations/{rid}"), None).await;
    let task_ids: Vec<String> = record.body["delegation"]["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["taskId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(task_ids.len(), 2, "{}", record.text);
    assert_eq!(
        delegation_events(&mut requester_owner, 5, &rid, &hidden, &task_ids).await,
        [
            status(1, "request"),
            status(1, "rejected"),
            status(2, "request"),
            status(2, "accepted"),
            status(2, "completed")
        ]
    );
    assert_eq!(
        delegation_events(&mut first_owner, 2, &rid, &hidden, &task_ids).await,
        [status(1, "request"), status(1, "rejected")]
    );
    assert_eq!(
        delegation_events(&mut second_owner, 3, &rid, &hidden, &task_ids).await,
        [status(2, "request"), status(2, "accepted"), status(2, "completed")]
    );
    // Each target's owner sees only the attempt offered to it; nobody else sees any.
    assert!(first_owner.next(Duration::from_millis(500)).await.is_none());
    assert!(outsider.next(Duration::from_millis(500)).await.is_none());
    // Recorded with the change: the log holds exactly these, for these two owners.
    let logged: Vec<(String, String)> = sqlx::query_as(
        "SELECT source_user_id, candidate_user_id FROM events WHERE kind = 'delegation.status' ORDER BY event_id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(logged.len(), 5);
    assert!(logged.iter().all(|(s, _)| s == "requester"));
}

/// With `PARLEY_MIN_TRUST` set, a target whose trust percentile is below it is refused, and the
/// percentile the refusal names is the one its trust record reads.
#[tokio::test]
async fn a_target_below_the_minimum_trust_is_refused_naming_its_percentile() {
    let app = TestApp::spawn_with(|c| c.min_trust = 50).await;
    let (requester, targets) = setup(&app, 2).await;
    // The first target let most of its claims expire, the second answered every one.
    for (target, answered, expired) in [(&targets[0], 1, 9), (&targets[1], 10, 0)] {
        sqlx::query(
            "INSERT INTO agent_trust_days (agent_id, day, claims_answered, claims_expired)
             VALUES ($1, (now() AT TIME ZONE 'UTC')::date, $2, $3)",
        )
        .bind(target.agent.id.parse::<Uuid>().unwrap())
        .bind(answered)
        .bind(expired)
        .execute(&app.pool)
        .await
        .unwrap();
    }
    let trust = app.get(&format!("/api/trust/{}", targets[0].agent.id), &app.service_token()).await;
    assert_eq!(trust.status, StatusCode::OK, "{}", trust.text);
    let percentile = trust.body["percentile"].as_i64().unwrap();
    assert!(percentile < 50, "{}", trust.text);

    let rid = Uuid::new_v4().to_string();
    let refused = app.delegate(&requester, &body(&requester, &rid, Some(&targets[0].anon))).await;
    refused.assert_error(StatusCode::BAD_REQUEST, "target_not_eligible");
    assert!(
        refused.text.contains(&format!("trust percentile {percentile} is below the minimum 50")),
        "{}",
        refused.text
    );
    assert_eq!(app.count("delegations").await, 0);
    let asked = app.delegate(&requester, &body(&requester, &rid, Some(&targets[1].anon))).await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.text);
}
