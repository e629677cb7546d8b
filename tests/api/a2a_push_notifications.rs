//! A2A push notifications: a requester sets a configuration (with its send, or with the
//! configuration methods of 1.0 and 0.3) and the task's updates are POSTed to its URL, with its
//! authentication and token, from the outbox: `StreamResponse`s in 1.0 (a status update while
//! the task runs, the whole task once it has ended), the task in 0.3. The configurations are the
//! requester's alone, their credentials never read back, their URLs judged by the outbound
//! address rule. The receiver is the webhooks' (`tests/webhooks/receiver.py`).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    a2a_server::{parties, serve},
    helpers::TestApp,
    webhooks::{Receiver, app_with},
};

/// A JSON-RPC call to `/a2a` as `key` under `version` (`None`: no header, 0.3).
async fn rpc(app: &TestApp, key: &str, version: Option<&str>, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": params});
    let mut req = app.client.post(format!("{}/a2a", app.base)).bearer_auth(key).json(&body);
    if let Some(v) = version {
        req = req.header("A2A-Version", v);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.json().await.unwrap()
}

/// A summarization the target completes (`complete`) or keeps accepted (`hold`).
fn work(mode: &str) -> Value {
    json!({"taskType": "summarization", "input": {"text": "a long text", "mode": mode}, "timeoutMs": 20000})
}

#[tokio::test]
async fn a_send_with_a_configuration_gets_every_update_pushed_with_its_credentials() {
    let app = app_with(|_| {}).await;
    let receiver = Receiver::start().await;
    let (requester, target, _) = parties(&app).await;
    let _target = serve(&app, &target);
    let config = json!({
        "url": receiver.url("/a2a"),
        "token": "task-token-1",
        "authentication": {"scheme": "Bearer", "credentials": "push-secret-1"}
    });
    let sent = rpc(
        &app,
        &requester.key,
        Some("1.0"),
        "SendMessage",
        json!({
            "message": {"messageId": uuid::Uuid::new_v4(), "role": "ROLE_USER", "parts": [{"data": work("complete")}]},
            "configuration": {"returnImmediately": true, "taskPushNotificationConfig": config}
        }),
    )
    .await;
    let task = sent["result"]["task"]["id"].as_str().unwrap_or_else(|| panic!("{sent}")).to_owned();
    let got = receiver
        .wait("/a2a", Duration::from_secs(20), |got| {
            got.iter().any(|p| p["body"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED")
        })
        .await;
    for push in &got {
        assert_eq!(push["authorization"], "Bearer push-secret-1", "{push}");
        assert_eq!(push["notificationToken"], "task-token-1");
        let body = push["body"].as_object().unwrap();
        assert_eq!(body.len(), 1, "a StreamResponse holds one of its kinds: {push}");
        let (kind, inner) = body.iter().next().unwrap();
        assert!(["statusUpdate", "task"].contains(&kind.as_str()), "{push}");
        let id = if kind == "task" { &inner["id"] } else { &inner["taskId"] };
        assert_eq!(*id, json!(task));
    }
    let last = got.iter().find(|p| p["body"]["task"].is_object()).unwrap();
    assert_eq!(last["body"]["task"]["artifacts"][0]["parts"][0]["data"]["summary"], "short", "{last}");
    // Read back: the configuration, never its credentials.
    let read = rpc(&app, &requester.key, Some("1.0"), "ListTaskPushNotificationConfigs", json!({"taskId": task})).await;
    let configs = read["result"]["configs"].as_array().unwrap_or_else(|| panic!("{read}"));
    assert_eq!(configs.len(), 1);
    assert_eq!((configs[0]["id"].clone(), configs[0]["url"].clone()), (json!(task), json!(receiver.url("/a2a"))));
    assert_eq!(configs[0]["authentication"], json!({"scheme": "Bearer"}));
    assert!(!read.to_string().contains("push-secret-1"), "credentials are write-only: {read}");
}

#[tokio::test]
async fn configurations_are_created_read_listed_and_deleted_by_their_requester_only() {
    let app = app_with(|_| {}).await;
    let receiver = Receiver::start().await;
    let (requester, target, _) = parties(&app).await;
    let stranger = app.register_agent("eve").await;
    let _target = serve(&app, &target);
    let sent = rpc(
        &app,
        &requester.key,
        Some("1.0"),
        "SendMessage",
        json!({"message": {"messageId": "hold-1", "role": "ROLE_USER", "parts": [{"data": work("hold")}]},
               "configuration": {"returnImmediately": true}}),
    )
    .await;
    let task = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    let create = |id: &str, path: &str| {
        json!({"taskId": task, "id": id, "url": receiver.url(path),
               "authentication": {"scheme": "Bearer", "credentials": "c-secret"}})
    };
    let made = rpc(&app, &requester.key, Some("1.0"), "CreateTaskPushNotificationConfig", create("one", "/one")).await;
    assert_eq!(made["result"]["id"], "one", "{made}");
    assert_eq!(made["result"]["taskId"], json!(task));
    assert!(!made.to_string().contains("c-secret"));
    rpc(&app, &requester.key, Some("1.0"), "CreateTaskPushNotificationConfig", create("two", "/two")).await;
    // The snake_case names of the protocol are read too.
    let got =
        rpc(&app, &requester.key, Some("1.0"), "GetTaskPushNotificationConfig", json!({"task_id": task, "id": "two"}))
            .await;
    assert_eq!(got["result"]["url"], receiver.url("/two"), "{got}");
    let listed =
        rpc(&app, &requester.key, Some("1.0"), "ListTaskPushNotificationConfigs", json!({"taskId": task})).await;
    assert_eq!(listed["result"]["configs"].as_array().unwrap().len(), 2);
    // Another agent: as if the task did not exist.
    for (method, params) in [
        ("GetTaskPushNotificationConfig", json!({"taskId": task, "id": "one"})),
        ("ListTaskPushNotificationConfigs", json!({"taskId": task})),
        ("DeleteTaskPushNotificationConfig", json!({"taskId": task, "id": "one"})),
        ("CreateTaskPushNotificationConfig", create("three", "/three")),
    ] {
        let refused = rpc(&app, &stranger.key, Some("1.0"), method, params).await;
        assert_eq!(refused["error"]["code"], -32001, "{method}: {refused}");
    }
    // Delete is idempotent; a deleted configuration is gone.
    for _ in 0..2 {
        let deleted = rpc(
            &app,
            &requester.key,
            Some("1.0"),
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": task, "id": "two"}),
        )
        .await;
        assert!(deleted.get("error").is_none(), "{deleted}");
    }
    let gone =
        rpc(&app, &requester.key, Some("1.0"), "GetTaskPushNotificationConfig", json!({"taskId": task, "id": "two"}))
            .await;
    assert_eq!(gone["error"]["code"], -32001, "{gone}");
    // A cancel moves the task: the remaining configuration hears of it, the deleted one not.
    let canceled = rpc(&app, &requester.key, Some("1.0"), "CancelTask", json!({"id": task})).await;
    assert!(canceled.get("error").is_none(), "{canceled}");
    let pushed = receiver
        .wait("/one", Duration::from_secs(20), |got| {
            got.iter().any(|p| p["body"]["task"]["status"]["state"] == "TASK_STATE_CANCELED")
        })
        .await;
    assert_eq!(pushed.last().unwrap()["authorization"], "Bearer c-secret");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(receiver.received("/two").is_empty(), "no push after a delete");
    // Bad input changes nothing.
    let before = app.count("outbox_targets").await;
    for (params, code) in [
        (json!({"taskId": task, "url": "ftp://x"}), "invalid_body"),
        (json!({"taskId": task}), "invalid_body"),
        (json!({"taskId": task, "url": receiver.url("/x"), "token": "two words"}), "invalid_body"),
        (
            json!({"taskId": task, "url": receiver.url("/x"), "authentication": {"credentials": "no-scheme"}}),
            "invalid_body",
        ),
        (json!({"taskId": task, "url": receiver.url("/x"), "authentication": "Bearer x"}), "invalid_body"),
    ] {
        let refused = rpc(&app, &requester.key, Some("1.0"), "CreateTaskPushNotificationConfig", params).await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        assert_eq!(refused["error"]["data"][0]["metadata"]["code"], code, "{refused}");
    }
    let unknown = rpc(
        &app,
        &requester.key,
        Some("1.0"),
        "CreateTaskPushNotificationConfig",
        json!({"taskId": uuid::Uuid::new_v4(), "url": receiver.url("/x")}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32001);
    assert_eq!(app.count("outbox_targets").await, before);
}

#[tokio::test]
async fn a_0_3_configuration_gets_the_task_in_0_3_form() {
    let app = app_with(|_| {}).await;
    let receiver = Receiver::start().await;
    let (requester, target, _) = parties(&app).await;
    let _target = serve(&app, &target);
    let sent = rpc(
        &app,
        &requester.key,
        None,
        "message/send",
        json!({"message": {"messageId": "hold-03", "role": "user", "kind": "message",
                           "parts": [{"kind": "data", "data": work("hold")}]},
               "configuration": {"blocking": false}}),
    )
    .await;
    let task = sent["result"]["id"].as_str().unwrap_or_else(|| panic!("{sent}")).to_owned();
    let set = rpc(
        &app,
        &requester.key,
        None,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": task, "pushNotificationConfig": {"url": receiver.url("/old"), "token": "t03",
               "authentication": {"schemes": ["Bearer"], "credentials": "old-secret"}}}),
    )
    .await;
    assert_eq!(set["result"]["pushNotificationConfig"]["id"], json!(task), "the task's id when none is given: {set}");
    assert_eq!(set["result"]["pushNotificationConfig"]["authentication"], json!({"schemes": ["Bearer"]}));
    let got = rpc(&app, &requester.key, None, "tasks/pushNotificationConfig/get", json!({"id": task})).await;
    assert_eq!(got["result"]["pushNotificationConfig"]["url"], receiver.url("/old"), "{got}");
    let listed = rpc(&app, &requester.key, None, "tasks/pushNotificationConfig/list", json!({"id": task})).await;
    assert_eq!(listed["result"].as_array().map(Vec::len), Some(1), "{listed}");
    rpc(&app, &requester.key, None, "tasks/cancel", json!({"id": task})).await;
    let pushed = receiver
        .wait("/old", Duration::from_secs(20), |got| got.iter().any(|p| p["body"]["status"]["state"] == "canceled"))
        .await;
    let last = pushed.last().unwrap();
    assert_eq!((last["body"]["kind"].clone(), last["body"]["id"].clone()), (json!("task"), json!(task)), "{last}");
    assert_eq!(
        (last["authorization"].clone(), last["notificationToken"].clone()),
        (json!("Bearer old-secret"), json!("t03"))
    );
    let deleted = rpc(
        &app,
        &requester.key,
        None,
        "tasks/pushNotificationConfig/delete",
        json!({"id": task, "pushNotificationConfigId": task}),
    )
    .await;
    assert_eq!(deleted["result"], Value::Null, "{deleted}");
}

#[tokio::test]
async fn a_loopback_push_url_is_refused_without_the_setting() {
    let app = TestApp::spawn().await;
    let (requester, _target, _) = parties(&app).await;
    let refused = rpc(
        &app,
        &requester.key,
        Some("1.0"),
        "SendMessage",
        json!({
            "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"data": work("hold")}]},
            "configuration": {"returnImmediately": true, "taskPushNotificationConfig": {"url": "http://127.0.0.1:9/push"}}
        }),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["data"][0]["metadata"]["code"], "url_refused");
    assert_eq!(app.count("delegations").await, 0, "the send made nothing");
}
