//! `POST /mcp`: a personal agent's runtime over the Model Context Protocol (JSON-RPC over
//! streamable HTTP), authenticated with the agent's API key.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{TestAgent, TestApp},
};

const PROTOCOL: &str = "2025-06-18";

/// How the request carries the key.
enum Key<'a> {
    None,
    Header(&'a str),
    Bearer(&'a str),
}

/// One JSON-RPC exchange; returns the HTTP status and the JSON-RPC answer (Null when none).
async fn rpc(app: &TestApp, key: Key<'_>, body: Value) -> (StatusCode, Value) {
    let mut req = app
        .client
        .post(format!("{}/mcp", app.base))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", PROTOCOL)
        .json(&body);
    req = match key {
        Key::None => req,
        Key::Header(k) => req.header("x-api-key", k),
        Key::Bearer(k) => req.bearer_auth(k),
    };
    let response = req.send().await.expect("request failed");
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

pub(crate) async fn initialize(app: &TestApp, key: &str) -> Value {
    let (status, answer) = rpc(
        app,
        Key::Header(key),
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "parley-test", "version": "1.0"}}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, _) =
        rpc(app, Key::Header(key), json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    assert!(status.is_success(), "initialized notification: {status}");
    answer["result"].clone()
}

/// `tools/call`; returns the result (`structuredContent`, `isError`, ...).
pub(crate) async fn call_tool(app: &TestApp, key: &str, name: &str, arguments: Value) -> Value {
    let (status, answer) = rpc(
        app,
        Key::Bearer(key),
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(answer.get("error").is_none(), "{name}: {answer}");
    answer["result"].clone()
}

/// Asserts that a tool's result is a tool error with `code`.
#[track_caller]
pub(crate) fn assert_tool_error(result: &Value, code: &str) {
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["code"], code, "{result}");
}

/// Tomas's agent, initialized over MCP, holding the claim on its turn of a
/// [`TestApp::mixed_negotiation`]; returns the agent and the negotiation's id.
pub(crate) async fn claimed_over_mcp(app: &TestApp) -> (TestAgent, String) {
    let (agent, id) = app.mixed_negotiation().await;
    initialize(app, &agent.key).await;
    call_tool(app, &agent.key, "pickup_negotiation", json!({})).await;
    (agent, id)
}

/// Registers Maya's agent (the requester) and Tomas's (the worker), which offers
/// [`fixtures::review_capability`]; returns them with the worker's anonymous id.
async fn requester_and_reviewer(app: &TestApp) -> (TestAgent, TestAgent, String) {
    let [requester, worker] = app.register_agents(["user-maya", "user-tomas"]).await;
    let put = app.agent_call(&worker, Method::PUT, "/capabilities", Some(&fixtures::review_capability(None))).await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    let anonymous = put.body["anonymousAgentId"].as_str().unwrap().to_owned();
    (requester, worker, anonymous)
}

/// Asks over MCP (`delegate_task`), as `requester` and with a request id of its own, for a
/// review of `code`; asserts it was no tool error and returns the request id and the result.
async fn delegate_review(app: &TestApp, requester: &TestAgent, code: &str) -> (String, Value) {
    let rid = uuid::Uuid::new_v4().to_string();
    let arguments = json!({"requestId": rid, "taskType": "code-review", "input": {"code": code}});
    let asked = call_tool(app, &requester.key, "delegate_task", arguments).await;
    assert_eq!(asked["isError"], false, "{asked}");
    (rid, asked)
}

#[tokio::test]
async fn an_agent_runtime_picks_up_and_answers_its_turn_over_mcp() {
    let app = TestApp::spawn().await;
    let (agent, id) = app.mixed_negotiation().await;

    let init = initialize(&app, &agent.key).await;
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    assert_eq!(init["serverInfo"]["name"], "parley");
    let instructions = init["instructions"].as_str().unwrap();
    assert!(instructions.contains("no user-facing output") || instructions.contains("Produce no user-facing output"));
    assert!(instructions.contains("clarifying questions"));
    assert!(instructions.contains("most conservative action"));

    let (status, listed) =
        rpc(&app, Key::Header(&agent.key), json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await;
    assert_eq!(status, StatusCode::OK);
    let mut names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "accept_delegation",
            "cancel_delegation",
            "complete_delegation",
            "delegate_task",
            "discover_agents",
            "fail_delegation",
            "get_delegation",
            "get_negotiation",
            "list_delegation_inbox",
            "list_negotiations",
            "pickup_negotiation",
            "rank_agents",
            "reject_delegation",
            "respond_to_negotiation"
        ]
    );
    let respond_tool =
        listed["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "respond_to_negotiation").unwrap();
    // Index Network's era-B tool took {negotiationId, action, message}: only those two are required.
    let mut required: Vec<&str> =
        respond_tool["inputSchema"]["required"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    required.sort();
    assert_eq!(required, ["action", "negotiationId"], "{respond_tool}");

    let waiting = call_tool(&app, &agent.key, "list_negotiations", json!({"status": "waiting_for_agent"})).await;
    assert_eq!(waiting["structuredContent"]["negotiations"][0]["negotiationId"], id.as_str());
    assert_eq!(waiting["structuredContent"]["negotiations"][0]["isUsersTurn"], true);

    let picked = call_tool(&app, &agent.key, "pickup_negotiation", json!({})).await;
    let turn = &picked["structuredContent"];
    assert_eq!(picked["isError"], false, "{picked}");
    assert_eq!(turn["pickedUp"], true);
    assert_eq!(turn["negotiationId"], id.as_str());
    assert_eq!(turn["turn"]["number"], 1);
    assert_eq!(turn["context"]["ownUser"]["id"], "user-tomas");
    let token = turn["claimToken"].as_str().unwrap().to_owned();

    let respond = |action: &str, reasoning: &str| {
        json!({"negotiationId": id, "claimToken": token, "action": action, "reasoning": reasoning,
            "suggestedRoles": {"ownUser": "agent", "otherUser": "patient"}})
    };
    // Propose is not allowed after turn 0: the engine's own refusal, as a tool error.
    let refused = call_tool(&app, &agent.key, "respond_to_negotiation", respond("propose", "Again")).await;
    assert_tool_error(&refused, "action_not_allowed");

    let accept = respond("accept", "Eight years of Rust and payments APIs: exactly what Maya is looking for");
    let answered = call_tool(&app, &agent.key, "respond_to_negotiation", accept).await;
    assert_eq!(answered["isError"], false, "{answered}");
    let done = &answered["structuredContent"];
    assert_eq!(done["success"], true);
    assert_eq!(done["turnNumber"], 1);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["opportunity"]["status"], "pending");
    assert_eq!(done["outcome"]["hasOpportunity"], true);

    // The negotiation advanced: HTTP and MCP agree.
    let shown = call_tool(&app, &agent.key, "get_negotiation", json!({"negotiationId": id})).await;
    assert_eq!(shown["structuredContent"]["status"], "completed");
    assert_eq!(shown["structuredContent"]["turns"].as_array().unwrap().len(), 2);
    assert_eq!(shown["structuredContent"]["latestAction"], "accept");
    let via_http = app.get(&format!("/api/negotiations/{id}"), &app.service_token()).await;
    assert_eq!(via_http.body["turns"][1]["action"], "accept");

    let nothing = call_tool(&app, &agent.key, "pickup_negotiation", json!({})).await;
    assert_eq!(nothing["structuredContent"]["pickedUp"], false);

    let bad_id = call_tool(&app, &agent.key, "get_negotiation", json!({"negotiationId": "not-an-id"})).await;
    assert_eq!(bad_id["isError"], true);
    let unknown = call_tool(&app, &agent.key, "get_negotiation", json!({"negotiationId": uuid::Uuid::now_v7()})).await;
    assert_tool_error(&unknown, "not_found");
    let bad_status = call_tool(&app, &agent.key, "list_negotiations", json!({"status": "sleeping"})).await;
    assert_eq!(bad_status["isError"], true);
}

#[tokio::test]
async fn mcp_refuses_missing_bad_and_revoked_keys() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});

    let (status, _) = rpc(&app, Key::None, list.clone()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = rpc(&app, Key::Header("pk_not-a-real-key"), list.clone()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = rpc(&app, Key::Bearer("pk_not-a-real-key"), list.clone()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A user's JWT is not an agent key.
    let (status, _) = rpc(&app, Key::Bearer(&app.user_token("user-tomas")), list.clone()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, _) = rpc(&app, Key::Header(&agent.key), list.clone()).await;
    assert_eq!(status, StatusCode::OK);

    let revoke = app
        .call(
            Method::DELETE,
            &format!("/api/agents/{}/keys/{}", agent.id, agent.key_id),
            Some(&app.user_token("user-tomas")),
            None,
        )
        .await;
    assert_eq!(revoke.status, StatusCode::NO_CONTENT);
    let (status, body) = rpc(&app, Key::Header(&agent.key), list.clone()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["code"], "unauthorized");
    let (status, _) = rpc(&app, Key::Bearer(&agent.key), list).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn era_b_respond_arguments_store_the_message_as_reasoning_and_peer_roles() {
    let app = TestApp::spawn().await;
    let (agent, id) = claimed_over_mcp(&app).await;

    // Index Network's era-B call: no claim token, no reasoning, no roles.
    let message = "Tomas has built payments APIs in Rust for eight years; this is the role he wants.";
    let answered = call_tool(
        &app,
        &agent.key,
        "respond_to_negotiation",
        json!({"negotiationId": id, "action": "accept", "message": message}),
    )
    .await;
    assert_eq!(answered["isError"], false, "{answered}");
    assert_eq!(answered["structuredContent"]["status"], "completed");

    let stored = app.get(&format!("/api/negotiations/{id}"), &app.service_token()).await;
    let turn = &stored.body["turns"][1];
    assert_eq!(turn["action"], "accept");
    assert_eq!(turn["message"], message);
    assert_eq!(turn["reasoning"], message, "the reasoning is taken from the message");
    assert_eq!(turn["suggestedRoles"], json!({"ownUser": "peer", "otherUser": "peer"}));
}

#[tokio::test]
async fn discover_agents_and_rank_agents_answer_as_the_http_routes_do() {
    let app = TestApp::spawn().await;
    let caller = app.register_agent("user-maya").await;
    let worker = app.register_agent("user-tomas").await;
    let offer = json!({"taskType": "code-review", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
        "estimatedCostUsd": 0.5, "estimatedLatencyMs": 2000, "tags": ["rust", "security"]});
    let put = app.agent_call(&worker, Method::PUT, "/capabilities", Some(&offer)).await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    let anonymous = put.body["anonymousAgentId"].clone();

    let listed =
        rpc(&app, Key::Header(&caller.key), json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await.1;
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"discover_agents") && names.contains(&"rank_agents"), "{names:?}");

    let found = call_tool(
        &app,
        &caller.key,
        "discover_agents",
        json!({"taskType": "code-review", "maxLatencyMs": 5000, "limit": 5}),
    )
    .await;
    assert_eq!(found["isError"], false, "{found}");
    let over_http =
        app.get("/api/agents/discover?taskType=code-review&maxLatencyMs=5000&limit=5", &app.service_token()).await;
    assert_eq!(found["structuredContent"], over_http.body);
    assert_eq!(found["structuredContent"]["results"][0]["anonymousAgentId"], anonymous);

    let task = json!({"task_summary": "review rust code for security", "max_cost_amount": "$1.00", "max_latency_ms": 4000, "taskType": "code-review"});
    let ranked = call_tool(&app, &caller.key, "rank_agents", task.clone()).await;
    assert_eq!(ranked["isError"], false, "{ranked}");
    let over_http = app.post("/api/agents/rank", &app.service_token(), &task).await;
    assert_eq!(ranked["structuredContent"], over_http.body);
    let top = &ranked["structuredContent"]["candidates"][0];
    assert_eq!(top["anonymousAgentId"], anonymous);
    // Jaccard 4/5, load 1, cost 0.75, performance 0.5: 0.44 + 0.2 + 0.05 + 0.0375 + 0.075.
    assert_eq!(top["assessment"]["score"], 0.8025);
    assert!(!ranked.to_string().contains(&worker.id) && !ranked.to_string().contains("user-tomas"));

    // Bad arguments are tool errors naming the field, as the routes' 400s.
    for (tool, args, field) in [
        ("discover_agents", json!({"taskType": "cooking"}), "taskType"),
        ("discover_agents", json!({"taskType": "testing", "limit": 0}), "limit"),
        ("rank_agents", json!({"task_summary": "x", "limit": 0}), "limit"),
        ("rank_agents", json!({"task_summary": ""}), "task_summary"),
        ("rank_agents", json!({"task_summary": "x", "weights": {"cost": -1}}), "cost"),
    ] {
        let refused = call_tool(&app, &caller.key, tool, args).await;
        assert_tool_error(&refused, "invalid_body");
        assert!(refused["structuredContent"]["error"].as_str().unwrap().contains(field), "{refused}");
    }
    // Numbers arrive as numbers over MCP and as text in the route's query string; both are
    // checked by the same rules, and refused in the same words.
    for (args, query) in [
        (json!({"taskType": "testing", "minTrustScore": 101}), "taskType=testing&minTrustScore=101"),
        (json!({"taskType": "testing", "maxCostUsd": 0}), "taskType=testing&maxCostUsd=0"),
        (json!({"taskType": "testing", "maxLatencyMs": -5}), "taskType=testing&maxLatencyMs=-5"),
        (json!({"taskType": "testing", "limit": -1}), "taskType=testing&limit=-1"),
        (json!({"taskType": "testing", "customType": "x"}), "taskType=testing&customType=x"),
    ] {
        let refused = call_tool(&app, &caller.key, "discover_agents", args).await;
        let over_http = app.get(&format!("/api/agents/discover?{query}"), &app.service_token()).await;
        assert_eq!(over_http.status, StatusCode::BAD_REQUEST, "{}", over_http.text);
        assert_eq!(refused["structuredContent"], over_http.body, "{refused}");
    }
    for (args, body) in [
        (json!({"task_summary": "x", "limit": -3}), json!({"task_summary": "x", "limit": -3})),
        (json!({"task_summary": "x", "taskType": "cooking"}), json!({"task_summary": "x", "taskType": "cooking"})),
        (json!({"task_summary": "x", "customType": "x"}), json!({"task_summary": "x", "customType": "x"})),
    ] {
        let refused = call_tool(&app, &caller.key, "rank_agents", args).await;
        let over_http = app.post("/api/agents/rank", &app.service_token(), &body).await;
        assert_eq!(over_http.status, StatusCode::BAD_REQUEST, "{}", over_http.text);
        assert_eq!(refused["structuredContent"], over_http.body, "{refused}");
    }
}

#[tokio::test]
async fn a_delegation_runs_its_whole_loop_over_mcp_as_over_http() {
    let app = TestApp::spawn().await;
    let (requester, worker, anonymous) = requester_and_reviewer(&app).await;
    let (rid, asked) = delegate_review(&app, &requester, "fn main() {}").await;
    let request = json!({"requestId": rid});
    let d = &asked["structuredContent"]["delegation"];
    assert_eq!(d["status"], "request");
    assert_eq!(d["attempts"][0]["targetAnonymousId"], anonymous.as_str());
    assert!(!asked.to_string().contains(&worker.id), "the requester sees the target only by anonymous id");

    let inbox = call_tool(&app, &worker.key, "list_delegation_inbox", json!({})).await;
    assert_eq!(inbox["structuredContent"]["total"], 1, "{inbox}");
    let item = &inbox["structuredContent"]["requests"][0];
    assert_eq!(item["requestId"], rid.as_str());
    assert_eq!(item["input"], json!({"code": "fn main() {}"}));
    assert!(!inbox.to_string().contains(&requester.id), "the target sees the requester only by anonymous id");
    // The same inbox as the HTTP route's.
    let over_http = app.agent_call(&worker, Method::GET, "/delegations/inbox", None).await;
    assert_eq!(inbox["structuredContent"], over_http.body);

    let accepted = call_tool(&app, &worker.key, "accept_delegation", request.clone()).await;
    assert_eq!(accepted["structuredContent"]["accepted"], true, "{accepted}");
    let token = accepted["structuredContent"]["claimToken"].as_str().unwrap().to_owned();

    // The output schema's refusal is the route's `output_invalid`, and the attempt stays accepted.
    let complete = |output: Value| json!({"requestId": rid, "output": output, "claimToken": token});
    let wrong = call_tool(&app, &worker.key, "complete_delegation", complete(json!({"feedback": 5}))).await;
    assert_tool_error(&wrong, "output_invalid");
    let done = call_tool(&app, &worker.key, "complete_delegation", complete(json!({"feedback": "fine"}))).await;
    assert_eq!(done["structuredContent"], json!({"completed": true}), "{done}");

    let got = call_tool(&app, &requester.key, "get_delegation", request).await;
    assert_eq!(got["isError"], false, "{got}");
    assert_eq!(got["structuredContent"]["result"]["status"], "success", "AgentLens's word for completed");
    assert_eq!(got["structuredContent"]["result"]["output"], json!({"feedback": "fine"}));
    let over_http = app.get(&format!("/api/delegations/{rid}"), &app.user_token("user-maya")).await;
    assert_eq!(got["structuredContent"], over_http.body);
}

#[tokio::test]
async fn delegation_tools_refuse_as_the_routes_do_and_change_nothing() {
    let app = TestApp::spawn().await;
    let (requester, worker, _) = requester_and_reviewer(&app).await;
    let outsider = app.register_agent("user-ines").await;

    for (args, code) in [
        (json!({"taskType": "code-review", "input": {"code": 7}}), "input_invalid"),
        (json!({"taskType": "cooking", "input": {}}), "invalid_body"),
        (json!({"requestId": "nope", "taskType": "code-review", "input": {"code": "x"}}), "invalid_body"),
        (
            json!({"taskType": "code-review", "input": {"code": "x"}, "targetAnonymousId": uuid::Uuid::new_v4()}),
            "unknown_target",
        ),
    ] {
        let refused = call_tool(&app, &requester.key, "delegate_task", args.clone()).await;
        assert_eq!(refused["isError"], true, "{args}: {refused}");
        assert_eq!(refused["structuredContent"]["code"], code, "{args}: {refused}");
    }
    assert_eq!(app.count("delegations").await, 0);

    let (rid, _) = delegate_review(&app, &requester, "x").await;
    let request = json!({"requestId": rid});
    // Another agent may neither read it nor act on it.
    let read = call_tool(&app, &outsider.key, "get_delegation", request.clone()).await;
    assert_eq!(read["structuredContent"]["code"], "not_found", "{read}");
    let taken = call_tool(&app, &outsider.key, "accept_delegation", request.clone()).await;
    assert_eq!(taken["structuredContent"]["code"], "not_found", "{taken}");
    // Failing before accepting is the route's conflict.
    let failed = call_tool(&app, &worker.key, "fail_delegation", json!({"requestId": rid, "error": "x"})).await;
    assert_eq!(failed["structuredContent"]["code"], "invalid_state", "{failed}");
    let rejected = call_tool(&app, &worker.key, "reject_delegation", json!({"requestId": rid, "reason": "busy"})).await;
    assert_eq!(rejected["structuredContent"], json!({"ended": true}), "{rejected}");
    let got = call_tool(&app, &requester.key, "get_delegation", request).await;
    assert_eq!(got["structuredContent"]["delegation"]["attempts"][0]["reason"], "busy", "{got}");
}

#[tokio::test]
async fn respond_has_one_rule_set_over_http_and_mcp_a_null_message_and_no_roles_are_accepted() {
    let app = TestApp::spawn().await;
    let token = app.service_token();
    // Two of Tomas's turns parked: one answered over HTTP, one over MCP.
    let agent = app.register_agent("user-tomas").await;
    let over_http = app.start(&fixtures::good_match()).await["negotiation"]["id"].as_str().unwrap().to_owned();
    let over_mcp = app.start(&fixtures::good_match()).await["negotiation"]["id"].as_str().unwrap().to_owned();
    initialize(&app, &agent.key).await;

    // As Index Network's clients send it: a counter with a null message (and here no roles).
    let http_token = app.pickup(&agent, None).await.body["claimToken"].as_str().unwrap().to_owned();
    let http_id = if app.snapshot(&over_http).await.0 == "claimed" { &over_http } else { &over_mcp };
    let body = json!({"claimToken": http_token, "action": "counter", "message": null,
        "assessment": {"reasoning": "Need to know the company's stage"}});
    let answered = app.respond(&agent, http_id, &body).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);

    // The same over MCP: no message, no roles, no reasoning.
    let mcp_id = if http_id == &over_http { &over_mcp } else { &over_http };
    let picked = call_tool(&app, &agent.key, "pickup_negotiation", json!({})).await;
    assert_eq!(picked["structuredContent"]["negotiationId"], mcp_id.as_str(), "{picked}");
    let claim = picked["structuredContent"]["claimToken"].clone();
    let args = json!({"negotiationId": mcp_id, "claimToken": claim, "action": "question", "message": null});
    let answered = call_tool(&app, &agent.key, "respond_to_negotiation", args).await;
    assert_eq!(answered["isError"], false, "{answered}");

    // Both stored the same way: no message, both roles `peer`.
    for id in [http_id, mcp_id] {
        let view = app.get(&format!("/api/negotiations/{id}"), &token).await;
        let turn = &view.body["turns"][1];
        assert_eq!(turn["message"], Value::Null, "{turn}");
        assert_eq!(turn["suggestedRoles"], json!({"ownUser": "peer", "otherUser": "peer"}), "{turn}");
    }
    // A role that is none of the three is refused by both, and so is a message past 10 000
    // characters.
    let next = app.pickup(&agent, None).await;
    if next.status == StatusCode::OK {
        let (id, claim) = (next.body["negotiationId"].as_str().unwrap().to_owned(), next.body["claimToken"].clone());
        let bad_role = json!({"claimToken": claim, "action": "counter",
            "assessment": {"reasoning": "x", "suggestedRoles": {"ownUser": "boss", "otherUser": "peer"}}});
        app.respond(&agent, &id, &bad_role).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
        let args = json!({"negotiationId": id, "claimToken": claim, "action": "counter",
            "suggestedRoles": {"ownUser": "boss", "otherUser": "peer"}});
        assert_tool_error(&call_tool(&app, &agent.key, "respond_to_negotiation", args).await, "invalid_body");
        let args =
            json!({"negotiationId": id, "claimToken": claim, "action": "counter", "message": "m".repeat(10_001)});
        assert_tool_error(&call_tool(&app, &agent.key, "respond_to_negotiation", args).await, "invalid_body");
        // One rule set: the same refusal, word for word, whichever adapter received the respond.
        let long = "m".repeat(10_001);
        let pairs = [
            (
                json!({"claimToken": claim, "action": "haggle", "assessment": {"reasoning": "x"}}),
                json!({"negotiationId": id, "claimToken": claim, "action": "haggle", "reasoning": "x"}),
            ),
            (
                json!({"claimToken": claim, "action": "counter", "message": long, "assessment": {"reasoning": "x"}}),
                json!({"negotiationId": id, "claimToken": claim, "action": "counter", "message": long, "reasoning": "x"}),
            ),
            (
                json!({"claimToken": "", "action": "counter", "assessment": {"reasoning": "x"}}),
                json!({"negotiationId": id, "claimToken": "", "action": "counter", "reasoning": "x"}),
            ),
        ];
        for (body, args) in pairs {
            let over_http = app.respond(&agent, &id, &body).await;
            assert_eq!(over_http.status, StatusCode::BAD_REQUEST, "{}", over_http.text);
            let over_mcp = call_tool(&app, &agent.key, "respond_to_negotiation", args).await;
            assert_eq!(over_mcp["structuredContent"], over_http.body, "{over_mcp}");
        }
    }
    // The tool's schema says the same: only the negotiation and the action are required.
    let (_, listed) =
        rpc(&app, Key::Header(&agent.key), json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await;
    let tool =
        listed["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "respond_to_negotiation").unwrap();
    let description = tool["description"].as_str().unwrap();
    assert!(
        description.contains("optional for every action") && !description.contains("message is required"),
        "{description}"
    );
}
