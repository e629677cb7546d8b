//! `POST /api/opportunities/{id}/reactivate`: a stalled or expired opportunity negotiated again
//! in a new round; every other status refused with nothing changed; a repeat returns the round.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{SseReader, TestAgent, TestApp, answer},
};

const WAIT: Duration = Duration::from_secs(15);

fn reactivate_path(opportunity: &str) -> String {
    format!("/api/opportunities/{opportunity}/reactivate")
}

/// What a refused request must leave as it was: rows of every table a reactivation writes.
async fn footprint(app: &TestApp) -> Vec<i64> {
    let mut counts = Vec::new();
    for table in ["tasks", "messages", "artifacts", "events", "conversations"] {
        counts.push(app.count(table).await);
    }
    let statuses: Vec<String> = sqlx::query_scalar("SELECT status FROM opportunities ORDER BY opportunity_id")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    counts.push(statuses.iter().filter(|s| *s == "negotiating").count() as i64);
    counts
}

/// Registers Tomas's personal agent, starts the founder/engineer match and cancels it while his
/// turn is parked: the opportunity is `stalled`. Returns `(Tomas's agent, opportunity,
/// negotiation)`.
async fn stalled(app: &TestApp) -> (TestAgent, String, String) {
    let tomas = app.register_agent("user-tomas").await;
    let started = app.start(&fixtures::good_match()).await;
    let negotiation = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let opportunity = started["opportunity"]["id"].as_str().unwrap().to_owned();
    assert_eq!(started["negotiation"]["status"], "waiting_for_agent");
    let canceled =
        app.call(Method::DELETE, &format!("/api/negotiations/{negotiation}"), Some(&app.service_token()), None).await;
    assert_eq!(canceled.status, StatusCode::OK, "{}", canceled.text);
    let o = app.get(&format!("/api/opportunities/{opportunity}"), &app.service_token()).await;
    assert_eq!(o.body["status"], "stalled");
    // Stalled because the platform canceled it, which the opportunity says.
    assert_eq!((o.body["endReason"].as_str(), o.body["round"].as_u64()), (Some("canceled"), Some(0)), "{}", o.text);
    (tomas, opportunity, negotiation)
}

async fn opportunity_status(app: &TestApp, opportunity: &str) -> Value {
    app.get(&format!("/api/opportunities/{opportunity}"), &app.service_token()).await.body
}

#[tokio::test]
async fn only_stalled_and_expired_opportunities_can_be_reactivated() {
    let app = TestApp::spawn_with(|c| c.pending_ttl = Duration::from_secs(2)).await;
    let service = app.service_token();
    app.register_agent("user-raj").await;

    // negotiating: Raj opens, and his agent has not answered yet.
    let negotiating = app.start(&fixtures::request(fixtures::kernel_developer(), fixtures::pastry_chef(), 40.0)).await;
    assert_eq!(negotiating["opportunity"]["status"], "negotiating");
    // pending: two system negotiators accept a good match (it expires later, below).
    let pending = app.start(&fixtures::good_match()).await;
    assert_eq!(pending["opportunity"]["status"], "pending");
    // rejected: two system negotiators reject a mismatch.
    let mut mismatch = fixtures::mismatch();
    mismatch["candidateUser"]["id"] = json!("user-raj-2");
    let rejected = app.start(&mismatch).await;
    assert_eq!(rejected["opportunity"]["status"], "rejected");
    // accepted: a good match both people accept.
    let mut good = fixtures::good_match();
    good["sourceUser"]["id"] = json!("user-maya-2");
    good["candidateUser"]["id"] = json!("user-tomas-2");
    let accepted = app.start(&good).await;
    let accepted_id = accepted["opportunity"]["id"].as_str().unwrap().to_owned();
    for user in ["user-maya-2", "user-tomas-2"] {
        let decided = app
            .post(
                &format!("/api/opportunities/{accepted_id}/decision"),
                &app.user_token(user),
                &json!({ "decision": "accept" }),
            )
            .await;
        assert_eq!(decided.status, StatusCode::OK, "{}", decided.text);
    }
    assert_eq!(opportunity_status(&app, &accepted_id).await["status"], "accepted");

    let before = footprint(&app).await;
    for (started, status) in [(&negotiating, "negotiating"), (&rejected, "rejected"), (&accepted, "accepted")] {
        let id = started["opportunity"]["id"].as_str().unwrap();
        let answer = app.post(&reactivate_path(id), &service, &json!({})).await;
        answer.assert_error(StatusCode::CONFLICT, "not_reactivatable");
        assert!(answer.body["error"].as_str().unwrap().contains(status), "{}", answer.text);
        assert_eq!(opportunity_status(&app, id).await["status"], status);
    }
    let pending_id = pending["opportunity"]["id"].as_str().unwrap().to_owned();
    // Pending is refused as long as it is pending (the TTL is two seconds: check at once).
    let refused = app.post(&reactivate_path(&pending_id), &service, &json!({})).await;
    let after = footprint(&app).await;
    if opportunity_status(&app, &pending_id).await["status"] == "pending" {
        refused.assert_error(StatusCode::CONFLICT, "not_reactivatable");
        assert_eq!(after, before, "a refused reactivation changes nothing");
    }
    let unknown = app.post(&reactivate_path("0193b0a4-7000-7000-8000-000000000009"), &service, &json!({})).await;
    unknown.assert_error(StatusCode::NOT_FOUND, "not_found");

    // expired: the pending one, once its TTL passed, gets a new round (system negotiators: it
    // runs to its end at once, here `pending` again).
    let deadline = tokio::time::Instant::now() + WAIT;
    while opportunity_status(&app, &pending_id).await["status"] != "expired" {
        assert!(tokio::time::Instant::now() < deadline, "the pending opportunity never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // No body at all: the body is optional, and leaving it out keeps every context.
    let again = app.call(Method::POST, &reactivate_path(&pending_id), Some(&service), None).await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.text);
    assert_eq!(again.body["opportunity"]["status"], "pending");
    assert_eq!(again.body["negotiation"]["status"], "completed");
    assert_eq!(again.body["negotiation"]["outcome"]["hasOpportunity"], true);
    assert_ne!(again.body["negotiation"]["id"], pending["negotiation"]["id"]);
    assert_eq!(again.body["opportunity"]["negotiationId"], again.body["negotiation"]["id"]);
}

#[tokio::test]
async fn a_reactivated_round_runs_to_an_outcome_and_its_agent_sees_the_earlier_round() {
    let app = TestApp::spawn().await;
    let service = app.service_token();
    let (tomas, opportunity, first) = stalled(&app).await;

    let mut events = SseReader::open(&app.base, &service, None).await;
    let mut candidate = fixtures::engineer();
    candidate["profile"]["bio"] = json!("Senior backend engineer, now leading a payments team in Rust");
    let answer_ = app.post(&reactivate_path(&opportunity), &service, &json!({ "candidateUser": candidate })).await;
    assert_eq!(answer_.status, StatusCode::CREATED, "{}", answer_.text);
    let second = answer_.body["negotiation"]["id"].as_str().unwrap().to_owned();
    assert_ne!(second, first);
    assert_eq!(answer_.body["opportunity"]["status"], "negotiating");
    assert_eq!(answer_.body["opportunity"]["negotiationId"], second.as_str());
    // Turns numbered from 0 again: Maya's system negotiator proposed, Tomas's agent is next.
    assert_eq!(answer_.body["negotiation"]["status"], "waiting_for_agent");
    assert_eq!(answer_.body["negotiation"]["turns"][0]["turnNumber"], 0);
    assert_eq!(answer_.body["negotiation"]["turns"][0]["action"], "propose");
    // The second round (1, from 0), which names the first; the opportunity says which round.
    assert_eq!(answer_.body["negotiation"]["round"], 1);
    assert_eq!(answer_.body["negotiation"]["earlierRounds"], json!([first]));
    assert_eq!(
        (answer_.body["opportunity"]["round"].as_u64(), answer_.body["opportunity"]["endReason"].as_str()),
        (Some(1), None)
    );
    let earlier = app.get(&format!("/api/negotiations/{first}"), &app.user_token("user-maya")).await.body;
    assert_eq!((earlier["round"].as_u64(), earlier["earlierRounds"].clone()), (Some(0), json!([])), "{earlier}");
    // The same conversation, a new task in it.
    let conversations: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT conversation_id) FROM tasks").fetch_one(&app.pool).await.unwrap();
    assert_eq!(conversations, 1);

    // The stream shows the opportunity going back to negotiating and the new round.
    let mut seen = Vec::new();
    while let Some(ev) = events.next(Duration::from_secs(5)).await {
        let is_round = ev.event == "negotiation.round";
        seen.push(ev);
        if is_round {
            break;
        }
    }
    let status = seen.iter().find(|e| e.event == "opportunity.status").expect("an opportunity.status event");
    assert_eq!(status.data["status"], "negotiating");
    assert_eq!(status.data["previousStatus"], "stalled");
    let round = seen.iter().find(|e| e.event == "negotiation.round").expect("a negotiation.round event");
    assert_eq!(round.data["negotiationId"], second.as_str());
    assert_eq!(round.data["previousNegotiationId"], first.as_str());
    assert_eq!(round.data["round"], 1);

    // Pickup shows the earlier round: its turns (without the other side's reasoning) and outcome.
    let picked = app.pickup(&tomas, None).await;
    assert_eq!(picked.status, StatusCode::OK, "{}", picked.text);
    assert_eq!(picked.body["negotiationId"], second.as_str());
    assert_eq!(picked.body["turn"]["number"], 1);
    assert_eq!(
        picked.body["context"]["ownUser"]["profile"]["bio"],
        "Senior backend engineer, now leading a payments team in Rust"
    );
    let previous = picked.body["context"]["previousRounds"].as_array().unwrap();
    assert_eq!(previous.len(), 1, "{:#}", picked.body["context"]);
    assert_eq!(previous[0]["negotiationId"], first.as_str());
    assert_eq!(previous[0]["outcome"]["reason"], "canceled");
    let turns = previous[0]["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0]["action"], "propose");
    assert_eq!(turns[0]["side"], "source");
    assert!(turns[0].get("reasoning").is_none(), "Maya's reasoning stays private: {}", turns[0]);

    // Tomas's agent accepts: the round ends and the opportunity is pending for the people.
    let token = picked.body["claimToken"].as_str().unwrap();
    let responded = app.respond(&tomas, &second, &answer("accept", Some(token))).await;
    assert_eq!(responded.status, StatusCode::OK, "{}", responded.text);
    assert_eq!(responded.body["status"], "completed");
    assert_eq!(responded.body["opportunity"]["status"], "pending");
    let o = opportunity_status(&app, &opportunity).await;
    assert_eq!(o["status"], "pending");
    assert_eq!(o["negotiationId"], second.as_str());

    // The earlier round is still readable, as it ended.
    let old = app.get(&format!("/api/negotiations/{first}"), &service).await;
    assert_eq!(old.status, StatusCode::OK, "{}", old.text);
    assert_eq!(old.body["status"], "canceled");
    assert_eq!(old.body["outcome"]["reason"], "canceled");
    let old_task = app.get(&format!("/api/tasks/{first}"), &app.user_token("user-tomas")).await;
    assert_eq!(old_task.status, StatusCode::OK, "{}", old_task.text);
}

#[tokio::test]
async fn a_new_context_without_a_name_keeps_the_name_the_platform_gave() {
    let app = TestApp::spawn().await;
    let (_, opportunity, _) = stalled(&app).await;
    // The README's example: only the id and a profile, no name.
    let body =
        json!({"candidateUser": {"id": "user-tomas", "profile": {"skills": ["rust", "payments api", "team lead"]}}});
    let round = app.post(&reactivate_path(&opportunity), &app.service_token(), &body).await;
    assert_eq!(round.status, StatusCode::CREATED, "{}", round.text);
    assert_eq!(round.body["negotiation"]["sides"]["candidate"]["name"], "Tomas Novak", "{}", round.text);
    assert_eq!(round.body["negotiation"]["sides"]["candidate"]["userId"], "user-tomas");
    assert_eq!(round.body["opportunity"]["candidateUserName"], "Tomas Novak");
    let seen = app.get(&format!("/api/opportunities/{opportunity}"), &app.user_token("user-maya")).await;
    assert_eq!(seen.body["counterpartName"], "Tomas Novak", "{}", seen.text);
}

#[tokio::test]
async fn a_repeat_while_the_new_round_runs_returns_that_round() {
    let app = TestApp::spawn().await;
    let service = app.service_token();
    let (_, opportunity, _) = stalled(&app).await;

    let first = app.post(&reactivate_path(&opportunity), &service, &json!({})).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let before = footprint(&app).await;
    let repeat = app.call_raw(Method::POST, &reactivate_path(&opportunity), Some(&service), "").await;
    assert_eq!(repeat.status, StatusCode::OK, "{}", repeat.text);
    assert_eq!(repeat.body["negotiation"]["id"], first.body["negotiation"]["id"]);
    assert_eq!(repeat.body["opportunity"]["status"], "negotiating");
    assert_eq!(footprint(&app).await, before, "a repeat starts nothing");
    assert_eq!(app.count("tasks").await, 2);
}

#[tokio::test]
async fn bad_bodies_are_refused_and_change_nothing() {
    let app = TestApp::spawn().await;
    let service = app.service_token();
    let (_, opportunity, _) = stalled(&app).await;
    let path = reactivate_path(&opportunity);

    let before = footprint(&app).await;
    let bodies: Vec<(Value, &str)> = vec![
        (json!({ "sourceUser": { "id": "user-someone-else" } }), "sourceUser.id"),
        (json!({ "candidateUser": fixtures::founder() }), "candidateUser.id"),
        (json!({ "candidateUser": { "id": "user-tomas", "intents": [{ "text": "  " }] } }), "candidateUser.intents"),
        (json!({ "sourceUser": { "id": "" } }), "sourceUser.id"),
        (json!({ "seedAssessment": { "score": 150, "reasoning": "a fine match" } }), "seedAssessment.score"),
        (json!({ "seedAssessment": { "score": 50, "reasoning": " " } }), "seedAssessment.reasoning"),
        (
            json!({ "seedAssessment": { "score": 50, "reasoning": "ok",
            "actors": [{ "userId": "user-stranger", "role": "peer" }] } }),
            "seedAssessment.actors",
        ),
        (json!({ "round": 2 }), "round"),
        (json!([1, 2]), "invalid request"),
        (json!({ "sourceUser": "user-maya" }), "invalid request"),
    ];
    for (body, names) in bodies {
        let answer = app.post(&path, &service, &body).await;
        answer.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
        assert!(answer.body["error"].as_str().unwrap().contains(names), "{body}: {}", answer.text);
    }
    let garbage = app.call_raw(Method::POST, &path, Some(&service), "{not json").await;
    garbage.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    let user = app.post(&path, &app.user_token("user-tomas"), &json!({})).await;
    user.assert_error(StatusCode::FORBIDDEN, "forbidden");
    assert_eq!(footprint(&app).await, before, "nothing changed");
    assert_eq!(opportunity_status(&app, &opportunity).await["status"], "stalled");
}
