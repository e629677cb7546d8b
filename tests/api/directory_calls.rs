//! What the directory, trust, ranking and delegation tests share: capabilities to offer, calls
//! with an agent's key, the delegate call and the waits around it, and scripted trust records
//! written as the end of claims and attempts would write them.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::{Answer, TestAgent, TestApp};

/// A capability of `task_type` taking `{code}` and giving `{feedback}`, with the cost and latency
/// it declares.
pub fn capability(task_type: &str, cost: Option<f64>, latency: Option<i64>) -> Value {
    let mut body = json!({
        "taskType": task_type,
        "inputSchema": {"type": "object", "properties": {"code": {"type": "string"}}},
        "outputSchema": {"type": "object", "properties": {"feedback": {"type": "string"}}},
    });
    if let Some(c) = cost {
        body["estimatedCostUsd"] = json!(c);
    }
    if let Some(l) = latency {
        body["estimatedLatencyMs"] = json!(l);
    }
    body
}

/// Puts the agent's capability.
pub async fn put_capability(app: &TestApp, agent: &TestAgent, body: &Value) -> Answer {
    app.agent_call(agent, Method::PUT, "/capabilities", Some(body)).await
}

/// Writes a scripted record: `days_ago` days before today (UTC), so many claims answered and
/// expired.
pub async fn record(app: &TestApp, agent: &TestAgent, days_ago: i32, answered: i32, expired: i32) {
    sqlx::query(
        "INSERT INTO agent_trust_days (agent_id, day, claims_answered, claims_expired)
         VALUES ($1, (now() AT TIME ZONE 'UTC')::date - $2, $3, $4)",
    )
    .bind(agent.id.parse::<Uuid>().unwrap())
    .bind(days_ago)
    .bind(answered)
    .bind(expired)
    .execute(&app.pool)
    .await
    .unwrap();
}

/// Adds delegation attempt ends to the agent's counters of a day, as the ends of attempts
/// addressed to it write them: `completed` and `unfinished` (rejected, timed out, in error) of
/// all its attempts, and of those it had accepted.
pub async fn record_attempts(app: &TestApp, agent: &TestAgent, days_ago: i32, all: (i32, i32), accepted: (i32, i32)) {
    sqlx::query(
        "INSERT INTO agent_trust_days AS d (agent_id, day, attempts_completed, attempts_unfinished,
                                            accepted_completed, accepted_unfinished)
         VALUES ($1, (now() AT TIME ZONE 'UTC')::date - $2, $3, $4, $5, $6)
         ON CONFLICT (agent_id, day) DO UPDATE
            SET attempts_completed = d.attempts_completed + EXCLUDED.attempts_completed,
                attempts_unfinished = d.attempts_unfinished + EXCLUDED.attempts_unfinished,
                accepted_completed = d.accepted_completed + EXCLUDED.accepted_completed,
                accepted_unfinished = d.accepted_unfinished + EXCLUDED.accepted_unfinished",
    )
    .bind(agent.id.parse::<Uuid>().unwrap())
    .bind(days_ago)
    .bind(all.0)
    .bind(all.1)
    .bind(accepted.0)
    .bind(accepted.1)
    .execute(&app.pool)
    .await
    .unwrap();
}

/// Records that attempts of requesters owned by `owners` counted for or against the agent today
/// (one each), as the end of an attempt of another owner writes it beside the counters.
pub async fn record_requesters(app: &TestApp, agent: &TestAgent, owners: &[&str]) {
    for owner in owners {
        sqlx::query(
            "INSERT INTO trust_requester_days (target_agent_id, requester_owner_id, day, counted)
             VALUES ($1, $2, (now() AT TIME ZONE 'UTC')::date, 1)",
        )
        .bind(agent.id.parse::<Uuid>().unwrap())
        .bind(*owner)
        .execute(&app.pool)
        .await
        .unwrap();
    }
}

/// A discovery by the platform service.
pub async fn discover(app: &TestApp, query: &str) -> Answer {
    app.get(&format!("/api/agents/discover?{query}"), &app.service_token()).await
}

/// The agent's trust as its own key reads it.
pub async fn trust(app: &TestApp, agent: &TestAgent) -> Value {
    let answer = app.keyed(agent, Method::GET, &format!("/api/trust/{}", agent.id), None).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    answer.body
}

/// (anonymous id, composite) of each result, in order.
pub fn ranking(answer: &Answer) -> Vec<(String, f64)> {
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    answer.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["anonymousAgentId"].as_str().unwrap().to_owned(), r["compositeScore"].as_f64().unwrap()))
        .collect()
}

/// A Parley whose anonymous ids live a second, where Tomas's agent offers a `testing`
/// capability whose anonymous id has just expired (a refused call must not replace it).
pub async fn with_an_expired_anonymous_id() -> TestApp {
    // No timer workers: housekeeping replaces expired ids too, and these tests check that a
    // refused request replaced none.
    let app = TestApp::spawn_with(|c| {
        c.anonymous_id_ttl = Duration::from_secs(1);
        c.workers = false;
    })
    .await;
    let agent = app.register_agent("user-tomas").await;
    offer(&app, &agent, &capability("testing", None, None)).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    app
}

/// Offers the capability; returns the agent's anonymous id.
pub async fn offer(app: &TestApp, agent: &TestAgent, body: &Value) -> String {
    let put = put_capability(app, agent, body).await;
    assert!(put.status.is_success(), "{}", put.text);
    put.body["anonymousAgentId"].as_str().unwrap().to_owned()
}

impl TestApp {
    /// A call on any path with the agent's key.
    pub async fn keyed(&self, agent: &TestAgent, method: Method, path: &str, body: Option<&Value>) -> Answer {
        let mut req = self.client.request(method, format!("{}{path}", self.base)).header("x-api-key", &agent.key);
        if let Some(b) = body {
            req = req.json(b);
        }
        Answer::from(req.send().await.unwrap()).await
    }

    /// A delegate call answered at once (`?wait=0`); the tests that hold say so.
    pub async fn delegate(&self, requester: &TestAgent, body: &Value) -> Answer {
        self.keyed(requester, Method::POST, "/api/agents/delegate?wait=0", Some(body)).await
    }

    /// A target's verb (`accept`, `reject`, `complete`, `fail`) on a delegation.
    pub async fn act(&self, target: &TestAgent, request_id: &str, verb: &str, body: Option<&Value>) -> Answer {
        self.agent_call(target, Method::POST, &format!("/delegations/{request_id}/{verb}"), body).await
    }

    /// The target's delegation inbox, held up to `wait` seconds.
    pub async fn inbox(&self, target: &TestAgent, wait: Option<u64>) -> Answer {
        let path = match wait {
            Some(w) => format!("/delegations/inbox?wait={w}"),
            None => "/delegations/inbox".to_owned(),
        };
        let answer = self.agent_call(target, Method::GET, &path, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        answer
    }

    /// Waits (by long-polls, at most `limit`) for the delegation to end; returns the last answer.
    pub async fn until_ended(&self, requester: &TestAgent, request_id: &str, limit: Duration) -> Answer {
        let started = std::time::Instant::now();
        loop {
            let a = self.keyed(requester, Method::GET, &format!("/api/delegations/{request_id}?wait=5"), None).await;
            if a.status == StatusCode::OK || started.elapsed() > limit {
                return a;
            }
        }
    }

    /// Waits (at most `limit`) until `target`'s inbox holds the request.
    pub async fn until_offered(&self, target: &TestAgent, request_id: &str, limit: Duration) {
        let started = std::time::Instant::now();
        loop {
            let inbox = self.inbox(target, Some(2)).await;
            if inbox.body["requests"].as_array().unwrap().iter().any(|r| r["requestId"] == request_id) {
                return;
            }
            assert!(started.elapsed() < limit, "never offered to the target");
        }
    }

    /// The stored id of the delegation with this request id.
    pub async fn delegation_id(&self, request_id: &str) -> Uuid {
        sqlx::query_scalar("SELECT delegation_id FROM delegations WHERE request_id = $1")
            .bind(request_id.parse::<Uuid>().unwrap())
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    /// (status, retries_used) of the delegation and its attempts' (status, reason).
    pub async fn stored(&self, request_id: &str) -> (String, i32, Vec<(String, Option<String>)>) {
        let id = self.delegation_id(request_id).await;
        let (status, retries): (String, i32) =
            sqlx::query_as("SELECT status, retries_used FROM delegations WHERE delegation_id = $1")
                .bind(id)
                .fetch_one(&self.pool)
                .await
                .unwrap();
        let attempts =
            sqlx::query_as("SELECT status, reason FROM delegation_attempts WHERE delegation_id = $1 ORDER BY attempt")
                .bind(id)
                .fetch_all(&self.pool)
                .await
                .unwrap();
        (status, retries, attempts)
    }
}
