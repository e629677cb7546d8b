//! Parley as an A2A router: plain messages (text, no delegate body) from a requester's key reach
//! the skill of a directory agent that fits, over JSON-RPC and HTTP+JSON, and what the agent
//! answers passes back. The agents are the A2A TCK's own agent (`tests/a2a/tck_sut.py`, served by
//! the official SDK's server, which answers by `messageId` prefix) started under other names and
//! skills, each registered in Parley by its AgentCard: routing by meaning (two agents with
//! different skills, the right one chosen), by name, trust breaking a tie, none fitting; a Message
//! answer, multi-turn `input-required`, a streamed chunked artifact, a cancel forwarded, reads of
//! a routed task, and an unknown task; push notifications of routed tasks, Parley's own; and the
//! official SDK's client doing the same (`tests/a2a/sdk_router_client.py`).

use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    a2a_tck::{Sut, parley, python, register_by_card},
    helpers::{TestAgent, TestApp},
};

/// A JSON-RPC 1.0 call by `agent`; the response's body.
async fn rpc(app: &TestApp, agent: &TestAgent, method: &str, params: Value) -> Value {
    let answer = app
        .client
        .post(format!("{}/a2a", app.base))
        .bearer_auth(&agent.key)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    answer.json().await.unwrap()
}

/// A plain text message with `message_id`.
fn text(message_id: &str, text: &str) -> Value {
    json!({"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}})
}

/// The skill a send's task (or message) was routed to.
fn routed_skill(result: &Value) -> &str {
    let inner = result.get("task").or_else(|| result.get("message")).unwrap_or(result);
    inner["metadata"]["parley"]["route"]["skillId"].as_str().unwrap_or_else(|| panic!("not routed: {result}"))
}

/// Parley with two of the kit's agents registered by card: a translator (skill `translate`) and
/// a forecaster (skill `weather`); the agents run while the second value lives.
async fn translator_and_forecaster(python: &std::path::Path) -> (TestApp, [Sut; 2]) {
    let translator = Sut::start(
        python,
        &[
            "--name",
            "Translator",
            "--skill",
            "translate|Translate text|Translates text between languages such as French and German|translation,language",
        ],
    )
    .await;
    let forecaster = Sut::start(
        python,
        &[
            "--name",
            "Forecaster",
            "--skill",
            "weather|Weather forecast|Forecasts the weather for a city: rain, sun, temperature|weather,forecast",
        ],
    )
    .await;
    let app = parley().await;
    register_by_card(&app, "user-t", "Translator", &translator.card()).await;
    register_by_card(&app, "user-f", "Forecaster", &forecaster.card()).await;
    (app, [translator, forecaster])
}

#[tokio::test]
async fn plain_messages_reach_the_skill_that_fits_by_meaning_or_by_name_and_none_fitting_names_the_skills() {
    let python = python().await;
    let (app, _agents) = translator_and_forecaster(&python).await;
    let asker = app.register_agent("user-asker").await;

    // By meaning.
    let sent =
        rpc(&app, &asker, "SendMessage", text("tck-complete-task-1", "Please translate good morning into French"))
            .await;
    let result = &sent["result"];
    assert_eq!(routed_skill(result), "translate", "{sent}");
    assert_eq!(result["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(result["task"]["status"]["message"]["parts"][0]["text"], "Hello from TCK");
    let forwarded = result["task"]["history"][0]["messageId"].as_str().unwrap();
    assert!(forwarded.starts_with("tck-complete-task-1"), "the target's message id keeps the requester's: {forwarded}");
    assert_eq!(result["task"]["history"][0]["parts"], json!([{"text": "Please translate good morning into French"}]));
    let sent =
        rpc(&app, &asker, "SendMessage", text("tck-complete-task-2", "Will it rain in Oslo tomorrow? forecast")).await;
    assert_eq!(routed_skill(&sent["result"]), "weather", "{sent}");

    // By name, whatever the text says.
    let mut named = text("tck-complete-task-3", "Please translate good morning into French");
    named["metadata"] = json!({"skillId": "weather"});
    assert_eq!(routed_skill(&rpc(&app, &asker, "SendMessage", named).await["result"]), "weather");

    // Over HTTP+JSON too, and a Message answer passes back as a Message.
    let rest = app
        .client
        .post(format!("{}/a2a/rest/message:send", app.base))
        .bearer_auth(&asker.key)
        .header("A2A-Version", "1.0")
        .json(&text("tck-message-response-1", "translate this into German"))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), StatusCode::OK);
    let rest: Value = rest.json().await.unwrap();
    assert_eq!(rest["message"]["parts"][0]["text"], "Direct message response", "{rest}");
    assert_eq!(routed_skill(&rest), "translate");

    // Nothing fits: the skills to choose from.
    let none = rpc(&app, &asker, "SendMessage", text("m-none", "quantum chromodynamics lecture notes")).await;
    assert_eq!(none["error"]["code"], -32602, "{none}");
    assert_eq!(none["error"]["data"][0]["metadata"]["code"], "no_skill_matches");
    assert_eq!(none["error"]["data"][0]["domain"], "a2a-protocol.org");
    let message = none["error"]["message"].as_str().unwrap();
    assert!(message.contains("translate") && message.contains("weather"), "{message}");
    let mut unknown = text("m-unknown", "anything");
    unknown["metadata"] = json!({"skillId": "cooking"});
    let unknown = rpc(&app, &asker, "SendMessage", unknown).await;
    assert_eq!(unknown["error"]["data"][0]["metadata"]["code"], "no_skill_matches", "{unknown}");

    // The skills are the card's, stored with it.
    let skills: Vec<String> =
        sqlx::query_scalar("SELECT skill_id FROM agent_skills ORDER BY skill_id").fetch_all(&app.pool).await.unwrap();
    assert_eq!(skills, ["translate", "weather"]);
}

#[tokio::test]
async fn trust_breaks_a_tie_between_skills_that_fit_alike() {
    let python = python().await;
    let skill = |id: &str| format!("{id}|Summarise documents|Summarises long documents into a paragraph|summary");
    let (a, b) = (skill("summary-a"), skill("summary-b"));
    let first = Sut::start(&python, &["--name", "First", "--skill", &a]).await;
    let second = Sut::start(&python, &["--name", "Second", "--skill", &b]).await;
    let app = parley().await;
    let first_agent = register_by_card(&app, "user-1", "First", &first.card()).await;
    let second_agent = register_by_card(&app, "user-2", "Second", &second.card()).await;
    let asker = app.register_agent("user-asker").await;
    // Their records as the daily roll leaves them: the second agent is trusted more, then less.
    for (trusted, other, expected) in
        [(&second_agent, &first_agent, "summary-b"), (&first_agent, &second_agent, "summary-a")]
    {
        sqlx::query("DELETE FROM trust_records").execute(&app.pool).await.unwrap();
        for (agent, raw) in [(trusted, 90.0), (other, 20.0)] {
            sqlx::query(
                "INSERT INTO trust_records (agent_id, health, raw, events, as_of, provisional)
                 VALUES ($1::uuid, $2, $2, 10, (now() AT TIME ZONE 'UTC')::date, false)",
            )
            .bind(&agent.id)
            .bind(raw)
            .execute(&app.pool)
            .await
            .unwrap();
        }
        let id = format!("tck-complete-task-{expected}");
        let sent = rpc(&app, &asker, "SendMessage", text(&id, "Summarise this document please")).await;
        assert_eq!(routed_skill(&sent["result"]), expected, "{sent}");
    }
}

/// The SSE events of a streaming call, each event's data.
async fn events(response: reqwest::Response) -> Vec<Value> {
    let mut body = response.bytes_stream();
    let mut text = String::new();
    let read = async {
        while let Some(chunk) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read).await.expect("the stream did not end");
    text.split("\n\n")
        .filter_map(|e| {
            e.lines().find_map(|l| l.strip_prefix("data:")).map(|d| serde_json::from_str(d.trim()).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn a_routed_task_goes_on_at_its_target_multi_turn_streamed_read_and_canceled() {
    let python = python().await;
    let sut = Sut::start(&python, &[]).await;
    let app = parley().await;
    register_by_card(&app, "user-sut", "The kit's agent", &sut.card()).await;
    let asker = app.register_agent("user-asker").await;

    // input-required, then the next message on that task reaches the same target task.
    let asked = rpc(&app, &asker, "SendMessage", text("tck-input-required-1", "TCK needs more input")).await;
    let task = &asked["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{asked}");
    let (task_id, context_id) = (task["id"].as_str().unwrap(), task["contextId"].as_str().unwrap());
    let follow = json!({"message": {"messageId": "follow-up-1", "taskId": task_id, "contextId": context_id,
                                     "role": "ROLE_USER", "parts": [{"text": "here it is"}]}});
    let answered = rpc(&app, &asker, "SendMessage", follow).await;
    assert_eq!(answered["result"]["task"]["id"], task_id, "{answered}");
    assert_eq!(answered["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let read = rpc(&app, &asker, "GetTask", json!({"id": task_id, "historyLength": 10})).await;
    assert_eq!(read["result"]["id"], task_id, "{read}");
    assert!(read["result"]["history"].as_array().unwrap().len() >= 2, "{read}");
    // Over HTTP+JSON the same task.
    let rest = app
        .client
        .get(format!("{}/a2a/rest/tasks/{task_id}", app.base))
        .bearer_auth(&asker.key)
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), StatusCode::OK);
    assert_eq!(rest.json::<Value>().await.unwrap()["status"]["state"], "TASK_STATE_COMPLETED");

    // A streamed, chunked artifact: the target's events in order.
    let stream = app
        .client
        .post(format!("{}/a2a", app.base))
        .bearer_auth(&asker.key)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": "s", "method": "SendStreamingMessage",
                      "params": text("tck-stream-artifact-chunked-1", "TCK streaming test")}))
        .send()
        .await
        .unwrap();
    let results: Vec<Value> = events(stream).await.into_iter().map(|e| e["result"].clone()).collect();
    let chunks: Vec<&Value> = results.iter().filter_map(|r| r.get("artifactUpdate")).collect();
    assert_eq!(chunks.len(), 2, "{results:#?}");
    assert_eq!(chunks[0]["artifact"]["parts"][0]["text"], "chunk-1 ");
    assert_eq!(chunks[1]["artifact"]["parts"][0]["text"], "chunk-2");
    assert_eq!(chunks[1]["append"], true);
    assert_eq!(chunks[1]["lastChunk"], true);
    let last = results.last().unwrap();
    assert_eq!(last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED", "{results:#?}");

    // A cancel reaches the target's task.
    let mut working = text("test-resubscribe-message-id-1", "TCK long task");
    working["configuration"] = json!({"returnImmediately": true});
    let started = rpc(&app, &asker, "SendMessage", working).await;
    let id = started["result"]["task"]["id"].as_str().unwrap_or_else(|| panic!("{started}")).to_owned();
    let canceled = rpc(&app, &asker, "CancelTask", json!({"id": id})).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");

    // A 0.3 client's plain message reaches the 1.0 agent, and reads its answer in 0.3's shapes.
    let old = app
        .client
        .post(format!("{}/a2a", app.base))
        .bearer_auth(&asker.key)
        .json(&json!({"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": {"message": {
            "kind": "message", "messageId": "tck-artifact-file-1", "role": "user",
            "parts": [{"kind": "text", "text": "TCK artifact test"}]}}}))
        .send()
        .await
        .unwrap();
    let old: Value = old.json().await.unwrap();
    let task = &old["result"];
    assert_eq!((task["kind"].as_str(), task["status"]["state"].as_str()), (Some("task"), Some("completed")), "{old}");
    let part = &task["artifacts"][0]["parts"][0];
    assert_eq!((part["kind"].as_str(), part["file"]["name"].as_str()), (Some("file"), Some("output.txt")), "{old}");
    assert_eq!(task["history"][0]["role"], "user");

    // Another requester's key does not reach the task; an unknown task is -32001.
    let other = app.register_agent("user-other").await;
    let foreign = rpc(&app, &other, "GetTask", json!({"id": task_id})).await;
    assert_eq!(foreign["error"]["code"], -32001, "{foreign}");
    let unknown = json!({"message": {"messageId": "m", "taskId": "no-such-task", "role": "ROLE_USER",
                                      "parts": [{"text": "hello"}]}});
    assert_eq!(rpc(&app, &asker, "SendMessage", unknown).await["error"]["code"], -32001);
}

#[tokio::test]
async fn a_plain_message_to_a_polling_agents_skill_reaches_it_through_pickup_as_a_delegation() {
    use crate::directory_calls::offer;
    let app = parley().await;
    let [poet, translator, asker] = app.register_agents(["user-poet", "user-translator", "user-asker"]).await;
    let skill = |custom: &str, description: &str, tag: &str| {
        json!({"taskType": "custom", "customType": custom, "description": description, "tags": [tag],
               "inputSchema": {"type": "object", "required": ["parts"]}, "outputSchema": {"type": "object"}})
    };
    let poet_anonymous = offer(&app, &poet, &skill("haiku", "Writes a haiku about any topic", "poetry")).await;
    offer(&app, &translator, &skill("translate", "Translates text between languages", "language")).await;

    let mut sent = text("m-haiku", "Write a haiku about autumn leaves");
    sent["configuration"] = json!({"returnImmediately": true});
    let sent = rpc(&app, &asker, "SendMessage", sent).await;
    let task = &sent["result"]["task"];
    assert_eq!(task["metadata"]["parley"]["taskType"], "custom", "{sent}");
    let task_id = task["id"].as_str().unwrap().to_owned();

    // The poet picks it up as any delegation: the input is the message's parts.
    let inbox = app.inbox(&poet, Some(5)).await;
    let item = &inbox.body["requests"][0];
    assert_eq!(item["input"], json!({"parts": [{"text": "Write a haiku about autumn leaves"}]}), "{}", inbox.text);
    assert_eq!(app.inbox(&translator, None).await.body["total"], 0);
    let rid = item["requestId"].as_str().unwrap().to_owned();
    let accepted = app.act(&poet, &rid, "accept", None).await;
    let token = accepted.body["claimToken"].as_str().unwrap().to_owned();
    let done =
        app.act(&poet, &rid, "complete", Some(&json!({"output": {"haiku": "leaves fall"}, "claimToken": token}))).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    let read = rpc(&app, &asker, "GetTask", json!({"id": task_id})).await;
    assert_eq!(read["result"]["status"]["state"], "TASK_STATE_COMPLETED", "{read}");
    let attempt = &read["result"]["metadata"]["parley"]["attempts"][0];
    assert_eq!(attempt["targetAnonymousId"], poet_anonymous.as_str(), "{read}");
}

/// The push notifications of `receiver`'s `path` so far: each one's task id and state.
fn pushed(receiver: &crate::webhooks::Receiver, path: &str) -> Vec<(String, String)> {
    receiver
        .received(path)
        .iter()
        .map(|p| {
            let update = &p["body"]["statusUpdate"];
            (
                update["taskId"].as_str().unwrap_or_default().to_owned(),
                update["status"]["state"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_routed_tasks_push_configurations_are_parleys_and_each_new_state_it_sees_is_pushed_once() {
    let python = python().await;
    let sut = Sut::start(&python, &[]).await;
    let receiver = crate::webhooks::Receiver::start().await;
    let app = parley().await;
    register_by_card(&app, "user-sut", "The kit's agent", &sut.card()).await;
    let asker = app.register_agent("user-asker").await;

    // A configuration in the send: kept by Parley (the kit's agent is not asked to push), and the
    // task's first state pushed with its credentials.
    let mut first = text("tck-input-required-push-1", "TCK needs more input");
    first["configuration"] = json!({"taskPushNotificationConfig": {
        "id": "mine", "url": receiver.url("/routed"), "token": "tok-1",
        "authentication": {"scheme": "Bearer", "credentials": "routed-secret"}}});
    let asked = rpc(&app, &asker, "SendMessage", first).await;
    let task = &asked["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{asked}");
    let (task_id, context_id) =
        (task["id"].as_str().unwrap().to_owned(), task["contextId"].as_str().unwrap().to_owned());
    let got = receiver.wait("/routed", Duration::from_secs(20), |got| !got.is_empty()).await;
    assert_eq!(got[0]["authorization"], "Bearer routed-secret", "{got:#?}");
    assert_eq!(got[0]["notificationToken"], "tok-1");
    let update = &got[0]["body"]["statusUpdate"];
    assert_eq!(
        (update["taskId"].as_str(), update["contextId"].as_str()),
        (Some(task_id.as_str()), Some(context_id.as_str()))
    );
    assert_eq!(update["metadata"]["parley"]["route"]["skillId"], routed_skill(&asked["result"]));

    // The configuration methods on the routed task are answered by Parley.
    let read = rpc(&app, &asker, "GetTaskPushNotificationConfig", json!({"taskId": task_id, "id": "mine"})).await;
    assert_eq!(
        (read["result"]["taskId"].as_str(), read["result"]["url"].as_str()),
        (Some(task_id.as_str()), Some(receiver.url("/routed").as_str())),
        "{read}"
    );
    assert!(!read.to_string().contains("routed-secret"), "credentials are write-only: {read}");
    let second = json!({"taskId": task_id, "id": "other", "url": receiver.url("/other")});
    let created = rpc(&app, &asker, "CreateTaskPushNotificationConfig", second).await;
    assert_eq!(created["result"]["id"], "other", "{created}");
    let listed = rpc(&app, &asker, "ListTaskPushNotificationConfigs", json!({"taskId": task_id})).await;
    assert_eq!(listed["result"]["configs"].as_array().map(Vec::len), Some(2), "{listed}");
    for _ in 0..2 {
        let deleted =
            rpc(&app, &asker, "DeleteTaskPushNotificationConfig", json!({"taskId": task_id, "id": "other"})).await;
        assert!(deleted.get("error").is_none(), "deleting is idempotent: {deleted}");
    }
    let other = app.register_agent("user-other").await;
    let foreign = rpc(&app, &other, "ListTaskPushNotificationConfigs", json!({"taskId": task_id})).await;
    assert_eq!(foreign["error"]["code"], -32001, "{foreign}");

    // A read of the same state tells nothing new; the follow-up's completion is pushed.
    rpc(&app, &asker, "GetTask", json!({"id": task_id})).await;
    let follow = json!({"message": {"messageId": "follow-up-push-1", "taskId": task_id, "contextId": context_id,
                                     "role": "ROLE_USER", "parts": [{"text": "here it is"}]}});
    let answered = rpc(&app, &asker, "SendMessage", follow).await;
    assert_eq!(answered["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{answered}");
    rpc(&app, &asker, "GetTask", json!({"id": task_id})).await;
    receiver.wait("/routed", Duration::from_secs(20), |got| got.len() >= 2).await;
    // Once the outbox has nothing more to send to it, exactly one push per state arrived.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let pending: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM outbox_deliveries d JOIN outbox_targets t USING (target_id)
              WHERE t.route_task_id = $1 AND d.status = 'pending'",
        )
        .bind(&task_id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
        if pending == 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{pending} pushes still pending");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut states = pushed(&receiver, "/routed");
    states.sort();
    assert_eq!(
        states,
        vec![
            (task_id.clone(), "TASK_STATE_COMPLETED".to_owned()),
            (task_id.clone(), "TASK_STATE_INPUT_REQUIRED".to_owned())
        ],
        "each state once, reads told nothing new"
    );
    assert!(receiver.received("/other").is_empty(), "a deleted configuration gets nothing");
}

#[tokio::test]
async fn the_official_sdks_client_reaches_the_right_agent_through_parley() {
    let python = python().await;
    let (app, _agents) = translator_and_forecaster(&python).await;
    let asker = app.register_agent("user-asker").await;
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/sdk_router_client.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .env("PARLEY_BASE", &app.base)
        .env("REQUESTER_KEY", &asker.key)
        .kill_on_drop(true)
        .output();
    let out =
        tokio::time::timeout(Duration::from_secs(300), run).await.expect("the SDK client ran past 5 minutes").unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}\n{}", String::from_utf8_lossy(&out.stderr));
    for check in [
        "by meaning, each message reaches the skill that fits",
        "by name",
        "nothing fits: the skills to choose from",
        "a message answer",
        "multi-turn input-required, then the task read",
        "a streamed chunked artifact",
        "a cancel forwarded",
    ] {
        assert!(said.lines().any(|l| l == format!("ok {check}")), "not checked: {check}\n{said}");
    }
}
