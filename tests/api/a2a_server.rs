//! Parley as an A2A server, spoken to as JSON-RPC over HTTP: the card, the envelope and the
//! version rules, sends as delegations played by a polling target, reads, lists, cancels and
//! streams, and each refusal with the code A2A gives it. (The official SDK's clients are run
//! against a live Parley in `a2a_sdk`.)

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::{SseReader, TestAgent, TestApp};

/// What the target's capability takes and gives.
fn capability() -> Value {
    json!({
        "taskType": "summarization",
        "inputSchema": {"type": "object", "required": ["text"], "properties": {
            "text": {"type": "string"}, "words": {"type": "integer"}, "mode": {"type": "string"}}},
        "outputSchema": {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}},
        "estimatedLatencyMs": 1000
    })
}

/// A requester and a target offering [`capability`]; the target's anonymous id.
pub(crate) async fn parties(app: &TestApp) -> (TestAgent, TestAgent, String) {
    let [requester, target] = app.register_agents(["rhea", "tomas"]).await;
    let put = app.agent_call(&target, reqwest::Method::PUT, "/capabilities", Some(&capability())).await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    (requester, target, put.body["anonymousAgentId"].as_str().unwrap().to_owned())
}

/// The target's side, in the background: each request in its inbox is accepted, and then, by
/// its input's `mode`, completed (`complete`, the default), completed after a second (`slow`),
/// kept accepted (`hold`) or rejected (`reject`).
pub(crate) fn serve(app: &TestApp, target: &TestAgent) -> tokio::task::JoinHandle<()> {
    let (client, base, target) = (app.client.clone(), app.base.clone(), target.clone());
    tokio::spawn(async move {
        loop {
            let Ok(r) = client
                .get(format!("{base}/api/agents/{}/delegations/inbox?wait=2", target.id))
                .bearer_auth(&target.key)
                .send()
                .await
            else {
                return;
            };
            let Ok(inbox) = r.json::<Value>().await else { return };
            for request in inbox["requests"].as_array().cloned().unwrap_or_default() {
                let rid = request["requestId"].as_str().unwrap().to_owned();
                let mode = request["input"]["mode"].as_str().unwrap_or("complete").to_owned();
                let at = |verb: &str| format!("{base}/api/agents/{}/delegations/{rid}/{verb}", target.id);
                let post = |url: String, body: Value| client.post(url).bearer_auth(&target.key).json(&body).send();
                if mode == "reject" {
                    let _ = post(at("reject"), json!({"reason": "not today"})).await;
                    continue;
                }
                let _ = post(at("accept"), json!({})).await;
                match mode.as_str() {
                    "hold" => {}
                    "slow" => {
                        let (client, key, url) = (client.clone(), target.key.clone(), at("complete"));
                        tokio::spawn(async move {
                            tokio::time::sleep(Duration::from_millis(1500)).await;
                            let _ = client
                                .post(url)
                                .bearer_auth(key)
                                .json(&json!({"output": {"summary": "late"}}))
                                .send()
                                .await;
                        });
                    }
                    _ => {
                        let _ = post(at("complete"), json!({"output": {"summary": "short"}})).await;
                    }
                }
            }
        }
    })
}

/// A JSON-RPC call to `/a2a` as `key` (none: no credentials), under `version` (none: no header).
async fn rpc(
    app: &TestApp,
    key: Option<&str>,
    version: Option<&str>,
    method: &str,
    params: Value,
) -> (StatusCode, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let mut req = app.client.post(format!("{}/a2a", app.base)).json(&body);
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    if let Some(v) = version {
        req = req.header("A2A-Version", v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A 1.0 send of `data` under `message_id`.
fn send_params(message_id: &str, data: Value, blocking: bool) -> Value {
    json!({
        "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"data": data}]},
        "configuration": {"returnImmediately": !blocking}
    })
}

fn summarize(mode: &str) -> Value {
    json!({"taskType": "summarization", "input": {"text": "a long text", "words": 20.0, "mode": mode}, "timeoutMs": 20000.0})
}

#[tokio::test]
async fn the_card_is_public_at_both_paths_names_the_endpoint_and_revalidates() {
    let app = TestApp::spawn_with(|c| c.public_url = Some("https://parley.example.com".into())).await;
    for path in ["/.well-known/agent-card.json", "/.well-known/agent.json"] {
        let resp = app.client.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let etag = resp.headers()["etag"].to_str().unwrap().to_owned();
        assert_eq!(resp.headers()["cache-control"], "public, max-age=300");
        assert!(resp.headers().contains_key("last-modified"));
        let card: Value = resp.json().await.unwrap();
        if path == "/.well-known/agent.json" {
            // Where 0.3 clients look: the 0.3 card.
            assert_eq!(card["url"], "https://parley.example.com/a2a");
            assert_eq!(card["protocolVersion"], "0.3.0");
        } else {
            // The 1.0 card: 1.0 fields only, JSON-RPC at 1.0 and 0.3, HTTP+JSON at 1.0.
            assert!(card.get("url").is_none() && card.get("preferredTransport").is_none(), "{card}");
            assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
            assert_eq!(card["supportedInterfaces"][0]["url"], "https://parley.example.com/a2a");
            assert_eq!(card["supportedInterfaces"][1]["protocolBinding"], "HTTP+JSON");
            assert_eq!(card["supportedInterfaces"][1]["url"], "https://parley.example.com/a2a/rest");
            assert_eq!(card["supportedInterfaces"][2]["protocolVersion"], "0.3");
        }
        assert_eq!(card["capabilities"]["streaming"], true);
        assert_eq!(card["capabilities"]["pushNotifications"], true);
        assert!(card["skills"].as_array().unwrap().iter().any(|s| s["id"] == "summarization"));
        let again = app.client.get(format!("{}{path}", app.base)).header("if-none-match", &etag).send().await.unwrap();
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    }
}

#[tokio::test]
async fn without_a_public_url_a_spoofed_host_is_never_cached_for_anyone_else() {
    let app = TestApp::spawn().await;
    let resp = card_claiming_host(&app, "evil.example:666").await;
    assert_eq!(resp.status(), StatusCode::OK);
    // The card says what this client claimed, so only this client may keep it.
    assert_eq!(resp.headers()["cache-control"], "private, max-age=300");
    assert_eq!(resp.headers()["vary"], "Host");
    let card: Value = resp.json().await.unwrap();
    assert_eq!(card["supportedInterfaces"][0]["url"], "http://evil.example:666/a2a");
    // With PARLEY_PUBLIC_URL the Host header has no say at all.
    let app = TestApp::spawn_with(|c| c.public_url = Some("https://parley.example.com".into())).await;
    let card: Value = card_claiming_host(&app, "evil.example:666").await.json().await.unwrap();
    assert_eq!(card["supportedInterfaces"][0]["url"], "https://parley.example.com/a2a");
}

/// The card, asked for with `host` in the `Host` header.
async fn card_claiming_host(app: &TestApp, host: &str) -> reqwest::Response {
    app.client.get(format!("{}/.well-known/agent-card.json", app.base)).header("host", host).send().await.unwrap()
}

#[tokio::test]
async fn no_or_bad_credentials_are_401_with_www_authenticate_before_anything_else() {
    let app = TestApp::spawn().await;
    for key in [None, Some("pk_unknown"), Some("")] {
        let mut req = app.client.post(format!("{}/a2a", app.base)).body("not even json");
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{key:?}");
        assert!(resp.headers()["www-authenticate"].to_str().unwrap().starts_with("Bearer"));
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["code"], "unauthorized");
    }
}

#[tokio::test]
async fn a_blocking_send_is_a_delegation_played_to_its_end_in_either_version() {
    let app = TestApp::spawn().await;
    let (requester, target, _) = parties(&app).await;
    let _target = serve(&app, &target);
    let (status, v1) =
        rpc(&app, Some(&requester.key), Some("1.0"), "SendMessage", send_params("m-1", summarize("complete"), true))
            .await;
    assert_eq!(status, StatusCode::OK);
    let task = &v1["result"]["task"];
    assert_eq!(v1["id"], 7);
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v1}");
    assert_eq!(task["artifacts"][0]["name"], "delegation-result");
    assert_eq!(task["artifacts"][0]["parts"][0]["data"], json!({"summary": "short"}));
    assert_eq!(task["history"][0]["role"], "ROLE_USER");
    assert_eq!(task["history"][0]["parts"][0]["data"]["words"], 20, "a whole double is read as an integer");
    assert_eq!(task["metadata"]["parley"]["taskType"], "summarization");
    assert_eq!(task["metadata"]["parley"]["attempts"][0]["status"], "completed");
    let task_id = task["id"].as_str().unwrap().to_owned();

    // The same task at GET /api/tasks/{id}, for its requester (0.3 names).
    let rest =
        app.client.get(format!("{}/api/tasks/{task_id}", app.base)).bearer_auth(&requester.key).send().await.unwrap();
    assert_eq!(rest.status(), StatusCode::OK);
    let rest: Value = rest.json().await.unwrap();
    assert_eq!((rest["kind"].as_str(), rest["status"]["state"].as_str()), (Some("task"), Some("completed")));

    // 0.3: kinds and lower-case states, the task unwrapped.
    let mut params = send_params("m-2", summarize("complete"), true);
    params["message"]["parts"] = json!([{"kind": "data", "data": summarize("complete")}]);
    params["configuration"] = json!({"blocking": true});
    let (_, v03) = rpc(&app, Some(&requester.key), None, "message/send", params).await;
    assert_eq!(v03["result"]["kind"], "task", "{v03}");
    assert_eq!(v03["result"]["status"]["state"], "completed");
    assert_eq!(v03["result"]["artifacts"][0]["parts"][0]["kind"], "data");
}

#[tokio::test]
async fn a_repeated_message_id_is_the_same_task_and_another_body_under_it_is_refused() {
    let app = TestApp::spawn().await;
    let (requester, _target, _) = parties(&app).await;
    let send = |body| rpc(&app, Some(&requester.key), Some("1.0"), "SendMessage", body);
    let (_, first) = send(send_params("same", summarize("hold"), false)).await;
    let (_, again) = send(send_params("same", summarize("hold"), false)).await;
    assert_eq!(first["result"]["task"]["id"], again["result"]["task"]["id"], "{first} {again}");
    assert_eq!(first["result"]["task"]["status"]["state"], "TASK_STATE_SUBMITTED");
    let (_, other) = send(send_params("same", summarize("complete"), false)).await;
    assert_eq!(other["error"]["code"], -32602, "{other}");
    assert_eq!(other["error"]["data"][0]["metadata"]["code"], "request_id_reused");
    assert_eq!(app.count("delegations").await, 1);
}

#[tokio::test]
async fn parleys_refusals_are_invalid_params_with_parleys_code() {
    let app = TestApp::spawn().await;
    let (requester, _target, _) = parties(&app).await;
    let send = |data| {
        rpc(
            &app,
            Some(&requester.key),
            Some("1.0"),
            "SendMessage",
            send_params(&Uuid::new_v4().to_string(), data, false),
        )
    };
    let cases = [
        (json!({"taskType": "summarization", "input": {"no_text": 1}}), "input_invalid"),
        (
            json!({"taskType": "summarization", "input": {"text": "x"}, "targetAnonymousId": Uuid::new_v4()}),
            "unknown_target",
        ),
        (json!({"taskType": "cooking", "input": {}}), "invalid_body"),
        (json!({"taskType": "summarization", "input": {"text": "x"}, "timeoutMs": 20000.5}), "invalid_body"),
        (json!({"taskType": "summarization", "input": {"text": "x"}, "requestId": Uuid::new_v4()}), "invalid_body"),
    ];
    for (data, code) in cases {
        let (status, answer) = send(data.clone()).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer["error"]["code"], -32602, "{data}: {answer}");
        assert_eq!(answer["error"]["data"][0]["metadata"]["code"], code, "{data}: {answer}");
    }
    // 0.3 carries the code as `data.code`.
    let params = json!({"message": {"kind": "message", "messageId": "x", "role": "user",
        "parts": [{"kind": "data", "data": {"taskType": "summarization", "input": {"no_text": 1}}}]}});
    let (_, answer) = rpc(&app, Some(&requester.key), None, "message/send", params).await;
    assert_eq!(answer["error"]["data"]["code"], "input_invalid", "{answer}");
    assert_eq!(app.count("delegations").await, 0);
}

#[tokio::test]
async fn unknown_and_other_agents_tasks_are_not_found_and_the_envelope_rules_hold() {
    let app = TestApp::spawn().await;
    let (requester, target, _) = parties(&app).await;
    let stranger = app.register_agent("mallory").await;
    let (_, sent) =
        rpc(&app, Some(&requester.key), Some("1.0"), "SendMessage", send_params("m", summarize("hold"), false)).await;
    let id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    for (key, id) in [
        (&stranger.key, id.as_str()),
        (&target.key, id.as_str()),
        (&requester.key, &Uuid::new_v4().to_string()),
        (&requester.key, "not-a-uuid"),
    ] {
        let (_, got) = rpc(&app, Some(key), Some("1.0"), "GetTask", json!({"id": id})).await;
        assert_eq!(got["error"]["code"], -32001, "{got}");
        let (_, got) = rpc(&app, Some(key), None, "tasks/get", json!({"id": id})).await;
        assert_eq!(got["error"]["code"], -32001, "{got}");
    }
    // Someone else's task is not at GET /api/tasks/{id} either.
    let rest = app.client.get(format!("{}/api/tasks/{id}", app.base)).bearer_auth(&stranger.key).send().await.unwrap();
    assert_eq!(rest.status(), StatusCode::NOT_FOUND);

    let (_, v) = rpc(&app, Some(&requester.key), None, "GetTask", json!({"id": id})).await;
    assert_eq!(v["error"]["code"], -32009, "a 1.0 method without the 1.0 header: {v}");
    let (_, v) = rpc(&app, Some(&requester.key), Some("0.3"), "GetTask", json!({"id": id})).await;
    assert_eq!(v["error"]["code"], -32009);
    let (_, v) = rpc(&app, Some(&requester.key), Some("1.0"), "tasks/fly", json!({})).await;
    assert_eq!(v["error"]["code"], -32601);
    // A push configuration names its task.
    let (_, v) = rpc(&app, Some(&requester.key), Some("1.0"), "CreateTaskPushNotificationConfig", json!({})).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let (_, v) = rpc(&app, Some(&requester.key), None, "tasks/pushNotificationConfig/set", json!({})).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let raw = app.client.post(format!("{}/a2a", app.base)).bearer_auth(&requester.key).body("{").send().await.unwrap();
    let raw: Value = raw.json().await.unwrap();
    assert_eq!(raw["error"]["code"], -32700);

    // History length, and the 1.0 list of the caller's tasks.
    let (_, got) = rpc(&app, Some(&requester.key), Some("1.0"), "GetTask", json!({"id": id, "historyLength": 0})).await;
    assert_eq!(got["result"]["history"], json!([]), "{got}");
    let (_, listed) = rpc(&app, Some(&requester.key), Some("1.0"), "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["tasks"][0]["id"], id.as_str(), "{listed}");
    let (_, listed) = rpc(&app, Some(&stranger.key), Some("1.0"), "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["tasks"], json!([]));
}

/// The JSON-RPC results of an A2A stream, until it closes or goes quiet for `wait`.
async fn results(resp: reqwest::Response, wait: Duration) -> Vec<Value> {
    assert_eq!(resp.status(), StatusCode::OK);
    let mut reader = SseReader::from_response(resp);
    assert!(reader.content_type.starts_with("text/event-stream"), "{}", reader.content_type);
    let mut out = Vec::new();
    while let Some(event) = reader.next(wait).await {
        out.push(event.data["result"].clone());
    }
    out
}

#[tokio::test]
async fn a_streaming_send_tells_each_move_then_the_artifact_and_the_final_status_and_closes() {
    let app = TestApp::spawn().await;
    let (requester, target, _) = parties(&app).await;
    let _target = serve(&app, &target);
    let body = json!({"jsonrpc": "2.0", "id": "s1", "method": "message/stream", "params": {
        "message": {"kind": "message", "messageId": "stream-1", "role": "user",
                    "parts": [{"kind": "data", "data": summarize("slow")}]}}});
    let resp =
        app.client.post(format!("{}/a2a", app.base)).bearer_auth(&requester.key).json(&body).send().await.unwrap();
    let events = results(resp, Duration::from_secs(10)).await;
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap_or("?")).collect();
    assert_eq!(kinds.first(), Some(&"task"), "{events:?}");
    assert_eq!(&kinds[kinds.len() - 2..], ["artifact-update", "status-update"], "{events:?}");
    let last = events.last().unwrap();
    assert_eq!((last["status"]["state"].as_str(), last["final"].as_bool()), (Some("completed"), Some(true)));
    assert!(events[1..events.len() - 1].iter().all(|e| e["final"] != true));
    assert!(events.iter().any(|e| e["status"]["state"] == "working"), "the accept is told: {events:?}");
    assert_eq!(events[events.len() - 2]["artifact"]["parts"][0]["data"], json!({"summary": "late"}));

    // A 1.0 subscription to the ended task is refused; to a live one it streams.
    let id = events[0]["id"].as_str().unwrap();
    let (_, v) = rpc(&app, Some(&requester.key), Some("1.0"), "SubscribeToTask", json!({"id": id})).await;
    assert_eq!(v["error"]["code"], -32004, "{v}");
    let (_, sent) =
        rpc(&app, Some(&requester.key), Some("1.0"), "SendMessage", send_params("m-sub", summarize("slow"), false))
            .await;
    let id = sent["result"]["task"]["id"].as_str().unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "SubscribeToTask", "params": {"id": id}});
    let resp = app
        .client
        .post(format!("{}/a2a", app.base))
        .bearer_auth(&requester.key)
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .unwrap();
    let events = results(resp, Duration::from_secs(10)).await;
    assert!(events[0]["task"]["id"] == id, "{events:?}");
    let last = events.last().unwrap();
    assert_eq!(last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED", "{events:?}");
    assert!(events.iter().any(|e| e["artifactUpdate"]["artifact"]["name"] == "delegation-result"));
}

#[tokio::test]
async fn a_delegation_that_falls_back_is_working_then_rejected_when_no_target_is_left() {
    let app = TestApp::spawn().await;
    let (requester, target, _) = parties(&app).await;
    let _target = serve(&app, &target);
    let (_, done) =
        rpc(&app, Some(&requester.key), Some("1.0"), "SendMessage", send_params("m-r", summarize("reject"), true))
            .await;
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_REJECTED", "{done}");
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "not today");
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
}

#[tokio::test]
async fn calls_are_counted_by_method_and_outcome() {
    use crate::metrics::{scrape, total};
    let app = TestApp::spawn().await;
    let (requester, _target, _) = parties(&app).await;
    let count = |scrape: &prometheus_parse::Scrape, method: &str, outcome: &str| {
        total(scrape, "parley_a2a_calls_total", &[("method", method), ("outcome", outcome)])
    };
    let before = scrape(&app).await;
    let _ = rpc(&app, Some(&requester.key), Some("1.0"), "GetTask", json!({"id": Uuid::new_v4()})).await;
    let _ =
        rpc(&app, Some(&requester.key), None, "message/send", send_params("counted", summarize("hold"), false)).await;
    let _ = rpc(&app, None, None, "tasks/get", json!({})).await;
    let after = scrape(&app).await;
    assert!(count(&after, "GetTask", "error") >= count(&before, "GetTask", "error") + 1.0);
    assert!(count(&after, "message/send", "ok") >= count(&before, "message/send", "ok") + 1.0);
    assert!(count(&after, "unknown", "refused") >= count(&before, "unknown", "refused") + 1.0);
}

#[tokio::test]
async fn task_streams_are_capped_per_user_over_all_their_agents() {
    let app = TestApp::spawn_with(|c| {
        c.a2a_streams_per_agent = 3;
        c.a2a_streams_per_user = 4;
        c.sse_max = 20;
        c.inbound_rate = 10_000;
    })
    .await;
    // Nobody serves the target: every delegation stays offered, and its streams open.
    let (_, _target, _) = parties(&app).await;
    let [ana_1, ana_2, ben] = app.register_agents(["user-ana", "user-ana", "user-ben"]).await;
    let subscribe = |agent: &TestAgent, task: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task}});
        let req = app.client.post(format!("{}/a2a", app.base)).bearer_auth(&agent.key).header("A2A-Version", "1.0");
        req.json(&body).send()
    };
    let mut open = Vec::new();
    let mut task_of = std::collections::HashMap::new();
    for (n, agent) in [&ana_1, &ana_2, &ben].into_iter().enumerate() {
        let params = send_params(&format!("held-{n}"), summarize("hold"), false);
        let (status, sent) = rpc(&app, Some(&agent.key), Some("1.0"), "SendMessage", params).await;
        assert_eq!(status, StatusCode::OK, "{sent}");
        task_of.insert(agent.id.clone(), sent["result"]["task"]["id"].as_str().unwrap().to_owned());
    }
    // Ana's first agent opens its three; a fourth is past the agent's cap.
    for _ in 0..3 {
        let stream = subscribe(&ana_1, &task_of[&ana_1.id]).await.unwrap();
        assert_eq!(stream.status(), StatusCode::OK);
        open.push(stream);
    }
    let refused = subscribe(&ana_1, &task_of[&ana_1.id]).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.text().await.unwrap().contains("PARLEY_A2A_STREAMS_PER_AGENT"));
    // Her second agent opens one more, and then she is at her cap over both.
    let stream = subscribe(&ana_2, &task_of[&ana_2.id]).await.unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    open.push(stream);
    let refused = subscribe(&ana_2, &task_of[&ana_2.id]).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS, "another of her agents does not lift her cap");
    let body: Value = refused.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("PARLEY_A2A_STREAMS_PER_USER"), "{body}");
    // Another user's agent is served meanwhile.
    for _ in 0..3 {
        let stream = subscribe(&ben, &task_of[&ben.id]).await.unwrap();
        assert_eq!(stream.status(), StatusCode::OK, "another user is not held out");
        open.push(stream);
    }
    drop(open);
}
