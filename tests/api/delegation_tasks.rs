//! Delegation attempts as A2A tasks at `GET /api/tasks/{taskId}`: what each attempt shows, who
//! may read it (the two agents' keys, their owners' tokens, the service) and that nobody else
//! learns it exists; and the MCP read tools' `wait`.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{Answer, TestAgent, TestApp},
    mcp::call_tool,
};

/// An agent of `user` offering code review at `cost` (cheaper ranks higher).
async fn offering(app: &TestApp, user: &str, cost: f64) -> TestAgent {
    let agent = app.register_agent(user).await;
    let put =
        app.agent_call(&agent, Method::PUT, "/capabilities", Some(&fixtures::review_capability(Some(cost)))).await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    agent
}

/// Who reads.
enum By<'a> {
    Key(&'a TestAgent),
    Jwt(String),
}

async fn read(app: &TestApp, path: &str, by: &By<'_>) -> Answer {
    let req = app.client.get(format!("{}{path}", app.base));
    let req = match by {
        By::Key(agent) => req.header("x-api-key", &agent.key),
        By::Jwt(token) => req.bearer_auth(token),
    };
    Answer::from(req.send().await.unwrap()).await
}

/// The first request in `target`'s inbox, waiting for one (at most 10 s).
async fn next_request(app: &TestApp, target: &TestAgent) -> Value {
    for _ in 0..5 {
        let inbox = app.agent_call(target, Method::GET, "/delegations/inbox?wait=2", None).await;
        assert_eq!(inbox.status, StatusCode::OK, "{}", inbox.text);
        if let Some(first) = inbox.body["requests"].get(0) {
            return first.clone();
        }
    }
    panic!("nothing was offered to the target");
}

#[tokio::test]
async fn each_attempt_of_a_fallback_is_an_a2a_task_its_parties_read_and_nobody_else_sees() {
    let app = TestApp::spawn().await;
    let requester = app.register_agent("user-maya").await;
    let first = offering(&app, "user-tomas", 1.0).await;
    let second = offering(&app, "user-ana", 11.0).await;
    let outsider = app.register_agent("user-eve").await;
    let rid = uuid::Uuid::new_v4().to_string();
    let input = json!({"code": "fn main() { println!(\"hi\"); }"});
    let output = json!({"feedback": "looks fine"});

    let body = json!({"requestId": rid, "agentId": requester.id, "taskType": "code-review", "input": input});
    let asked = app.delegate_async(&requester, &body).await;
    assert_eq!(asked.status, StatusCode::ACCEPTED);

    // The first target declines; the fallback goes to the second, which completes it.
    let offered = next_request(&app, &first).await;
    let rejected_task = offered["taskId"].as_str().expect("the inbox names the attempt's task").to_owned();
    let reject = app
        .agent_call(&first, Method::POST, &format!("/delegations/{rid}/reject"), Some(&json!({"reason": "busy"})))
        .await;
    assert_eq!(reject.status, StatusCode::OK, "{}", reject.text);
    let offered = next_request(&app, &second).await;
    let completed_task = offered["taskId"].as_str().unwrap().to_owned();
    assert_ne!(rejected_task, completed_task);
    let accept = app.agent_call(&second, Method::POST, &format!("/delegations/{rid}/accept"), None).await;
    assert_eq!(accept.status, StatusCode::OK, "{}", accept.text);
    let complete = app
        .agent_call(&second, Method::POST, &format!("/delegations/{rid}/complete"), Some(&json!({"output": output})))
        .await;
    assert_eq!(complete.status, StatusCode::OK, "{}", complete.text);

    // The requester's view of the delegation names the same tasks.
    let d = read(&app, &format!("/api/delegations/{rid}"), &By::Key(&requester)).await;
    assert_eq!(d.status, StatusCode::OK, "{}", d.text);
    let attempts = d.body["delegation"]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{}", d.text);
    assert_eq!(attempts[0]["taskId"], rejected_task.as_str());
    assert_eq!(attempts[1]["taskId"], completed_task.as_str());

    let ids_and_owners =
        [&requester.id, &first.id, &second.id, &outsider.id, "user-maya", "user-tomas", "user-ana", "user-eve"];
    let mut contexts = Vec::new();
    for (task, target, owner, not_party) in
        [(&rejected_task, &first, "user-tomas", &second), (&completed_task, &second, "user-ana", &first)]
    {
        let path = format!("/api/tasks/{task}");
        let readers = [
            By::Key(&requester),
            By::Jwt(app.user_token("user-maya")),
            By::Key(target),
            By::Jwt(app.user_token(owner)),
            By::Jwt(app.service_token()),
        ];
        let mut seen = Vec::new();
        for by in &readers {
            let a = read(&app, &path, by).await;
            assert_eq!(a.status, StatusCode::OK, "{path}: {}", a.text);
            for secret in ids_and_owners {
                assert!(!a.text.contains(secret), "{path} shows {secret}: {}", a.text);
            }
            seen.push(a.body);
        }
        // Everyone allowed reads the same task, and the same again (stable ids).
        assert!(seen.iter().all(|b| *b == seen[0]), "{seen:#?}");
        let t = &seen[0];
        assert_eq!(t["id"], task.as_str());
        assert_eq!(t["kind"], "task");
        assert!(t["status"]["timestamp"].is_string(), "{t}");
        let history = t["history"].as_array().unwrap();
        assert_eq!(history.len(), 1, "{t}");
        assert_eq!(history[0]["role"], "user");
        assert_eq!(history[0]["kind"], "message");
        assert_eq!(history[0]["taskId"], task.as_str());
        assert_eq!(history[0]["contextId"], t["contextId"]);
        assert_eq!(history[0]["parts"], json!([{"kind": "data", "data": input}]));
        assert!(history[0]["messageId"].is_string());
        let m = &t["metadata"];
        assert_eq!(m["requestId"], rid.as_str());
        assert_eq!(m["taskType"], "code-review");
        assert!(m["requesterAnonymousId"].is_string() && m["targetAnonymousId"].is_string(), "{t}");
        assert!(m["createdAt"].is_string() && m["endedAt"].is_string(), "{t}");
        contexts.push(t["contextId"].clone());

        // Anyone else: the task does not exist for them.
        for by in [By::Jwt(app.user_token("user-eve")), By::Key(&outsider), By::Key(not_party)] {
            let a = read(&app, &path, &by).await;
            assert_eq!(a.status, StatusCode::NOT_FOUND, "{path}: {}", a.text);
            assert_eq!(a.body["code"], "not_found", "{}", a.text);
            assert!(!a.text.contains(&rid), "{}", a.text);
        }
    }
    // Both attempts belong to one context: the delegation.
    assert_eq!(contexts[0], contexts[1]);

    let rejected = read(&app, &format!("/api/tasks/{rejected_task}"), &By::Key(&requester)).await.body;
    assert_eq!(rejected["status"]["state"], "rejected");
    assert_eq!(rejected["artifacts"], json!([]));
    assert_eq!(rejected["metadata"]["attempt"], 1);
    assert_eq!(rejected["metadata"]["attemptStatus"], "rejected");
    assert_eq!(rejected["metadata"]["reason"], "busy");
    // The reason is also the status message, as A2A clients read it.
    let message = &rejected["status"]["message"];
    assert_eq!(message["kind"], "message", "{rejected}");
    assert_eq!(message["role"], "agent");
    assert_eq!(message["taskId"], rejected["id"]);
    assert_eq!(message["contextId"], rejected["contextId"]);
    assert_eq!(message["parts"], json!([{"kind": "text", "text": "busy"}]));
    assert_ne!(message["messageId"], rejected["history"][0]["messageId"]);
    assert_eq!(rejected["metadata"]["targetAnonymousId"], attempts[0]["targetAnonymousId"]);

    let completed = read(&app, &format!("/api/tasks/{completed_task}"), &By::Key(&second)).await.body;
    assert_eq!(completed["status"]["state"], "completed");
    assert!(completed["status"].get("message").is_none(), "{completed}");
    assert_eq!(completed["metadata"]["attempt"], 2);
    assert_eq!(completed["metadata"]["requesterAnonymousId"], offered["requesterAnonymousId"]);
    let artifacts = completed["artifacts"].as_array().unwrap();
    assert_eq!(artifacts.len(), 1, "{completed}");
    assert_eq!(artifacts[0]["name"], "delegation-result");
    assert_eq!(artifacts[0]["parts"], json!([{"kind": "data", "data": output}]));
    assert_ne!(artifacts[0]["artifactId"], completed["history"][0]["messageId"]);
    assert_ne!(completed["history"][0]["messageId"], rejected["history"][0]["messageId"]);

    // An agent key reads no negotiation, and an unknown id stays unknown for everyone.
    let started = app.start(&crate::fixtures::good_match()).await;
    let negotiation = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let tomas = app.register_agent("user-tomas").await;
    let a = read(&app, &format!("/api/tasks/{negotiation}"), &By::Key(&tomas)).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.text);
    let a = read(&app, &format!("/api/tasks/{negotiation}"), &By::Jwt(app.user_token("user-tomas"))).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let unknown = format!("/api/tasks/{}", uuid::Uuid::now_v7());
    for by in [By::Jwt(app.service_token()), By::Key(&requester)] {
        assert_eq!(read(&app, &unknown, &by).await.status, StatusCode::NOT_FOUND);
    }
}

#[tokio::test]
async fn mcp_get_delegation_and_inbox_wait_like_the_http_long_polls() {
    let app = TestApp::spawn().await;
    let requester = app.register_agent("user-maya").await;
    let worker = offering(&app, "user-tomas", 1.0).await;
    let rid = uuid::Uuid::new_v4().to_string();

    // A bad wait is the route's `invalid_body`, and nothing is read.
    for (tool, args) in
        [("list_delegation_inbox", json!({"wait": 0})), ("get_delegation", json!({"requestId": rid, "wait": -3}))]
    {
        let refused = call_tool(&app, &worker.key, tool, args).await;
        assert_eq!(refused["isError"], true, "{refused}");
        assert_eq!(refused["structuredContent"]["code"], "invalid_body", "{refused}");
        assert!(refused["structuredContent"]["error"].as_str().unwrap().contains("wait"), "{refused}");
    }

    // The inbox is empty when the wait begins; the request made meanwhile is its answer.
    let (inbox, asked) =
        tokio::join!(call_tool(&app, &worker.key, "list_delegation_inbox", json!({"wait": 20})), async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let args = json!({"requestId": rid, "taskType": "code-review", "input": {"code": "x"}});
            call_tool(&app, &requester.key, "delegate_task", args).await
        });
    assert_eq!(asked["isError"], false, "{asked}");
    let task_id = asked["structuredContent"]["delegation"]["attempts"][0]["taskId"].clone();
    assert!(task_id.is_string(), "{asked}");
    assert_eq!(inbox["structuredContent"]["total"], 1, "{inbox}");
    assert_eq!(inbox["structuredContent"]["requests"][0]["requestId"], rid.as_str());
    assert_eq!(inbox["structuredContent"]["requests"][0]["taskId"], task_id);

    // The requester waits for the end; the target completes meanwhile; the wait answers the result.
    let output = json!({"feedback": "fine"});
    let (got, _) =
        tokio::join!(call_tool(&app, &requester.key, "get_delegation", json!({"requestId": rid, "wait": 20})), async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let accept = app.agent_call(&worker, Method::POST, &format!("/delegations/{rid}/accept"), None).await;
            assert_eq!(accept.status, StatusCode::OK, "{}", accept.text);
            let body = json!({"output": output});
            let done =
                app.agent_call(&worker, Method::POST, &format!("/delegations/{rid}/complete"), Some(&body)).await;
            assert_eq!(done.status, StatusCode::OK, "{}", done.text);
        });
    assert_eq!(got["isError"], false, "{got}");
    assert_eq!(got["structuredContent"]["result"]["status"], "success", "{got}");
    assert_eq!(got["structuredContent"]["result"]["output"], output);
    let over_http = app.get(&format!("/api/delegations/{rid}"), &app.user_token("user-maya")).await;
    assert_eq!(got["structuredContent"], over_http.body);
}

#[tokio::test]
async fn a_stored_delegation_status_reads_as_itself_and_a_name_that_is_no_status_fails_the_read() {
    use parley::delegation::Status;
    let app = TestApp::spawn().await;
    for status in Status::ALL {
        let read: Status =
            sqlx::query_scalar("SELECT $1::text").bind(status.as_str()).fetch_one(&app.pool).await.unwrap();
        assert_eq!(read, status);
    }
    // Never silently another status (it used to read as `error`).
    let bogus = sqlx::query_scalar::<_, Status>("SELECT 'finished'::text").fetch_one(&app.pool).await;
    assert!(bogus.is_err(), "{bogus:?}");
}
