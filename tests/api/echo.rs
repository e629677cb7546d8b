//! No answer echoes what a client sent at length: errors name the field and quote at most a
//! short prefix of a bad value, over REST and MCP alike, whatever the value is made of.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{helpers::TestApp, mcp::call_tool};

/// 50 KB of a combining mark, which Debug escaping turns into 4.5 times as many bytes.
fn marks() -> String {
    "\u{300}".repeat(25_000)
}

#[tokio::test]
async fn mcp_tools_quote_a_bad_id_by_a_short_prefix() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    crate::mcp::initialize(&app, &agent.key).await;
    for (tool, field) in [("get_delegation", "requestId"), ("get_negotiation", "negotiationId")] {
        let result = call_tool(&app, &agent.key, tool, json!({field: marks()})).await;
        crate::mcp::assert_tool_error(&result, "invalid_body");
        let size = serde_json::to_string(&result).unwrap().len();
        eprintln!("{tool} with a 50 KB {field}: the answer is {size} bytes");
        assert!(size < 1_000, "{tool} answered {size} bytes: {result}");
        assert!(result.to_string().contains(field), "{result}");
    }
}

#[tokio::test]
async fn rest_errors_quote_a_bad_value_by_a_short_prefix() {
    let app = TestApp::spawn().await;
    let service = app.service_token();
    let big = marks();
    let text_of = |a: &crate::helpers::Answer| a.text.len();
    // A string where an object belongs, and an unknown field, in a body.
    let wrong_type = app.post("/api/negotiations", &service, &json!({"sourceUser": big})).await;
    wrong_type.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    let unknown_field =
        app.post("/api/agents", &app.user_token("user-maya"), &json!({"name": "x", big.clone(): 1})).await;
    unknown_field.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    // An unknown query parameter, and a bad number in one.
    let query = app.get(&format!("/api/agents/discover?taskType=testing&{}=1", "x".repeat(50_000)), &service).await;
    query.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    let number = app
        .get(&format!("/api/agents/discover?taskType=testing&maxCostUsd={}", "9".repeat(40_000) + "x"), &service)
        .await;
    number.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    // A mistyped string in a capability (a schema that is not one).
    let agent = app.register_agent("user-tomas").await;
    let schema = app
        .agent_call(
            &agent,
            Method::PUT,
            "/capabilities",
            Some(&json!({"taskType": "testing", "inputSchema": {"type": big}, "outputSchema": {}})),
        )
        .await;
    schema.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    for (what, answer) in [
        ("wrong type", &wrong_type),
        ("unknown field", &unknown_field),
        ("query", &query),
        ("number", &number),
        ("schema", &schema),
    ] {
        eprintln!("{what}: {} bytes: {}", text_of(answer), answer.text.chars().take(160).collect::<String>());
        assert!(text_of(answer) < 1_000, "{what}: {}", answer.text);
        let body: Value = serde_json::from_str(&answer.text).unwrap();
        assert!(!body["error"].as_str().unwrap().is_empty());
    }
}
