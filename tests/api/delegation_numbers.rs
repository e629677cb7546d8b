//! The numbers a client built on protobuf's `Value` sends (every number a double): the delegate
//! body's `timeoutMs` and `maxRetries` take integral doubles as integers and refuse fractions
//! naming the field, and an input's integral doubles are integers to the capability's schema,
//! to the stored delegation (a retry with integers is the same request) and to the target.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::delegation::{body, setup, spawn};

#[tokio::test]
async fn the_delegate_body_takes_integral_doubles_as_integers() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 1).await;

    // `timeoutMs` and `maxRetries` as protobuf's Value sends them.
    let rid = Uuid::new_v4().to_string();
    let mut b = body(&requester, &rid, Some(&targets[0].anon));
    b["timeoutMs"] = json!(20000.0);
    b["maxRetries"] = json!(3.0);
    let asked = app.delegate(&requester, &b).await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.text);
    assert_eq!(asked.body["delegation"]["timeoutMs"], 20000);
    assert_eq!(asked.body["delegation"]["maxRetries"], 3);
    // The same body again, with integers this time, is the same request.
    b["timeoutMs"] = json!(20000);
    b["maxRetries"] = json!(3);
    let again = app.delegate(&requester, &b).await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text);
    assert_eq!(app.count("delegations").await, 1);

    // A fraction is refused, naming the field; nothing is made.
    for (field, value) in [("timeoutMs", json!(20000.5)), ("maxRetries", json!(3.5))] {
        let mut b = body(&requester, &Uuid::new_v4().to_string(), Some(&targets[0].anon));
        b[field] = value.clone();
        let refused = app.delegate(&requester, &b).await;
        refused.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
        assert!(refused.text.contains(&format!("{field} must be a whole number, not {value}")), "{}", refused.text);
    }
    // Out of range, whole or not, as before.
    let mut b = body(&requester, &Uuid::new_v4().to_string(), Some(&targets[0].anon));
    b["maxRetries"] = json!(11.0);
    let refused = app.delegate(&requester, &b).await;
    refused.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    assert!(refused.text.contains("maxRetries must be from 0 to 10"), "{}", refused.text);
    assert_eq!(app.count("delegations").await, 1);
}

#[tokio::test]
async fn an_inputs_integral_doubles_are_integers_to_the_schema_and_to_the_target() {
    let app = spawn().await;
    let requester = app.register_agent("requester").await;
    let counter = app.register_agent("counter").await;
    let capability = json!({
        "taskType": "analysis",
        "inputSchema": {
            "type": "object",
            "required": ["lines"],
            "properties": {"lines": {"type": "integer", "maximum": 10}, "items": {"type": "array", "items": {"type": "integer"}}},
        },
        "outputSchema": {"type": "object"},
    });
    let put = app.agent_call(&counter, Method::PUT, "/capabilities", Some(&capability)).await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    let anon = put.body["anonymousAgentId"].as_str().unwrap().to_owned();
    let ask = |input: Value| json!({"requestId": Uuid::new_v4(), "taskType": "analysis", "targetAnonymousId": anon, "input": input});

    let asked = app.delegate(&requester, &ask(json!({"lines": 5.0, "items": [1.0, 2.0]}))).await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.text);
    // The target is handed integers, as stored.
    let inbox = app.inbox(&counter, None).await;
    assert_eq!(inbox.body["requests"][0]["input"], json!({"lines": 5, "items": [1, 2]}), "{}", inbox.text);
    assert!(inbox.body["requests"][0]["input"]["lines"].is_i64(), "{}", inbox.text);

    // A fraction is no integer; the schema still judges the value.
    let fraction = app.delegate(&requester, &ask(json!({"lines": 5.5}))).await;
    fraction.assert_error(StatusCode::BAD_REQUEST, "input_invalid");
    let too_many = app.delegate(&requester, &ask(json!({"lines": 11.0}))).await;
    too_many.assert_error(StatusCode::BAD_REQUEST, "input_invalid");
    assert_eq!(app.count("delegations").await, 1);
}
