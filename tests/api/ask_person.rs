//! Asking the person: an agent that is unsure asks its person (`ask_person`), the negotiation
//! waits for the answer, and the agent's next pickup of the turn carries it
//! (`context.personAnswers`; `null` when the answer window ran out). At most 3 questions per
//! side; nothing of a question reaches the other side (REST, MCP, the A2A view, SSE).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{Answer, SseReader, TestAgent, TestApp, answer},
    mcp::{call_tool, initialize},
    runner,
};

const QUESTION: &str = "PRIVATE-Q: Maya's startup pays mostly in equity. Is that a deal-breaker for you?";
const ANSWER: &str = "PRIVATE-A: equity is fine if the base covers rent";

/// An `ask_person` respond body.
fn ask(token: &str, question: &str, options: &[&str]) -> Value {
    json!({"claimToken": token, "action": "ask_person", "question": question, "options": options})
}

/// `POST /api/negotiations/{id}/questions/{q}/answer` as `user`.
async fn answer_as(app: &TestApp, user: &str, id: &str, question: &str, text: &str) -> Answer {
    app.post(
        &format!("/api/negotiations/{id}/questions/{question}/answer"),
        &app.user_token(user),
        &json!({"answer": text}),
    )
    .await
}

/// Asks as `agent` (which holds the claim `token`), asserting the question was asked; returns its id.
async fn asked(app: &TestApp, agent: &TestAgent, id: &str, token: &str, question: &str) -> String {
    let asked = app.respond(agent, id, &ask(token, question, &["yes", "no"])).await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.text);
    assert_eq!(asked.body["status"], "waiting_for_person", "{}", asked.text);
    asked.body["questionId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_agent_asks_its_person_and_its_next_pickup_carries_the_answer() {
    let app = TestApp::spawn().await;
    let mut tomas_events = SseReader::open(&app.base, &app.user_token("user-tomas"), None).await;
    let (agent, id, token) = app.claimed_negotiation().await;
    let tomas = app.user_token("user-tomas");

    let first = app.respond(&agent, &id, &ask(&token, QUESTION, &["yes", "no"])).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(first.body["status"], "waiting_for_person");
    assert_eq!(first.body["turnNumber"], 1, "the turn does not advance");
    let question_id = first.body["questionId"].as_str().unwrap().to_owned();
    // A repeat (a lost answer) gets the same answer; another body under the token is refused.
    let again = app.respond(&agent, &id, &ask(&token, QUESTION, &["yes", "no"])).await;
    assert_eq!((again.status, &again.body), (StatusCode::OK, &first.body));
    app.respond(&agent, &id, &ask(&token, "something else?", &[]))
        .await
        .assert_error(StatusCode::CONFLICT, "turn_already_answered");
    // The claim is released and nothing waits for the agent meanwhile.
    assert_eq!(app.snapshot(&id).await, ("waiting_for_person".to_owned(), 1, 1));
    assert_eq!(app.pickup(&agent, None).await.status, StatusCode::NO_CONTENT);
    app.respond(&agent, &id, &answer("accept", Some(&token))).await.assert_error(StatusCode::CONFLICT, "claim_stale");

    // The person sees the question on their negotiation and opportunity, and as an event.
    let view = app.get(&format!("/api/negotiations/{id}"), &tomas).await.body;
    assert_eq!((&view["status"], &view["waitingFor"]), (&json!("waiting_for_person"), &json!("person")));
    let pending = &view["pendingQuestion"];
    assert_eq!((&pending["id"], &pending["question"]), (&json!(question_id), &json!(QUESTION)));
    assert_eq!(pending["options"], json!(["yes", "no"]));
    assert!(pending["expiresAt"].is_string() && pending["askedAt"].is_string());
    let opportunity = view["opportunityId"].as_str().unwrap();
    let seen = app.get(&format!("/api/opportunities/{opportunity}"), &tomas).await.body;
    assert_eq!(seen["pendingQuestion"]["id"], json!(question_id), "{seen}");
    let listed = app.get("/api/opportunities", &tomas).await.body;
    assert_eq!(listed["opportunities"][0]["pendingQuestion"]["question"], QUESTION, "{listed}");
    let event = loop {
        let e = tomas_events.next(Duration::from_secs(10)).await.expect("the question's event");
        if e.event == "negotiation.question" {
            break e;
        }
    };
    assert_eq!((&event.data["state"], &event.data["questionId"]), (&json!("asked"), &json!(question_id)));
    assert_eq!(event.data["question"], QUESTION);

    // Only the asking person may answer; an empty answer is refused.
    answer_as(&app, "user-maya", &id, &question_id, "no").await.assert_error(StatusCode::NOT_FOUND, "not_found");
    answer_as(&app, "user-tomas", &id, &question_id, "  ").await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    let answered = answer_as(&app, "user-tomas", &id, &question_id, ANSWER).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    assert_eq!(answered.body["answer"], ANSWER);
    // The same answer again changes nothing; another is refused.
    assert_eq!(answer_as(&app, "user-tomas", &id, &question_id, ANSWER).await.status, StatusCode::OK);
    answer_as(&app, "user-tomas", &id, &question_id, "no").await.assert_error(StatusCode::CONFLICT, "question_closed");
    let view = app.get(&format!("/api/negotiations/{id}"), &tomas).await.body;
    assert_eq!((&view["status"], &view["waitingFor"]), (&json!("waiting_for_agent"), &json!("agent")));
    assert!(view.get("pendingQuestion").is_none(), "{view}");

    // The agent's next pickup of the turn carries the answer, and the turn goes on as usual.
    let picked = app.pickup(&agent, None).await;
    assert_eq!(picked.status, StatusCode::OK, "{}", picked.text);
    assert_eq!(picked.body["turn"]["number"], 1);
    let answers = picked.body["context"]["personAnswers"].as_array().unwrap();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!((&answers[0]["questionId"], &answers[0]["answer"]), (&json!(question_id), &json!(ANSWER)));
    assert_eq!(answers[0]["question"], QUESTION);
    assert!(answers[0]["answeredAt"].is_string());
    let token = picked.body["claimToken"].as_str().unwrap();
    let countered = app.respond(&agent, &id, &answer("counter", Some(token))).await;
    assert_eq!(countered.status, StatusCode::OK, "{}", countered.text);
    assert_eq!(countered.body["turnNumber"], 1);
    // Insights count the person's questions, for them and for everyone; the other side's are 0.
    let app = &app;
    let counted = async |token: String| app.get("/api/insights", &token).await.body["total"]["personQuestions"].clone();
    assert_eq!(counted(tomas.clone()).await, json!({"asked": 1, "answered": 1, "unanswered": 0}));
    assert_eq!(counted(app.service_token()).await, json!({"asked": 1, "answered": 1, "unanswered": 0}));
    assert_eq!(counted(app.user_token("user-maya")).await, json!({"asked": 0, "answered": 0, "unanswered": 0}));
    // The answer belongs to that turn: a later turn's pickup carries none.
    let later = app.pickup(&agent, None).await;
    if later.status == StatusCode::OK {
        assert!(later.body["context"].get("personAnswers").is_none(), "{}", later.text);
    }
}

#[tokio::test]
async fn a_question_nobody_answers_in_time_goes_back_to_the_agent_with_null() {
    let app = TestApp::spawn_with(|c| c.ask_timeout = Duration::from_secs(1)).await;
    let (agent, id, token) = app.claimed_negotiation().await;
    let question_id = asked(&app, &agent, &id, &token, QUESTION).await;
    let view = app.wait_for(&id, Duration::from_secs(20), |v| v["status"] == "waiting_for_agent").await;
    assert_eq!(view["waitingFor"], "agent");
    assert_eq!(view["turnCount"], 1, "the window's end takes no turn");
    answer_as(&app, "user-tomas", &id, &question_id, "yes").await.assert_error(StatusCode::CONFLICT, "question_closed");
    let picked = app.pickup(&agent, None).await;
    assert_eq!(picked.status, StatusCode::OK, "{}", picked.text);
    let answers = &picked.body["context"]["personAnswers"];
    assert_eq!(answers[0]["questionId"], json!(question_id), "{answers}");
    assert!(answers[0]["answer"].is_null() && answers[0]["answeredAt"].is_null(), "{answers}");
    let insights = app.get("/api/insights", &app.user_token("user-tomas")).await.body;
    assert_eq!(insights["total"]["personQuestions"], json!({"asked": 1, "answered": 0, "unanswered": 1}), "{insights}");
    // Liveness and fallback are unchanged for the rest of the turn: the park timer is armed.
    let park_timers: i64 = app
        .counted(&format!(
            "SELECT count(*) FROM apalis.jobs WHERE idempotency_key IN ('park:{id}', 'claim:{id}') AND status = 'Pending'"
        ))
        .await;
    assert_eq!(park_timers, 1);
}

#[tokio::test]
async fn a_fourth_question_of_a_side_is_refused_and_the_claim_kept() {
    let app = TestApp::spawn().await;
    let (agent, id, mut token) = app.claimed_negotiation().await;
    for n in 1..=3 {
        let q = asked(&app, &agent, &id, &token, &format!("question {n}?")).await;
        let answered = answer_as(&app, "user-tomas", &id, &q, "yes").await;
        assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
        token = app.claim_token(&agent).await;
    }
    let picked = app.pickup(&agent, None).await.body;
    assert_eq!(picked["context"]["personAnswers"].as_array().map(Vec::len), Some(3), "{picked}");
    let fourth = app.respond(&agent, &id, &ask(&token, "question 4?", &[])).await;
    fourth.assert_error(StatusCode::CONFLICT, "limit_reached");
    assert_eq!(fourth.body["limit"], 3);
    assert_eq!(app.snapshot(&id).await.0, "claimed", "the refused ask keeps the claim");
    let accepted = app.respond(&agent, &id, &answer("accept", Some(&token))).await;
    assert_eq!(accepted.body["status"], "completed", "{}", accepted.text);
}

#[tokio::test]
async fn bad_asks_are_refused_with_the_field_named() {
    let app = TestApp::spawn().await;
    let (agent, id, token) = app.claimed_negotiation().await;
    for (body, says) in [
        (json!({"claimToken": token, "action": "ask_person"}), "question"),
        (ask(&token, &"q".repeat(501), &[]), "question"),
        (ask(&token, "ok?", &["a", "b", "c", "d", "e", "f"]), "options"),
        (ask(&token, "ok?", &["a", "a"]), "options"),
        (
            json!({"claimToken": token, "action": "accept", "question": "ok?",
                "assessment": {"reasoning": "r"}}),
            "ask_person",
        ),
        (json!({"claimToken": token, "action": "accept"}), "assessment"),
    ] {
        let refused = app.respond(&agent, &id, &body).await;
        refused.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
        assert!(refused.body["error"].as_str().unwrap().contains(says), "{body}: {}", refused.text);
    }
    assert_eq!(app.snapshot(&id).await.0, "claimed");
}

#[tokio::test]
async fn over_mcp_an_agent_asks_and_its_next_pickup_carries_the_answer() {
    let app = TestApp::spawn().await;
    let (agent, id) = crate::mcp::claimed_over_mcp(&app).await;
    let asked = call_tool(
        &app,
        &agent.key,
        "respond_to_negotiation",
        json!({"negotiationId": id, "action": "ask_person", "question": QUESTION, "options": ["yes", "no"]}),
    )
    .await;
    assert_eq!(asked["structuredContent"]["status"], "waiting_for_person", "{asked}");
    let question_id = asked["structuredContent"]["questionId"].as_str().unwrap().to_owned();
    let nothing = call_tool(&app, &agent.key, "pickup_negotiation", json!({})).await;
    assert_eq!(nothing["structuredContent"]["pickedUp"], false, "{nothing}");
    assert_eq!(answer_as(&app, "user-tomas", &id, &question_id, "no").await.status, StatusCode::OK);
    let picked = call_tool(&app, &agent.key, "pickup_negotiation", json!({})).await;
    let answers = &picked["structuredContent"]["context"]["personAnswers"];
    assert_eq!((&answers[0]["questionId"], &answers[0]["answer"]), (&json!(question_id), &json!("no")), "{picked}");
}

#[tokio::test]
async fn the_other_side_never_reads_the_question_or_the_answer() {
    let app = TestApp::spawn().await;
    let [maya_agent, tomas_agent] = app.register_agents(["user-maya", "user-tomas"]).await;
    let maya = app.user_token("user-maya");
    let mut maya_events = SseReader::open(&app.base, &maya, None).await;
    let started = app.start(&fixtures::good_match()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let opportunity = started["opportunity"]["id"].as_str().unwrap().to_owned();

    // Personal vs personal: Maya's agent proposes, Tomas's asks Tomas.
    let token = app.claim_token(&maya_agent).await;
    assert_eq!(app.respond(&maya_agent, &id, &answer("propose", Some(&token))).await.status, StatusCode::OK);
    let token = app.claim_token(&tomas_agent).await;
    let question_id = asked(&app, &tomas_agent, &id, &token, QUESTION).await;

    let clean = |what: &str, a: &Answer| {
        assert_eq!(a.status, StatusCode::OK, "{what}: {}", a.text);
        assert!(
            !a.text.contains("PRIVATE-") && !a.text.contains(&question_id),
            "{what} shows the question: {}",
            a.text
        );
    };
    let check_maya = async |when: &str| {
        let view = app.get(&format!("/api/negotiations/{id}"), &maya).await;
        clean(&format!("{when}: Maya's negotiation view"), &view);
        clean(
            &format!("{when}: Maya's opportunity"),
            &app.get(&format!("/api/opportunities/{opportunity}"), &maya).await,
        );
        clean(&format!("{when}: Maya's opportunities"), &app.get("/api/opportunities", &maya).await);
        clean(&format!("{when}: Maya's A2A task"), &app.get(&format!("/api/tasks/{id}"), &maya).await);
        let agent_view = app.agent_call(&maya_agent, Method::GET, &format!("/negotiations/{id}"), None).await;
        clean(&format!("{when}: Maya's agent's view"), &agent_view);
        let mcp = call_tool(&app, &maya_agent.key, "get_negotiation", json!({"negotiationId": id})).await;
        assert!(!mcp.to_string().contains("PRIVATE-"), "{when}: MCP get_negotiation: {mcp}");
        view
    };
    initialize(&app, &maya_agent.key).await;
    let waiting = check_maya("while asked").await;
    assert_eq!(waiting.body["waitingFor"], "person", "Maya reads only that it waits for the other person");
    answer_as(&app, "user-maya", &id, &question_id, ANSWER).await.assert_error(StatusCode::NOT_FOUND, "not_found");

    assert_eq!(answer_as(&app, "user-tomas", &id, &question_id, ANSWER).await.status, StatusCode::OK);
    check_maya("once answered").await;
    let token = app.claim_token(&tomas_agent).await;
    assert_eq!(app.respond(&tomas_agent, &id, &answer("counter", Some(&token))).await.status, StatusCode::OK);
    // Maya's agent's pickup: the history holds the counter, nothing of the question.
    let picked = app.pickup(&maya_agent, None).await;
    clean("Maya's agent's pickup", &picked);
    assert!(picked.body["context"].get("personAnswers").is_none());
    let over_mcp = call_tool(&app, &maya_agent.key, "pickup_negotiation", json!({})).await;
    assert!(!over_mcp.to_string().contains("PRIVATE-"), "{over_mcp}");
    check_maya("after the counter").await;

    // Maya's event stream: up to the counter's turn, never the question's event.
    loop {
        let e = maya_events.next(Duration::from_secs(10)).await.expect("Maya's events up to the counter");
        assert_ne!(e.event, "negotiation.question", "{:?}", e.data);
        assert!(!e.data.to_string().contains("PRIVATE-"), "{:?}", e.data);
        if e.event == "negotiation.turn" && e.data["turnNumber"] == 1 {
            break;
        }
    }
}

/// `parley agent`: a program asks its person, and decides by the answer.
#[tokio::test]
async fn a_program_asks_its_person_and_decides_by_the_answer() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    let id = runner::start(&app, fixtures::good_match()).await;
    let scratch = runner::Scratch::new("ask");
    let mut runner = runner::Runner::start(&app, &tomas.key, &["--exec", &scratch.program("ask")], &scratch, "runner");
    app.wait_for(&id, runner::PATIENCE, |v| v["status"] == "waiting_for_person").await;
    let view = app.get(&format!("/api/negotiations/{id}"), &app.user_token("user-tomas")).await.body;
    let question = &view["pendingQuestion"];
    assert_eq!(question["question"], "Is equity instead of salary fine?", "{view}");
    let path = format!("/api/negotiations/{id}/questions/{}/answer", question["id"].as_str().unwrap());
    let answered = app.post(&path, &app.user_token("user-tomas"), &serde_json::json!({"answer": "yes"})).await;
    assert_eq!(answered.status, reqwest::StatusCode::OK, "{}", answered.text);
    let done = app.wait_for(&id, runner::PATIENCE, |v| v["status"] == "completed").await;
    assert_eq!(done["turns"][1]["action"], "accept", "{done}");
    let runs = scratch.runs_on(&id, 1);
    assert_eq!(runs.len(), 2, "asked, then decided: {runs:?}");
    let second: Value = serde_json::from_str(runs[1]["raw"].as_str().unwrap()).unwrap();
    assert_eq!(second["context"]["personAnswers"][0]["answer"], "yes", "{second}");
    runner.term();
    assert_eq!(runner.exit().await.code(), Some(0), "{}", runner.log());
}

/// The answer window is a durable timer: armed by a process killed with SIGKILL right after the
/// ask, it still closes the question once a new worker runs, and the turn goes back to the agent.
#[tokio::test]
async fn the_answer_window_survives_kill_9() {
    let database_url = crate::helpers::fresh_database().await;
    let data_dir = std::env::temp_dir().join(format!("parley-ask-kill-{}", uuid::Uuid::now_v7()));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let env = |cmd: &mut std::process::Command| {
        cmd.env("DATABASE_URL", &database_url)
            .env("PARLEY_BIND", format!("127.0.0.1:{port}"))
            .env("PARLEY_DATA_DIR", &data_dir)
            .env("PARLEY_JWT_SECRET", crate::helpers::TEST_SECRET)
            .env("PARLEY_ASK_TIMEOUT", "2s")
            .env("PARLEY_TIMER_POLL", "200ms")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
    };
    let mut serve = std::process::Command::new(env!("CARGO_BIN_EXE_parley"));
    serve.arg("serve");
    env(&mut serve);
    let mut child = serve.spawn().unwrap();
    let app = TestApp::spawn_on(&database_url, |c| c.workers = false).await;
    let base = format!("http://127.0.0.1:{port}");
    // Up to a minute: a debug build loads WordNet for seconds, more on a busy machine.
    for _ in 0..600 {
        if reqwest::get(format!("{base}/readyz")).await.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let agent = app.register_agent("user-tomas").await;
    let client = reqwest::Client::new();
    let started = crate::helpers::post_for_json(
        &client,
        &format!("{base}/api/negotiations"),
        &app.service_token(),
        &fixtures::good_match(),
    )
    .await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let agent_url = format!("{base}/api/agents/{}/negotiations", agent.id);
    let picked: Value = client
        .post(format!("{agent_url}/pickup"))
        .header("x-api-key", &agent.key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = picked["claimToken"].as_str().unwrap();
    let asked = client
        .post(format!("{agent_url}/{id}/respond"))
        .header("x-api-key", &agent.key)
        .json(&ask(token, QUESTION, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), StatusCode::OK);
    // SIGKILL: no shutdown, no chance to run anything.
    child.kill().unwrap();
    child.wait().unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(app.snapshot(&id).await.0, "waiting_for_person", "nothing ran the timer while no worker lived");

    let mut worker = std::process::Command::new(env!("CARGO_BIN_EXE_parley"));
    worker.arg("worker");
    env(&mut worker);
    let mut worker = worker.spawn().unwrap();
    let view = app.wait_for(&id, Duration::from_secs(30), |v| v["status"] == "waiting_for_agent").await;
    worker.kill().unwrap();
    worker.wait().unwrap();
    assert_eq!(view["turnCount"], 1);
    let closed = app
        .counted(&format!("SELECT count(*) FROM person_questions WHERE task_id = '{id}' AND status = 'unanswered'"))
        .await;
    assert_eq!(closed, 1);
}

#[tokio::test]
async fn a_negotiation_cancelled_while_its_person_is_asked_shows_no_question_and_takes_no_answer() {
    let app = TestApp::spawn().await;
    let (agent, id, token) = app.claimed_negotiation().await;
    let question_id = asked(&app, &agent, &id, &token, QUESTION).await;
    let canceled = app.call(Method::DELETE, &format!("/api/negotiations/{id}"), Some(&app.service_token()), None).await;
    assert_eq!(canceled.status, StatusCode::OK, "{}", canceled.text);
    assert_eq!(canceled.body["status"], "canceled");
    let tomas = app.user_token("user-tomas");
    let listed = app.get("/api/opportunities", &tomas).await;
    assert!(!listed.text.contains("PRIVATE-Q"), "{}", listed.text);
    answer_as(&app, "user-tomas", &id, &question_id, "yes")
        .await
        .assert_error(StatusCode::CONFLICT, "already_completed");
    let timers = app
        .counted(&format!(
            "SELECT count(*) FROM apalis.jobs WHERE idempotency_key = 'park:{id}' AND status = 'Pending'"
        ))
        .await;
    assert_eq!(timers, 0, "the answer window ended with the negotiation");
}
